r"""One attention row with soft-capped logits (Gemma2's ``c tanh(a / c)``): a Random Energy Model whose energies are
bounded -- :func:`capped_ipr` and its Monte Carlo :func:`mc_capped_ipr`.

**Setting** (Giorlandino & Goldt 2025, App. B.1, as in ``sigprop.attention._rem``): the logits of one query row on
``T`` equicorrelated tokens of norm ``q`` and overlap ``p`` are ``a_s = m + e_s`` with a part ``m ~ N(0, s^2 p)``
shared by every key and ``T`` independent ``e_s ~ N(0, s^2 (q - p))``, where ``s^2 = beta^2 log T q`` (G&G's units:
``Cov(a_ts, a_ts') = beta^2 log T q_tt q_ss'``). Without a cap ``m`` cancels in the softmax; with one it does not: the
energies are ``E_s = c tanh((m + e_s) / c)``.

**The exact finite-T value.** Given ``m`` the capped energies are i.i.d., so the REM's one-quadrature formula holds
with the capped law (``1/Z^2 = int t e^{-tZ} dt``, ``t = e^y``):

.. math::  \mathbb E[Y^{(2)} \mid m] = T \int dy\, H(y)\, L(y)^{T-1}, \quad
           H(y) = \mathbb E\, e^{2(E+y) - e^{E+y}}, \quad L(y) = \mathbb E\, e^{-e^{E+y}},

and ``E Y^(2)`` is its mean over ``m``: a fine uniform rule over ``e`` (851 points on ``[-8.5, 8.5]`` standard
deviations: the cut-off ``e^{E+y}`` is sharp in ``e``), Gauss-Hermite over ``m`` (24 nodes; smooth) and the
trapezoid rule in ``y`` (spacing 0.02 on ``[-max E - log T - 25, 6 - min E]``, where the integrand has decayed below
1e-10 of its peak). About a second per point (more for wide energies). Checked in ``tests/test_capped.py`` against :func:`sigprop.theory.ipr_finite`
(a cap far above every energy) and against Monte Carlo of capped softmax rows.

**No condensation as T -> infinity.** Every weight obeys ``A_s <= e^{2c} / (e^{2c} + T - 1)`` (one energy at most
``c``, the others at least ``-c``), so ``E Y^(2) <= max_s A_s -> 0``: at a fixed cap the condensed phase of Result 1
disappears at large enough ``T``, whatever ``beta``. At finite ``T`` the cap matters once it reaches below the top
energies of the uncapped row, ``~ s sqrt(2 (q - p) log T / q)``; :func:`capped_ipr` says how much, and the book's
off-the-shelf chapter shows where concentration disappears (Gemma2's ``c = 50`` sits far above the logits of any
default initialisation, ``s`` of order ``0.1``: it does nothing at initialisation).
"""
from __future__ import annotations

import math

import numpy as np
import torch

from ..stats._estimate import Estimate
from ..stats._montecarlo import monte_carlo
from ..stats._validate import (broadcast, check_allocation, check_int, check_overlaps, check_positive, check_seq_len,
                               theory_function, to_output)
from ._layer import attention_weights

__all__ = ["mc_capped_ipr"]
__theory__ = ["capped_ipr"]

#: The keys' energies: a uniform grid of standard-normal z on [-8.5, 8.5] (Gaussian mass outside 2e-17), fine enough
#: for the double-exponential cut-off e^{E+y}, which varies on the scale 1/sigma (spacing 0.02 < 1/sigma for the
#: energies' scales here, sigma <= 40); Gauss-Hermite nodes over the shared part; spacing of the y-grid.
_Z = np.linspace(-8.5, 8.5, 851)
_Z_WEIGHTS = np.exp(-_Z**2 / 2) / np.exp(-_Z**2 / 2).sum()
_N_M, _DY = 24, 0.02
#: Largest y-grid (points): the energies' span over 0.02, about 2 x 10^5 at logit scales sigma ~ 200.
_Y_MAX = 2e5
_M_NODES, _M_WEIGHTS = np.polynomial.hermite_e.hermegauss(_N_M)
#: Largest T accepted (the y-grid's length grows like log T; beyond, use the bound of the module docstring).
T_MAX = 1e12


def _scales(beta, T, q, p):
    """The shared part's and the keys' logit scales (module docstring); refused where they leave float64."""
    with np.errstate(over="ignore", invalid="ignore"):
        s2 = np.float64(beta) ** 2 * np.log(np.float64(T)) * np.float64(q)
        sm, se = np.sqrt(s2 * max(p, 0.0)), np.sqrt(s2 * (q - p))
    if not (np.isfinite(sm) and np.isfinite(se)):
        raise ValueError(f"beta = {beta:.3g} makes the logits' scale leave the float64 range")
    return float(sm), float(se)


def _row_ipr(m, sigma, cap, T):
    """``E[Y2 | m]`` for capped energies ``cap tanh((m + sigma z) / cap)`` (module docstring)."""
    E = cap * np.tanh((m + sigma * _Z) / cap)                          # (N_Z,)
    w = _Z_WEIGHTS
    lo, hi = -E.max() - math.log(T) - 25.0, 6.0 - E.min()
    if (hi - lo) / _DY > _Y_MAX:
        raise ValueError(f"energies spanning {float(E.max() - E.min()):.3g} (logit scale sigma = {sigma:.3g}, cap = "
                         f"{cap:.3g}) need a y-grid of {(hi - lo) / _DY:.3g} points, more than {_Y_MAX:.0g}: beyond "
                         "this quadrature's range (the row is condensed on its top key: E Y2 ~ 1 there)")
    y = np.arange(lo, hi, _DY)[:, None]                                 # (Y, 1)
    u = E[None, :] + y
    eu = np.exp(np.minimum(u, 700.0))
    H = (np.exp(2 * u - eu) * w).sum(-1)
    log_L = np.log((np.exp(-eu) * w).sum(-1).clip(1e-300, None))
    return float(T * np.trapezoid(H * np.exp((T - 1) * log_L), dx=_DY))


@theory_function
def capped_ipr(beta, T, cap, q=1.0, p=0.0):
    """``E Y^(2)`` of one attention row whose logits are soft-capped at ``cap`` (``c tanh(a / c)``), at finite ``T``
    on equicorrelated tokens of norm ``q`` and overlap ``p`` (module docstring: exact, one quadrature per shared
    part and point). Broadcasts; ``2 <= T <= 1e12``, ``cap > 0``, ``0 <= p < q``."""
    b = check_positive(beta, "beta", allow_zero=True)
    Tf = check_seq_len(T, maximum=T_MAX, why=" (the y-grid grows like log T)")
    c = check_positive(cap, "cap")
    qa, pa = check_overlaps(q, p, strict=True)
    if np.any(pa < 0):
        raise ValueError(f"capped_ipr needs p >= 0 (a shared part of non-negative variance); got p = {np.min(pa)}")
    arrays = broadcast(beta=b, T=Tf, cap=c, q=qa, p=pa)
    w = _M_WEIGHTS / _M_WEIGHTS.sum()

    def one(bi, ti, ci, qi, pi):
        sm, se = _scales(bi, ti, qi, pi)
        return sum(wi * _row_ipr(sm * mi, se, ci, ti) for mi, wi in zip(_M_NODES, w))

    out = np.vectorize(one, otypes=[float])(*(a.astype(float) for a in arrays))
    return to_output(out, beta, T, cap, q, p)


def mc_capped_ipr(beta, *, T: int, cap: float, n: int, q: float = 1.0, p: float = 0.0, generator=None) -> Estimate:
    """Monte Carlo of :func:`capped_ipr`: ``n`` rows of ``T`` logits ``m + e_s`` (module docstring), capped, through a
    softmax (:func:`sigprop.attention_weights`, float64); the mean of ``sum_s A_s^2`` and its standard error."""
    b = float(check_positive(beta, "beta", allow_zero=True))
    T = check_int(T, "T", minimum=2)
    c = float(check_positive(cap, "cap"))
    qa, pa = (float(v) for v in check_overlaps(q, p, strict=True))
    check_allocation((min(int(n), 256), T), torch.float64, "mc_capped_ipr's chunk of logits")
    sm, se = _scales(b, T, qa, max(pa, 0.0))

    def sample(k, g):
        m = sm * torch.randn(k, 1, generator=g, dtype=torch.float64)
        a = c * torch.tanh((m + se * torch.randn(k, T, generator=g, dtype=torch.float64)) / c)
        return attention_weights(a).pow(2).sum(-1)

    return monte_carlo(sample, n, generator=generator)
