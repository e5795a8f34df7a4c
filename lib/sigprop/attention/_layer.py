r"""A random softmax attention layer: the layer, its analytic maps and its Monte Carlo.

**The layer.** For tokens ``x`` of shape ``(..., T, d)`` (rows are tokens),

    a_ts = logit_scale * (W_Q x_t) . (W_K x_s),     A = softmax_s(a),     out_t = sum_s A_ts W_V x_s

(Giorlandino & Goldt 2025, Eqs. (6)-(7); Noci et al. 2022, Eq. (1)). With a joint query-key matrix
``w_qk`` the logits are ``logit_scale * x_t^T W_QK x_s`` (Bao et al. 2024, Eq. (1),
``logit_scale = 1/lambda``). ``logit_scale`` defaults to ``1/sqrt(d_k)``. ``causal=True`` masks
``s > t``; ``gain_control=True`` centres the values along the sequence before mixing (Giorlandino &
Goldt 2025, Sec. 3). Multi-head attention is broadcasting: give weights a head axis.

**Precision policy** (one place, :func:`attention_weights`): logits are accumulated in at least
float32 (a float16 product ``q . k`` overflows at ~6.5e4), the row maximum is subtracted *before*
the scale is applied (so any finite ``logit_scale`` gives weights, never NaN) and the softmax runs in
at least float32; the weights come back in the values' dtype.

**Its maps** (Giorlandino & Goldt 2025, App. B.1-B.2). For fixed tokens the scores are Gaussian
with ``E[a_ts a_tau sigma] = beta^2 log T q_{t tau} q_{s sigma}`` (Eq. 9, :func:`score_covariance`).
Averaging over ``W_V`` (variance ``sigma_v^2/d``), exactly,
``q' = sigma_v^2 (p + (q-p) Y^(2))``, ``p' = sigma_v^2 (p + (q-p) Y_p)`` (Eqs. 20-23,
:func:`attention_map`), with ``Y^(2)`` the REM's participation ratio (``sigprop.attention._rem``) and the
cross-overlap ``Y_p = E sum_s A_ts A_t's`` (``1/T`` for independent rows, 0 as T -> infinity).
The cosine map (Eq. 3, :func:`cosine_map`) is ``rho / (rho + (1 - rho) Y^(2))``; Appendix B.2.3
prints ``rho / (1 + (1 - rho) Y^(2))`` (``form="appendix"``, an erratum).

**Its Monte Carlo**: :func:`sample_scores` and :func:`mc_attention_layer` (named statistics in
:class:`AttentionLayerStats`); the IPR of large layers is in ``sigprop.attention._ipr``.

Used in ``chapters/giorlandino-goldt2025/02_rem_in_depth.ipynb`` and throughout the book.
"""
from __future__ import annotations

import dataclasses
import enum
import math

import numpy as np
import torch

from ..stats._config import _work_dtype
from ..stats._estimate import Estimate
from ..stats._montecarlo import monte_carlo
from ..stats._random import as_generator
from ._cross import cross_excess_array, excess_y2
from ._rem import _energy_scale, ipr_limit, rem_quadrature
from ..inputs import exact_equicorrelated_tokens, equicorrelated_tokens
from ..stats._validate import (broadcast, check_flag, check_float_dtype, check_gram_bound, check_int, check_option,
                               check_overlaps, check_positive, check_range, check_real, check_same_device,
                               check_seq_len, check_tensor, theory_function, to_output)
__all__ = ["self_attention", "layer_norm", "attention_weights", "sample_scores", "mc_attention_layer",
           "AttentionLayerStats"]
__theory__ = ["score_covariance", "attention_map", "cosine_map"]


# ---------------------------------------------------------------- the layer


def layer_norm(x: torch.Tensor, *, center: bool = False) -> torch.Tensor:
    """Token-wise normalisation without affine parameters, ``x_t / sqrt(|x_t|^2 / d)``.

    Giorlandino & Goldt 2025, Eq. (5). ``center=True`` subtracts the feature mean first (torch's ``LayerNorm``
    without affine and eps). Overflow-safe (each token divided by its largest entry before its norm; in place in the
    fast kernel, squares of float32/16 summed in float64): entries up to the dtype's maximum work, a zero token maps
    to zero. Differentiable.
    """
    check_tensor(x, "x", ndim_min=1)
    return normalise_tokens(x, check_flag(center, "center"))


def normalise_tokens(x: torch.Tensor, center: bool) -> torch.Tensor:
    if center:
        x = x - x.mean(-1, keepdim=True)
    # the result does not depend on this scale, so it is a constant for autograd
    top = x.detach().abs().amax(-1, keepdim=True).clamp_min(torch.finfo(x.dtype).tiny)
    u = x / top  # entries in [-1, 1]: |u|^2 <= d cannot overflow
    rms = torch.linalg.vector_norm(u, dim=-1, keepdim=True, dtype=_work_dtype(x.dtype)) / math.sqrt(x.shape[-1])
    # divide in the work dtype: a clamped rms would underflow to 0 in float16 (zero token: 0 / tiny = 0)
    return (u / rms.clamp_min(torch.finfo(rms.dtype).tiny)).to(x.dtype)


def normalise_tokens_(x: torch.Tensor, center: bool) -> torch.Tensor:
    """:func:`normalise_tokens` in place on a fresh tensor (the fast kernel; no autograd)."""
    if center:
        x.sub_(x.mean(-1, keepdim=True))
    if x.dtype != torch.float64 and x.device.type == "cpu":   # squares of float32/16 fit float64: 2 passes, not 5
        rms = torch.linalg.vector_norm(x, dim=-1, keepdim=True, dtype=torch.float64)
        return x.div_(rms.mul_(x.shape[-1] ** -0.5).clamp_min_(torch.finfo(torch.float64).tiny))   # in float64
    x.div_(x.abs().amax(-1, keepdim=True).clamp_min_(torch.finfo(x.dtype).tiny))
    rms = torch.linalg.vector_norm(x, dim=-1, keepdim=True, dtype=_work_dtype(x.dtype))
    rms.mul_(1.0 / math.sqrt(x.shape[-1])).clamp_min_(torch.finfo(rms.dtype).tiny)
    return x.div_(rms)  # computed in rms's (work) dtype, stored in x's


def attention_weights(scores: torch.Tensor, *, scale: float = 1.0, causal: bool = False) -> torch.Tensor:
    """``softmax_s(scale * scores)`` over the last axis, in at least float32 (returned in that dtype).

    ``scores`` (..., T, S) are raw query-key products; the row maximum (the minimum for ``scale < 0``) is
    subtracted before scaling, so a huge finite ``scale`` gives the arg-max row instead of NaN. ``causal`` masks
    ``s > t`` after scaling: ``scale = 0`` gives uniform weights over the visible keys, ``scale < 0`` the softmax
    of the negated scores.
    """
    if not isinstance(scores, torch.Tensor) or not scores.is_floating_point():  # cheap checks only: a hot path
        raise TypeError(f"scores must be a floating-point torch.Tensor; got {type(scores).__name__}"
                        + (f" of {scores.dtype}" if isinstance(scores, torch.Tensor) else ""))
    if scores.ndim < 1 + bool(causal):
        raise ValueError(f"scores must have at least {1 + bool(causal)} dimensions; got shape {tuple(scores.shape)}")
    scale = check_real(scale, "scale")
    work = scores.to(_work_dtype(scores.dtype))
    mask = torch.ones(*work.shape[-2:], dtype=torch.bool, device=work.device).triu(1) if causal else None
    if scale == 1.0:   # softmax subtracts the row maximum itself: one pass over the logits (the block's fast path)
        return torch.softmax(work if mask is None else work.masked_fill(mask, float("-inf")), dim=-1)
    if abs(scale) > 1e30 and work.dtype != torch.float64:  # scale itself would round to inf in float32
        work = work.double()
    # shift by the visible row's extreme in the scale's direction, mask after scaling (issue 37, item 5)
    hidden = work if mask is None else work.masked_fill(mask, float("-inf") if scale >= 0 else float("inf"))
    work = (work - (hidden.amax(-1, keepdim=True) if scale >= 0 else hidden.amin(-1, keepdim=True))) * scale
    if mask is not None:
        work = work.masked_fill(mask, float("-inf"))
    return torch.softmax(work, dim=-1)


def softmax_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, scale: float,
                      causal: bool = False, gain_control: bool = False):
    """Core: ``q, k`` (..., T, d_k), ``v`` (..., T, d_v) -> (out (..., T, d_v), A (..., T, T))."""
    work = _work_dtype(q.dtype)
    return mix_values(q.to(work) @ k.to(work).transpose(-1, -2), v, scale=scale, causal=causal, gain_control=gain_control)


def mix_values(scores, v, *, scale, causal, gain_control):
    A = attention_weights(scores, scale=scale, causal=causal).to(v.dtype)
    if gain_control:
        v = v - v.mean(-2, keepdim=True)
    return A @ v, A


def self_attention(x: torch.Tensor, w_q: torch.Tensor | None = None, w_k: torch.Tensor | None = None,
                   w_v: torch.Tensor | None = None, *, logit_scale: float | None = None, causal: bool = False,
                   gain_control: bool = False, w_qk: torch.Tensor | None = None):
    """Softmax self-attention.

    Parameters
    ----------
    x : (..., T, d)
    w_q, w_k : (..., d_k, d) -- query and key maps (omit both when ``w_qk`` is given)
    w_v : (..., d_v, d) or None (identity values, ``d_v = d``)
    w_qk : (..., d, d) joint query-key matrix (Bao et al. 2024)
    logit_scale : multiplier of the logits; default ``1/sqrt(d_k)`` (``1/sqrt(d)`` with ``w_qk``)

    Returns
    -------
    out : (..., T, d_v) and A : (..., T, T), rows of A summing to one.
    """
    check_tensor(x, "x", ndim_min=2)
    causal = check_flag(causal, "causal")
    gain_control = check_flag(gain_control, "gain_control")
    d = x.shape[-1]
    if x.shape[-2] < 1:
        raise ValueError(f"x must hold at least one token; got shape {tuple(x.shape)}")
    work = _work_dtype(x.dtype)
    if w_qk is not None:
        if w_q is not None or w_k is not None:
            raise ValueError("give either w_qk or (w_q, w_k), not both")
        check_tensor(w_qk, "w_qk", ndim_min=2)
        if w_qk.shape[-2:] != (d, d):
            raise ValueError(f"w_qk must have shape (..., d, d)=(..., {d}, {d}); got {tuple(w_qk.shape)}")
        check_same_device(x=x, w_qk=w_qk)
        _check_batch(x, w_qk=w_qk, w_v=w_v)
        scale = 1.0 / math.sqrt(d)
        xw = x.to(work)
        scores = xw @ w_qk.to(work) @ xw.transpose(-1, -2)
    else:
        if w_q is None or w_k is None:
            raise ValueError("self_attention needs w_q and w_k (or w_qk)")
        for name, w in (("w_q", w_q), ("w_k", w_k)):
            check_tensor(w, name, ndim_min=2)
            if w.shape[-1] != d:
                raise ValueError(f"{name} must have shape (..., d_k, d) with d={d}; got {tuple(w.shape)}")
        if w_q.shape[-2] != w_k.shape[-2]:
            raise ValueError(f"w_q and w_k must share d_k; got {w_q.shape[-2]} and {w_k.shape[-2]}")
        check_same_device(x=x, w_q=w_q, w_k=w_k)
        _check_batch(x, w_q=w_q, w_k=w_k, w_v=w_v)
        scale = 1.0 / math.sqrt(w_q.shape[-2])
        xw = x.to(work)
        scores = (xw @ w_q.to(work).transpose(-1, -2)) @ (xw @ w_k.to(work).transpose(-1, -2)).transpose(-1, -2)
    if logit_scale is not None:
        scale = check_real(logit_scale, "logit_scale", minimum=0.0)
    if w_v is None:
        v = x
    else:
        check_tensor(w_v, "w_v", ndim_min=2)
        if w_v.shape[-1] != d:
            raise ValueError(f"w_v must have shape (..., d_v, d) with d={d}; got {tuple(w_v.shape)}")
        check_same_device(x=x, w_v=w_v)
        v = x @ w_v.transpose(-1, -2)
    return mix_values(scores, v, scale=scale, causal=causal, gain_control=gain_control)


def _check_batch(x, **weights):
    """The batch dimensions (all but the last two) of ``x`` and of every given weight broadcast."""
    given = {k: w for k, w in weights.items() if isinstance(w, torch.Tensor)}
    try:
        torch.broadcast_shapes(x.shape[:-2], *(w.shape[:-2] for w in given.values()))
    except RuntimeError:
        got = ", ".join(f"{k} {tuple(w.shape)}" for k, w in {"x": x, **given}.items())
        raise ValueError(f"batch dimensions of x and the weights must broadcast; got {got}") from None


# ---------------------------------------------------------------- its maps


@theory_function
def score_covariance(x, *, beta):
    r"""Covariance of the attention scores for fixed tokens, Eq. (9): ``beta^2 log T q_{t tau} q_{s sigma}``.

    ``x (..., T, d)`` -> ``(..., T, T, T, T)`` float64 tensor ``C[t, s, tau, sigma] =
    E[a_ts a_tau sigma]`` for ``W_Q, W_K`` of variance ``beta sqrt(log T)/d`` (Result 1).
    Memory ``T^4``: meant for small ``T``.
    """
    check_tensor(x, "x", ndim_min=2)
    check_positive(beta, "beta", allow_zero=True)
    T, d = x.shape[-2], x.shape[-1]
    if T < 2:
        raise ValueError(f"x needs T >= 2 tokens; got shape {tuple(x.shape)}")
    xd = x.double()
    Q = xd @ xd.transpose(-1, -2) / d  # (..., T, T)
    s2 = float(beta) * float(beta) * math.log(T)
    out = s2 * Q[..., :, None, :, None] * Q[..., None, :, None, :]  # [t, s, tau, sigma]
    if not bool(torch.isfinite(out).all()):
        raise ValueError(f"score_covariance overflows float64 (beta = {float(beta):g}, largest |x_t . x_s|/d = "
                         f"{float(Q.abs().max()):g}); rescale x or beta")
    return out


class CrossOverlap(str, enum.Enum):
    REM = "rem"
    INDEPENDENT = "1/T"


@theory_function
def attention_map(q, p, *, beta, sigma_v2=1.0, gain_control=False, T=None, y2=None, yp=None, cross_overlap="rem"):
    r"""One attention layer (no residual, no LN): ``(q, p) -> (q', p')`` (Eqs. 20-23).

    ``q' = sigma_v2 (p + (q-p) Y2)``, ``p' = sigma_v2 (p + (q-p) Y_p)``; gain control (values centred
    over the sequence, Sec. 3, Algorithm 3) subtracts the mean value: ``q' = sigma_v2 (q-p)(Y2 - 1/T)``,
    ``p' = sigma_v2 (q-p)(Y_p - 1/T)``. ``T=None``: the T -> infinity map of the paper,
    ``Y2 = max(0, 1 - beta_c(q,p)/beta)`` and ``Y_p = 0``. ``T`` given: the exact finite-``T`` ``Y2`` of the
    REM and, with ``cross_overlap="rem"`` (default), the exact finite-``T`` ``Y_p`` of two correlated REM rows
    (:func:`sigprop.theory.cross_overlap`); ``cross_overlap="1/T"`` sets ``Y_p = 1/T``, exact only for
    independent rows (``p = 0``) and uniform rows: in the condensed phase with ``p > 0`` the true ``Y_p`` is
    several times larger and the ``1/T`` map underestimates the cosine (``book/errata``, Fig. 1(e)).
    ``y2``, ``yp`` override (e.g. measured values). Broadcasts.

    Domain: ``|p| <= q`` and the Gram bound ``p >= -q/(T-1)`` (``p >= 0`` for ``T=None``); negative overlaps are
    inside it and mapped exactly: ``Y_p < 1/T`` there (``sigprop.attention._cross``, "Negative overlaps").
    """
    qa, pa = check_overlaps(q, p, strict=False)
    b = check_positive(beta, "beta", allow_zero=True)
    v = check_positive(sigma_v2, "sigma_v2", allow_zero=True)
    Ta = None if T is None else check_seq_len(T)
    check_gram_bound(*broadcast(q=qa, p=pa), Ta)   # what no T tokens can have: p < -q/(T-1) (p < 0 as T -> inf)
    y2 = None if y2 is None else check_range(y2, "y2 (a participation ratio)", 0.0, 1.0)
    yp = None if yp is None else check_range(yp, "yp (a participation ratio)", 0.0, 1.0)
    cross = check_option(cross_overlap, CrossOverlap, "cross_overlap")
    qn, pn = attention_map_kernel(qa, pa, b, v, check_flag(gain_control, "gain_control"), Ta, y2, yp, cross)
    return to_output(qn, q, p, beta), to_output(pn, q, p, beta)


def attention_map_kernel(q, p, beta, sigma_v2, gain_control, T=None, y2=None, yp=None, cross=CrossOverlap.REM):
    """Arrays in, arrays out (no validation); used by the block maps.

    With gain control the map multiplies ``Y2 - 1/T`` and ``Y_p - 1/T``, which vanish like ``sigma^2`` as the
    tokens collapse: they are computed directly (``sigprop.attention._cross``), not as differences.
    """
    q, p, beta, sigma_v2 = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in (q, p, beta, sigma_v2)))
    if T is None:  # the paper's T -> infinity map: Y_p = 0, and no mean value to subtract
        y2 = ipr_limit(beta, q, p, 2.0) if y2 is None else y2
        yp = 0.0 if yp is None else yp
        if gain_control:
            return sigma_v2 * (q - p) * y2, sigma_v2 * (q - p) * yp
        return sigma_v2 * (p + (q - p) * y2), sigma_v2 * (p + (q - p) * yp)
    inv = 1.0 / np.asarray(T, dtype=float)
    if yp is not None:
        ex_p = yp - inv
    elif cross is CrossOverlap.REM:
        ex_p = cross_excess_array(beta, T, q, p)
    else:
        ex_p = np.zeros(np.broadcast(q, inv).shape)
    if gain_control:
        ex_2 = _y2_excess(beta, T, q, p) if y2 is None else y2 - inv
        return sigma_v2 * (q - p) * ex_2, sigma_v2 * (q - p) * ex_p
    y2 = _y2_finite(beta, T, q, p) if y2 is None else y2
    return sigma_v2 * (p + (q - p) * y2), sigma_v2 * (p + (q - p) * (inv + ex_p))


def _y2_finite(beta, T, q, p):
    """Exact finite-T ``E Y2`` (quadrature of ``sigprop.attention._rem``), elementwise over broadcast arrays."""
    sig, TT = np.broadcast_arrays(_energy_scale(beta, T, q, p), np.asarray(T, dtype=float))
    out = np.empty(sig.shape)
    for idx in np.ndindex(sig.shape):
        out[idx] = rem_quadrature(float(sig[idx]), float(TT[idx]))[0]
    return out


def _y2_excess(beta, T, q, p):
    """``E Y2 - 1/T`` without cancellation (``sigprop.attention._cross``), elementwise over broadcast arrays."""
    sig, TT = np.broadcast_arrays(_energy_scale(beta, T, q, p), np.asarray(T, dtype=float))
    out = np.empty(sig.shape)
    for idx in np.ndindex(sig.shape):
        out[idx] = excess_y2(float(sig[idx]), float(TT[idx]))
    return out


class _CosineForm(str, enum.Enum):
    RESULT1 = "result1"
    APPENDIX = "appendix"


@theory_function
def cosine_map(rho, beta, *, form="result1"):
    r"""Cosine map of one attention layer, ``Phi_S(rho)`` (Result 1, Eq. 3), tokens with ``q = 1``.

    ``form="result1"``: ``rho / (rho + (1 - rho) Y^(2)(beta; 1, rho))`` (Eq. 3, equal to 1 for
    ``beta <= beta_c(rho) = sqrt(2/(1-rho))``); ``form="appendix"``: the printed end of App.
    B.2.3, ``rho / (1 + (1 - rho) Y^(2))`` (an erratum). Broadcasts; ``0 <= rho < 1``.
    """
    form = check_option(form, _CosineForm, "form")
    r = check_range(rho, "rho", 0.0, 1.0)
    b = check_positive(beta, "beta")
    r, b = np.broadcast_arrays(r.astype(float), b.astype(float))
    y = ipr_limit(b, np.ones_like(r), r, 2.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        if form is _CosineForm.RESULT1:
            den = r + (1.0 - r) * y
            out = np.where(den > 0, r / np.where(den > 0, den, 1.0), 1.0)
        else:
            out = r / (1.0 + (1.0 - r) * y)
    return to_output(out, rho, beta)


# ---------------------------------------------------------------- its Monte Carlo


def sample_scores(x, n, *, beta, generator=None):
    """``n`` independent draws of the score matrix ``a (n, ..., T, T)`` for fixed tokens ``x (..., T, d)``.

    Fresh ``W_Q, W_K`` (entries ``N(0, beta sqrt(log T)/d)``) per draw; Eq. (6).
    """
    check_tensor(x, "x", ndim_min=2)
    n = check_int(n, "n", minimum=1)
    check_positive(beta, "beta", allow_zero=True)
    g = as_generator(generator, x.device)
    T, d = x.shape[-2], x.shape[-1]
    s = math.sqrt(float(beta) * math.sqrt(math.log(T)) / d)
    shape = (n,) + tuple(x.shape[:-2]) + (d, d)
    w_q = s * torch.randn(shape, generator=g, device=x.device, dtype=x.dtype)
    w_k = s * torch.randn(shape, generator=g, device=x.device, dtype=x.dtype)
    return (x @ w_q.transpose(-1, -2)) @ (x @ w_k.transpose(-1, -2)).transpose(-1, -2) / math.sqrt(d)


@dataclasses.dataclass(frozen=True)
class AttentionLayerStats:
    """Named results of :func:`mc_attention_layer`, each an :class:`~sigprop.Estimate` over samples.

    ``q_in, p_in``: input overlaps; ``y2, y3``: mean ``sum_s A_ts^r`` (r = 2, 3); ``y_p``: cross-overlap
    ``sum_s A_ts A_t's`` (t != t'); ``q_out, p_out``: output overlaps averaged exactly over ``W_V``
    (``sigma_v^2 = 1``); ``rho_out``: ``p_out / q_out`` per sample (the W_V-averaged cosine, the paper's
    definition; compare :func:`sigprop.theory.cosine_map`).
    """

    q_in: Estimate
    p_in: Estimate
    y2: Estimate
    y3: Estimate
    y_p: Estimate
    q_out: Estimate
    p_out: Estimate
    rho_out: Estimate

    @classmethod
    def _from_columns(cls, est: Estimate) -> "AttentionLayerStats":
        return cls(*(est[..., i] for i in range(len(dataclasses.fields(cls)))))


class _Tokens(str, enum.Enum):
    EXACT = "exact"
    GAUSSIAN = "gaussian"


def mc_attention_layer(beta, *, T, d, n, rho=0.0, tokens="exact", generator=None, chunk=None, device=None,
                       dtype=torch.float32) -> AttentionLayerStats:
    r"""Monte Carlo of one random attention layer on tokens of cosine ``rho`` (``q_tt = 1``).

    Per sample (one draw of tokens and of ``W_Q, W_K``) the row-averaged statistics of
    :class:`AttentionLayerStats`. Compare ``q_out, p_out`` with Eqs. (20)-(23) and ``rho_out`` with
    :func:`sigprop.theory.cosine_map`.

    ``tokens="exact"`` (default, needs ``T < d``): Gram matrix exactly ``rho + (1-rho) delta``
    (:func:`sigprop.exact_equicorrelated_tokens`, also for ``-1/(T-1) <= rho < 0``; Eq. 21 holds without
    fluctuations, so
    ``q_out = p + (q-p) Y2`` per draw); ``tokens="gaussian"``: equicorrelated Gaussian tokens normalised
    to ``q_tt = 1``, whose ``O(d^{-1/2})`` overlap fluctuations correlate with the attention and add
    ``O(log T / d)`` to ``q_out``.
    """
    check_positive(beta, "beta", allow_zero=True)
    T = check_int(T, "T", minimum=2)
    d = check_int(d, "d", minimum=1)
    check_range(rho, "rho", -1.0, 1.0 - 1e-12)
    check_gram_bound(1.0, rho, T)
    kind = check_option(tokens, _Tokens, "tokens")
    check_float_dtype(dtype)
    if kind is _Tokens.EXACT and T + 1 > d:
        raise ValueError(f"tokens='exact' needs T + 1 <= d; got T={T}, d={d}")
    s = math.sqrt(float(beta) * math.sqrt(math.log(T)) / d)

    def make(m, gen):
        if kind is _Tokens.EXACT:
            return exact_equicorrelated_tokens(m, T=T, d=d, rho=float(rho), generator=gen, dtype=dtype)
        return equicorrelated_tokens(m, T=T, d=d, rho=float(rho), normalised=True, generator=gen, dtype=dtype)

    def sample(m, gen):
        x = make(m, gen)
        w_q = s * torch.randn(m, d, d, generator=gen, device=gen.device, dtype=dtype)
        w_k = s * torch.randn(m, d, d, generator=gen, device=gen.device, dtype=dtype)
        a = (x @ w_q.transpose(-1, -2)) @ (x @ w_k.transpose(-1, -2)).transpose(-1, -2)
        A = attention_weights(a.double(), scale=1.0 / math.sqrt(d))  # (m, T, T)
        xd = x.double()
        Q = xd @ xd.transpose(-1, -2) / d
        off = 1.0 - torch.eye(T, dtype=torch.float64, device=gen.device)
        npair = T * (T - 1)
        q_in = torch.diagonal(Q, dim1=-2, dim2=-1).mean(-1)
        p_in = (Q * off).sum((-1, -2)) / npair
        y2 = A.pow(2).sum(-1).mean(-1)
        y3 = A.pow(3).sum(-1).mean(-1)
        yp = ((A @ A.transpose(-1, -2)) * off).sum((-1, -2)) / npair
        out = A @ Q @ A.transpose(-1, -2)
        q_out = torch.diagonal(out, dim1=-2, dim2=-1).mean(-1)
        p_out = (out * off).sum((-1, -2)) / npair
        return torch.stack([q_in, p_in, y2, y3, yp, q_out, p_out, p_out / q_out], dim=-1)

    if chunk is not None:
        chunk = check_int(chunk, "chunk", minimum=1)
    else:
        chunk = max(1, min(n, int(4e6 // (T * T + T * d + d * d))))
    est = monte_carlo(sample, n, generator=generator, chunk=chunk, device=device, work=chunk * T * d * d)
    return AttentionLayerStats._from_columns(est)
