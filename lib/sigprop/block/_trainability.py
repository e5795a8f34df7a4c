r"""Trainability diagrams over ``(beta, alpha_SA)`` (Giorlandino & Goldt 2025, Fig. 1(c), Sec. 3).

Iterate the block map (:func:`sigprop.theory.cosine_vs_depth`, Algorithms 1-3) over a
whole grid at once and classify every point by two collapse criteria:

* **entropy collapse** -- some attention layer is in the condensed (localised) phase of the
  REM: ``Y^(2)(beta; 1, rho_l) > entropy_threshold`` at its input cosine ``rho_l`` (Result 1,
  Eq. 4). With the default threshold 0 this is ``beta > beta_c(rho_l) = sqrt(2/(1 - rho_l))``;
  since ``beta_c`` grows with ``rho``, the first layer decides whenever ``rho`` grows with depth,
  which is the paper's ``beta_c = sqrt(2)`` boundary for near-orthogonal inputs (App. C.1).
* **rank collapse** -- the output cosine after ``depth`` blocks exceeds ``rank_threshold``
  (``rho_L >= rank_threshold``; the paper does not state its threshold, the widget varies it).

Entropy collapse takes precedence (it cannot be cured by skip connections, Sec. 2.1.1).
Phases: ``TRAINABLE = 0``, ``RANK_COLLAPSE = 1``, ``ENTROPY_COLLAPSE = 2``.

Everything is numpy-vectorised over the grid: a 100 x 100 grid over 60 layers takes a few
milliseconds to tens of milliseconds (``tests/test_trainability.py`` asserts < 2 s).
Used in ``chapters/giorlandino-goldt2025/04_trainability.ipynb``.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ._depth import cosine_vs_depth
from ..stats._validate import check_int, check_positive, check_range, check_real, theory_function

__all__ = ["TrainabilityDiagram", "TRAINABLE", "RANK_COLLAPSE", "ENTROPY_COLLAPSE", "PHASE_NAMES"]
__theory__ = ["trainability_diagram", "critical_alpha_sa"]

TRAINABLE, RANK_COLLAPSE, ENTROPY_COLLAPSE = 0, 1, 2
PHASE_NAMES = {TRAINABLE: "trainable", RANK_COLLAPSE: "rank collapse", ENTROPY_COLLAPSE: "entropy collapse"}


@dataclasses.dataclass(frozen=True)
class TrainabilityDiagram:
    """Result of :func:`sigprop.theory.trainability_diagram`; arrays of shape ``(len(alpha_sa), len(beta))``."""

    beta: np.ndarray          # (nb,)
    alpha_sa: np.ndarray      # (na,)
    phase: np.ndarray         # (na, nb) int: 0 trainable, 1 rank collapse, 2 entropy collapse
    rho_final: np.ndarray     # (na, nb) cosine after `depth` blocks
    y2_max: np.ndarray        # (na, nb) largest attention IPR over the layers
    depth: int
    rank_threshold: float
    entropy_threshold: float

    def fraction(self, phase: int) -> float:
        """Fraction of grid points in ``phase``."""
        return float(np.mean(self.phase == phase))


@theory_function
def trainability_diagram(beta, alpha_sa, *, depth, rank_threshold=0.99, entropy_threshold=0.0,
                         rho0=0.0, **kwargs) -> TrainabilityDiagram:
    """Classify every ``(alpha_sa, beta)`` point of a grid (Fig. 1(c)); see the module docstring.

    ``beta (nb,)`` and ``alpha_sa (na,)`` are 1-D grids; the result's arrays are ``(na, nb)``.
    ``rho0`` is the input cosine (0: near-orthogonal tokens as in App. C.1). Other keywords go
    to :func:`sigprop.theory.block_map` (``norm="post"|"pre"|"none"``, ``gain_control``,
    ``alpha_mlp``, ``sigma_w2``, ``sigma_b2``, ``sigma_v2``, ``activation``).
    """
    b = np.atleast_1d(np.asarray(check_positive(beta, "beta"), dtype=float))
    a = np.atleast_1d(np.asarray(check_positive(alpha_sa, "alpha_sa", allow_zero=True), dtype=float))
    if b.ndim != 1 or a.ndim != 1:
        raise ValueError(f"beta and alpha_sa must be 1-D grids; got shapes {b.shape} and {a.shape}")
    depth = check_int(depth, "depth", minimum=1)
    check_range(rank_threshold, "rank_threshold", 0.0, 1.0)
    check_range(entropy_threshold, "entropy_threshold", 0.0, 1.0)
    rho, y2 = cosine_vs_depth(depth, beta=b[None, :], alpha_sa=a[:, None], rho0=rho0, **kwargs)
    y2_max = np.nanmax(y2[:-1], axis=0)
    rho_final = rho[-1]
    phase = np.full(rho_final.shape, TRAINABLE, dtype=int)
    phase[rho_final >= rank_threshold] = RANK_COLLAPSE
    phase[y2_max > entropy_threshold] = ENTROPY_COLLAPSE
    return TrainabilityDiagram(b, a, phase, rho_final, y2_max, depth, float(rank_threshold),
                               float(entropy_threshold))


@theory_function
def critical_alpha_sa(depth, *, beta, rank_threshold=0.99, rho0=0.0, lo=0.0, hi=10.0, tol=1e-6, **kwargs):
    """Smallest ``alpha_sa`` with ``rho_depth < rank_threshold`` (bisection, vectorised over ``beta``).

    Assumes ``rho_depth`` decreases with ``alpha_sa`` (checked at the bracket ends: raises
    ``ValueError`` when ``hi`` still collapses; returns ``lo`` where ``lo`` already does not).
    """
    b = np.atleast_1d(np.asarray(check_positive(beta, "beta"), dtype=float))
    depth = check_int(depth, "depth", minimum=1)
    check_range(rank_threshold, "rank_threshold", 0.0, 1.0)
    lo, hi = check_real(lo, "lo", minimum=0.0), check_real(hi, "hi", minimum=0.0)
    tol = check_real(tol, "tol", minimum=0.0, strict=True)
    if hi <= lo:
        raise ValueError(f"the bracket needs lo < hi; got lo={lo}, hi={hi}")

    def rho_at(a):
        return cosine_vs_depth(depth, beta=b, alpha_sa=a, rho0=rho0, **kwargs)[0][-1]

    lo_a, hi_a = np.full(b.shape, float(lo)), np.full(b.shape, float(hi))
    if np.any(rho_at(hi_a) >= rank_threshold):
        raise ValueError(f"alpha_sa = hi = {hi} still gives rank collapse for some beta; raise hi")
    ok_lo = rho_at(np.maximum(lo_a, 1e-12)) < rank_threshold
    for _ in range(200):
        if np.max(hi_a - lo_a) <= tol:
            break
        mid = 0.5 * (lo_a + hi_a)
        bad = rho_at(mid) >= rank_threshold
        lo_a = np.where(bad, mid, lo_a)
        hi_a = np.where(bad, hi_a, mid)
    return np.where(ok_lo, float(lo), hi_a)
