"""Measures: pure functions of tensors (no sampling, no mutation).

Token geometry (Giorlandino & Goldt 2025, Eq. (1); Noci et al. 2022, Eq. (5)):
``q_ts = x_t . x_s / d``; ``q`` is the mean of the diagonal, ``p`` of the off-diagonal;
cosine ``rho_ts = q_ts / sqrt(q_tt q_ss)``.

Attention rows (Giorlandino & Goldt 2025, Eq. (2)): inverse participation ratio
``Y^(r)_t = sum_s A_ts^r`` and Shannon entropy ``-sum_s A_ts log A_ts`` (nats).
"""
from __future__ import annotations

import torch

from ._validate import TOL, check_real, check_tensor

__all__ = [
    "token_overlaps",
    "cosine_matrix",
    "mean_cosine",
    "attention_ipr",
    "attention_entropy",
    "cross_token_covariance",
    "stable_rank",
]

#: Floor under token norms in :func:`cosine_matrix` (a zero token has cosine 0 with everything).
NORM_EPS = 1e-30


def _work(x):
    """Gram matrices and norms accumulate in at least float32 (float16 products overflow at ~6.5e4)."""
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


def _tokens(x, name="x"):
    check_tensor(x, name, ndim_min=2)
    if x.shape[-2] < 2:
        raise ValueError(f"{name} needs T >= 2 tokens along dim -2; got shape {tuple(x.shape)}")
    return x


def _offdiag_mean(m):
    T = m.shape[-1]
    total = m.sum((-1, -2)) - torch.diagonal(m, dim1=-2, dim2=-1).sum(-1)
    return total / (T * (T - 1))


def token_overlaps(x: torch.Tensor):
    """``(q, p)``: mean diagonal and mean off-diagonal of ``x x^T / d``; x (..., T, d) -> two (...) tensors."""
    _tokens(x)
    xw = _work(x)
    gram = xw @ xw.transpose(-1, -2) / x.shape[-1]
    return torch.diagonal(gram, dim1=-2, dim2=-1).mean(-1), _offdiag_mean(gram)


def cosine_matrix(x: torch.Tensor) -> torch.Tensor:
    """(..., T, d) -> (..., T, T) cosine similarities between tokens."""
    _tokens(x)
    xw = _work(x)
    # divide by the largest entry first, so that the norm of huge tokens cannot overflow
    xw = xw / xw.abs().amax(-1, keepdim=True).clamp_min(torch.finfo(xw.dtype).tiny)
    u = xw / xw.norm(dim=-1, keepdim=True).clamp_min(NORM_EPS)
    return u @ u.transpose(-1, -2)


def mean_cosine(x: torch.Tensor) -> torch.Tensor:
    """(..., T, d) -> (...): average cosine similarity over token pairs t != s."""
    return _offdiag_mean(cosine_matrix(x))


def _rows(A, name="A"):
    check_tensor(A, name, ndim_min=1)
    if A.shape[-1] < 1:
        raise ValueError(f"{name} must have a non-empty last dimension")
    if bool((A < 0).any()):
        raise ValueError(f"{name} must be non-negative (attention weights)")
    rtol = TOL.get(A.dtype, TOL[torch.float32])[0]
    total = _work(A).sum(-1)
    if A.numel() and bool(((total - 1).abs() > max(rtol, 1e-6) * A.shape[-1]).any()):
        worst = float((total - 1).abs().max())
        raise ValueError(f"{name} must have rows that sum to 1 (attention weights); a row sums to 1 {'+-'} {worst:.3g}")
    return A


def attention_ipr(A: torch.Tensor, r: float = 2) -> torch.Tensor:
    """Inverse participation ratio of order r of each row: (..., T) -> (...), in [T^(1-r), 1]."""
    _rows(A)
    r = check_real(r, "r", minimum=1.0)
    return _work(A).pow(r).sum(-1)


def attention_entropy(A: torch.Tensor) -> torch.Tensor:
    """Shannon entropy (nats) of each row, with 0 log 0 = 0: (..., T) -> (...), in [0, log T]."""
    _rows(A)
    A = _work(A)
    return -torch.where(A > 0, A * A.clamp_min(torch.finfo(A.dtype).tiny).log(), torch.zeros_like(A)).sum(-1)


def cross_token_covariance(v: torch.Tensor) -> torch.Tensor:
    """Covariance over samples between token positions: v (n, N, d) -> (N, N, d, d).

    Entry ``[i, j]`` is ``Cov(v_i, v_j) = E[(v_i - E v_i)(v_j - E v_j)^T]`` (unbiased, n - 1).
    """
    check_tensor(v, "v", ndim_min=3)
    if v.ndim != 3:
        raise ValueError(f"v must have shape (samples, N, d); got {tuple(v.shape)}")
    n = v.shape[0]
    if n < 2:
        raise ValueError(f"need at least 2 samples; got {n}")
    c = v - v.mean(0, keepdim=True)
    return torch.einsum("nid,nje->ijde", c, c) / (n - 1)


def stable_rank(x: torch.Tensor) -> torch.Tensor:
    """``||X||_F^2 / ||X||_2^2`` of each (T, d) matrix: (..., T, d) -> (...), in [1, min(T, d)]."""
    check_tensor(x, "x", ndim_min=2)
    xw = _work(x)
    xw = xw / xw.abs().amax((-1, -2), keepdim=True).clamp_min(torch.finfo(xw.dtype).tiny)   # scale-free
    s = torch.linalg.matrix_norm(xw, ord=2)
    return torch.linalg.matrix_norm(xw, ord="fro").pow(2) / s.pow(2).clamp_min(NORM_EPS)
