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

Every row also says what its standard error is (``uncertainty``: ``sampling``, ``seeds``, ``numerical`` or
``exact``; :class:`Uncertainty`): a training result is a mean over seeds with its SE, and only an exact row (a
count, an identity, a closed form) has SE 0 (:meth:`Measured.check` refuses anything else).

Each registration also states the status it is ``expected`` to have; ``tests/test_claims.py`` runs the
whole ledger and fails when a status changes. One module per document, ``claims/<document>.py``,
registers that document's claims (Giorlandino & Goldt's rows on off-the-shelf models are in two more modules:
``giorlandino_goldt2025_real.py``, the authors' BERT, and ``modern_models.py``, today's Llama and GPT-NeoX with
RoPE; their rows are that document's and are recorded with it); :func:`load` imports them. The committed record of a run,
``sigprop/claims/records/<document>.json`` (``make ledger``, with the run's provenance on every row), is what the
book quotes (the ``{ledger}`` role) and shows (the claims appendix); the tests require a fresh run to agree with it
in distribution -- the same statuses, every number within ``Z_RERUN`` combined standard errors -- and every
status to clear its boundary by more than a rerun elsewhere can move it (``sigprop.claims._record``).

Run ``python -m sigprop.claims [--document NAME ...] [--json FILE] [--record]``.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Callable

import numpy as np

from ._record import (FLOAT_ATOL, FLOAT_RTOL, MARGIN, QUOTE_FIELDS, RECORDS, Z_RERUN, disagreements, fragile,
                      load_record, provenance_text, quote, record_path, rerun_tolerance, rounding, write_record)
from ._result import (DOCUMENTS, ClaimResult, Measured, Nature, Status, Uncertainty, _at_paper_scale, _check_scale,
                      status_margin)

__all__ = ["claim", "Measured", "ClaimResult", "Status", "Nature", "Uncertainty", "DOCUMENTS", "registry", "load",
           "run", "run_one", "load_record", "write_record", "provenance_text", "record_path", "quote", "QUOTE_FIELDS",
           "RECORDS", "Z_RERUN", "MARGIN", "FLOAT_RTOL", "FLOAT_ATOL", "rounding", "rerun_tolerance", "disagreements",
           "fragile", "status_margin"]


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


_REGISTRY: dict[str, Claim] = {}


def _where(fn) -> tuple:
    """Where a claim function is defined (file and first line): names repeat (many are ``_``), places do not."""
    return fn.__code__.co_filename, fn.__code__.co_firstlineno


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
        if id in _REGISTRY and _where(_REGISTRY[id].fn) != _where(fn):   # a reloaded module re-registers its own
            raise ValueError(f"claim id {id!r} is registered twice: {_where(_REGISTRY[id].fn)} and {_where(fn)}")
        _REGISTRY[id] = Claim(id, document, source, claim, status, fn, kind, sizes)
        return fn

    return register


def load() -> None:
    """Import the documents' claims modules (each registers its claims when imported)."""
    from . import (aghajanyan2025, bao2024, giorlandino_goldt2025, giorlandino_goldt2025_real,  # noqa: F401
                   modern_blocks, modern_models, noci2022)


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
                 None if m.corrected is None else _float(m.corrected), m.note, m.uncertainty)
    m.check(c.id)
    status = m.status(c.nature, _at_paper_scale(c.scale))
    return ClaimResult(c.id, c.document, c.source, c.claim, m.stated, m.measured, m.stderr, m.tolerance,
                       status.value, c.expected.value, m.corrected, m.note, round(time.perf_counter() - start, 3),
                       c.nature.value, c.scale, Uncertainty(m.uncertainty).value)


def run(document: str | None = None, *, progress: bool = False) -> list[ClaimResult]:
    """Run every registered claim (of one document); results in DOCUMENTS order, each document in registration order."""
    claims = registry(document)
    if progress:
        from tqdm.auto import tqdm
        claims = tqdm(claims, desc="claims", leave=False)
    return [run_one(c) for c in claims]
