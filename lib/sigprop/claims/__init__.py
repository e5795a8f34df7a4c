"""The claims ledger: every quantitative claim of the four documents, checked.

A claim is a function registered with :func:`claim` that measures something (Monte
Carlo, autograd, quadrature) and returns a :class:`Measured`. Its status is derived, never
typed in:

* ``reproduced`` -- ``|measured - stated| <= tolerance``;
* ``erratum`` -- not reproduced, but ``|measured - corrected| <= tolerance`` for the
  corrected value the book derives;
* ``deviates`` -- neither.

Each registration also states the status it is ``expected`` to have; the test suite fails
when a claim's status changes. Chapters register claims in ``claims/_<document>.py``;
every such module is imported by :func:`load`.

Run ``python -m sigprop.claims [--document NAME] [--json FILE]``.
"""
from __future__ import annotations

import dataclasses
import enum
import importlib
import math
import pkgutil
import time
from typing import Callable

import numpy as np

__all__ = ["claim", "Measured", "ClaimResult", "Status", "DOCUMENTS", "registry", "load", "run", "run_one"]

DOCUMENTS = ("noci2022", "bao2024", "giorlandino-goldt2025", "aghajanyan2025")


class Status(str, enum.Enum):
    REPRODUCED = "reproduced"
    DEVIATES = "deviates"
    ERRATUM = "erratum"


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

    def status(self) -> Status:
        if abs(self.measured - self.stated) <= self.tolerance:
            return Status.REPRODUCED
        if self.corrected is not None and abs(self.measured - self.corrected) <= self.tolerance:
            return Status.ERRATUM
        return Status.DEVIATES


@dataclasses.dataclass(frozen=True)
class Claim:
    id: str
    document: str
    source: str
    claim: str
    expected: Status
    fn: Callable[[], Measured]


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

    def as_json(self) -> dict:
        return dataclasses.asdict(self)


_REGISTRY: dict[str, Claim] = {}


def claim(*, id: str, document: str, source: str, claim: str, expected: str = "reproduced"):
    """Decorator registering a claim function ``() -> Measured`` under a unique ``id``."""
    if document not in DOCUMENTS:
        raise ValueError(f"document must be one of {DOCUMENTS}; got {document!r}")
    try:
        status = Status(expected)
    except ValueError:
        raise ValueError(f"expected must be one of {[s.value for s in Status]}; got {expected!r}") from None

    def register(fn):
        if id in _REGISTRY and _REGISTRY[id].fn.__qualname__ != fn.__qualname__:
            raise ValueError(f"claim id {id!r} is registered twice")
        _REGISTRY[id] = Claim(id, document, source, claim, status, fn)
        return fn

    return register


def load() -> None:
    """Import every ``sigprop.claims._*`` module (each registers its claims)."""
    from . import __path__ as here

    for info in pkgutil.iter_modules(here):
        if info.name.startswith("_") and not info.name.startswith("__"):
            importlib.import_module(f"{__name__}.{info.name}")


def registry(document: str | None = None) -> list[Claim]:
    load()
    if document is not None and document not in DOCUMENTS:
        raise ValueError(f"document must be one of {DOCUMENTS}; got {document!r}")
    return [c for c in _REGISTRY.values() if document is None or c.document == document]


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
    return ClaimResult(c.id, c.document, c.source, c.claim, m.stated, m.measured, m.stderr, m.tolerance,
                       m.status().value, c.expected.value, m.corrected, m.note,
                       round(time.perf_counter() - start, 3))


def run(document: str | None = None, *, progress: bool = False) -> list[ClaimResult]:
    """Run every registered claim (of one document) and return the results in registration order."""
    claims = registry(document)
    if progress:
        from tqdm.auto import tqdm
        claims = tqdm(claims, desc="claims", leave=False)
    return [run_one(c) for c in claims]
