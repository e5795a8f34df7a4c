r"""The Random Energy Model of one attention row (Giorlandino & Goldt 2025, Sec. 2.1, App. B.1-B.3).

With ``W_Q, W_K`` entries of variance ``beta sqrt(log T) / d`` and logits
``a_ts = (W_Q x_t).(W_K x_s) / sqrt(d)``, the logits of one attention row are Gaussian with
``Cov(a_ts, a_ts') = beta^2 log T q_tt q_ss'`` (App. B.1, Eq. (9)). For tokens with norm ``q``
and pairwise overlap ``p`` the part shared by all keys (variance ``beta^2 log T q p``) cancels in
the softmax, leaving a REM: ``T`` i.i.d. energies of variance ``sigma^2 = beta^2 log T q (q - p)``.
The attention weights are its Gibbs weights ``A_s = e^{a_s} / Z`` and the order parameter is the
inverse participation ratio ``Y^(r) = sum_s A_s^r``.

**T -> infinity** (Result 1). The condensation point is

.. math::  \beta_c(q, p) = \sqrt{2 / (q (q - p))},

and for ``m = beta_c / beta < 1`` the weights are Poisson-Dirichlet(m, 0), so

.. math::  \mathbb E Y^{(r)} = \frac{\Gamma(r - m)}{\Gamma(r)\Gamma(1 - m)},\qquad
           \mathbb E (Y^{(2)})^2 = \frac{(1-m)(3-2m)}{3},

(``r = 2``: ``1 - beta_c/beta``, Eq. (4)); for ``beta <= beta_c`` every ``Y^(r>1)`` vanishes.

**Finite T** (exact, one quadrature). With ``1/Z^n = Gamma(n)^{-1} int_0^inf t^{n-1} e^{-tZ} dt`` and
``t = e^y``,

.. math::  \mathbb E Y^{(r)} = \frac{T}{\Gamma(r)} \int dy\, H_r(y)\, L(y)^{T-1},\qquad
           \mathbb E (Y^{(2)})^2 = \frac{T}{6}\int H_4 L^{T-1} + \frac{T(T-1)}{6}\int H_2^2 L^{T-2},

where ``H_n(y) = E exp(n(a+y) - e^{a+y})`` and ``L(y) = E exp(-e^{a+y})`` for one energy ``a``.
:func:`rem_quadrature` evaluates these by the trapezoid rule on smooth, decaying integrands (spectral
convergence: ~1e-12 relative at every ``2 <= T <= T_MAX`` (1e100) and every ``sigma``, checked against
grids four times finer, against direct simulation and, at ``T`` up to 1e100, against the annealed value
``e^{sigma^2}/T`` of the high-temperature phase, in ``tests/test_rem.py``). The sum rule ``E Y^(1) = 1``
holds to the same precision. The grid reaches ``y = -(log T + 40)``: an earlier ``-(log T + 40)/r`` lost the
``1/T`` floor above ``T ~ 1e13`` (``E Y^(2) T`` read 0.25 instead of 1 at ``T = 1e20``, ``sigma = 1e-3``). The
cross-overlap of two correlated rows is in ``sigprop.attention._cross``.

Used by the attention and block maps (``sp.theory.attention_map``, ``sp.theory.block_map``) and by
Result 2 (``sp.theory.rem_query_grad_sq_norm``); chapter ``giorlandino-goldt2025``, pages 01-05.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from scipy.special import gammaln, ndtr

from ..stats._config import threads_for, widest_float
from ..stats._estimate import Estimate
from ..stats._montecarlo import monte_carlo
from ..stats._validate import (broadcast, check_gram_bound, check_int, check_overlaps, check_positive, check_range,
                               check_seq_len, theory_function, to_output)
__all__ = ["mc_rem_moments"]
__theory__ = ["beta_c", "ipr", "ipr_finite", "rem_moments"]

#: Largest order r accepted: the quadrature's x-grid must hold the peak of ``e^{r x - e^x}`` at ``x = log r``.
R_MAX = 64.0
#: Largest T of the finite-T quadrature: beyond it ``T e^{2 y}`` at the grid's lower end ``y ~ -log T`` leaves the
#: float64 range (at T = 1e300 the value underflowed to 0), and the grid, which grows like log T, takes seconds.
T_MAX = 1e100
_T_WHY = " (the finite-T quadrature's domain: its grid grows like log T and leaves float64 beyond; use T=None)"


def _beta_c(q, p):
    # sqrt(2/q) / sqrt(q - p): no product q (q - p), which under- or overflows for extreme q
    gap = q - p
    with np.errstate(divide="ignore", invalid="ignore"):
        ok = (gap > 0) & (q > 0)
        return np.where(ok, np.sqrt(2.0 / np.where(ok, q, 1.0)) / np.sqrt(np.where(ok, gap, 1.0)), np.inf)


@theory_function
def beta_c(q, p):
    """Critical query/key scale ``sqrt(2 / (q (q - p)))`` (Giorlandino & Goldt 2025, Result 1).

    ``q > 0`` is the mean token norm ``|x|^2/d``, ``p`` the mean pairwise overlap, ``|p| < q``.
    """
    qa, pa = check_overlaps(q, p, strict=True)
    return to_output(_beta_c(qa, pa), q, p)


def _check_r(r):
    r_arr = check_range(r, "r (order of the participation ratio)", 1.0, R_MAX)
    return r_arr


def _pd_moments(m):
    """``(E Y2, E Y3, E Y2^2)`` of Poisson-Dirichlet(m, 0) weights, ``0 < m <= 1`` (``m = 1``: all zero).

    Pitman's exchangeable partition probability function gives ``E sum_i w_i^n = (1-m)_{n-1}/(n-1)!`` and
    ``E sum_{i != j} w_i^2 w_j^2 = m (1-m)^2 / 6``.
    """
    y2 = 1.0 - m
    y3 = (1.0 - m) * (2.0 - m) / 2.0
    y4 = (1.0 - m) * (2.0 - m) * (3.0 - m) / 6.0
    return y2, y3, y4 + m * (1.0 - m) ** 2 / 6.0


def ipr_limit(beta, q, p, r):
    """T -> infinity ``E Y^(r)`` (arrays, no validation)."""
    with np.errstate(divide="ignore"):
        m = _beta_c(q, p) / beta
    frozen = m < 1
    ms = np.where(frozen, m, 0.5)
    val = np.exp(gammaln(r - ms) - gammaln(r) - gammaln(1 - ms))
    return np.where(frozen, val, np.where(r == 1, 1.0, 0.0))


@theory_function
def ipr(beta, q=1.0, p=0.0, r=2):
    """T -> infinity mean inverse participation ratio of an attention row (Result 1, Eq. (4)).

    ``Y^(2) = max(0, 1 - beta_c / beta)``; general order ``r >= 1``:
    ``Gamma(r - m) / (Gamma(r) Gamma(1 - m))`` with ``m = beta_c(q, p) / beta`` for ``m < 1``
    (``r = 3``: ``(1 - m)(2 - m)/2``), 0 otherwise. Broadcasts over all arguments.
    """
    b = check_positive(beta, "beta")
    qa, pa = check_overlaps(q, p, strict=False)
    ra = _check_r(r)
    broadcast(beta=b, q=qa, p=pa, r=ra)
    check_gram_bound(*broadcast(q=qa, p=pa), None)   # T -> infinity tokens: p >= 0
    return to_output(ipr_limit(b, qa, pa, ra), beta, q, p, r)


# ---------------------------------------------------------------- finite T: one quadrature

#: x-grid of the quadrature: ``e^{n x - e^x}`` is negligible above X_HI for ``1 <= n <= R_MAX``; the lower end
#: moves down to ``-(log T + 40)`` when that is lower (:func:`_grid`).
_X_LO, _X_HI, _DX = -45.0, 10.0, 0.1
#: Gaussian tails kept: energies beyond ``z sigma`` with ``T P(|a| > z sigma) < e^-37`` are dropped.
_Z_TAIL = 9.0
#: Width of the smooth step ``Phi(x / c)`` subtracted from ``1 - e^{-e^x}`` (its Gaussian average is exact).
_STEP = 1.0
#: Below this sigma the energy average is a Gauss-Hermite rule instead of the x-grid.
_SIGMA_GH = 1.0
_GH = {n: np.polynomial.hermite_e.hermegauss(n) for n in (16, 32, 64)}
#: Float64 elements of one block of the Gaussian kernel in :func:`_site` (16 MiB).
_SITE_ELEMENTS = 2**21


def _site(points, sigma: float, x_lo: float, ns) -> tuple:
    """One energy ``a ~ N(0, sigma^2)`` seen at shifts ``y``: ``(1 - L, L, {n: H_n})`` at the ``points``, with
    ``L(y) = E exp(-e^{a+y})`` and ``H_n(y) = E exp(n (a+y) - e^{a+y})`` (module docstring)."""
    y = np.asarray(points, dtype=float)
    if sigma == 0.0:
        ex = np.exp(np.minimum(y, 700.0))
        return -np.expm1(-ex), np.exp(-ex), {n: np.exp(n * y - ex) for n in ns}
    if sigma < _SIGMA_GH:
        # nodes by scale: relative error < 1e-13 on every value above 1e-30 (measured against 200 nodes)
        g, w = _GH[16 if sigma <= 0.02 else 32 if sigma <= 0.1 else 64]
        w = w / w.sum()
        xx = y[..., None] + sigma * g  # (..., nodes)
        ex = np.exp(np.minimum(xx, 700.0))
        return (-np.expm1(-ex)) @ w, np.exp(-ex) @ w, {n: np.exp(n * xx - ex) @ w for n in ns}
    x = np.arange(x_lo, _X_HI + _DX / 2, _DX)
    ex = np.exp(x)
    # 1 - e^{-e^x} = Phi(x / c) + r(x); E Phi((a + y)/c) = Phi(y / sqrt(sigma^2 + c^2)) exactly, and r
    # decays at both ends of the grid, so its trapezoid sum converges spectrally
    rest = -np.expm1(-ex) - ndtr(x / _STEP)
    table = np.stack([rest] + [np.exp(n * x - ex) for n in ns], axis=1)  # (x, 1 + len(ns))
    flat = y.reshape(-1)
    out = np.empty((flat.size, table.shape[1]))
    rows = max(1, _SITE_ELEMENTS // x.size)  # the Gaussian kernel in row blocks: bounded memory at any T
    for i in range(0, flat.size, rows):
        K = np.exp(-0.5 * ((x - flat[i:i + rows, None]) / sigma) ** 2) * (_DX / (sigma * math.sqrt(2 * math.pi)))
        out[i:i + rows] = _mm(K, table)
    out = out.reshape(y.shape + (table.shape[1],))
    s = math.sqrt(sigma**2 + _STEP**2)
    return (ndtr(y / s) + out[..., 0], ndtr(-y / s) - out[..., 0], {n: out[..., 1 + i] for i, n in enumerate(ns)})


def _mm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` of the quadratures in float64, through torch on the CPU under :func:`sigprop.threads_for`:
    these products are small, and numpy's own BLAS threads would spin against a busy neighbour (issue 29,
    item 11: measured 1.3x wall and 1.45x CPU on a block map of G&G 03 beside other processes)."""
    with threads_for(a.shape[0] * a.shape[1] * b.shape[-1]):
        return (torch.from_numpy(np.ascontiguousarray(a)) @ torch.from_numpy(np.ascontiguousarray(b))).numpy()


def _log_l(miss, keep):
    """log L from whichever of ``1 - L`` and ``L`` is accurate."""
    with np.errstate(divide="ignore"):
        return np.where(miss < 0.5, np.log1p(-np.minimum(miss, 0.5)), np.log(np.maximum(keep, 1e-300)))


def _grid(sigma: float, T: float):
    """The y-grid (lower end of x, spacing, tail cut): the integrand lives where ``a + y`` lies in
    ``[x_lo, X_HI]`` for an energy within ``z_tail sigma`` and varies on the scale ``max(1, sigma /
    sqrt(1 + 2 log T))`` (the width of ``L^(T-1)``'s edge), resolved by 5 or 6 points. ``x_lo = -(log T + 40)``: below it ``T (1 - L)``
    and ``T^r H_r`` are under ``e^-40`` whatever ``r >= 1``, so neither the power ``L^(T-1)`` nor the value
    (at least ``T^(1-r)``) feels the cut. (An earlier ``-(log T + 40)/r`` lost the ``1/T`` floor of ``Y^(2)``
    above ``T ~ 1e13``.)"""
    x_lo = min(_X_LO, -(math.log(T) + 40.0))
    # 6 points per edge width (and 0.2 on the width-1 double exponential): the trapezoid rule converges
    # spectrally; halving the spacing moved no value by more than 5e-12 (relative) from T = 2 to 1e12
    dy = max(0.2, sigma / (6.0 * math.sqrt(1.0 + 2.0 * math.log(T))))
    z_tail = max(_Z_TAIL, math.sqrt(2.0 * (math.log(T) + 37.0)))
    return x_lo, dy, z_tail


def rem_quadrature(sigma: float, T: float, orders=(2.0,), square: bool = False) -> list[float]:
    """``[E Y^(r) for r in orders]`` (then ``E (Y^(2))^2`` if ``square``) for ``T`` i.i.d. ``N(0, sigma^2)`` energies."""
    if sigma == 0.0:
        out = [T ** (1.0 - r) for r in orders]
        return out + [T**-2.0] if square else out
    ns = sorted(set(orders) | ({2.0, 4.0} if square else set()))
    x_lo, dy, z_tail = _grid(sigma, T)
    y = np.arange(x_lo - z_tail * sigma, _X_HI + z_tail * sigma + dy / 2, dy)
    miss, keep, H = _site(y, sigma, x_lo, ns)
    log_l = _log_l(miss, keep)
    p1 = np.exp((T - 1.0) * log_l)
    out = [T * math.exp(-gammaln(r)) * float(np.sum(H[r] * p1) * dy) for r in orders]
    if square:
        p2 = np.exp((T - 2.0) * log_l)
        w4 = float(np.sum(H[4.0] * p1) * dy) / 6.0
        w22 = float(np.sum(H[2.0] ** 2 * p2) * dy) / 6.0
        out.append(T * w4 + T * (T - 1.0) * w22)
    return out


def _energy_scale(beta, T, q, p):
    """``sigma = beta sqrt(log T q (q - p))`` (arrays)."""
    return beta * np.sqrt(np.log(T) * q * np.maximum(q - p, 0.0))


@theory_function
def ipr_finite(beta, T, q=1.0, p=0.0, r=2):
    """Exact finite-T mean IPR ``E sum_s A_s^r`` of the REM behind Result 1.

    Energies i.i.d. ``N(0, beta^2 log T q (q - p))`` (App. B.1 after removing the part shared by all
    keys). Tends to :func:`ipr` as T -> infinity, slowly (in log T), and equals ``T^(1-r)`` at
    ``beta = 0``. One quadrature (module docstring), ~1e-12 relative for every ``T >= 2`` and
    ``beta >= 0``; ``1 <= r <= 64``. Broadcasts over all arguments.
    """
    b = check_positive(beta, "beta", allow_zero=True)
    Ta = check_seq_len(T, maximum=T_MAX, why=_T_WHY)
    qa, pa = check_overlaps(q, p, strict=False)
    ra = _check_r(r)
    broadcast(beta=b, T=Ta, q=qa, p=pa, r=ra)
    check_gram_bound(*np.broadcast_arrays(qa, pa, Ta)[:2], np.broadcast_arrays(qa, pa, Ta)[2])   # p >= -q/(T-1)
    sig, TT, rr = np.broadcast_arrays(_energy_scale(b, Ta, qa, pa), Ta, ra)
    out = np.empty(sig.shape)
    for idx in np.ndindex(sig.shape):
        out[idx] = rem_quadrature(float(sig[idx]), float(TT[idx]), (float(rr[idx]),))[0]
    return to_output(out, beta, T, q, p, r)


@theory_function
def rem_moments(beta, q=1.0, p=0.0, *, T=None):
    r"""``(E[Y^(2)], E[Y^(3)], E[(Y^(2))^2])`` of one attention row at initialisation.

    Giorlandino & Goldt (2025), Result 1 and Eq. (26). ``T=None``: the ``T -> infinity`` limit, zero for
    ``beta <= beta_c`` and the Poisson-Dirichlet moments with ``m = beta_c / beta`` above
    (``E Y2 = 1 - m``, ``E Y3 = (1-m)(2-m)/2``, ``E Y2^2 = (1-m)(3-2m)/3``). ``T`` given: the exact
    finite-``T`` moments (the quadrature of :func:`ipr_finite`). Broadcasts over ``beta, q, p, T``.
    """
    b = check_positive(beta, "beta", allow_zero=True)
    qa, pa = check_overlaps(q, p)
    Ta = None if T is None else check_seq_len(T, maximum=T_MAX, why=_T_WHY)
    check_gram_bound(*np.broadcast_arrays(qa, pa, 1.0 if Ta is None else Ta)[:2], Ta)   # p >= -q/(T-1), or 0
    if T is None:
        bb, qq, pp = np.broadcast_arrays(b, qa, pa)
        bc = _beta_c(qq, pp)
        with np.errstate(divide="ignore"):
            m = np.where(bb > bc, bc / np.where(bb > 0, bb, 1.0), 1.0)
        return tuple(to_output(o, beta, q, p) for o in _pd_moments(m))
    sig, TT = np.broadcast_arrays(_energy_scale(b, Ta, qa, pa), Ta)
    res = np.empty((3,) + sig.shape)
    for idx in np.ndindex(sig.shape):
        res[(slice(None),) + idx] = rem_quadrature(float(sig[idx]), float(TT[idx]), (2.0, 3.0), square=True)
    return tuple(to_output(res[i], beta, q, p, T) for i in range(3))


# ---------------------------------------------------------------- Monte Carlo of the REM itself


def _rem_rows(beta, T, q, p):
    sigma = float(beta) * math.sqrt(math.log(T) * q * (q - p))
    return sigma, p / q


def mc_rem_moments(beta, *, T: int, n: int, q: float = 1.0, p: float = 0.0, generator=None,
                   device=None) -> Estimate:
    """Direct simulation of :func:`rem_moments`: ``[Y2, Y3, Y2^2]`` of ``n`` rows of ``T`` i.i.d. energies.

    The Monte Carlo twin of the quadrature (no weights, no tokens: the REM itself).
    """
    check_positive(beta, "beta", allow_zero=True)
    T = check_int(T, "T", minimum=2)
    check_overlaps(q, p, strict=False)
    sigma, _ = _rem_rows(beta, T, q, p)

    def sample(m, gen):
        a = sigma * torch.randn(m, T, generator=gen, device=gen.device, dtype=widest_float(gen.device))
        A = torch.softmax(a, dim=-1)
        y2 = A.pow(2).sum(-1)
        return torch.stack([y2, A.pow(3).sum(-1), y2 * y2], dim=-1)

    chunk = max(1, min(n, int(4e6 // T)))
    return monte_carlo(sample, n, generator=generator, chunk=chunk, device=device, work=chunk * T)
