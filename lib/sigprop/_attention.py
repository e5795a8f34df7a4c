"""Softmax self-attention, single- or multi-head, with the variants the documents use.

For tokens ``x`` of shape ``(..., T, d)`` (rows are tokens),

    a_ts = logit_scale * (W_Q x_t) . (W_K x_s),     A = softmax_s(a),     out_t = sum_s A_ts W_V x_s

(Giorlandino & Goldt 2025, Eqs. (6)-(7); Noci et al. 2022, Eq. (1)). With a joint
query-key matrix ``w_qk`` the logits are ``logit_scale * x_t^T W_QK x_s`` (Bao et al.
2024, Eq. (1), ``logit_scale = 1/lambda``). ``logit_scale`` defaults to ``1/sqrt(d_k)``.

* ``causal=True`` masks ``s > t``.
* ``gain_control=True`` centres the values along the sequence before mixing,
  ``out_t = sum_s A_ts W_V (x_s - mean_u x_u)`` (Giorlandino & Goldt 2025, Sec. 3).

Multi-head attention is broadcasting: give weights a head axis and ``x`` a singleton
one, e.g. ``x[..., None, :, :]`` with ``w_q`` of shape ``(..., H, d_k, d)``.
The softmax runs in at least float32 (log-sum-exp via ``torch.softmax``).
"""
from __future__ import annotations

import math

import torch

from ._validate import check_same_device, check_tensor

__all__ = ["self_attention", "layer_norm"]

#: Floor under the RMS in :func:`layer_norm`, so a zero token maps to zero instead of NaN.
LN_EPS = 1e-12


def layer_norm(x: torch.Tensor, *, center: bool = False) -> torch.Tensor:
    """Token-wise normalisation without affine parameters, ``x_t / sqrt(|x_t|^2 / d)``.

    Giorlandino & Goldt 2025, Eq. (5). ``center=True`` subtracts the feature mean first
    (torch's ``LayerNorm`` without affine); for random high-dimensional tokens the two
    agree to O(1/d).
    """
    if center:
        x = x - x.mean(-1, keepdim=True)
    rms = x.pow(2).mean(-1, keepdim=True).clamp_min(LN_EPS).sqrt()
    return x / rms


def softmax_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, scale: float,
                      causal: bool = False, gain_control: bool = False):
    """Core: ``q, k`` (..., T, d_k), ``v`` (..., T, d_v) -> (out (..., T, d_v), A (..., T, T))."""
    logits = scale * (q @ k.transpose(-1, -2))  # (..., T, T)
    return _mix(logits, v, causal=causal, gain_control=gain_control)


def _mix(logits, v, *, causal, gain_control):
    work = logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits
    if causal:
        T = work.shape[-1]
        mask = torch.ones(T, T, dtype=torch.bool, device=work.device).triu(1)
        work = work.masked_fill(mask, float("-inf"))
    A = torch.softmax(work, dim=-1).to(v.dtype)
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
    d = x.shape[-1]
    if x.shape[-2] < 1:
        raise ValueError(f"x must hold at least one token; got shape {tuple(x.shape)}")
    if w_qk is not None:
        if w_q is not None or w_k is not None:
            raise ValueError("give either w_qk or (w_q, w_k), not both")
        check_tensor(w_qk, "w_qk", ndim_min=2)
        if w_qk.shape[-2:] != (d, d):
            raise ValueError(f"w_qk must have shape (..., d, d)=(..., {d}, {d}); got {tuple(w_qk.shape)}")
        check_same_device(x=x, w_qk=w_qk)
        scale = 1.0 / math.sqrt(d) if logit_scale is None else float(logit_scale)
        logits = scale * (x @ w_qk @ x.transpose(-1, -2))
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
        scale = 1.0 / math.sqrt(w_q.shape[-2]) if logit_scale is None else float(logit_scale)
        logits = scale * ((x @ w_q.transpose(-1, -2)) @ (x @ w_k.transpose(-1, -2)).transpose(-1, -2))
    if logit_scale is not None and not math.isfinite(float(logit_scale)):
        raise ValueError(f"logit_scale must be finite; got {logit_scale}")
    if w_v is None:
        v = x
    else:
        check_tensor(w_v, "w_v", ndim_min=2)
        if w_v.shape[-1] != d:
            raise ValueError(f"w_v must have shape (..., d_v, d) with d={d}; got {tuple(w_v.shape)}")
        check_same_device(x=x, w_v=w_v)
        v = x @ w_v.transpose(-1, -2)
    return _mix(logits, v, causal=causal, gain_control=gain_control)
