"""The committed record of the ledger, and how a fresh run is compared with it: in distribution, not in bits.

``records/<document>.json`` (package data; ``make ledger``, ``python -m sigprop.claims --record``) is one run of a
document's claims, row by row; each row keeps the provenance of that run (command, date, git commit, machine,
torch version, CPU capability, threads). The book quotes it (``{ledger}`` role, :func:`quote`) and shows it (the
claims appendix); the tests check that a fresh run agrees with it.

**Agreement** (:func:`disagreements`). PyTorch promises no bitwise-identical results across CPUs, CPU kernels or
thread counts, and training amplifies the last bit, so a fresh run agrees with the record when it has the same
status and every number (``stated``, ``measured``, ``corrected``, ``tolerance``) differs by at most
:data:`Z_RERUN` combined standard errors ``hypot(SE_record, SE_fresh)`` -- the comparison of two independent draws
of the row, the widest difference a correct rerun can show -- plus a float64 rounding floor (:func:`rounding`).
A row whose value moved further is a real change: re-record it (``make ledger``).

**Margins** (:func:`fragile`). A status must not depend on the machine: the measured value must sit further from
the boundary that decides its status (:func:`~sigprop.claims._result.status_margin`) than a rerun elsewhere can move
it. Required margins, by what the row's standard error is (:data:`MARGIN`):

* ``sampling`` and ``numerical``, 1 SE: a rerun at the same seeds elsewhere draws the same samples, and rounding
  moves the value by far less (the largest change measured between CPU kernels and torch versions, on a chaotic
  60-block tanh network, is 0.05 SE; README.md, "Reproducibility"); a 1-SE margin also flags values 3-5 SE from a
  4-SE boundary, which call for more samples, not for luck;
* ``seeds``, 2 sqrt(2) SE: a rerun elsewhere is a fresh draw of the seeds' mean (the difference of two draws has
  SD sqrt(2) SE), so the status flips with probability below 2.3 % where the record is the truth;
* ``exact``, more than the rounding floor: a count, an identity or a closed form changes by rounding only, so it
  must not sit on its boundary (a count scored with tolerance 0 sits on it: half a count is the tolerance).
"""
from __future__ import annotations

import json
import math
import pathlib

from ._result import DOCUMENTS, ClaimResult, Uncertainty, status_margin

__all__ = ["RECORDS", "Z_RERUN", "MARGIN", "FLOAT_RTOL", "FLOAT_ATOL", "record_path", "load_record", "write_record",
           "provenance_text", "rounding", "rerun_tolerance", "disagreements", "fragile", "quote", "QUOTE_FIELDS"]

RECORDS = "records"
#: A fresh number agrees with the recorded one within this many combined standard errors (the project's per-point
#: z, CONTRIBUTING.md: two-sided P(|Z| > 4) = 6e-5 per number where both are draws of the same row).
Z_RERUN = 4.0
#: The float64 rounding floor of any comparison: the same float64 computation on other CPUs, kernels, thread counts
#: or torch versions differs by a few ulp per operation (SIMD paths of exp/log, summation order). Measured on the
#: exact rows (AVX2 with torch 2.13 against AVX-512 and the default kernel with torch 2.11): at most 4.5e-16
#: relative, and 5.5e-15 absolute on a value that is itself rounding (a relative error of 8e-15). The floor is
#: 1e-11 relative (20,000 times that) plus 1e-13 absolute (20 times that).
FLOAT_RTOL, FLOAT_ATOL = 1e-11, 1e-13
#: The margin (in SE) by which a row's value must clear the boundary that decides its status (module docstring).
MARGIN = {Uncertainty.SAMPLING.value: 1.0, Uncertainty.NUMERICAL.value: 1.0, Uncertainty.SEEDS.value: 2 * math.sqrt(2)}
#: The numbers of a row that a rerun must reproduce in distribution (SE and time are not: they are measured anew).
FIELDS = ("stated", "measured", "corrected", "tolerance")


def record_path(document: str):
    """The committed record file of ``document`` (a ``pathlib.Path`` inside the installed package)."""
    if document not in DOCUMENTS:
        raise ValueError(f"document must be one of {DOCUMENTS}; got {document!r}")
    return pathlib.Path(__file__).parent / RECORDS / f"{document}.json"


def load_record(document: str | None = None) -> dict[str, ClaimResult]:
    """The committed ledger record (of one document, or all): ``{claim id: ClaimResult}`` in registration order."""
    out = {}
    for doc in DOCUMENTS if document is None else (document,):
        path = record_path(doc)
        if path.exists():
            out.update({r["id"]: ClaimResult(**r) for r in json.loads(path.read_text())})
    return out


def write_record(results, document: str, *, provenance: dict, path=None, order=None) -> pathlib.Path:
    """Write ``document``'s rows of ``results`` (a run's :class:`ClaimResult` list) as its record, each row with
    ``provenance`` (:func:`sigprop.experiments.provenance` of the run, taken before it); returns the path written.

    ``order``: the document's registered claim ids. When given, only the rows of ``results`` are rewritten; the
    record's other rows are kept as they were recorded (with their own provenance), all in that order."""
    path = record_path(document) if path is None else pathlib.Path(path)
    rows = {r.id: dict(r.as_json(), provenance=provenance) for r in results if r.document == document}
    if order is not None:
        old = {r["id"]: r for r in json.loads(path.read_text())} if path.exists() else {}
        missing = [i for i in order if i not in rows and i not in old]
        if missing:
            raise ValueError(f"the record of {document} has no row for {missing}: record the whole document")
        rows = {i: rows.get(i, old.get(i)) for i in order}
    path.write_text(json.dumps(list(rows.values()), indent=1) + "\n")
    return path


def provenance_text(p: dict | None) -> str:
    """One line of plain text saying where and how a record was made (the claims appendix shows it)."""
    if not p:
        return "recorded without provenance"
    commit = (p.get("git_commit") or "unknown") + (" with uncommitted changes" if p.get("git_dirty") else "")
    return (f"recorded {str(p.get('date', '?'))[:10]} by `{p.get('command', '?')}` at commit {commit}: "
            f"{p.get('machine')}, {p.get('cpus')} CPUs, torch {p.get('torch')}, CPU kernels {p.get('cpu_capability')}, "
            f"{p.get('threads')} threads")


def rounding(x: float | None) -> float:
    """The float64 rounding floor of a comparison of ``x``: ``FLOAT_ATOL + FLOAT_RTOL |x|``."""
    return FLOAT_ATOL + FLOAT_RTOL * abs(x or 0.0)


def rerun_tolerance(fresh: ClaimResult, recorded: ClaimResult, field: str = "measured") -> float:
    """How far ``field`` of a fresh run may sit from the record's: Z_RERUN combined SEs plus rounding."""
    values = (getattr(fresh, field) or 0.0, getattr(recorded, field) or 0.0)
    return Z_RERUN * math.hypot(fresh.stderr, recorded.stderr) + rounding(max(values, key=abs))


def disagreements(fresh: ClaimResult, recorded: ClaimResult) -> list[str]:
    """What keeps a fresh run of a row from agreeing with its record (empty: it agrees in distribution)."""
    out = []
    if fresh.id != recorded.id:
        return [f"{fresh.id}: compared with the record of {recorded.id}"]
    if fresh.status != recorded.status:
        out.append(f"{fresh.id}: status {fresh.status}, recorded {recorded.status}")
    if fresh.uncertainty != recorded.uncertainty:
        out.append(f"{fresh.id}: uncertainty {fresh.uncertainty}, recorded {recorded.uncertainty}")
    for field in FIELDS:
        a, b = getattr(fresh, field), getattr(recorded, field)
        if (a is None) != (b is None):
            out.append(f"{fresh.id}: {field} {a}, recorded {b}")
        elif a is not None and abs(a - b) > rerun_tolerance(fresh, recorded, field):
            out.append(f"{fresh.id}: {field} {a:.6g}, recorded {b:.6g} (SE {fresh.stderr:.2g} / {recorded.stderr:.2g}; "
                       f"allowed {rerun_tolerance(fresh, recorded, field):.2g}): re-record it (make ledger)")
    return out


def fragile(r: ClaimResult) -> str | None:
    """Why ``r``'s status could change on another machine (its value sits within the required margin of the
    boundary that decides it, module docstring), or None."""
    margin = status_margin(r)
    if r.uncertainty == Uncertainty.EXACT.value:
        if margin > rounding(r.measured):
            return None
        return f"{r.id}: exact row {margin:.3g} from its status boundary, within rounding ({rounding(r.measured):.2g})"
    need = MARGIN[r.uncertainty] * r.stderr
    if margin >= need:
        return None
    return (f"{r.id}: {r.status} {margin / r.stderr:.2f} SE from its status boundary (needs "
            f"{MARGIN[r.uncertainty]:.2f} for a {r.uncertainty} SE): more samples or seeds, or a tolerance basis away from the edge")


#: Fields of a record row that :func:`quote` renders.
QUOTE_FIELDS = ("measured", "stated", "corrected", "tolerance", "stderr", "status", "measured-only")


def _digits(se: float) -> int:
    """Decimals that show a standard error to two significant digits."""
    return max(0, 1 - math.floor(math.log10(se))) if se > 0 else 0


def _number(x: float, se: float) -> str:
    if se > 0:
        return f"{x:.{_digits(se)}f}"
    return f"{x:.4g}"


def quote(id: str, field: str = "measured", *, record: dict | None = None) -> str:
    """A number of the committed record as the book prints it: ``measured`` gives ``"17.07 ± 0.29"`` (the
    value to the standard error's precision, SE to two digits); ``stated``, ``corrected``, ``tolerance``,
    ``stderr``, ``measured-only`` give one number at that precision; ``status`` the status word."""
    record = load_record() if record is None else record
    if id not in record:
        raise KeyError(f"no claim {id!r} in the ledger record")
    if field not in QUOTE_FIELDS:
        raise ValueError(f"field must be one of {QUOTE_FIELDS}; got {field!r}")
    r = record[id]
    if field == "status":
        return r.status
    if field == "measured":
        return f"{_number(r.measured, r.stderr)} ± {r.stderr:.2g}" if r.stderr > 0 else _number(r.measured, 0)
    value = {"measured-only": r.measured, "stated": r.stated, "corrected": r.corrected, "tolerance": r.tolerance,
             "stderr": r.stderr}[field]
    if value is None:
        raise ValueError(f"claim {id!r} has no {field} value")
    return f"{value:.2g}" if field == "stderr" else _number(value, r.stderr)
