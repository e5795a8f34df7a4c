r"""Query, key and value gradients of self-attention at initialisation (Noci et al. 2022, Sec. 3.1, 3.3).

For one attention layer :math:`S = A X W^V`, :math:`A = \mathrm{softmax}(M)`,
:math:`M = X W^Q W^{K\top}X^\top/\sqrt{d_k}` (Eq. 1), Noci et al. compare the squared
Frobenius norms of the Jacobians :math:`\partial S/\partial W` (row-major vectorisation,
Appendix A.1.1). Under uniform attention (Assumption 3.1, :math:`A = U`,
:math:`\partial A/\partial M = \tfrac1n I\otimes L`, Eq. 24, :math:`L = I - U`), with
per-entry weight variances :math:`\sigma_q^2,\sigma_k^2,\sigma_v^2` and
:math:`B = X^\top L X = X^\top X - n\bar x\bar x^\top`:

* Eq. (6): :math:`\|\partial S/\partial W^V\|_F^2 = d_v\, n\|\bar x\|^2` (no expectation needed);
* Eq. (7): :math:`\mathbb E\|\partial S/\partial W^Q\|_F^2 = \sigma_v^2\sigma_k^2 d_v\, \|X\|_F^2\|B\|_F^2/n^2`;
* Eq. (8) states the bound :math:`\mathbb E\|\partial S/\partial X\|_F^2 \le 8\sigma_q^2\sigma_k^2\sigma_v^2 d_k d_v\|B\|_F^2/n
  + 2 d_v^2\sigma_v^2`. Its proof (Eqs. 33-36) treats the commutation matrix as if
  :math:`K_{nn}(I\otimes P)K_{nn}^\top = I\otimes P`; in fact it is :math:`P\otimes I`. The exact value
  (derived in the book chapter ``noci2022``, :func:`input_grad_sq_norm`) is

  .. math::

      \mathbb E\Big\|\frac{\partial S}{\partial X}\Big\|_F^2 = \sigma_q^2\sigma_k^2\sigma_v^2
      \Big[\frac{d_v^2}{n}\|B\|_F^2 + \frac{2 d_v}{n^2}\|B\|_F^2 + \frac{d_v^2}{n^2}\|X\|_F^2\|LX\|_F^2\Big]
      + d_v^2\sigma_v^2 ,

  whose key-side term :math:`\|X\|_F^2\|LX\|_F^2` exceeds the bound near rank collapse with a
  large mean token.

For equicorrelated Gaussian tokens (Sec. 3.3: variance :math:`\sigma_x^2`, correlation
:math:`\rho`, :math:`d_k = d_v = d`, :math:`\sigma_k^2=\sigma_v^2=1/d`):

* Eq. (17): :math:`\mathbb E\|\partial S/\partial W^V\|_F^2 = \sigma_x^2 d^2(1+\rho(n-1))` (exact);
* Eq. (18): :math:`\mathbb E\|\partial S/\partial W^Q\|_F^2 = \sigma_x^6\frac{n-1}{n}(1-\rho)^2 d(n+d)`
  assumes :math:`\|X\|_F^2` and :math:`\|B\|_F^2` uncorrelated. Exactly, :math:`LX` and
  :math:`\bar x` are independent and :math:`B` is Wishart with :math:`n-1` degrees of freedom,
  so :math:`\mathbb E[\|LX\|_F^2\|B\|_F^2] = \sigma_x^2(1-\rho)((n-1)d+4)\,\mathbb E\|B\|_F^2`
  (homogeneity of Gaussian moments), and the exact value is Eq. (18) times
  :math:`1 + 4(1-\rho)/(nd)` (``exact=True``).

Monte Carlo side: :func:`attention_jacobian_sq_norms` differentiates real softmax (or
uniform-surrogate) attention with ``torch.func.jacrev`` under ``torch.func.vmap``;
:func:`softmax_param_grad_sq_norms` is the same quantity in closed form for real softmax
attention (exact, cheap; tested against autograd), used for large sweeps (Figs. 11-13).
"""
from __future__ import annotations

import enum

import numpy as np
import torch

from ._layer import attention_weights
from ._uniform import _uniform_attention_kernel
from ..stats._validate import (check_attention_weights, check_finite, check_option, check_positive, check_range,
                               check_real, check_tensor, finite_tensor, theory_function, to_output)
__all__ = [
    "attention_jacobian_sq_norms",
    "softmax_param_grad_sq_norms",
    "loss_grad_sq_norms",
]
__theory__ = [
    "value_grad_sq_norm",
    "query_grad_sq_norm",
    "input_grad_sq_norm",
    "input_grad_bound",
    "value_grad_sq_norm_equicorrelated",
    "query_grad_sq_norm_equicorrelated",
    "query_value_log_ratio",
]


class _Attention(str, enum.Enum):
    SOFTMAX = "softmax"
    UNIFORM = "uniform"


# ----------------------------------------------------------------------------- conditional theory (Lemma 3.1)

def _centred(xd):
    return xd - xd.mean(-2, keepdim=True)


def _dims(x, d_k, sigma_q2, sigma_k2, sigma_v2):
    check_tensor(x, "x", ndim_min=2)
    n, d = x.shape[-2], x.shape[-1]
    d_k = d if d_k is None else int(check_positive(d_k, "d_k"))
    sq = 1.0 / d if sigma_q2 is None else float(check_positive(sigma_q2, "sigma_q2"))
    sk = 1.0 / d if sigma_k2 is None else float(check_positive(sigma_k2, "sigma_k2"))
    sv = 1.0 / d if sigma_v2 is None else float(check_positive(sigma_v2, "sigma_v2"))
    return n, d, d_k, sq, sk, sv


@theory_function
def value_grad_sq_norm(x: torch.Tensor) -> torch.Tensor:
    r""":math:`\|\partial S/\partial W^V\|_F^2 = d_v\,n\,\|\bar x\|^2` under uniform attention.

    Noci et al. (2022), Lemma 3.1, Eq. (6) (with :math:`W^V` square, :math:`d_v\times d_v`).
    ``x`` (..., n, d_v) -> (...) float64.
    """
    check_tensor(x, "x", ndim_min=2)
    n, d = x.shape[-2], x.shape[-1]
    return d * n * x.double().mean(-2).pow(2).sum(-1)


@theory_function
def query_grad_sq_norm(x: torch.Tensor, *, sigma_v2=None, sigma_k2=None) -> torch.Tensor:
    r""":math:`\mathbb E_W\|\partial S/\partial W^Q\|_F^2 = \sigma_v^2\sigma_k^2 d_v\|X\|_F^2\|X^\top X - n\bar x\bar x^\top\|_F^2/n^2`.

    Noci et al. (2022), Lemma 3.1, Eq. (7), conditional on ``x`` (..., n, d_v); expectation
    over :math:`W^K, W^V` under uniform attention (it does not depend on :math:`d_k` or
    :math:`\sigma_q`). Variances default to :math:`1/d_v`. The keys give the same value.
    """
    n, d, _, _, sk, sv = _dims(x, None, None, sigma_k2, sigma_v2)
    xd = x.double()
    b = xd.transpose(-1, -2) @ _centred(xd)  # X^T L X, (..., d, d)
    return sv * sk * d * xd.pow(2).sum((-2, -1)) * b.pow(2).sum((-2, -1)) / n**2


@theory_function
def input_grad_sq_norm(x: torch.Tensor, *, d_k=None, sigma_q2=None, sigma_k2=None, sigma_v2=None) -> torch.Tensor:
    r"""Exact :math:`\mathbb E_W\|\partial S/\partial X\|_F^2` under uniform attention (corrects Eq. 8).

    .. math::

        \sigma_q^2\sigma_k^2\sigma_v^2\Big[\frac{d_v^2}{n}\|B\|_F^2 + \frac{2d_v}{n^2}\|B\|_F^2
        + \frac{d_v^2}{n^2}\|X\|_F^2\|LX\|_F^2\Big] + d_v^2\sigma_v^2

    (query side, query-key cross term, key side, value path). Derivation: book chapter
    ``noci2022``, page 1, from Noci et al. (2022), Lemma A.3 / Eq. (25). ``d_k`` does not
    enter (it cancels against the :math:`1/\sqrt{d_k}` logit scale); it is accepted for
    symmetry with :func:`input_grad_bound`. ``x`` (..., n, d_v) -> (...) float64.
    """
    n, d, _, sq, sk, sv = _dims(x, d_k, sigma_q2, sigma_k2, sigma_v2)
    xd = x.double()
    lx = _centred(xd)
    b2 = (xd.transpose(-1, -2) @ lx).pow(2).sum((-2, -1))
    key = xd.pow(2).sum((-2, -1)) * lx.pow(2).sum((-2, -1))
    return sq * sk * sv * (d * d * b2 / n + 2 * d * b2 / n**2 + d * d * key / n**2) + d * d * sv


@theory_function
def input_grad_bound(x: torch.Tensor, *, d_k=None, sigma_q2=None, sigma_k2=None, sigma_v2=None) -> torch.Tensor:
    r"""The right-hand side of Noci et al. (2022), Lemma 3.1, Eq. (8), as printed.

    :math:`8\sigma_q^2\sigma_k^2\sigma_v^2 d_k d_v\|B\|_F^2/n + 2 d_v^2\sigma_v^2`. Not a valid
    bound in general: see :func:`input_grad_sq_norm` and the errata.
    """
    n, d, d_k, sq, sk, sv = _dims(x, d_k, sigma_q2, sigma_k2, sigma_v2)
    xd = x.double()
    b2 = (xd.transpose(-1, -2) @ _centred(xd)).pow(2).sum((-2, -1))
    return 8 * sq * sk * sv * d_k * d * b2 / n + 2 * d * d * sv


# ----------------------------------------------------------------------------- equicorrelated inputs (Sec. 3.3)

def _equi(n, d, rho, sigma_x2):
    na = check_finite(n, "n")
    if np.any(na < 2):
        raise ValueError(f"n (tokens) must be >= 2; got {n!r}")
    da = check_positive(d, "d")
    ra = check_range(rho, "rho", 0.0, 1.0)
    sa = check_positive(sigma_x2, "sigma_x2")
    return na, da, ra, sa


@theory_function
def value_grad_sq_norm_equicorrelated(n, d, rho, sigma_x2=1.0):
    r""":math:`\mathbb E\|\partial S/\partial W^V\|_F^2 = \sigma_x^2 d^2(1+\rho(n-1))`. Noci et al. (2022), Eq. (17).

    Equicorrelated Gaussian tokens (Sec. 3.3), uniform attention, :math:`d_v = d`.
    """
    na, da, ra, sa = _equi(n, d, rho, sigma_x2)
    return to_output(sa * da**2 * (1 + ra * (na - 1)), n, d, rho, sigma_x2)


@theory_function
def query_grad_sq_norm_equicorrelated(n, d, rho, sigma_x2=1.0, *, exact=False):
    r""":math:`\sigma_x^6\frac{n-1}{n}(1-\rho)^2 d(n+d)`, Noci et al. (2022), Eq. (18).

    Eq. (18) assumes :math:`\|X\|_F^2` and :math:`\|X^\top L X\|_F^2` uncorrelated. With
    ``exact=True`` returns the exact uniform-attention expectation, Eq. (18) times
    :math:`1 + 4(1-\rho)/(nd)` (derivation in the module docstring; book chapter ``noci2022``).
    Assumes :math:`d_k = d_v = d` and :math:`\sigma_k^2 = \sigma_v^2 = 1/d`.
    """
    na, da, ra, sa = _equi(n, d, rho, sigma_x2)
    out = sa**3 * (na - 1) / na * (1 - ra) ** 2 * da * (na + da)
    if exact:
        out = out * (1 + 4 * (1 - ra) / (na * da))
    return to_output(out, n, d, rho, sigma_x2)


@theory_function
def query_value_log_ratio(n, d, rho, sigma_x2=1.0, *, exact=False):
    r"""Natural log of Eq. (18) / Eq. (17): the theory panel of Noci et al. (2022), Fig. 13.

    .. math:: \log\frac{\sigma_x^4 (n-1)(1-\rho)^2 (n+d)}{n\,d\,(1+\rho(n-1))}

    Minus infinity at :math:`\rho = 1` (rank collapse).
    """
    q = query_grad_sq_norm_equicorrelated(n, d, rho, sigma_x2, exact=exact)
    v = value_grad_sq_norm_equicorrelated(n, d, rho, sigma_x2)
    with np.errstate(divide="ignore"):
        out = np.log(np.asarray(q, dtype=float)) - np.log(np.asarray(v, dtype=float))
    return to_output(out, n, d, rho, sigma_x2, allow_inf=True)   # -inf at rho = 1 is the exact value


# ----------------------------------------------------------------------------- autograd and closed-form Monte Carlo

def _attention_single(attention, logit_scale):

    def fn(x, w_q, w_k, w_v):
        if attention is _Attention.UNIFORM:
            return _uniform_attention_kernel(x, w_q, w_k, w_v, logit_scale)[0]
        scale = w_q.shape[-2] ** -0.5 if logit_scale is None else logit_scale
        a = attention_weights((x @ w_q.T) @ (x @ w_k.T).T, scale=scale).to(x.dtype)
        return a @ x @ w_v.T

    return fn


def attention_jacobian_sq_norms(x, w_q, w_k, w_v, *, attention="softmax", logit_scale=None,
                                wrt=("v", "q", "k", "x")):
    r"""Squared Frobenius norms of the full Jacobians :math:`\partial S/\partial W^{V,Q,K}` and :math:`\partial S/\partial X`, by autograd.

    The Monte Carlo side of Noci et al. (2022), Lemma 3.1 (Eqs. 6-8) and Theorem 3.2:
    ``torch.func.jacrev`` of one attention layer, ``torch.func.vmap``-ed over the leading
    batch dimensions (one initialisation per batch entry; no Python loop over samples).

    ``x`` (B, n, d); ``w_q``, ``w_k`` (B, d_k, d); ``w_v`` (B, d_v, d). ``attention`` is
    ``"softmax"`` (real attention, Eq. 1, softmax by log-sum-exp in >= float32) or
    ``"uniform"`` (Assumption 3.1: :func:`sigprop.uniform_self_attention`). Returns a dict
    ``{name: (B,) tensor}`` for the names in ``wrt``. Cost grows like the Jacobian size
    :math:`n d_v\times(\text{parameters})`: use it for small :math:`n, d`.
    """
    check_attention_weights(x, w_q, w_k, w_v)
    att = check_option(attention, _Attention, "attention")
    if logit_scale is not None:
        logit_scale = check_real(logit_scale, "logit_scale", minimum=0.0)
    index = {"x": 0, "q": 1, "k": 2, "v": 3}
    if isinstance(wrt, str) or not isinstance(wrt, (tuple, list)):
        raise TypeError(f"wrt must be a tuple of names from 'x', 'q', 'k', 'v'; got {wrt!r}")
    names = tuple(wrt)
    bad = [w for w in names if w not in index]
    if bad or not names or len(set(names)) != len(names):   # issue 26, item 16: () and ("q", "q") reached torch
        raise ValueError(f"wrt must name each of 'x', 'q', 'k', 'v' at most once, at least one; got {wrt!r}")
    if x.ndim != 3 or w_q.ndim != 3 or w_k.ndim != 3 or w_v.ndim != 3:
        raise ValueError("attention_jacobian_sq_norms needs one leading batch dimension: "
                         f"x (B, n, d), weights (B, d_out, d); got x {tuple(x.shape)}, w_q {tuple(w_q.shape)}")
    fn = _attention_single(att, logit_scale)
    argnums = tuple(index[w] for w in names)
    jac = torch.func.vmap(torch.func.jacrev(fn, argnums=argnums))(x, w_q, w_k, w_v)
    return {w: j.pow(2).flatten(1).sum(1) for w, j in zip(names, jac)}


def softmax_param_grad_sq_norms(x, w_q, w_k, w_v, *, logit_scale=None):
    r"""Closed-form :math:`\|\partial S/\partial W^{V,Q,K}\|_F^2` for real softmax attention (exact; no assumption).

    With :math:`Q = XW_q^\top`, :math:`K = XW_k^\top`, :math:`T = XW_v^\top`,
    :math:`J_i = \mathrm{diag}(A_i) - A_iA_i^\top` (Eq. 23) and scale :math:`c`
    (:math:`1/\sqrt{d_k}`), row :math:`i` of :math:`dS` is :math:`c\,X_i\,dW_q^\top K^\top J_i T`
    for the queries and :math:`c\,Q_i\,dW_k X^\top J_i T` for the keys, so

    .. math::

        \|\partial S/\partial W^Q\|_F^2 = c^2\sum_i \|X_i\|^2\,\|K^\top J_i T\|_F^2,\quad
        \|\partial S/\partial W^K\|_F^2 = c^2\sum_i \|Q_i\|^2\,\|X^\top J_i T\|_F^2,\quad
        \|\partial S/\partial W^V\|_F^2 = d_v\|AX\|_F^2 .

    Batched over leading dimensions: ``x`` (..., n, d), weights (..., d_out, d). Returns a dict
    ``{"v", "q", "k": (...) tensors}`` in the dtype of ``x``. Tested against
    :func:`attention_jacobian_sq_norms`.
    """
    check_attention_weights(x, w_q, w_k, w_v)
    d_k, d_v = w_q.shape[-2], w_v.shape[-2]
    c = d_k**-0.5 if logit_scale is None else check_real(logit_scale, "logit_scale", minimum=0.0)
    q = x @ w_q.transpose(-1, -2)  # (..., n, d_k)
    k = x @ w_k.transpose(-1, -2)
    t = x @ w_v.transpose(-1, -2)  # (..., n, d_v)
    a = attention_weights(q @ k.transpose(-1, -2), scale=c).to(x.dtype)  # (..., n, n)
    # J_i T = diag(A_i) T - A_i (A_i^T T): (..., n_i, n_j, d_v)
    at = a @ t  # (..., n, d_v) rows A_i^T T
    jt = a.unsqueeze(-1) * t.unsqueeze(-3) - a.unsqueeze(-1) * at.unsqueeze(-2)
    kjt = torch.einsum("...jk,...ijv->...ikv", k, jt)  # K^T J_i T, (..., n, d_k, d_v)
    xjt = torch.einsum("...jd,...ijv->...idv", x, jt)  # X^T J_i T, (..., n, d, d_v)
    # c enters before squaring, in float64: a huge scale meets an exactly zero J (one-hot rows) as c * 0 = 0
    gq = (x.double().pow(2).sum(-1) * (c * kjt.double()).pow(2).sum((-2, -1))).sum(-1)
    gk = (q.double().pow(2).sum(-1) * (c * xjt.double()).pow(2).sum((-2, -1))).sum(-1)
    gq, gk = finite_tensor(gq.to(x.dtype), "the query gradient norm"), finite_tensor(gk.to(x.dtype), "the key gradient norm")
    gv = d_v * (a @ x).pow(2).sum((-2, -1))
    return {"v": gv, "q": gq, "k": gk}


def loss_grad_sq_norms(loss_fn, params: dict, *args):
    r"""Per-sample squared gradient norms :math:`\|\partial\mathcal L/\partial W\|_F^2` with ``torch.func.vmap(grad)``.

    ``loss_fn(params, *args) -> scalar`` for *one* sample; ``params`` a dict of tensors with a
    leading sample dimension ``B`` (one network or initialisation per entry), ``args`` tensors
    with the same leading dimension. Returns ``{name: (B,)}``, the squared Frobenius norm of each
    sample's gradient. A generic helper; :func:`transformer_layer_grad_sq_norms` is the
    transformer-specific use (Noci et al. 2022, Fig. 3(b, c)).
    """
    if not isinstance(params, dict) or not params:
        raise TypeError(f"params must be a non-empty dict of tensors; got {type(params).__name__}")
    grads = torch.func.vmap(torch.func.grad(loss_fn))(params, *args)
    return {name: g.pow(2).flatten(1).sum(1) for name, g in grads.items()}
