r"""Uniform attention: the forward recursions of Noci et al. (2022), Section 3.2.

Under Assumption 3.1 of Noci et al. (2022) every attention matrix at initialisation is
the uniform matrix :math:`U = \tfrac1n \mathbf 1\mathbf 1^\top`, so a block with a linear
MLP and no layer norm,

.. math::

    Z = \alpha_1\, U X W^V + X, \qquad X^{+} = \alpha_2\, Z W^{F_1} W^{F_2} + Z ,

(Eqs. 2-4; :math:`\alpha_1,\alpha_2` weight the residual *branches*, ``branch_sa`` and
``branch_mlp`` in :class:`sigprop.BlockConfig`; weights i.i.d. with variance :math:`1/d`)
propagates two scalars in expectation: the squared norm :math:`F = \|X\|_F^2` and the
summed Gram matrix :math:`C(X) = \sum_{k,k'}\langle X_k, X_{k'}\rangle = n^2\|\bar x\|^2`.

* Lemma 3.2, Eq. (10): :math:`\mathbb E\,C(X^L) = (1+\alpha_1^2)^L(1+\alpha_2^2)^L C(X)`.
* Lemma 3.3, Eq. (12): :math:`\mathbb E\|X^L\|_F^2 = (1+\alpha_2^2)^L\big[((1+\alpha_1^2)^L-1)\,C(X)/n
  + \|X\|_F^2\big]` (the geometric sum of Eq. 12 summed in closed form).
* Appendix A.4: the mean correlation of Eq. (14) is
  :math:`\rho^L = \big(\mathbb E C(X^L)/\mathbb E\|X^L\|_F^2 - 1\big)/(n-1)` when the input tokens
  have equal norms; Theorem 3.3 gives its limits (Eqs. 15-16).

The limits under :math:`\alpha_i^2 = \tilde\alpha_i / L` are Eqs. (11), (13), (15).

Remark (used in the errata, book chapter ``noci2022``): Eq. (16), :math:`\rho^L\to1` for
constant :math:`\alpha`'s, needs :math:`C(X) > 0`. A centred input (:math:`\bar x = 0`) keeps
:math:`\bar x^L = 0` at every depth, and then :math:`\rho^L = -1/(n-1)` exactly.

Lemma A.7 (Appendix A.5) motivates Assumption 3.1: with Glorot query/key weights the logits
:math:`M = X W^Q W^{K\top} X^\top/\sqrt{d_k}` have :math:`\mathbb E[M_{ij}^2\mid X] =
\sigma_k^4\|X_i\|^2\|X_j\|^2` (Eq. 43), which is :math:`O(1/d_k^2)` at fixed :math:`d_v` (Eq. 44).
Expanding the softmax to first order, :math:`A - U = \tfrac1n M L + O(M^2)` with
:math:`L = I - U`, gives the leading term of Fig. 7's statistic,

.. math::

    \mathbb E\Big[\tfrac{1}{n^2}\|A - U\|_F^2 \,\Big|\, X\Big]
    = \frac{\sigma_k^4\,\|X\|_F^2\,\|LX\|_F^2}{n^4}\,\big(1 + O(\sigma_k^4\|x\|^4)\big)

(:func:`uniform_deviation`); odd orders vanish because :math:`M\to-M` under :math:`W^Q\to-W^Q`.
"""
from __future__ import annotations

import numpy as np
import torch

from ..stats._estimate import Estimate
from ..stats._validate import (check_attention_weights, check_finite, check_int, check_positive, check_real,
                               check_tensor, finite_tensor, theory_function, to_output)
__all__ = [
    "gram_sum",
    "uniform_self_attention",
    "ratio_correlation",
]
__theory__ = [
    "uniform_gram_sum",
    "uniform_sq_norm",
    "uniform_mean_correlation",
    "uniform_gram_sum_limit",
    "uniform_sq_norm_limit",
    "uniform_mean_correlation_limit",
    "residual_scaling",
    "logit_second_moment",
    "uniform_deviation",
]


# ----------------------------------------------------------------------------- measures

def gram_sum(x: torch.Tensor) -> torch.Tensor:
    r""":math:`C(X) = \sum_{k,k'}\langle X_k, X_{k'}\rangle = \|\sum_k X_k\|^2 = n^2\|\bar x\|^2`.

    Noci et al. (2022), Lemma 3.2 and the remark after Eq. (11). ``x`` is ``(..., n, d)``;
    returns ``(...)`` in the dtype of ``x`` (accumulated in at least float32, which half-precision inputs get).
    """
    check_tensor(x, "x", ndim_min=2)
    xw = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    return finite_tensor(xw.sum(-2).pow(2).sum(-1), "gram_sum")


def ratio_correlation(c: torch.Tensor, f: torch.Tensor, n: int, dim: int = 0):
    r"""Monte Carlo estimate of the mean correlation :math:`\rho = (\mathbb E C/\mathbb E F - 1)/(n-1)`.

    Noci et al. (2022), Eq. (14) with the identity of Appendix A.4 (equal expected token
    norms). :math:`\rho` is a ratio of *expectations* (Eq. 5), not the mean of per-sample
    cosines, so it is estimated as a ratio of sample means; the standard error comes from
    the delta method, :math:`\mathrm{Var}(\bar C/\bar F) \approx
    \mathrm{Var}(C - R F)/(N\,\bar F^2)` with :math:`R = \bar C/\bar F`.

    ``c`` and ``f`` hold i.i.d. samples of :math:`C(X)` and :math:`\|X\|_F^2` along ``dim``
    (same shape). Returns a :class:`sigprop.Estimate`.
    """

    check_tensor(c, "c")
    check_tensor(f, "f")
    if c.shape != f.shape:
        raise ValueError(f"c and f must have the same shape; got {tuple(c.shape)} and {tuple(f.shape)}")
    n = check_int(n, "n (tokens)", minimum=2)
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or not -c.ndim <= dim < c.ndim:
        raise ValueError(f"dim must be an axis of c (shape {tuple(c.shape)}); got {dim!r}")
    c, f = c.double(), f.double()
    N = c.shape[dim]
    if N < 2:
        raise ValueError(f"need at least 2 samples along dim {dim}; got {N}")
    cm, fm = c.mean(dim), f.mean(dim)
    if bool((fm == 0).any()):  # issue 26, item 16: a ratio of expectations needs E F != 0
        raise ValueError("f must have a nonzero mean along dim (it is a squared Frobenius norm, > 0 for tokens "
                         "that are not all zero); got a zero mean")
    r = cm / fm
    resid = c - r.unsqueeze(dim) * f
    se_r = resid.std(dim, unbiased=True) / (N**0.5 * fm.abs())
    return Estimate((r - 1.0) / (n - 1), se_r / (n - 1), int(N))


# ----------------------------------------------------------------------------- attention

def uniform_self_attention(x, w_q, w_k, w_v, *, logit_scale=None):
    r"""Self-attention under Assumption 3.1, for autograd: value uniform, derivative the softmax's at uniform.

    Returns ``S = A X W_v^T`` where ``A`` *equals* :math:`U = \tfrac1n\mathbf 1\mathbf 1^\top`
    and its derivative with respect to the logits is the uniform-attention Jacobian of
    Noci et al. (2022), Eq. (24): :math:`dA = \tfrac1n\, dM\,L` (row-wise centring). This is
    what Lemma 3.1 differentiates: ``A = U + (M - stopgrad(M)) L / n``.

    ``x`` (..., n, d); ``w_q``, ``w_k`` (..., d_k, d); ``w_v`` (..., d_v, d) (PyTorch
    ``Linear`` layout: queries are ``x @ w_q.T``); ``logit_scale`` defaults to
    :math:`1/\sqrt{d_k}`. Returns ``(S, A)``.
    """
    check_attention_weights(x, w_q, w_k, w_v)
    if logit_scale is not None:
        logit_scale = check_real(logit_scale, "logit_scale", minimum=0.0)
    return _uniform_attention_kernel(x, w_q, w_k, w_v, logit_scale)


def _uniform_attention_kernel(x, w_q, w_k, w_v, logit_scale=None):
    """Unvalidated kernel of :func:`uniform_self_attention` (safe under ``torch.func`` transforms)."""
    d_k = w_q.shape[-2]
    scale = d_k**-0.5 if logit_scale is None else float(logit_scale)
    n = x.shape[-2]
    m = scale * (x @ w_q.transpose(-1, -2)) @ (x @ w_k.transpose(-1, -2)).transpose(-1, -2)  # (..., n, n)
    dm = m - m.detach()  # zero in value, identity in derivative
    a = torch.full_like(m, 1.0 / n) + (dm - dm.mean(-1, keepdim=True)) / n
    return a @ x @ w_v.transpose(-1, -2), a


# ----------------------------------------------------------------------------- theory

def _branches(branch_sa, branch_mlp):
    a1 = check_finite(branch_sa, "branch_sa")
    a2 = check_finite(branch_mlp, "branch_mlp")
    return a1 * a1, a2 * a2


def _depth(depth):
    L = check_finite(depth, "depth")
    if np.any(L < 0) or np.any(L != np.round(L)):
        raise ValueError(f"depth must be a non-negative integer (or array of them); got {depth!r}")
    return L


@theory_function
def uniform_gram_sum(c0, depth, *, branch_sa=1.0, branch_mlp=1.0):
    r""":math:`\mathbb E\,C(X^L) = (1+\alpha_1^2)^L(1+\alpha_2^2)^L\,C(X)`.

    Noci et al. (2022), Lemma 3.2, Eq. (10) (uniform attention, linear MLP, no LN).
    ``c0`` = :math:`C(X)` of the input, ``depth`` = :math:`L` (broadcasts),
    ``branch_sa``, ``branch_mlp`` = :math:`\alpha_1, \alpha_2`. Float64.
    """
    c0a = check_finite(c0, "c0")
    L = _depth(depth)
    s1, s2 = _branches(branch_sa, branch_mlp)
    return to_output((1 + s1) ** L * (1 + s2) ** L * c0a, c0, depth, branch_sa, branch_mlp)


@theory_function
def uniform_sq_norm(f0, c0, n, depth, *, branch_sa=1.0, branch_mlp=1.0):
    r""":math:`\mathbb E\|X^L\|_F^2 = (1+\alpha_2^2)^L\big[((1+\alpha_1^2)^L - 1)\,C(X)/n + \|X\|_F^2\big]`.

    Noci et al. (2022), Lemma 3.3, Eq. (12); the sum
    :math:`\alpha_1^2\sum_{k<L}(1+\alpha_1^2)^k = (1+\alpha_1^2)^L - 1` and
    :math:`n\|\bar x\|^2 = C(X)/n`. ``f0`` = :math:`\|X\|_F^2`, ``c0`` = :math:`C(X)`,
    ``n`` tokens.
    """
    f0a = check_positive(f0, "f0", allow_zero=True)
    c0a = check_positive(c0, "c0", allow_zero=True)
    na = check_positive(n, "n")
    L = _depth(depth)
    s1, s2 = _branches(branch_sa, branch_mlp)
    out = (1 + s2) ** L * (((1 + s1) ** L - 1) * c0a / na + f0a)
    return to_output(out, f0, c0, n, depth, branch_sa, branch_mlp)


@theory_function
def uniform_mean_correlation(f0, c0, n, depth, *, branch_sa=1.0, branch_mlp=1.0):
    r"""Mean token correlation :math:`\rho^L` (Eq. 14) at depth :math:`L` under uniform attention.

    Noci et al. (2022), Appendix A.4: :math:`\rho^L = \big(\mathbb E C(X^L)/\mathbb E\|X^L\|_F^2
    - 1\big)/(n-1)` with Eqs. (10) and (12); valid when the input tokens have equal norms
    (Theorem 3.3's hypothesis). The MLP factor :math:`(1+\alpha_2^2)^L` cancels, so
    ``branch_mlp`` does not enter:

    .. math:: \rho^L = \frac{1}{n-1}\left[\frac{n\,g\,C}{(g-1)C + n F} - 1\right],\quad g = (1+\alpha_1^2)^L.
    """
    f0a = check_positive(f0, "f0")
    c0a = check_positive(c0, "c0", allow_zero=True)
    na = check_finite(n, "n")
    if np.any(na < 2):
        raise ValueError(f"n (tokens) must be >= 2; got {n!r}")
    L = _depth(depth)
    s1, _ = _branches(branch_sa, branch_mlp)
    g = (1 + s1) ** L
    rho = (na * g * c0a / ((g - 1) * c0a + na * f0a) - 1) / (na - 1)
    return to_output(rho, f0, c0, n, depth, branch_sa, branch_mlp)


@theory_function
def residual_scaling(alpha_tilde, depth):
    r""":math:`\alpha = \sqrt{\tilde\alpha / L}`: the branch weight whose square is :math:`\tilde\alpha/L`.

    Noci et al. (2022), Lemma 3.2-3.3 and Theorem 3.3 (the ":math:`1/\sqrt L` scaling").
    """
    at = check_positive(alpha_tilde, "alpha_tilde", allow_zero=True)
    L = check_positive(depth, "depth")
    return to_output(np.sqrt(at / L), alpha_tilde, depth)


@theory_function
def uniform_gram_sum_limit(c0, *, alpha1_tilde, alpha2_tilde):
    r""":math:`\lim_{L\to\infty}\mathbb E C(X^L) = e^{\tilde\alpha_1+\tilde\alpha_2} C(X)`. Noci et al. (2022), Eq. (11)."""
    c0a = check_finite(c0, "c0")
    t1 = check_finite(alpha1_tilde, "alpha1_tilde")
    t2 = check_finite(alpha2_tilde, "alpha2_tilde")
    return to_output(np.exp(t1 + t2) * c0a, c0, alpha1_tilde, alpha2_tilde)


@theory_function
def uniform_sq_norm_limit(f0, c0, n, *, alpha1_tilde, alpha2_tilde):
    r""":math:`\lim_{L\to\infty}\mathbb E\|X^L\|_F^2 = e^{\tilde\alpha_2}\big[(e^{\tilde\alpha_1}-1)C(X)/n + \|X\|_F^2\big]`.

    Noci et al. (2022), Eq. (13) (with :math:`n\|\bar x\|^2 = C(X)/n`).
    """
    f0a = check_finite(f0, "f0")
    c0a = check_finite(c0, "c0")
    na = check_positive(n, "n")
    t1 = check_finite(alpha1_tilde, "alpha1_tilde")
    t2 = check_finite(alpha2_tilde, "alpha2_tilde")
    out = np.exp(t2) * ((np.exp(t1) - 1) * c0a / na + f0a)
    return to_output(out, f0, c0, n, alpha1_tilde, alpha2_tilde)


@theory_function
def uniform_mean_correlation_limit(f0, c0, n, *, alpha1_tilde):
    r""":math:`\lim_{L\to\infty}\rho^L` under :math:`\alpha_1^2 = \tilde\alpha_1/L`. Noci et al. (2022), Theorem 3.3, Eq. (15).

    .. math:: \frac{n e^{\tilde\alpha_1} C(X)}{(n-1)\big[(e^{\tilde\alpha_1}-1)C(X) + n\|X\|_F^2\big]} - \frac1{n-1}.

    :math:`\tilde\alpha_2` cancels. With constant :math:`\alpha`'s the limit is 1 (Eq. 16)
    only when :math:`C(X) > 0` (see the module docstring).
    """
    f0a = check_positive(f0, "f0")
    c0a = check_positive(c0, "c0", allow_zero=True)
    na = check_finite(n, "n")
    if np.any(na < 2):
        raise ValueError(f"n (tokens) must be >= 2; got {n!r}")
    t1 = check_finite(alpha1_tilde, "alpha1_tilde")
    e = np.exp(t1)
    out = na * e * c0a / ((na - 1) * ((e - 1) * c0a + na * f0a)) - 1 / (na - 1)
    return to_output(out, f0, c0, n, alpha1_tilde)


@theory_function
def logit_second_moment(x: torch.Tensor, sigma_k2) -> torch.Tensor:
    r""":math:`\mathbb E[M_{ij}^2\mid X] = \sigma_k^4\|X_i\|^2\|X_j\|^2`, Noci et al. (2022), Lemma A.7, Eq. (43).

    ``x`` (..., n, d); ``sigma_k2`` the per-entry variance of :math:`W^Q` and :math:`W^K`
    (both), logits scaled by :math:`1/\sqrt{d_k}`. Returns (..., n, n) float64.
    """
    check_tensor(x, "x", ndim_min=2)
    s = float(check_positive(sigma_k2, "sigma_k2"))
    r = x.double().pow(2).sum(-1)
    return finite_tensor(s * s * r.unsqueeze(-1) * r.unsqueeze(-2))


@theory_function
def uniform_deviation(x: torch.Tensor, sigma_k2) -> torch.Tensor:
    r"""Leading order of :math:`\mathbb E[\tfrac1{n^2}\|A-U\|_F^2\mid X]` = :math:`\sigma_k^4\|X\|_F^2\|LX\|_F^2/n^4`.

    Derived in the module docstring from Noci et al. (2022), Lemma A.7 (first-order softmax
    expansion around :math:`U`; relative corrections :math:`O(\sigma_k^4\|x\|^4)`). This is the
    statistic of Fig. 7; with Glorot :math:`\sigma_k^2 = 2/(d_v+d_k)` it decays as
    :math:`(d_v+d_k)^{-2}`. ``x`` (..., n, d) -> (...) float64.
    """
    check_tensor(x, "x", ndim_min=2)
    s = float(check_positive(sigma_k2, "sigma_k2"))
    xd = x.double()
    n = x.shape[-2]
    centred = xd - xd.mean(-2, keepdim=True)
    return finite_tensor(s * s * xd.pow(2).sum((-2, -1)) * centred.pow(2).sum((-2, -1)) / n**4)
