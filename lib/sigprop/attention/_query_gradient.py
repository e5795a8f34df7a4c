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

with ``V_u = W_V X_u`` and ``K_u = W_K X_u`` (:func:`query_jacobian_sq_norm`).

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

The moments ``E[Y2]``, ``E[Y3]`` and ``E[Y2^2]`` come from the REM of one attention row
(:func:`sigprop.theory.rem_moments`: Poisson-Dirichlet as T -> infinity, the exact quadrature at finite T).

Used in ``chapters/giorlandino-goldt2025/05_gradients.ipynb``.
"""
from __future__ import annotations

import enum
import math

import numpy as np
import torch

from ._layer import attention_weights
from ..stats._config import widest_float
from ..stats._estimate import Estimate
from ..stats._montecarlo import monte_carlo
from ._rem import rem_moments
from ..inputs import equicorrelated_tokens
from ..stats._validate import (check_attention_weights, check_float_dtype, check_int, check_option, check_positive,
                               check_range, theory_function, to_output)
__all__ = ["query_jacobian_sq_norm", "mc_rem_query_grad_sq_norm"]
__theory__ = ["rem_query_grad_sq_norm"]


class _Form(str, enum.Enum):
    CORRECTED = "corrected"
    PAPER = "paper"
    MEAN_FIELD = "mean-field"


@theory_function
def rem_query_grad_sq_norm(beta, q=1.0, p=0.0, sigma_v2=1.0, *, T=None, form="corrected"):
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
def query_jacobian_sq_norm(x, w_q, w_k, w_v):
    r"""Exact ``||dS/dW_Q||_F^2`` for ``S(X) = softmax(X W_Q^T W_K X^T / sqrt(d)) X W_V^T``.

    Shapes: ``x (..., T, d)``, ``w_* (..., d, d)`` (rows = output features). Uses the
    identity of the module docstring, ``O(T^2 d + T^3)``; checked against the full
    autograd Jacobian in ``tests/test_query_gradient.py``.
    """
    check_attention_weights(x, w_q, w_k, w_v)
    d = x.shape[-1]
    if w_q.shape[-2] != d:
        raise ValueError(f"w_q and w_k must be square, (..., d, d) with d = {d}; got {tuple(w_q.shape)}")
    qy = x @ w_q.transpose(-1, -2)                       # (..., T, d) queries
    k = x @ w_k.transpose(-1, -2)                        # keys
    v = x @ w_v.transpose(-1, -2)                        # values
    A = attention_weights(qy @ k.transpose(-1, -2), scale=1.0 / math.sqrt(d)).to(x.dtype)   # (..., T, T)
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


def mc_rem_query_grad_sq_norm(beta, T, d, n, *, rho=0.0, sigma_v2=1.0, generator=None, chunk=None,
                       device=None, dtype=torch.float32, progress=None) -> Estimate:
    r"""Monte Carlo of ``T / (d^2 sqrt(log T)) ||dL/dW_Q||_F^2`` by autograd (Result 2, Eq. 26).

    Each sample draws tokens (overlap ``rho``, norms exactly ``sqrt(d)``), fresh weights
    with the variances of Result 1, a read-out ``G``, and differentiates
    ``L = (1/T) sum G * S(X)`` with respect to ``W_Q`` (batched autograd: the summed loss
    of independent samples has per-sample gradients). Its mean is
    :func:`sigprop.theory.rem_query_grad_sq_norm` with ``q = 1, p = rho`` up to finite-``d``
    corrections. Returns an :class:`~sigprop.Estimate` over ``n`` i.i.d. samples.
    """
    check_positive(beta, "beta", allow_zero=True)
    T = check_int(T, "T", minimum=2)
    d = check_int(d, "d", minimum=1)
    check_range(rho, "rho", 0.0, 1.0 - 1e-12)
    check_positive(sigma_v2, "sigma_v2")
    check_float_dtype(dtype)
    beta, rho, sigma_v2 = float(beta), float(rho), float(sigma_v2)
    s_qk = math.sqrt(beta * math.sqrt(math.log(T)) / d)
    s_v = math.sqrt(sigma_v2 / d)
    scale = T / (d**2 * math.sqrt(math.log(T)))

    def sample(m, gen):
        dev = gen.device
        x = equicorrelated_tokens(m, T=T, d=d, rho=rho, normalised=True, generator=gen, dtype=dtype)
        w_q = (s_qk * torch.randn(m, d, d, generator=gen, device=dev, dtype=dtype)).requires_grad_(True)
        w_k = s_qk * torch.randn(m, d, d, generator=gen, device=dev, dtype=dtype)
        w_v = s_v * torch.randn(m, d, d, generator=gen, device=dev, dtype=dtype)
        G = torch.randn(m, T, d, generator=gen, device=dev, dtype=dtype)
        with torch.enable_grad():
            a = (x @ w_q.transpose(-1, -2)) @ (x @ w_k.transpose(-1, -2)).transpose(-1, -2)
            A = attention_weights(a, scale=1.0 / math.sqrt(d)).to(dtype)
            S = A @ (x @ w_v.transpose(-1, -2))
            L = (G * S).sum() / T               # sum over samples of per-sample losses
            (grad,) = torch.autograd.grad(L, w_q)
        return scale * grad.to(widest_float(grad.device)).pow(2).sum(dim=(-1, -2))

    if chunk is not None:
        chunk = check_int(chunk, "chunk", minimum=1)
    else:
        chunk = max(1, min(n, int(2e7 // (T * T + 3 * T * d + 3 * d * d))))
    return monte_carlo(sample, n, generator=generator, chunk=chunk, device=device, progress=progress,
                       desc="query gradient", work=chunk * T * d * (d + T))
