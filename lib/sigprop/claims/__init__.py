"""The claims ledger: every quantitative claim of the four documents, checked.

A claim is a function registered with :func:`claim` that measures something (Monte Carlo, autograd,
quadrature) and returns a :class:`Measured`. Its status is derived from the numbers and from two facts
stated at registration -- what kind of statement the document makes (``nature``) and at which sizes
the project measured it against the document's own (``scale``) -- never typed in:

* ``reproduced`` -- ``|measured - stated| <= tolerance``;
* otherwise, when a ``corrected`` value is given and ``|measured - corrected| <= tolerance``:

  - ``erratum`` -- the statement is false as printed (``nature="statement"``);
  - ``approximation`` -- the document states an approximation or assumption, and the corrected value
    quantifies its error (``nature="approximation"``);
  - ``missing-hypothesis`` -- the statement is true under a condition the document omits; the claim is
    measured where the condition fails (``nature="condition"``);

* otherwise ``not-reproduced`` when the measurement is not at the document's setting (``scale``:
  a size the document states differs from the size measured), else ``deviates`` (the document's stated
  number or figure is missed beyond tolerance at its own setting).

Each registration also states the status it is ``expected`` to have; ``tests/test_claims.py`` runs the
whole ledger and fails when a status changes. One module per document, ``claims/<document>.py``,
registers that document's claims (Giorlandino & Goldt's rows on off-the-shelf models are in a second module,
``giorlandino_goldt2025_real.py``); :func:`load` imports them. The committed record of a run,
``sigprop/claims/records/<document>.json`` (``make ledger``), is what the book's prose quotes (the ``{ledger}`` role),
and the tests check it against a fresh run.

Run ``python -m sigprop.claims [--document NAME] [--json FILE]``.
"""
from __future__ import annotations

import dataclasses
import enum
import math
import time
from typing import Callable

import numpy as np

__all__ = ["claim", "Measured", "ClaimResult", "Status", "Nature", "DOCUMENTS", "registry", "load", "run", "run_one",
           "load_record", "record_path", "quote"]

DOCUMENTS = ("noci2022", "bao2024", "giorlandino-goldt2025", "aghajanyan2025")


class Status(str, enum.Enum):
    REPRODUCED = "reproduced"
    ERRATUM = "erratum"
    APPROXIMATION = "approximation"
    MISSING_HYPOTHESIS = "missing-hypothesis"
    DEVIATES = "deviates"
    NOT_REPRODUCED = "not-reproduced"


class Nature(str, enum.Enum):
    """What kind of statement the document makes."""

    STATEMENT = "statement"          # asserted as true (an equation, a number, a figure's reading)
    APPROXIMATION = "approximation"  # the document states an approximation or assumption
    CONDITION = "condition"          # true under a condition the document omits (measured where it fails)


#: The status a matching ``corrected`` value gives, by the statement's nature.
_CORRECTED = {Nature.STATEMENT: Status.ERRATUM, Nature.APPROXIMATION: Status.APPROXIMATION,
              Nature.CONDITION: Status.MISSING_HYPOTHESIS}


def _at_paper_scale(scale) -> bool:
    """True unless ``scale`` says a size the document states differs from the size measured."""
    if not scale:
        return True
    measured, paper = scale.get("measured", {}), scale.get("paper", {})
    return all(measured.get(k) == v for k, v in paper.items())


def _check_scale(scale, id):
    if scale is None:
        return None
    if not isinstance(scale, dict) or set(scale) - {"measured", "paper"} or not all(
            isinstance(scale.get(k, {}), dict) for k in ("measured", "paper")):
        raise ValueError(f"claim {id!r}: scale must be a dict {{'measured': {{...}}, 'paper': {{...}}}}; got {scale!r}")
    return {"measured": dict(scale.get("measured", {})), "paper": dict(scale.get("paper", {}))}


@dataclasses.dataclass(frozen=True)
class Measured:
    """What a claim function returns. ``tolerance`` comes from the standard error (e.g.
    ``4 * stderr``) or the document's stated precision; say which in ``note``."""

    stated: float
    measured: float
    stderr: float
    tolerance: float
    corrected: float | None = None
    note: str = ""

    def status(self, nature: Nature = Nature.STATEMENT, at_paper_scale: bool = True) -> Status:
        """The status these numbers give a claim of this ``nature`` (see the module docstring)."""
        if abs(self.measured - self.stated) <= self.tolerance:
            return Status.REPRODUCED
        if self.corrected is not None and abs(self.measured - self.corrected) <= self.tolerance:
            return _CORRECTED[Nature(nature)]
        return Status.DEVIATES if at_paper_scale else Status.NOT_REPRODUCED


@dataclasses.dataclass(frozen=True)
class Claim:
    id: str
    document: str
    source: str
    claim: str
    expected: Status
    fn: Callable[[], Measured]
    nature: Nature = Nature.STATEMENT
    scale: dict | None = None


@dataclasses.dataclass(frozen=True)
class ClaimResult:
    id: str
    document: str
    source: str
    claim: str
    stated: float
    measured: float
    stderr: float
    tolerance: float
    status: str
    expected: str
    corrected: float | None
    note: str
    seconds: float
    nature: str = Nature.STATEMENT.value
    scale: dict | None = None

    def as_json(self) -> dict:
        return dataclasses.asdict(self)


_REGISTRY: dict[str, Claim] = {}


def claim(*, id: str, document: str, source: str, claim: str, expected: str = "reproduced",
          nature: str = "statement", scale: dict | None = None):
    """Decorator registering a claim function ``() -> Measured`` under a unique ``id``.

    ``nature``: ``"statement"`` (default), ``"approximation"`` or ``"condition"`` (module docstring).
    ``scale``: ``{"measured": {...}, "paper": {...}}``, the sizes the project measured at and the sizes the
    document states (e.g. ``{"measured": {"T": 256, "d": 128}, "paper": {"T": 8192, "d": 1024}}``; a size the
    document does not state is left out of ``"paper"``).
    """
    if document not in DOCUMENTS:
        raise ValueError(f"document must be one of {DOCUMENTS}; got {document!r}")
    try:
        status = Status(expected)
    except ValueError:
        raise ValueError(f"expected must be one of {[s.value for s in Status]}; got {expected!r}") from None
    try:
        kind = Nature(nature)
    except ValueError:
        raise ValueError(f"nature must be one of {[n.value for n in Nature]}; got {nature!r}") from None
    sizes = _check_scale(scale, id)

    def register(fn):
        if id in _REGISTRY and _REGISTRY[id].fn.__qualname__ != fn.__qualname__:
            raise ValueError(f"claim id {id!r} is registered twice")
        _REGISTRY[id] = Claim(id, document, source, claim, status, fn, kind, sizes)
        return fn

    return register


def load() -> None:
    """Import the documents' claims modules (each registers its claims when imported)."""
    from . import aghajanyan2025, bao2024, giorlandino_goldt2025, giorlandino_goldt2025_real, noci2022  # noqa: F401


def registry(document: str | None = None) -> list[Claim]:
    load()
    if document is not None and document not in DOCUMENTS:
        raise ValueError(f"document must be one of {DOCUMENTS}; got {document!r}")
    found = [c for c in _REGISTRY.values() if document is None or c.document == document]
    return sorted(found, key=lambda c: DOCUMENTS.index(c.document))  # documents in DOCUMENTS order, as recorded


def _float(x) -> float:
    return float(np.asarray(x.detach().cpu() if hasattr(x, "detach") else x, dtype=float))


def run_one(c: Claim) -> ClaimResult:
    start = time.perf_counter()
    m = c.fn()
    if not isinstance(m, Measured):
        raise TypeError(f"claim {c.id} must return a Measured; got {type(m).__name__}")
    m = Measured(_float(m.stated), _float(m.measured), _float(m.stderr), _float(m.tolerance),
                 None if m.corrected is None else _float(m.corrected), m.note)
    if not all(math.isfinite(v) for v in (m.stated, m.measured, m.stderr, m.tolerance)):
        raise ValueError(f"claim {c.id} returned a non-finite number: {m}")
    status = m.status(c.nature, _at_paper_scale(c.scale))
    return ClaimResult(c.id, c.document, c.source, c.claim, m.stated, m.measured, m.stderr, m.tolerance,
                       status.value, c.expected.value, m.corrected, m.note, round(time.perf_counter() - start, 3),
                       c.nature.value, c.scale)


def run(document: str | None = None, *, progress: bool = False) -> list[ClaimResult]:
    """Run every registered claim (of one document); results in DOCUMENTS order, each document in registration order."""
    claims = registry(document)
    if progress:
        from tqdm.auto import tqdm
        claims = tqdm(claims, desc="claims", leave=False)
    return [run_one(c) for c in claims]


#: The committed record of a ledger run, one file per document (package data, ``records/<document>.json``;
#: ``make ledger`` rewrites them). The book's prose quotes it through the ``{ledger}`` role, chapter pages
#: show it, and ``tests/test_claims.py`` checks a fresh run against it.
RECORDS = "records"


def record_path(document: str):
    """The committed record file of ``document`` (a ``pathlib.Path`` inside the installed package)."""
    import pathlib

    if document not in DOCUMENTS:
        raise ValueError(f"document must be one of {DOCUMENTS}; got {document!r}")
    return pathlib.Path(__file__).parent / RECORDS / f"{document}.json"


def load_record(document: str | None = None) -> dict[str, ClaimResult]:
    """The committed ledger record (of one document, or all): ``{claim id: ClaimResult}`` in registration order."""
    import json

    out = {}
    for doc in DOCUMENTS if document is None else (document,):
        path = record_path(doc)
        if path.exists():
            out.update({r["id"]: ClaimResult(**r) for r in json.loads(path.read_text())})
    return out


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
