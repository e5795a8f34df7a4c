r"""Attention localisation and the QK-eigenspectrum (Bao, Hataya & Karakida 2024).

The setting (Bao et al. 2024, Sec. 2--4). Tokens follow the Gaussian random walk of
Assumption 1, ``x_1 ~ N(0, Sigma)``, ``x_{t+1} ~ N(x_t, Sigma)`` (sampled by
:func:`sigprop.random_walk_tokens`), so ``Cov(x_i, x_j) = min(i, j) Sigma``. The last token
queries all ``T`` tokens through a joint query-key matrix ``A = W_QK`` (``d x d``) with
temperature ``lambda``:

.. math::  \omega_j = x_j^\top A\, x_T / \lambda, \qquad j = 1..T.

The softmax is linearised at the origin, ``S(omega)_i ~ <gamma^i, omega> + gamma_0^i`` with
``gamma^i = e^i/T - 1/T^2`` and ``gamma_0^i = 1/T``, and clipped to ``[0, 1]`` (the piecewise-linear
softmax ``S~``, Sec. 2). Token ``i`` passes signal to the QK-gradient when the clipped argument

.. math::  Z_i := \langle\gamma^i, \omega\rangle + \gamma_0^i = (\omega_i - \bar\omega)/T + 1/T

lies in ``[0, 1]``; its probability is the signal propagation probability ``rho_i``
(Definition 1). With ``W := A Sigma``:

* **Lemma 1 as printed**: ``mu^i = (i/T - 1/2) tr W / lambda + o(1)`` and
  ``v^i = (2 i^2/T^2 + 7/12) tr(W^2)/lambda^2 + o(1)``.
* **Exact moments** (derived in the chapter; :func:`signal_propagation_moments`): with
  ``a := tr(A Sigma A^T Sigma)`` and ``b := tr(W^2)`` (``a = b`` for symmetric ``A``),

  .. math::  \mu^i = \frac1T + \frac{\operatorname{tr} W}{\lambda T}\Big(i - \frac{T+1}{2}\Big),\quad
             v^i = \frac{T a M_i + (i - \frac{T+1}{2})^2 b}{\lambda^2 T^2},\quad
             M_i = \frac{i(i-1)}{T} - i + \frac{(T+1)(2T+1)}{6T}.

  As ``T -> infinity`` with ``theta = i/T``: ``v -> (2 theta^2 - 2 theta + 7/12) tr(W^2)/lambda^2``
  (symmetric ``A``): the printed Lemma 1 misses the ``-2 theta`` term (an erratum, see the
  chapter; the slip is in the term (B2) of Appendix C).
* **Eq. (6)**: the Gaussian approximation ``rho_i ~ P(0 <= N(mu^i, v^i) <= 1)`` in the variables
  ``xi = tr W / sqrt(tr W^2)`` and ``eta = sqrt(tr W^2)/lambda``:
  ``rho(theta) = Phi((theta - 1/2) xi; theta) - Phi((theta - 1/2) xi - 1/eta; theta)`` with
  ``Phi(z; theta) = erf(z / sqrt(2 s(theta)))/2`` and ``s`` the variance profile.
* **Lemma 2**: the limits of ``rho(theta)`` (:func:`rho_theta_limit`).
* **Sec. 5**: the norm inequalities (5), (7), (10) (:func:`qk_norms` gathers every quantity),
  and the attention-entropy lower bound (9) of Zhai et al. (:func:`zhai_entropy_bound`,
  with the provable min-entropy bound :func:`min_entropy_bound`).

Samplers and measures (torch; leading batch dimensions first) sit beside the theory:
:func:`spectral_qk_matrix` (``W_QK = B diag(w) B^T`` of Sec. 5), :func:`anisotropic_sigma`,
:func:`last_query_logits`, :func:`linearised_softmax_argument`, :func:`piecewise_linear_softmax`,
:func:`propagation_indicator`; :func:`qk_gradient_terms` splits the QK-gradient of Sec. 3 into its terms
(19)-(21). Used in ``chapters/bao2024``.

Devices. Every tensor a function here creates lives on the device of its inputs, or of its generator
for the samplers (``device`` given: an int seed makes a generator there; not given: the generator's
device decides, the CPU for an int seed or None), so a sampler called inside :func:`sigprop.monte_carlo`
(whose child generators live on :func:`sigprop.default_device`) draws on that device.
:func:`last_query_logits` brings the (small) ``w_qk`` to the device and dtype of the tokens ``x``.
Float64 work (the Haar basis, the traces and norms of :func:`qk_traces` and :func:`qk_norms`) runs on
:func:`sigprop.float64_device` -- the device itself, or the CPU for Apple MPS, which has no float64;
on MPS the samplers draw in float32 there and return float32.
"""
from __future__ import annotations

import enum
import math

import numpy as np
import torch
from scipy.special import erf

from ..stats._config import float64_device
from ..stats._random import as_generator
from ..stats._validate import (check_float_dtype, check_finite, check_int, check_option, check_positive, check_real, check_tensor,
                               theory_function, to_output)
__all__ = ["spectral_qk_matrix", "anisotropic_sigma", "last_query_logits", "linearised_softmax_argument",
    "piecewise_linear_softmax", "propagation_indicator", "qk_traces", "qk_norms", "qk_gradient_terms"]
__theory__ = ["signal_propagation_moments", "signal_propagation_moments_paper", "variance_profile",
    "gaussian_propagation_probability", "rho_theta", "rho_theta_limit", "xi_eta", "zhai_entropy_bound",
    "min_entropy_bound", "one_spike_entropy"]


class VarianceForm(str, enum.Enum):
    CORRECTED = "corrected"
    PAPER = "paper"


# --------------------------------------------------------------------------- samplers


def _sampling_devices(generator, device, dtype):
    """``(generator, device, work, draw, out)``: the generator (on ``device`` if given), the device it draws on,
    the device of the float64 work (:func:`sigprop.float64_device`), the dtype of the draws (float64 where the
    device has it, else float32) and the output dtype (``dtype``, default float64 where the device has it)."""
    g = as_generator(generator, device)
    dev = g.device
    work = float64_device(dev)
    has64 = work.type == dev.type
    draw = torch.float64 if has64 else torch.float32
    out = (torch.float64 if has64 else torch.float32) if dtype is None else check_float_dtype(dtype)
    return g, dev, work, draw, out


def spectral_qk_matrix(*batch: int, d: int, mean: float, scale: float, generator=None, device=None,
                       dtype=None) -> torch.Tensor:
    """Symmetric ``W_QK = B diag(w) B^T``, ``w_k ~ N(mean, scale^2)`` i.i.d., ``B`` Haar orthogonal.

    Bao et al. 2024, Sec. 5 ("Numerical simulation", Fig. 5). Shape ``(*batch, d, d)``.
    ``B`` is the Q factor of a Gaussian matrix with the signs of ``diag(R)`` absorbed (Haar).
    Drawn with ``generator`` on its device (``device``: where an int seed's generator is made; default
    the generator's device, the CPU for a seed); the QR runs in float64 on
    :func:`sigprop.float64_device` and the result is returned on the generator's device in ``dtype``
    (default float64, float32 on MPS).
    """
    for k, b in enumerate(batch):
        check_int(b, f"batch[{k}]", minimum=1)
    d = check_int(d, "d", minimum=1)
    mean = check_real(mean, "mean")
    scale = check_real(scale, "scale", minimum=0.0)
    g, dev, work, draw, out_dtype = _sampling_devices(generator, device, dtype)
    z = torch.randn(*batch, d, d, generator=g, device=dev, dtype=draw).to(work, torch.float64)
    q, r = torch.linalg.qr(z)
    q = q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1)).unsqueeze(-2)
    w = mean + scale * torch.randn(*batch, d, generator=g, device=dev, dtype=draw).to(work, torch.float64)
    out = (q * w.unsqueeze(-2)) @ q.transpose(-1, -2)  # B diag(w) B^T
    return (0.5 * (out + out.transpose(-1, -2))).to(dev, out_dtype)


def anisotropic_sigma(d: int, *, low: float = -2.5, high: float = 2.5, generator=None, device=None,
                      dtype=None) -> torch.Tensor:
    """``Sigma = R^T R / d`` with ``R_ab ~ Unif(low, high)`` (Bao et al. 2024, Sec. 5). Shape ``(d, d)``.

    Devices and dtypes as :func:`spectral_qk_matrix`: drawn on the generator's device, the product formed
    in float64 on :func:`sigprop.float64_device`, returned on the generator's device in ``dtype``.
    """
    d = check_int(d, "d", minimum=1)
    low, high = check_real(low, "low"), check_real(high, "high")
    if not high > low:
        raise ValueError(f"need high > low; got low={low}, high={high}")
    g, dev, work, draw, out_dtype = _sampling_devices(generator, device, dtype)
    if max(abs(low), abs(high)) > (limit := math.sqrt(torch.finfo(out_dtype).max) / 2):   # Sigma_ab <= that^2
        raise ValueError(f"|low|, |high| must be at most {limit:.3g} (Sigma finite in {out_dtype}); got {low}, {high}")
    r = low + (high - low) * torch.rand(d, d, generator=g, device=dev, dtype=draw).to(work, torch.float64)
    s = (r.T / math.sqrt(d)) @ (r / math.sqrt(d))   # scaled first: the sums stay below max(|low|, |high|)^2
    return (0.5 * (s + s.T)).to(dev, out_dtype)


# --------------------------------------------------------------------------- measures


def last_query_logits(x: torch.Tensor, w_qk: torch.Tensor, lam: float) -> torch.Tensor:
    """``omega_j = x_j^T W_QK x_T / lambda`` (Definition 1). ``x (..., T, d)``, ``w_qk (..., d, d)`` -> ``(..., T)``.

    Row convention: ``x[..., j, :]`` is the token ``x_j`` of the paper (a column of its ``X``).
    The row ``T`` of the attention matrix of :func:`sigprop.self_attention` with ``w_qk`` and
    ``logit_scale = 1/lambda`` is ``softmax(omega)``. The tokens decide device and dtype: ``w_qk`` (a small
    ``d x d`` matrix, e.g. drawn once on the CPU with an int seed) is brought to ``x``'s device and dtype, so
    the function runs inside a Monte Carlo whose walks are drawn on an accelerator.
    """
    check_tensor(x, "x", ndim_min=2, dtype_float=False)   # finiteness is checked on omega (d times smaller)
    if not x.is_floating_point():
        raise TypeError(f"x must be a floating-point tensor; got {x.dtype}")
    check_tensor(w_qk, "w_qk", ndim_min=2, last=x.shape[-1])
    if w_qk.shape[-2] != x.shape[-1]:
        raise ValueError(f"w_qk must have shape (..., d, d) with d={x.shape[-1]}; got {tuple(w_qk.shape)}")
    try:
        torch.broadcast_shapes(w_qk.shape[:-2], x.shape[:-2])
    except RuntimeError:
        raise ValueError(f"batch shapes must broadcast: x {tuple(x.shape)}, w_qk {tuple(w_qk.shape)}") from None
    lam = check_real(lam, "lam", minimum=0.0, strict=True)
    w_qk = w_qk.to(device=x.device, dtype=x.dtype)
    # einsum contracts without materialising w_qk broadcast over x's batch (matmul would copy it per walk)
    key = torch.einsum("...ij,...j->...i", w_qk, x[..., -1, :])  # (..., d): W_QK x_T
    omega = torch.einsum("...tj,...j->...t", x, key) / lam
    if not bool(torch.isfinite(omega).all()):
        raise ValueError("x and w_qk must be finite; the logits contain NaN or inf")
    return omega


def linearised_softmax_argument(omega: torch.Tensor) -> torch.Tensor:
    """``Z_i = <gamma^i, omega> + gamma_0^i = (omega_i - mean(omega))/T + 1/T`` for every ``i``.

    Bao et al. 2024, Sec. 2 (Taylor coefficients ``gamma^i = e^i/T - 1/T^2``, ``gamma_0^i = 1/T``).
    ``omega (..., T)`` -> ``(..., T)``. Invariant to a constant shift of ``omega``.
    """
    check_tensor(omega, "omega", ndim_min=1)
    T = omega.shape[-1]
    return (omega - omega.mean(-1, keepdim=True)) / T + 1.0 / T


def piecewise_linear_softmax(omega: torch.Tensor) -> torch.Tensor:
    """``S~(omega)_i = max(0, min(1, Z_i))`` (Bao et al. 2024, Sec. 2, Fig. 1). Not normalised."""
    return linearised_softmax_argument(omega).clamp(0.0, 1.0)


def propagation_indicator(omega: torch.Tensor) -> torch.Tensor:
    """``1{Z_i in [0, 1]}`` as a float tensor ``(..., T)``; its mean over inputs is ``rho_i`` (Definition 1)."""
    z = linearised_softmax_argument(omega)
    return ((z >= 0) & (z <= 1)).to(omega.dtype)


def _float64(w_qk: torch.Tensor, sigma: torch.Tensor | None):
    """``w_qk`` and ``sigma`` (identity when None) in float64 on :func:`sigprop.float64_device` of ``w_qk``."""
    d = w_qk.shape[-1]
    if w_qk.shape[-2] != d:
        raise ValueError(f"w_qk must be square, shape (..., d, d); got {tuple(w_qk.shape)}")
    work = float64_device(w_qk.device)
    a = w_qk.to(work, torch.float64)
    if sigma is None:
        return a, torch.eye(a.shape[-1], dtype=torch.float64, device=work)
    check_tensor(sigma, "sigma", ndim_min=2, last=d)
    if sigma.shape[-2] != d:
        raise ValueError(f"sigma must have shape (d, d) with d={d}; got {tuple(sigma.shape)}")
    return a, sigma.to(work, torch.float64)


def qk_gradient_terms(x, y, w_qk, w_v, w_f, lam):
    """The terms (19), (20), (21) of the QK-gradient (3) of Bao et al. 2024 (App. B.1), per walk.

    One layer with the clipped linear softmax and identity MLP, ``F = W_F (W_V X S~(omega) + x_T)``, loss
    ``J = E||y - F||^2 / 2``. ``x (N, T, d)`` tokens, ``y (N, d)`` targets, ``w_f = W_F2 W_F1 + I``. Returns three
    ``(N, d)`` tensors ``u_k`` with ``term_k = mean_n u_k[n] x_T[n]^T``; the three terms add up to the autograd
    gradient of ``J`` (tests). Used by the ledger rows on Eq. (4)."""
    if check_tensor(x, "x", ndim_min=3).ndim != 3:
        raise ValueError(f"x must have shape (N, T, d); got {tuple(x.shape)}")
    N, T, d = x.shape
    for name, w, shape in (("y", y, (N, d)), ("w_v", w_v, (d, d)), ("w_f", w_f, (d, d))):
        if tuple(check_tensor(w, name).shape) != shape:
            raise ValueError(f"{name} must have shape {shape}; got {tuple(w.shape)}")
    y = y.to(x)
    omega = last_query_logits(x, w_qk, lam)                                    # (N, T)
    z = linearised_softmax_argument(omega)
    mask = ((z >= 0) & (z <= 1)).to(x.dtype)                                   # gamma~^i_i != 0
    # gamma~_0: 0, 1 or 1/T, as tensors of z's dtype (Python scalars in torch.where would round 1/T to float32)
    g0 = torch.where(z < 0, torch.zeros_like(z), torch.where(z > 1, torch.ones_like(z), torch.full_like(z, 1 / T)))
    gam = lambda v: mask * v / T - (mask * v).sum(-1, keepdim=True) / T**2     # Gamma v = sum_i gamma~^i v_i
    w_f, w_v = w_f.to(x), w_v.to(x)                                            # the tokens decide device, dtype
    V = x @ (w_f @ w_v).T                                                      # rows (W_F W_V x_i)^T
    P = lambda v: (V @ (V.transpose(-1, -2) @ v.unsqueeze(-1))).squeeze(-1)   # P v
    Xv = lambda v: (x.transpose(-1, -2) @ v.unsqueeze(-1)).squeeze(-1)        # X v (the paper's X: tokens as columns)
    q = (V @ (x[:, -1] @ w_f.T - y).unsqueeze(-1)).squeeze(-1)
    u19 = Xv(gam(P(mask * (omega - omega.mean(-1, keepdim=True)) / T))) / lam
    return u19, Xv(gam(P(g0))) / lam, Xv(gam(q)) / lam


def qk_traces(w_qk: torch.Tensor, sigma: torch.Tensor | None = None) -> dict:
    """Traces entering Lemma 1 for ``W = W_QK Sigma``: ``tr_w``, ``tr_w2 = tr(W^2)``,
    ``tr_wwt = tr(W_QK Sigma W_QK^T Sigma)`` (float64 tensors of shape ``w_qk.shape[:-2]``, on
    :func:`sigprop.float64_device` of ``w_qk``'s device: that device, or the CPU for MPS)."""
    check_tensor(w_qk, "w_qk", ndim_min=2)
    a, s = _float64(w_qk, sigma)
    w = a @ s
    wt = a.transpose(-1, -2) @ s
    return {
        "tr_w": torch.diagonal(w, dim1=-2, dim2=-1).sum(-1),
        "tr_w2": (w * w.transpose(-1, -2)).sum((-2, -1)),
        "tr_wwt": (w * wt.transpose(-1, -2)).sum((-2, -1)),
    }


def qk_norms(w_qk: torch.Tensor, sigma: torch.Tensor | None = None) -> dict:
    """Every quantity in the inequalities (5), (7), (8), (10) of Bao et al. 2024 (float64, batched).

    Keys: ``d``, ``tr_w``, ``tr_w2``, ``eig_w`` (eigenvalues of ``W = W_QK Sigma``, real for symmetric
    ``W_QK``), ``spec_sigma`` (``||Sigma||_2``), ``fro_sigma_inv`` (``||Sigma^-1||_F``), ``tr_qk``,
    ``spec_qk`` (``||W_QK||_2``), ``fro_qk``, ``l1_induced_qk`` (max column abs sum),
    ``l1_entrywise_qk`` (sum of abs entries). Tensors on :func:`sigprop.float64_device` of ``w_qk``'s device.
    """
    check_tensor(w_qk, "w_qk", ndim_min=2)
    a, s = _float64(w_qk, sigma)
    d = a.shape[-1]
    tr = qk_traces(a, s)
    # eigenvalues of A Sigma = those of Sigma^{1/2} A Sigma^{1/2} (symmetric when A is)
    se, sv = torch.linalg.eigh(s)
    root = (sv * se.clamp_min(0).sqrt()) @ sv.T
    sym = root @ (0.5 * (a + a.transpose(-1, -2))) @ root
    return {
        "d": d,
        "tr_w": tr["tr_w"],
        "tr_w2": tr["tr_w2"],
        "eig_w": torch.linalg.eigvalsh(sym),
        "spec_sigma": se.max(),
        "fro_sigma_inv": torch.linalg.matrix_norm(torch.linalg.inv(s)),
        "tr_qk": torch.diagonal(a, dim1=-2, dim2=-1).sum(-1),
        "spec_qk": torch.linalg.matrix_norm(a, ord=2),
        "fro_qk": torch.linalg.matrix_norm(a),
        "l1_induced_qk": torch.linalg.matrix_norm(a, ord=1),
        "l1_entrywise_qk": a.abs().sum((-2, -1)),
    }


# --------------------------------------------------------------------------- theory


@theory_function
def signal_propagation_moments(i, T, *, tr_w, tr_w2, lam, tr_wwt=None):
    r"""Exact mean and variance of ``Z_i = <gamma^i, omega> + gamma_0^i`` under Assumption 1.

    Corrects Bao et al. 2024, Lemma 1 (derivation in ``chapters/bao2024``, exact at every finite
    ``T``; no ``o(1)``):

    ``mu^i = 1/T + (tr W / (lambda T)) (i - (T+1)/2)``,
    ``v^i = [T tr_wwt M_i + (i - (T+1)/2)^2 tr_w2] / (lambda T)^2``,
    ``M_i = i(i-1)/T - i + (T+1)(2T+1)/(6T)``,

    with ``tr_w = tr(W_QK Sigma)``, ``tr_w2 = tr((W_QK Sigma)^2)`` and
    ``tr_wwt = tr(W_QK Sigma W_QK^T Sigma)`` (defaults to ``tr_w2``: symmetric ``W_QK``; for
    non-symmetric ``W_QK`` pass it, and ``tr_w2`` may then be negative). Get all three from
    :func:`qk_traces`. ``i`` in ``1..T`` (1-based as in the paper). Returns ``(mu, v)``.
    """
    ia = check_finite(i, "i")
    Ta = check_finite(T, "T")
    if np.any(Ta < 1) or np.any(ia < 1) or np.any(ia > Ta):
        raise ValueError(f"need 1 <= i <= T; got i in [{ia.min()}, {ia.max()}], T in [{Ta.min()}, {Ta.max()}]")
    trw = check_finite(tr_w, "tr_w")
    if tr_wwt is None:  # symmetric W_QK: tr(W^2) = tr(W W^T-type) >= 0
        trw2 = check_positive(tr_w2, "tr_w2", allow_zero=True)
        trwwt = trw2
    else:  # non-symmetric W_QK: tr((W_QK Sigma)^2) may be negative, tr(W_QK Sigma W_QK^T Sigma) may not
        trw2 = check_finite(tr_w2, "tr_w2")
        trwwt = check_positive(tr_wwt, "tr_wwt", allow_zero=True)
    la = check_positive(lam, "lam")
    c = ia - (Ta + 1) / 2
    mu = 1.0 / Ta + trw * c / (la * Ta)
    m = ia * (ia - 1) / Ta - ia + (Ta + 1) * (2 * Ta + 1) / (6 * Ta)
    v = (Ta * trwwt * m + c**2 * trw2) / (la * Ta) ** 2
    like = (i, T, tr_w, tr_w2, lam)
    return to_output(mu, *like), to_output(v, *like)


@theory_function
def variance_profile(theta, *, form: str = "corrected"):
    """``s(theta)`` with ``v = s(theta) tr(W^2)/lambda^2`` as ``T -> infinity``.

    ``form="paper"``: ``2 theta^2 + 7/12`` (Bao et al. 2024, Lemma 1 as printed);
    ``form="corrected"``: ``2 theta^2 - 2 theta + 7/12 = 2 (theta - 1/2)^2 + 1/12`` (the limit of
    :func:`signal_propagation_moments`).
    """
    f = check_option(form, VarianceForm, "form")
    th = check_finite(theta, "theta")
    s = 2 * th**2 + 7 / 12 if f is VarianceForm.PAPER else 2 * th**2 - 2 * th + 7 / 12
    return to_output(s, theta)


@theory_function
def signal_propagation_moments_paper(theta, *, tr_w, tr_w2, lam):
    """Lemma 1 of Bao et al. 2024 as printed: ``((theta - 1/2) tr W/lambda, (2 theta^2 + 7/12) tr W^2/lambda^2)``."""
    th = check_finite(theta, "theta")
    trw = check_finite(tr_w, "tr_w")
    trw2 = check_positive(tr_w2, "tr_w2", allow_zero=True)
    la = check_positive(lam, "lam")
    mu = (th - 0.5) * trw / la
    v = (2 * th**2 + 7 / 12) * trw2 / la**2
    return to_output(mu, theta, tr_w, tr_w2), to_output(v, theta, tr_w, tr_w2)


@theory_function
def gaussian_propagation_probability(mu, v):
    """``P(0 <= N(mu, v) <= 1) = [erf((1 - mu)/sqrt(2v)) + erf(mu/sqrt(2v))]/2`` (Bao et al. 2024, Sec. 4)."""
    m = check_finite(mu, "mu")
    va = check_positive(v, "v")
    s = np.sqrt(2 * va)
    return to_output(0.5 * (erf((1 - m) / s) + erf(m / s)), mu, v)


@theory_function
def rho_theta(theta, xi, eta, *, form: str = "paper"):
    r"""``rho(theta)``, Bao et al. 2024, Eq. (6).

    ``rho = Phi((theta - 1/2) xi; theta) - Phi((theta - 1/2) xi - 1/eta; theta)``,
    ``Phi(z; theta) = erf(z / sqrt(2 s(theta)))/2``, with ``s`` from :func:`variance_profile`
    (``form="paper"`` reproduces Eq. (6); ``"corrected"`` uses the corrected variance).
    ``xi = tr W / sqrt(tr W^2)`` in ``[-sqrt d, sqrt d]``, ``eta = sqrt(tr W^2)/lambda > 0``
    (Fig. 2's caption writes ``lambda^2``: a typo, Eq. (6) needs ``lambda``).
    """
    th = check_finite(theta, "theta")
    x = check_finite(xi, "xi")
    e = check_positive(eta, "eta")
    s = np.asarray(variance_profile(th, form=form), dtype=float)
    den = np.sqrt(2 * s)
    a = (th - 0.5) * x
    out = 0.5 * erf(a / den) - 0.5 * erf((a - 1.0 / e) / den)
    return to_output(out, theta, xi, eta)


@theory_function
def rho_theta_limit(theta, r):
    """Limit of ``rho(theta)`` in Lemma 2 (items 1--2): ``xi -> +-inf``, ``eta -> 0``, ``xi eta -> r``.

    ``r >= 0``: ``1{theta >= 1/2}`` if ``r <= 2`` else ``1{1/2 <= theta <= 1/2 + 1/r}``;
    ``r < 0``: ``1{theta <= 1/2}`` if ``r >= -2`` else ``1{1/2 + 1/r <= theta <= 1/2}``.
    At the jump points themselves the pointwise limit of Eq. (6) is ``1/2``, not the indicator's
    value (the proof's own ``Phi(0) = 0``); this function returns ``1/2`` there.
    """
    th = check_finite(theta, "theta")
    ra = check_finite(r, "r")
    th, ra = np.broadcast_arrays(th, ra)
    pos = ra >= 0
    with np.errstate(divide="ignore"):
        edge = np.where(ra != 0, 0.5 + 1.0 / np.where(ra != 0, ra, 1.0), np.inf)
    upper = np.where(pos & (ra >= 2), edge, np.inf)      # r = 2: the edge is theta = 1 itself
    lower = np.where(~pos & (ra <= -2), edge, -np.inf)
    inside_pos = (th > 0.5) & (th < upper)
    inside_neg = (th < 0.5) & (th > lower)
    out = np.where(pos, inside_pos, inside_neg).astype(float)
    at_half = np.isclose(th, 0.5)
    at_edge = np.isclose(th, np.where(pos, upper, lower))
    out = np.where(at_half | at_edge, 0.5, out)
    return to_output(out, theta, r)


@theory_function
def xi_eta(tr_w, tr_w2, lam):
    """``(xi, eta) = (tr W / sqrt(tr W^2), sqrt(tr W^2) / lambda)`` (Bao et al. 2024, Eq. (6))."""
    trw = check_finite(tr_w, "tr_w")
    trw2 = check_positive(tr_w2, "tr_w2")
    la = check_positive(lam, "lam")
    return to_output(trw / np.sqrt(trw2), tr_w, tr_w2), to_output(np.sqrt(trw2) / la, tr_w2, lam)


@theory_function
def zhai_entropy_bound(nu, T):
    """Eq. (9) of Bao et al. 2024 as printed (after Zhai et al. 2023, Thm 3.1):
    ``ln(1 + T e^-nu) + nu e^(-nu/2) / (1/T + e^-nu)``.

    The chapter shows it exceeds ``ln T`` (the largest entropy of any distribution on ``T`` points)
    for a range of ``nu``, so it cannot be a lower bound as printed; see :func:`min_entropy_bound`.
    """
    n = check_positive(nu, "nu", allow_zero=True)
    Ta = check_positive(T, "T")
    out = np.log1p(Ta * np.exp(-n)) + n * np.exp(-n / 2) / (1.0 / Ta + np.exp(-n))
    return to_output(out, nu, T)


@theory_function
def one_spike_entropy(delta, T):
    """Entropy of ``softmax`` of a logit vector with one entry ``delta`` above ``T - 1`` equal ones:
    ``ln(1 + (T-1) e^-delta) + delta (T-1) e^-delta / (1 + (T-1) e^-delta)``.

    For large ``T`` this is ``~ ln(1 + T e^-delta) + delta e^-delta / (1/T + e^-delta)``: the shape of
    Eq. (9) with ``e^-delta`` where Eq. (9) prints ``e^(-nu/2)``. It is *not* a lower bound on the
    entropy over all logits of range ``delta`` (several tied spikes can do lower for small
    ``delta``; see the tests); :func:`min_entropy_bound` is."""
    dl = check_positive(delta, "delta", allow_zero=True)
    Ta = check_positive(T, "T")
    u = (Ta - 1) * np.exp(-dl)
    return to_output(np.log1p(u) + dl * u / (1 + u), delta, T)


@theory_function
def min_entropy_bound(delta, T):
    """``ln(1 + (T-1) e^-delta)``: a lower bound on the Shannon entropy of ``softmax(omega)`` for any
    ``omega`` in ``R^T`` with ``max omega - min omega <= delta`` (Shannon >= min-entropy
    ``-ln max_j p_j`` and ``max_j p_j <= e^delta/(e^delta + T - 1)``)."""
    dl = check_positive(delta, "delta", allow_zero=True)
    Ta = check_positive(T, "T")
    return to_output(np.log1p((Ta - 1) * np.exp(-dl)), delta, T)
