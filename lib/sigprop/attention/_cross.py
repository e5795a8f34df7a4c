r"""Two correlated attention rows: the cross-overlap ``Y_p`` (Giorlandino & Goldt 2025, App. B.1, B.2.2).

Two query tokens ``t, t'`` of overlap ``p`` see the same keys. Their logits over the keys are REMs
(``sigprop.attention._rem``) of variance ``sigma^2 = beta^2 log T q (q - p)`` whose key-dependent parts share a
column field (Eq. (9)): ``a_s = m_s + e_s``, ``a'_s = m_s + e'_s`` with ``m_s ~ N(0, c sigma^2)`` shared,
``e, e' ~ N(0, (1 - c) sigma^2)`` private, ``c = p / q``. The order parameter of the ``p`` map is

.. math::  Y_p = \mathbb E \sum_s A_s A'_s ,\qquad D = Y_p - 1/T \;(\ge 0),

``1/T`` for independent rows (``c = 0``), the row's own ``E Y^(2)`` for ``c = 1``. Gain control (values
centred over the sequence) multiplies exactly ``D`` and ``Y^(2) - 1/T``, which vanish like ``sigma^2`` as
the tokens collapse, so this module computes ``D`` itself, never as ``Y_p - 1/T`` from a rounded ``Y_p``.

**The excess, directly.** With ``X_s = e^{a_s}``, ``Z = sum_s X_s`` and the sample covariance
``C = (1/T) sum_s X_s X'_s - (Z/T)(Z'/T)``, ``D = T E[C / (Z Z')]``; writing ``1/(Z Z')`` as a double Laplace
integral (``t = e^y``, ``u = e^v``) and using that the sites are i.i.d.,

.. math::  D = (T - 1) \iint \psi(y, v)^{T-2}\, \tfrac12\,
           \mathbb E_{m_1, m_2}\big[G(y; m_1, m_2)\, G(v; m_1, m_2)\big]\, dy\, dv,

with ``psi(y, v) = E_m[L(y+m) L(v+m)]``, ``G(y; m_1, m_2) = H(y+m_1) L(y+m_2) - L(y+m_1) H(y+m_2)``, and ``L``,
``H = H_1`` the private energy's site functions (``_rem._site``). ``G`` is antisymmetric and vanishes at
``m_1 = m_2``: no cancellation remains. Three regimes of the shared scale ``s_m = sqrt(c) sigma``:

* ``s_m < 1e-5``: the first order in ``s_m^2``, ``D = s_m^2 (1 - E Y^(2)(s_e))^2 / (T - 1)`` (``s_e`` the
  private scale; ``Cov(A_s, A'_s) = Var_m E[A_s | m]``, linearised in ``m``), relative error ``O(s_m^2)``;
* ``s_m <= 0.3``: the formula above with ``m`` on a Gauss-Hermite rule (``_GH_M`` nodes, all pairs);
* larger ``s_m``: ``Y_p`` itself from ``T iint E_m[H H'] psi^{T-1}`` with ``m`` on the y-lattice (spacing at
  most ``s_m / 2``), then ``D = Y_p - 1/T`` (here ``D`` is not small against ``1/T``).

Accuracy, checked in ``tests/test_cross_overlap.py`` over a grid reaching the domain's edges (``sigma`` from
1e-8 to 60, ``c`` from 1e-12 to 1, ``T`` from 2 to ``T_MAX``): against the exact two-token value (``T = 2``:
``D = 2 E_x[(E_u sigmoid(x + u) - 1/2)^2]``, scipy quadrature), against ``E Y^(2)`` (``c = 1``, the
independent one-row quadrature), against the first-order formula and against Monte Carlo of the two rows
(:func:`mc_cross_overlap`); ~1e-9 relative on ``D`` or better.

**Negative overlaps** (issue 37). ``T`` tokens of norm ``q`` and overlap ``p`` exist for ``p >= -q/(T-1)`` (the
Gram matrix ``Q = (q - p) I + p 1 1^T`` is positive semi-definite). The logits are Gaussian as ``d_k -> infinity``
with ``E[a_ts a_t's'] = k Q_tt' Q_ss'`` (Eq. (9)). For ``p >= 0`` the key factor ``Q_ss' = p + (q - p) delta``
splits into a field shared by all keys, which the softmax removes, and i.i.d. key noise; for ``p < 0`` that split
would need a shared field of negative variance and does not exist. But the softmax sees only the logits centred
over the keys (a row constant cancels), and ``P Q P = (q - p) P`` with ``P = I - 1 1^T / T`` whatever the sign of
``p``: the centred logits of rows ``t != t'`` have ``E[a_ts a_t's'] = k Q_tt' (q - p)(delta_ss' - 1/T)``. That is the
law of i.i.d. keys (centred), each row of scale ``sigma^2 = beta^2 log T q (q - p)`` (so ``Y^(2)`` is unchanged),
with key-wise correlation ``c = Q_tt' / Q_tt = p / q`` between the rows:

.. math::  a_s = \sigma(\sqrt{|c|}\, m_s + \sqrt{1-|c|}\, e_s), \qquad
           a'_s = \sigma(\operatorname{sign}(c)\sqrt{|c|}\, m_s + \sqrt{1-|c|}\, e'_s):

for ``c < 0`` the shared field enters the second row reversed. Every formula above carries over with the second
row's site functions at ``v - m`` instead of ``v + m`` (``psi(y, v) = E_m[L(y+m) L(v-m)]``, ``G(v; -m_1, -m_2)``),
which on the symmetric Gauss-Hermite rule and the symmetric m-lattice is the reversed node order. Consequences:
``D < 0`` (anti-correlated rows favour different keys, ``Y_p < 1/T``); to first order ``D = -s_m^2 (1 - E
Y^(2)(s_e))^2 / (T - 1)``, odd in ``c``; at ``T = 2`` ``D`` is exactly odd in ``c`` (the second row's logit
difference is ``-x + u'`` where the first's is ``x + u``), so two tokens of cosine -1 give ``Y_p = 1 - E Y^(2)``.
The maps had set ``c = 0`` for ``p < 0``: ``attention_map(1, -0.3, beta=1, T=4).p`` was 0.025, now -0.0395, the
random layer's -0.039. Checked in ``tests/test_cross_overlap.py`` (Monte Carlo of the two rows at the Gram bound,
halfway and 0 for ``T = 4, 64``; the exact ``T = 2`` value; the branches against each other) and
``tests/test_domains.py`` (the random attention layer and network at the domain's edges). The book should say so
where ``Y_p`` is introduced (``chapters/giorlandino-goldt2025/02_rem_in_depth.ipynb``, the two-row REM, and the
notation page's ``Y_p``): for ``p < 0`` the rows are anti-correlated and ``Y_p`` falls below ``1/T``.

Used by the finite-T attention and block maps (``sp.theory.attention_map``, ``sp.theory.block_map``);
chapter ``giorlandino-goldt2025``, page 02.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from ..stats._config import widest_float
from ..stats._estimate import Estimate
from ..stats._montecarlo import monte_carlo
from ..stats._validate import (broadcast, check_gram_bound, check_int, check_overlaps, check_positive, check_range,
                               check_seq_len, theory_function, to_output)
from ._rem import _X_HI, _energy_scale, _grid, _log_l, _mm, _site, rem_quadrature

__all__ = ["mc_cross_overlap"]
__theory__ = ["cross_overlap"]

#: Largest T of the finite-T two-row quadrature: its grid grows like log T (about 1 s at 1e12 on one core).
T_MAX = 1e12
#: Largest energy scale ``sigma``: beyond it ``sigma^2`` nears overflow, and ``Y_p`` is at its ``beta -> infinity``
#: value long before (``beta = 1e4`` and ``5e5`` differ by 6e-9 relative at ``T = 16``, ``p = 0.3``).
SIGMA_MAX = 1e6
#: Shared scale below which the first-order formula is used (relative error O(s_m^2) < 1e-10).
_SM_SERIES = 1e-5
#: Shared scale up to which ``m`` is integrated by Gauss-Hermite (checked against the lattice above it).
_SM_GH = 0.3
_GH_M = np.polynomial.hermite_e.hermegauss(12)  # 1e-13 against the lattice at s_m = 0.3 (24 nodes: the same)
#: Most grid operations (len(y)^2 x lattice) the lattice branch may take (a few seconds); beyond, refused.
_WORK_MAX = 2e9


def excess_y2(sigma: float, T: float) -> float:
    """``E Y^(2) - 1/T`` of one REM row of ``T`` energies of scale ``sigma``, without cancellation."""
    return cross_excess(sigma, T, 1.0)


def cross_excess(sigma: float, T: float, c: float) -> float:
    """``D = Y_p - 1/T`` for two rows of scale ``sigma`` and key-wise correlation ``c`` (module docstring;
    ``c < 0``: the shared field enters the second row reversed, "Negative overlaps")."""
    if sigma == 0.0 or c == 0.0:
        return 0.0
    if c < 0.0 and T == 2.0:  # two keys: D is odd in c (the second row's logit difference is reversed)
        return -cross_excess(sigma, T, -c)
    flip = c < 0.0
    sm, se = sigma * math.sqrt(abs(c)), sigma * math.sqrt(max(1.0 - abs(c), 0.0))
    if sm < _SM_SERIES:
        y2 = 1.0 / T if se == 0.0 else rem_quadrature(se, T)[0]
        return math.copysign(sm * sm * (1.0 - y2) ** 2 / (T - 1.0), c)
    if sm <= _SM_GH:
        return _excess_hermite(sm, se, T, flip)
    if c == 1.0:
        return rem_quadrature(sigma, T)[0] - 1.0 / T
    return _yp_lattice(sm, se, T, flip) - 1.0 / T


def _excess_hermite(sm: float, se: float, T: float, flip: bool = False) -> float:
    """``D`` by the pair formula with the shared field on a Gauss-Hermite rule (``flip``: the second row sees
    ``-m``, node ``k`` of the first row meets node ``-k`` of the second; the rule is symmetric)."""
    g, w = _GH_M
    w = w / w.sum()
    x_lo, dy, z_tail = _grid(math.hypot(sm, se), T)
    y = _trim(np.arange(x_lo - z_tail * se - 8.0 * sm, _X_HI + z_tail * se + 8.0 * sm + dy / 2, dy), sm, se, T, x_lo)
    miss, keep, H = _site(y[None, :] + sm * g[:, None], se, x_lo, (1.0,))  # (nodes, len(y)) each
    H = H[1.0]
    r = slice(None, None, -1) if flip else slice(None)   # the second row's node order
    a = w @ miss
    one_minus_psi = a[:, None] + a[None, :] - _mm((miss * w[:, None]).T, miss[r])  # accurate where psi ~ 1
    log_psi = _log_l(one_minus_psi, _mm((keep * w[:, None]).T, keep[r]))
    k, l = np.triu_indices(len(g), 1)
    G = H[k] * keep[l] - keep[k] * H[l]  # (pairs, len(y)), zero at m_k = m_l
    G2 = G if not flip else H[::-1][k] * keep[::-1][l] - keep[::-1][k] * H[::-1][l]  # the same at -m_k, -m_l
    V = _mm((G * (w[k] * w[l])[:, None]).T, G2)  # (len(y), len(y)): half the sum over ordered pairs
    return float((T - 1.0) * np.sum(V * np.exp((T - 2.0) * log_psi)) * dy * dy)


def _trim(y, sm: float, se: float, T: float, x_lo: float):
    """Drop the top of the y-grid where every ``psi(y, v)^(T-2)`` is below ``e^-60``: ``psi(y, v) <= L(y)``, the
    one-row site function of the whole energy, decreasing in ``y`` (most of the grid at large T)."""
    miss, keep, _ = _site(y, math.hypot(sm, se), x_lo, ())
    alive = np.flatnonzero(max(T - 2.0, 1.0) * _log_l(miss, keep) > -60.0)
    return y[: alive[-1] + 3] if alive.size else y[:3]


def _yp_lattice(sm: float, se: float, T: float, flip: bool = False) -> float:
    """``Y_p = T iint E_m[H(y+m) H(v+m)] psi^{T-1} dy dv`` with ``m`` on a sub-lattice of the y-grid (``flip``:
    ``H(v-m)`` and ``L(v-m)`` for the second row; the lattice and its weights are symmetric in ``m``)."""
    x_lo, dy, z_tail = _grid(math.hypot(sm, se), T)
    # the m-lattice carries the m-average: it must resolve the shared field's Gaussian and the private site
    # functions, whose features are max(1, s_e) wide (0.3 of that: 1e-13 against T = 2 exactly); its step is
    # a multiple of the y spacing so that every y_i + m_j is a grid point
    dy = min(dy, sm / 2.0, 0.3 * max(1.0, se))
    stride = max(1, int(min(sm / 1.5, 0.3 * max(1.0, se)) / dy))
    half = math.ceil(z_tail * sm / (stride * dy))
    y = _trim(np.arange(x_lo - z_tail * (se + sm), _X_HI + z_tail * (se + sm) + dy / 2, dy), sm, se, T, x_lo)
    work = len(y) ** 2 * (2 * half + 1)
    if work > _WORK_MAX:
        raise ValueError(
            f"cross_overlap is outside its domain here: sigma = sqrt(beta^2 log T q (q - p)) = {math.hypot(sm, se):.4g}"
            f" with p/q = {sm * sm / (sm * sm + se * se):.12g} and T = {T:.4g} needs {work:.2g} grid operations (the "
            f"limit is {_WORK_MAX:.0e}; the grid grows with sigma, log T and the ratio of the shared scale "
            f"{sm:.3g} to the private one {se:.3g}): a smaller beta, T or p/q is inside")
    j = np.arange(-half, half + 1)
    w = np.exp(-0.5 * (j * stride * dy / sm) ** 2)
    w /= w.sum()
    lattice = y[0] + dy * (j[0] * stride + np.arange(len(y) + stride * (len(j) - 1)))  # every y_i + m_j
    miss, keep, H = _site(lattice, se, x_lo, (1.0,))
    at = np.arange(len(y))[None, :] + stride * np.arange(len(j))[:, None]  # (len(j), len(y)): y_i + m_j
    M, L, Hm = miss[at], keep[at], H[1.0][at]
    r = slice(None, None, -1) if flip else slice(None)   # m_j -> -m_j for the second row
    a = w @ M
    one_minus_f = a[:, None] + a[None, :] - _mm((M * w[:, None]).T, M[r])  # 1 - E_m[l l'], accurate near F = 1
    f = _mm((L * w[:, None]).T, L[r])
    g = _mm((Hm * w[:, None]).T, Hm[r])
    return float(T * np.sum(g * np.exp((T - 1.0) * _log_l(one_minus_f, f))) * dy * dy)


def _check_cross(beta, T, q, p):
    b = check_positive(beta, "beta", allow_zero=True)
    Ta = check_seq_len(T, maximum=T_MAX, why=" (the two-row quadrature's domain: its grid grows like log T; as "
                       "T -> infinity Y_p -> 0, the T=None maps)")
    qa, pa = check_overlaps(q, p, strict=False)
    check_gram_bound(qa, pa, Ta)
    broadcast(beta=b, T=Ta, q=qa, p=pa)
    sig = _energy_scale(b, Ta, qa, pa)
    if np.any(sig > SIGMA_MAX):
        raise ValueError(f"the energy scale sigma = beta sqrt(log T q (q - p)) must be at most {SIGMA_MAX:g} (Y_p has "
                         f"reached its beta -> infinity value long before); got sigma = {float(np.max(sig)):.3g}")
    return b, Ta, qa, pa


def cross_excess_array(beta, T, q, p):
    """``Y_p - 1/T`` elementwise over broadcast arrays (the maps' kernel: only the domain of T is checked)."""
    check_seq_len(T, maximum=T_MAX, why=" (the two-row quadrature's domain; cross_overlap='1/T' or T=None beyond)")
    sig, TT, qq, pp = np.broadcast_arrays(_energy_scale(beta, T, q, p), np.asarray(T, dtype=float), q, p)
    # beyond SIGMA_MAX Y_p has reached its beta -> infinity value: a map whose q grows through depth (no
    # normalisation) evaluates it there instead of failing (cross_overlap itself refuses such sigma)
    sig = np.minimum(sig, SIGMA_MAX)
    out = np.empty(sig.shape)
    for idx in np.ndindex(sig.shape):
        # the Gram bound p/q >= -1/(T-1) is checked by the callers; rounding below it is clipped onto it
        c = min(max(float(pp[idx] / qq[idx]), -1.0 / (float(TT[idx]) - 1.0)), 1.0) if qq[idx] > 0 else 0.0
        out[idx] = cross_excess(float(sig[idx]), float(TT[idx]), c)
    return out


@theory_function
def cross_overlap(beta, T, q=1.0, p=0.0):
    r"""Exact finite-T cross-overlap ``Y_p = E sum_s A_ts A_t's`` of two attention rows (App. B.2.2).

    The rows are REMs with energies of variance ``sigma^2 = beta^2 log T q (q - p)`` whose s-dependent parts
    share the column field (App. B.1, Eq. (9)): correlation ``c = p / q`` between the rows. ``Y_p = 1/T``
    exactly for ``p = 0`` (independent rows), ``E Y^(2)`` for ``p -> q``, below ``1/T`` for ``p < 0`` (the rows
    anti-correlated: module docstring, "Negative overlaps"), and ``Y_p -> 0`` as T -> infinity, slowly: in the
    condensed phase with ``p > 0`` it is several times ``1/T`` at moderate T. Computed as ``1/T + D`` with the
    excess ``D`` evaluated directly (module docstring; ~1e-9 relative on ``D``). Domain: ``beta >= 0``, ``2 <= T <=
    T_MAX`` (1e12), ``-q/(T-1) <= p <= q`` (the Gram bound), ``sigma <= SIGMA_MAX`` (1e6). Broadcasts over all
    arguments.
    """
    b, Ta, qa, pa = _check_cross(beta, T, q, p)
    out = 1.0 / np.asarray(Ta, dtype=float) + cross_excess_array(b, Ta, qa, pa)
    return to_output(out, beta, T, q, p)


def mc_cross_overlap(beta, *, T, n, q=1.0, p=0.0, generator=None, device=None) -> Estimate:
    r"""Monte Carlo of :func:`sigprop.theory.cross_overlap`: ``[Y2, Y_p]`` of ``n`` independent pairs of rows.

    Row energies ``sigma (sqrt(c) b_s + sqrt(1-c) e_ts)`` with ``sigma^2 = beta^2 log T q (q-p)``, ``c = p/q``
    (the column field ``b_s`` is shared: Eq. 9; for ``c < 0`` the second row gets ``-sqrt(|c|) b_s``); exact softmax
    in the device's widest float. ``p = 0`` gives ``Y_p = 1/T`` in mean.
    """
    check_positive(beta, "beta", allow_zero=True)
    T = check_int(T, "T", minimum=2)
    check_positive(q, "q")
    check_range(p / q, "p/q", -1.0, 1.0 - 1e-12)
    check_gram_bound(q, p, T)
    sigma, c = float(beta) * math.sqrt(math.log(T) * q * (q - p)), p / q

    def sample(m, gen):
        b = math.sqrt(abs(c)) * torch.randn(m, 1, T, generator=gen, device=gen.device, dtype=widest_float(gen.device))
        e = torch.randn(m, 2, T, generator=gen, device=gen.device, dtype=b.dtype)
        shared = torch.cat([b, math.copysign(1.0, c) * b], 1)   # for c < 0 the second row sees -b
        A = torch.softmax(sigma * (shared + math.sqrt(1.0 - abs(c)) * e), dim=-1)
        return torch.stack([A[:, 0].pow(2).sum(-1), (A[:, 0] * A[:, 1]).sum(-1)], dim=-1)

    chunk = max(1, min(n, int(2e6 // T)))
    return monte_carlo(sample, n, generator=generator, chunk=chunk, device=device, work=chunk * T)
