"""A ledger row: what a claim function returns (:class:`Measured`), what the ledger records (:class:`ClaimResult`),
the rules that derive its status from the numbers, and how far its value sits from a status boundary.

Every row states what its standard error is (:class:`Uncertainty`), because that decides what a rerun elsewhere
can show: a Monte Carlo estimate at fixed seeds (``sampling``) is the same draw on every CPU up to rounding; a
mean over training seeds (``seeds``) is a fresh draw on another CPU, because training amplifies the last bit; a
deterministic numerical method (``numerical``) carries its own error estimate; an ``exact`` row (a count, an
identity or a closed form in float64) has standard error 0 and changes only by rounding.
"""
from __future__ import annotations

import dataclasses
import enum
import math

__all__ = ["DOCUMENTS", "Status", "Nature", "Uncertainty", "Measured", "ClaimResult", "status_margin"]

#: The four documents, in the order the ledger runs and records them.
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


class Uncertainty(str, enum.Enum):
    """What a row's standard error is, and so what a rerun on another machine can change."""

    SAMPLING = "sampling"     # Monte Carlo SE over i.i.d. draws at fixed seeds (same draws elsewhere, up to rounding)
    SEEDS = "seeds"           # SE over independent training seeds (a rerun elsewhere is a fresh draw)
    NUMERICAL = "numerical"   # the error estimate of a deterministic numerical method (an extrapolation)
    EXACT = "exact"           # SE 0: a count, an identity or a closed form, exact up to float64 rounding


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
    """What a claim function returns. ``tolerance`` comes from the standard error (e.g. ``4 * stderr``) or the
    document's stated precision; say which in ``note``. ``uncertainty`` says what ``stderr`` is
    (:class:`Uncertainty`): ``stderr`` is 0 exactly when the row is ``"exact"``, and the note then says why."""

    stated: float
    measured: float
    stderr: float
    tolerance: float
    corrected: float | None = None
    note: str = ""
    uncertainty: str = Uncertainty.SAMPLING.value

    def status(self, nature: Nature = Nature.STATEMENT, at_paper_scale: bool = True) -> Status:
        """The status these numbers give a claim of this ``nature`` (see the module docstring)."""
        if abs(self.measured - self.stated) <= self.tolerance:
            return Status.REPRODUCED
        if self.corrected is not None and abs(self.measured - self.corrected) <= self.tolerance:
            return _CORRECTED[Nature(nature)]
        return Status.DEVIATES if at_paper_scale else Status.NOT_REPRODUCED

    def check(self, id: str) -> None:
        """Refuse non-finite numbers, an unknown ``uncertainty``, and a standard error that contradicts it."""
        if not all(math.isfinite(v) for v in (self.stated, self.measured, self.stderr, self.tolerance)):
            raise ValueError(f"claim {id} returned a non-finite number: {self}")
        try:
            kind = Uncertainty(self.uncertainty)
        except ValueError:
            raise ValueError(f"claim {id}: uncertainty must be one of {[u.value for u in Uncertainty]}; "
                             f"got {self.uncertainty!r}") from None
        if self.stderr < 0 or (self.stderr == 0) != (kind is Uncertainty.EXACT):
            raise ValueError(f"claim {id}: a standard error of 0 is for exact rows only (uncertainty 'exact'), and "
                             f"an exact row has SE 0; got stderr={self.stderr!r}, uncertainty={kind.value!r}")


@dataclasses.dataclass(frozen=True)
class ClaimResult:
    """One row of the ledger (a run's or the committed record's). ``provenance`` is where and how the record
    was made (:func:`sigprop.experiments.provenance`); None for a row of a fresh run."""

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
    uncertainty: str = Uncertainty.SAMPLING.value
    provenance: dict | None = None

    def as_json(self) -> dict:
        return dataclasses.asdict(self)


def status_margin(r) -> float:
    """How far ``r.measured`` may move before ``r``'s status changes: the distance to the nearest boundary of
    the inequalities that decide it (``|measured - stated| <= tolerance``, then ``|measured - corrected| <=
    tolerance``), in the row's own units; 0 when it sits on a boundary."""
    inside_stated = r.tolerance - abs(r.measured - r.stated)
    if inside_stated >= 0:
        return inside_stated
    if r.corrected is None:
        return -inside_stated
    inside_corrected = r.tolerance - abs(r.measured - r.corrected)
    return min(-inside_stated, abs(inside_corrected))
