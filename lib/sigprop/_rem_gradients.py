r"""Result 2 of Giorlandino & Goldt (2025): the query-gradient norm at initialisation.

Setting (Giorlandino & Goldt 2025, Appendix A and Result 1): tokens ``X`` of shape
``(T, d)`` with ``X_t . X_s / d = q`` (``t = s``) and ``p`` (``t != s``); query and key
weights with i.i.d. entries of variance ``beta sqrt(log T) / d``; values with variance
``sigma_v^2 / d``; scores ``a_ts = (W_Q X_t) . (W_K X_s) / sqrt(d)`` (Eq. 6); attention
``A = softmax(a)`` row-wise and ``S(X)_t = sum_s A_ts W_V X_s`` (Eq. 7).

**The Jacobian identity.** For every draw of the weights (no approximation),

.. math::

    \|\partial S / \partial W_Q\|_F^2 = \sum_t q_{tt} \sum_{u,u'} A_{tu} A_{tu'}
        (V_u - S_t)\cdot(V_{u'} - S_t)\,(K_u \cdot K_{u'}),

with ``V_u = W_V X_u`` and ``K_u = W_K X_u`` (:func:`query_jacobian_norm`).

**The theory.** Replacing ``V_u . V_u'`` and ``K_u . K_u'`` by their means
(``d sigma_v^2 q_uu'`` and ``d beta sqrt(log T) q_uu'``) and ``q_uu'`` by
``p + (q - p) delta_uu'`` (the paper's B.5 steps), the ``p`` terms cancel exactly and

.. math::

    \frac{\|\partial S/\partial W_Q\|_F^2}{T d^2 \sqrt{\log T}}
      \to \beta \sigma_v^2 q (q-p)^2 \, \mathbb{E}\big[Y^{(2)} - 2 Y^{(3)} + (Y^{(2)})^2\big].

For the loss ``L = (1/T) sum_tj G_tj S_tj`` with ``G`` i.i.d. standard normal (a random
linear read-out averaged over tokens), ``E_G ||dL/dW_Q||^2 = ||dS/dW_Q||^2 / T^2``, so the
left-hand side is exactly the paper's ``T / (d^2 sqrt(log T)) E ||dL/dW_Q||_F^2`` of
Eq. (26) with ``C = 1``.

Two corrections to the printed Eq. (26) (errata page of the chapter):

* term (4) of B.5 is ``p^2 + 2p(q-p)Y2 + (q-p)^2 Y2^2``, not ``... + p(q-p) Y2^2``; the
  bracket is ``(q-p)(Y2 - 2 Y3 + Y2^2)``, not ``(q-p)(Y2 - 2Y3) + p Y2^2``. The printed
  form is negative for every ``beta > beta_c`` when ``p = 0`` (it equals ``-(1 - m)^2``);
  a squared norm cannot be.
* ``(Y2)^2`` is the mean of the square of the (non-self-averaging) IPR, not the square of
  its mean. In the condensed phase (``m = beta_c / beta < 1``) the Poisson-Dirichlet
  moments give ``E[Y2] - 2 E[Y3] + E[Y2^2] = m (1 - m) / 3``; with ``(E Y2)^2`` instead the
  bracket vanishes identically.

Finite ``T``: :func:`rem_moments` computes ``E[Y2]``, ``E[Y3]`` and ``E[Y2^2]`` of a REM
with ``T`` i.i.d. Gaussian energies of variance ``beta^2 log T q (q - p)`` by quadrature,
using ``1/Z^n = Gamma(n)^{-1} int_0^inf t^{n-1} e^{-tZ} dt`` (exact up to quadrature error).

Used in ``chapters/giorlandino-goldt2025/05_gradients.ipynb``.
"""
from __future__ import annotations

import enum
import math

import numpy as np
import torch
from scipy.special import gammaln, ndtr

from ._estimate import Estimate
from ._montecarlo import monte_carlo
from ._validate import check_int, check_option, check_overlaps, check_positive, check_range, to_output

__all__ = ["query_jacobian_norm", "query_grad_norm_mc"]
__theory__ = ["rem_moments", "query_grad_norm"]


# ---------------------------------------------------------------------------------------
# REM moments: T -> infinity (Poisson-Dirichlet) and finite T (quadrature)
# ---------------------------------------------------------------------------------------
def _pd_moments(m):
    """E[Y2], E[Y3], E[Y2^2] of Poisson-Dirichlet(m, 0) weights (condensed REM, m = beta_c/beta < 1).

    From Pitman's exchangeable partition probability function:
    E sum_i w_i^n = (1-m)_{n-1} / (n-1)!, E sum_{i!=j} w_i^a w_j^b = m (1-m)_{a-1} (1-m)_{b-1} / (a+b-1)!.
    """
    y2 = 1.0 - m
    y3 = (1.0 - m) * (2.0 - m) / 2.0
    y4 = (1.0 - m) * (2.0 - m) * (3.0 - m) / 6.0
    y22 = m * (1.0 - m) ** 2 / 6.0
    return y2, y3, y4 + y22


# quadrature grids (documented constants, not fudge factors)
_DX = 0.05          # spacing of the log-energy grid x = log(t e^E); integrands vary on scale ~1
_X_LO, _X_HI = -35.0, 5.0   # h_n(e^x) = e^{n x - e^x} < e^{-35} outside; tail of 1 - L above X_HI added exactly
_DY = 0.05          # spacing of the log-Laplace variable y = log t
_SIGMA_SMALL = 1.0  # below this energy scale use Gauss-Hermite in the standard normal g instead


#: Above this energy scale the REM is deep in its condensed phase: the finite-T moments are within
#: ~1e-2 of the Poisson-Dirichlet limit (checked against ``ipr_finite`` at T = 16 ... 1e5), while the
#: quadrature grid would grow like sigma (e.g. without LayerNorm, where q grows with depth).
_SIGMA_FROZEN = 60.0


def _rem_moments_finite_scalar(sigma: float, T: float):
    """E[Y2], E[Y3], E[Y2^2] for T i.i.d. N(0, sigma^2) energies (quadrature)."""
    logT = math.log(T)
    if sigma > _SIGMA_FROZEN:
        return _pd_moments(min(1.0, math.sqrt(2.0 * logT) / sigma))
    # y-range: the integrand lives where y ~ -log Z, log Z in [sigma sqrt(2 log T), log T + sigma^2/2]
    y_lo = -(sigma * (math.sqrt(2.0 * logT) + 8.0) + logT + 15.0)
    y = np.arange(y_lo, 6.0, _DY)
    if sigma < _SIGMA_SMALL:
        g, w = np.polynomial.hermite_e.hermegauss(80)
        w = w / w.sum()
        xx = y[:, None] + sigma * g[None, :]
        ex = np.exp(np.minimum(xx, 50.0))
        one_minus_L = (-np.expm1(-ex)) @ w
        H = {n: np.exp(n * xx - ex) @ w for n in (2, 3, 4)}
    else:
        dx = min(_DX, sigma / 20.0)   # resolve the Gaussian kernel of width sigma
        x = np.arange(_X_LO, _X_HI + dx / 2, dx)
        K = np.exp(-0.5 * ((x[None, :] - y[:, None]) / sigma) ** 2) * (dx / (sigma * math.sqrt(2 * math.pi)))
        ex = np.exp(x)
        one_minus_L = K @ (-np.expm1(-ex)) + ndtr((y - (_X_HI + dx / 2)) / sigma)
        H = {n: K @ np.exp(n * x - ex) for n in (2, 3, 4)}
    with np.errstate(divide="ignore"):
        logL = np.log1p(-np.minimum(one_minus_L, 1.0))
    P1 = np.exp((T - 1.0) * logL)
    P2 = np.exp((T - 2.0) * logL)

    def integral(f):
        return float(np.sum(f) * _DY)

    y2 = T * math.exp(-gammaln(2)) * integral(H[2] * P1)
    y3 = T * math.exp(-gammaln(3)) * integral(H[3] * P1)
    y4 = T * math.exp(-gammaln(4)) * integral(H[4] * P1)
    y22 = T * (T - 1.0) * math.exp(-gammaln(4)) * integral(H[2] ** 2 * P2)
    return y2, y3, y4 + y22


def rem_moments(beta, q=1.0, p=0.0, *, T=None):
    r"""``(E[Y^(2)], E[Y^(3)], E[(Y^(2))^2])`` of one attention row at initialisation.

    Giorlandino & Goldt (2025), Result 1 and Eq. (26): the scores of one row are a REM
    with ``T`` energies of s-dependent variance ``beta^2 log T q (q - p)`` (Appendix B.1,
    Eq. 9; the ``p`` part is common to the row and cancels in the softmax).

    ``T=None``: the ``T -> infinity`` limit: all zero for ``beta <= beta_c`` and the
    Poisson-Dirichlet moments with ``m = beta_c / beta`` above (``E Y2 = 1 - m``,
    ``E Y3 = (1-m)(2-m)/2``, ``E Y2^2 = (1-m)(3-2m)/3``).
    ``T`` given: exact moments for ``T`` i.i.d. Gaussian energies, by quadrature
    (agrees with :func:`sigprop.theory.ipr_finite` to 1e-5 relative in tests).

    Returns a tuple of three floats (or arrays, broadcast over ``beta, q, p, T``).
    """
    beta_a = check_positive(beta, "beta", allow_zero=True)
    qa, pa = check_overlaps(q, p)
    if T is None:
        b, qq, pp = np.broadcast_arrays(beta_a, qa, pa)
        bc = np.sqrt(2.0 / (qq * (qq - pp)))
        with np.errstate(divide="ignore"):
            m = np.where(b > bc, bc / np.where(b > 0, b, 1.0), 1.0)
        out = _pd_moments(m)
        return tuple(to_output(o, beta, q, p) for o in out)
    Ta = np.asarray(T, dtype=float)
    if np.any(~np.isfinite(Ta)) or np.any(Ta < 2):
        raise ValueError(f"T (sequence length) must be finite and >= 2; got {T!r}")
    b, qq, pp, TT = np.broadcast_arrays(beta_a, qa, pa, Ta)
    res = np.empty((3,) + b.shape)
    for idx in np.ndindex(b.shape):
        sigma = float(b[idx]) * math.sqrt(math.log(TT[idx]) * qq[idx] * (qq[idx] - pp[idx]))
        res[(slice(None),) + idx] = _rem_moments_finite_scalar(sigma, float(TT[idx]))
    return tuple(to_output(res[i], beta, q, p, T) for i in range(3))


class _Form(str, enum.Enum):
    CORRECTED = "corrected"
    PAPER = "paper"
    MEAN_FIELD = "mean-field"


def query_grad_norm(beta, q=1.0, p=0.0, sigma_v2=1.0, *, T=None, form="corrected"):
    r"""``T / (d^2 sqrt(log T)) E ||dL/dW_Q||_F^2`` at initialisation (Result 2, Eq. 26, ``C = 1``).

    For the loss ``L = (1/T) sum G_tj S_tj`` with a standard normal read-out ``G``.

    ``form="corrected"`` (default): ``beta sigma_v^2 q (q-p)^2 E[Y2 - 2 Y3 + Y2^2]``.
    ``form="mean-field"``: the same with ``(E Y2)^2`` in place of ``E[Y2^2]`` (what Eq. 26
    means if the IPR were self-averaging).
    ``form="paper"``: the printed Eq. (26), ``beta sigma_v^2 q (q-p) [(q-p)(Y2 - 2Y3) + p Y2^2]``
    (with ``(E Y2)^2``); negative for ``beta > beta_c`` when ``p = 0``: see the errata.
    ``T=None`` uses the ``T -> infinity`` moments, otherwise the exact finite-``T`` REM ones.
    """
    form = check_option(form, _Form, "form")
    check_positive(sigma_v2, "sigma_v2")
    y2, y3, y22 = rem_moments(beta, q, p, T=T)
    b = np.asarray(beta, dtype=float)
    qq, pp, sv = (np.asarray(v, dtype=float) for v in (q, p, sigma_v2))
    y2, y3, y22 = (np.asarray(v, dtype=float) for v in (y2, y3, y22))
    if form is _Form.CORRECTED:
        val = b * sv * qq * (qq - pp) ** 2 * (y2 - 2 * y3 + y22)
    elif form is _Form.MEAN_FIELD:
        val = b * sv * qq * (qq - pp) ** 2 * (y2 - 2 * y3 + y2**2)
    else:
        val = b * sv * qq * (qq - pp) * ((qq - pp) * (y2 - 2 * y3) + pp * y2**2)
    return to_output(val, beta, q, p, sigma_v2)


# ---------------------------------------------------------------------------------------
# Monte Carlo: autograd on random single-head attention layers
# ---------------------------------------------------------------------------------------
def query_jacobian_norm(x, w_q, w_k, w_v):
    r"""Exact ``||dS/dW_Q||_F^2`` for ``S(X) = softmax(X W_Q^T W_K X^T / sqrt(d)) X W_V^T``.

    Shapes: ``x (..., T, d)``, ``w_* (..., d, d)`` (rows = output features). Uses the
    identity of the module docstring, ``O(T^2 d + T^3)``; checked against the full
    autograd Jacobian in ``tests/test_rem_gradients.py``.
    """
    d = x.shape[-1]
    qy = x @ w_q.transpose(-1, -2)                       # (..., T, d) queries
    k = x @ w_k.transpose(-1, -2)                        # keys
    v = x @ w_v.transpose(-1, -2)                        # values
    A = torch.softmax(qy @ k.transpose(-1, -2) / math.sqrt(d), dim=-1)   # (..., T, T)
    s = A @ v                                            # (..., T, d)
    kg = k @ k.transpose(-1, -2)                         # (..., T, T) K_u . K_u'
    vg = v @ v.transpose(-1, -2)
    sv = s @ v.transpose(-1, -2)                         # (..., T, T) S_t . V_u
    t1 = ((A @ (vg * kg)) * A).sum(-1)                   # sum_uu' A A V.V K.K
    ak = A @ kg                                          # (..., T, T): sum_u A_tu K_u.K_u'
    t2 = (A * sv * ak).sum(-1)                           # sum_uu' A A (S_t.V_u') K.K
    t4 = (s * s).sum(-1) * (ak * A).sum(-1)
    qtt = (x * x).sum(-1) / d
    return (qtt * (t1 - 2 * t2 + t4)).sum(-1)


def _normalised_tokens(n, T, d, rho, generator, device, dtype):
    """Equicorrelated tokens (overlap rho, common part of fixed norm) rescaled to ||X_t||^2 = d, as after LN."""
    g = torch.randn(n, 1, d, generator=generator, device=device, dtype=dtype)
    z = torch.randn(n, T, d, generator=generator, device=device, dtype=dtype)
    g = g * (math.sqrt(d) / g.norm(dim=-1, keepdim=True))   # common part of norm exactly sqrt(d)
    x = math.sqrt(rho) * g + math.sqrt(1.0 - rho) * z
    return x * (math.sqrt(d) / x.norm(dim=-1, keepdim=True))


def query_grad_norm_mc(beta, T, d, n, *, rho=0.0, sigma_v2=1.0, generator=None, chunk=None,
                       device=None, dtype=torch.float32, progress=None) -> Estimate:
    r"""Monte Carlo of ``T / (d^2 sqrt(log T)) ||dL/dW_Q||_F^2`` by autograd (Result 2, Eq. 26).

    Each sample draws tokens (overlap ``rho``, norms exactly ``sqrt(d)``), fresh weights
    with the variances of Result 1, a read-out ``G``, and differentiates
    ``L = (1/T) sum G * S(X)`` with respect to ``W_Q`` (batched autograd: the summed loss
    of independent samples has per-sample gradients). Its mean is
    :func:`sigprop.theory.query_grad_norm` with ``q = 1, p = rho`` up to finite-``d``
    corrections. Returns an :class:`~sigprop.Estimate` over ``n`` i.i.d. samples.
    """
    check_positive(beta, "beta", allow_zero=True)
    T = check_int(T, "T", minimum=2)
    d = check_int(d, "d", minimum=1)
    check_range(rho, "rho", 0.0, 1.0 - 1e-12)
    check_positive(sigma_v2, "sigma_v2")
    beta, rho, sigma_v2 = float(beta), float(rho), float(sigma_v2)
    s_qk = math.sqrt(beta * math.sqrt(math.log(T)) / d)
    s_v = math.sqrt(sigma_v2 / d)
    scale = T / (d**2 * math.sqrt(math.log(T)))

    def sample(m, gen):
        dev = gen.device
        x = _normalised_tokens(m, T, d, rho, gen, dev, dtype)
        w_q = (s_qk * torch.randn(m, d, d, generator=gen, device=dev, dtype=dtype)).requires_grad_(True)
        w_k = s_qk * torch.randn(m, d, d, generator=gen, device=dev, dtype=dtype)
        w_v = s_v * torch.randn(m, d, d, generator=gen, device=dev, dtype=dtype)
        G = torch.randn(m, T, d, generator=gen, device=dev, dtype=dtype)
        with torch.enable_grad():
            a = (x @ w_q.transpose(-1, -2)) @ (x @ w_k.transpose(-1, -2)).transpose(-1, -2) / math.sqrt(d)
            A = torch.softmax(a.float() if dtype in (torch.float16, torch.bfloat16) else a, dim=-1).to(dtype)
            S = A @ (x @ w_v.transpose(-1, -2))
            L = (G * S).sum() / T               # sum over samples of per-sample losses
            (grad,) = torch.autograd.grad(L, w_q)
        return scale * grad.double().pow(2).sum(dim=(-1, -2))

    if chunk is None:
        chunk = max(1, min(n, int(2e7 // (T * T + 3 * T * d + 3 * d * d))))
    return monte_carlo(sample, n, generator=generator, chunk=chunk, device=device, progress=progress,
                       desc="query gradient")
