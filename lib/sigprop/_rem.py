r"""Self-attention as a Random Energy Model (Giorlandino & Goldt 2025, Sec. 2.1, App. B.1-B.3).

With ``W_Q, W_K`` entries of variance ``beta sqrt(log T) / d`` and logits
``a_ts = (W_Q x_t).(W_K x_s) / sqrt(d)``, the logits of one attention row are Gaussian with
``Cov(a_ts, a_ts') = beta^2 log T q_tt q_ss'`` (App. B.1, Eq. (9)). For tokens with norm
``q`` and pairwise overlap ``p`` the part shared by all keys (variance ``beta^2 log T q p``)
cancels in the softmax, leaving a REM with ``T = e^N`` independent energies of variance
``beta^2 N q (q - p)``. Its condensation point is

.. math::  \beta_c(q, p) = \sqrt{2 / (q (q - p))}      \qquad \text{(Result 1)}

and the mean inverse participation ratio ``Y^(r) = E sum_s A_ts^r`` tends, as T -> infinity, to

.. math::  Y^{(r)}(\beta) = \frac{\Gamma(r - m)}{\Gamma(r)\Gamma(1 - m)},\quad m = \beta_c/\beta < 1,

and to 0 for ``beta <= beta_c`` (Poisson-Dirichlet weights of the frozen REM; for r = 2 this is
``1 - beta_c / beta``, Result 1, Eq. (4)). :func:`ipr_finite` gives the exact value at
finite T for i.i.d. Gaussian energies, by quadrature, and :func:`mc_attention_ipr` measures
it on real random attention layers with a streaming log-sum-exp, never building a T x T matrix.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from scipy.special import gammaln

from ._config import default_device
from ._estimate import Estimate
from ._random import as_generator, block_generator, draw_seed
from ._validate import (check_int, check_overlaps, check_positive, check_range, check_seq_len, is_torch,
                        to_output)

__all__ = ["mc_attention_ipr", "ipr_finite_width"]
__theory__ = ["beta_c", "ipr", "ipr_finite"]


def _beta_c(q, p):
    gap = q * (q - p)
    with np.errstate(divide="ignore"):
        return np.where(gap > 0, np.sqrt(2.0 / np.where(gap > 0, gap, 1.0)), np.inf)


def beta_c(q, p):
    """Critical query/key scale ``sqrt(2 / (q (q - p)))`` (Giorlandino & Goldt 2025, Result 1).

    ``q > 0`` is the mean token norm ``|x|^2/d``, ``p`` the mean pairwise overlap, ``|p| < q``.
    """
    qa, pa = check_overlaps(q, p, strict=True)
    return to_output(_beta_c(qa, pa), q, p)


def _check_r(r):
    r_arr = check_positive(r, "r")
    if np.any(r_arr < 1):
        raise ValueError(f"r (order of the participation ratio) must be >= 1; got {r}")
    return r_arr


def _ipr_limit(beta, q, p, r):
    m = _beta_c(q, p) / beta
    frozen = m < 1
    ms = np.where(frozen, m, 0.5)
    val = np.exp(gammaln(r - ms) - gammaln(r) - gammaln(1 - ms))
    return np.where(frozen, val, np.where(r == 1, 1.0, 0.0))


def ipr(beta, q=1.0, p=0.0, r=2):
    """T -> infinity mean inverse participation ratio of an attention row (Result 1, Eq. (4)).

    ``Y^(2) = max(0, 1 - beta_c / beta)``; general order ``r >= 1``:
    ``Gamma(r - m) / (Gamma(r) Gamma(1 - m))`` with ``m = beta_c(q, p) / beta`` for ``m < 1``
    (``r = 3``: ``(1 - m)(2 - m)/2``), 0 otherwise. Broadcasts over all arguments.
    """
    b = check_positive(beta, "beta")
    qa, pa = check_overlaps(q, p, strict=False)
    ra = _check_r(r)
    return to_output(_ipr_limit(b, qa, pa, ra), beta, q, p, r)


#: Gaussian nodes for the quadrature in :func:`ipr_finite` cover |z| <= max(_Z_MAX, sqrt(2 log T) + 4),
#: beyond the largest of T standard Gaussians.
_Z_MAX = 9.0


def _ipr_finite_one(sigma, T, r):
    """E sum_s A_s^r for T i.i.d. energies N(0, sigma^2), by
    E[e^{r a}/Z^r] = Gamma(r)^-1 int_0^inf t^{r-1} E[e^{r a - t e^a}] E[e^{-t e^a}]^{T-1} dt, t = e^s."""
    if sigma == 0:
        return T ** (1.0 - r)
    # trapezoid rules on smooth, rapidly decaying integrands converge spectrally: these steps
    # give ~1e-11 relative accuracy (checked against 12x finer grids)
    hz = min(0.06, 0.75 / sigma)
    z_max = max(_Z_MAX, math.sqrt(2 * math.log(T)) + 4.0)
    z = np.arange(-z_max, z_max + hz / 2, hz)
    wz = np.exp(-0.5 * z**2) / math.sqrt(2 * math.pi) * hz
    hs = min(0.2, 4.0 / max(1.0, sigma))
    s_lo = -sigma * z_max - 60.0 / r
    s_hi = math.log(T) + 10.0 + sigma * 2.0
    s = np.arange(s_lo, s_hi, hs)
    total = 0.0
    for chunk in np.array_split(s, max(1, len(s) * len(z) // 2_000_000 + 1)):
        w = sigma * z[None, :] + chunk[:, None]  # (S, Z)
        ew = np.exp(np.minimum(w, 700.0))
        head = (wz * np.exp(r * w - ew)).sum(1)  # e^{rs} E[e^{ra - t e^a}]
        miss = (wz * -np.expm1(-ew)).sum(1)  # 1 - E[e^{-t e^a}], accurate when small
        keep = (wz * np.exp(-ew)).sum(1)  # E[e^{-t e^a}], accurate when small
        log_l = np.where(miss < 0.5, np.log1p(-np.minimum(miss, 0.5)), np.log(np.maximum(keep, 1e-300)))
        total += np.sum(head * np.exp((T - 1) * log_l)) * hs
    return float(T * total / math.exp(gammaln(r)))


def ipr_finite(beta, T, q=1.0, p=0.0, r=2):
    """Exact finite-T mean IPR ``E sum_s A_s^r`` for the REM behind Result 1.

    Energies are i.i.d. ``N(0, beta^2 log T q (q - p))`` (App. B.1 after removing the part
    shared by all keys). Tends to :func:`ipr` as T -> infinity, slowly (in log T), and equals
    ``T^(1-r)`` at beta -> 0. Quadrature; accurate to ~1e-6 for
    ``beta sqrt(q (q - p) log T) <= 60``. Broadcasts over ``beta`` (other arguments scalar).
    """
    b = check_positive(beta, "beta")
    Ta = check_seq_len(T)
    qa, pa = check_overlaps(q, p, strict=False)
    ra = _check_r(r)
    if Ta.ndim or qa.ndim or pa.ndim or ra.ndim:
        raise ValueError("ipr_finite broadcasts over beta only; pass scalar T, q, p and r")
    scale = math.sqrt(max(float(qa * (qa - pa)), 0.0) * math.log(float(Ta)))
    sig = b * scale
    if np.any(sig > 60):
        raise ValueError(f"ipr_finite is accurate for beta*sqrt(q(q-p) log T) <= 60; got {float(np.max(sig)):.3g}")
    out = np.vectorize(lambda s_: _ipr_finite_one(float(s_), float(Ta), float(ra)))(sig)
    return to_output(np.asarray(out, dtype=float), beta)


def ipr_finite_width(beta, *, T: int, d: int, q: float = 1.0, p: float = 0.0, r: float = 2, samples: int = 256,
                     generator=None) -> Estimate:
    """Finite-T REM prediction including the finite-width spread of the logit scale.

    In a width-``d`` layer the logits of query ``t`` over the other keys are exactly i.i.d.
    Gaussian given ``W_Q, W_K, x_t`` (Gaussian tokens), with standard deviation
    ``sigma_t = beta sqrt(log T) d^(-3/2) |G_K^T G_Q x_t| sqrt(q - p)`` (``G`` standard Gaussian),
    whose mean square is ``beta^2 log T q (q - p)`` and whose relative spread is O(d^(-1/2)).
    Averages :func:`ipr_finite` over ``samples`` draws of ``sigma_t`` (a cubic spline in
    sigma); the standard error is that of this average. The one remaining difference from a
    real layer is the query's own key (an O(1/T) effect).
    """
    from scipy.interpolate import CubicSpline

    betas = np.atleast_1d(check_positive(beta, "beta")).astype(float)
    T = check_int(T, "T", minimum=2)
    d = check_int(d, "d", minimum=1)
    samples = check_int(samples, "samples", minimum=2)
    qa, pa = check_overlaps(q, p, strict=False)
    r = float(_check_r(r))
    g = as_generator(generator)
    gq = torch.randn(samples, d, d, generator=g, dtype=torch.float64)
    gk = torch.randn(samples, d, d, generator=g, dtype=torch.float64)
    x = math.sqrt(float(qa)) * torch.randn(samples, d, generator=g, dtype=torch.float64)
    w = torch.einsum("nji,nj->ni", gk, torch.einsum("nij,nj->ni", gq, x))  # G_K^T G_Q x_t
    unit = (w.norm(dim=-1) * math.sqrt(math.log(T)) / d**1.5 * math.sqrt(float(qa - pa))).numpy()
    means, ses = [], []
    for b in betas:
        sig = b * unit
        grid = np.linspace(sig.min(), sig.max(), 9)
        vals = np.array([_ipr_finite_one(float(s_), float(T), r) for s_ in grid])
        y = CubicSpline(grid, vals)(sig) if np.ptp(grid) > 0 else np.full_like(sig, vals[0])
        means.append(y.mean())
        ses.append(y.std(ddof=1) / math.sqrt(samples))
    return Estimate(torch.tensor(means, dtype=torch.float64), torch.tensor(ses, dtype=torch.float64), samples)


# ---------------------------------------------------------------- Monte Carlo


#: Keys are drawn in blocks of this many tokens, each from its own seed, so results do not
#: depend on the memory chunk (a multiple of the block).
KEY_BLOCK = 1024


def mc_attention_ipr(beta, *, T: int, d: int, inits: int = 16, queries: int = 32, r=(2,), q: float = 1.0,
                     p: float = 0.0, chunk: int = 8192, generator=None, device=None,
                     dtype=torch.float32, progress: bool | None = None) -> Estimate:
    """Monte Carlo of the mean IPR of attention rows in random attention layers.

    For each of ``inits`` independent draws of ``W_Q, W_K`` (entries ``N(0, beta sqrt(log T)/d)``)
    and of a sequence of ``T`` tokens ``x_s = sqrt(q)(sqrt(p/q) g + sqrt(1-p/q) z_s)`` in
    ``R^d``, the first ``queries`` tokens attend over all ``T`` tokens (themselves included);
    ``sum_s A_ts^r`` is streamed over key chunks with a running log-sum-exp, so memory is
    ``O(inits queries chunk)`` (one beta at a time) and no ``T x T`` matrix is built.

    Returns an :class:`Estimate` of shape ``(len(beta), len(r))``: mean over queries and
    inits, standard error over the ``inits`` independent networks (rows of one network are
    correlated). The logits of all ``beta`` are computed from one draw (they scale linearly
    in beta), so the curves are smooth in beta.
    """
    betas = np.atleast_1d(check_positive(beta, "beta")).astype(float)
    T = check_int(T, "T", minimum=2)
    d = check_int(d, "d", minimum=1)
    inits = check_int(inits, "inits", minimum=2)
    queries = check_int(queries, "queries", minimum=1)
    if queries > T:
        raise ValueError(f"queries must be <= T={T}; got {queries}")
    rs = np.atleast_1d(_check_r(r)).astype(float)
    check_overlaps(q, p, strict=False)
    check_range(p / q, "p/q", 0.0, 1.0)
    chunk = check_int(chunk, "chunk", minimum=KEY_BLOCK)
    if chunk % KEY_BLOCK:
        raise ValueError(f"chunk must be a multiple of {KEY_BLOCK}; got {chunk}")
    device = default_device() if device is None else torch.device(device)
    base = draw_seed(as_generator(generator))
    rho = p / q
    n_blocks = -(-T // KEY_BLOCK)

    def gen(i, b):
        return block_generator(base, i * (n_blocks + 1) + b, device)

    # per init: weights and the shared component (block index 0), keys from blocks 1..n_blocks
    gq, gk, common = [], [], []
    for i in range(inits):
        g = gen(i, 0)
        gq.append(torch.randn(d, d, generator=g, device=device, dtype=dtype))
        gk.append(torch.randn(d, d, generator=g, device=device, dtype=dtype))
        common.append(torch.randn(1, d, generator=g, device=device, dtype=dtype))
    wq, wk, common = torch.stack(gq), torch.stack(gk), torch.stack(common)  # (n, d, d), (n, 1, d)

    shared = math.sqrt(rho) * common  # (n, 1, d)

    def keys(b, out=None):
        # x_s = sqrt(q) (sqrt(rho) g + sqrt(1 - rho) z_s) for the keys of block b, written into ``out``
        size = min(KEY_BLOCK, T - b * KEY_BLOCK)
        z = torch.empty(inits, size, d, device=device, dtype=dtype) if out is None else out
        for i in range(inits):
            torch.randn(size, d, generator=gen(i, b + 1), device=device, dtype=dtype, out=z[i])
        return z.mul_(math.sqrt(1 - rho)).add_(shared).mul_(math.sqrt(q))  # (n, size, d)

    first = keys(0)
    qv = first[:, :queries] @ wq.transpose(-1, -2)  # (n, Q, d)
    unit = math.sqrt(math.log(T)) / d / math.sqrt(d)  # logits = beta * unit * (G_Q x_t).(G_K x_s)
    # Streaming log-sum-exp (issue 9): the logits of every beta are b * base with b = beta * unit > 0,
    # so each key chunk's maximum is b * max(base) and ``base - max(base)`` is shared by all betas
    # (``rel`` below).
    # For each beta, with running maximum m, sums S_r = sum_s exp(r (a_s - m)) and a chunk maximum
    # b * M_c, the update is m' = max(m, b M_c),
    #     S_r <- S_r exp(r (m - m')) + exp(r (b M_c - m')) sum_{s in chunk} exp(r b (base_s - M_c)).
    # One beta at a time on reused (inits, queries, chunk) float64 buffers: peak memory is
    # O(inits queries chunk), independent of len(beta) and T.
    bs = [float(v) for v in betas * unit]
    shape = (len(betas), inits, queries)
    run_max = torch.full(shape, -math.inf, device=device, dtype=torch.float64)
    s1 = torch.zeros(shape, device=device, dtype=torch.float64)
    sr = torch.zeros(*shape, len(rs), device=device, dtype=torch.float64)
    per_chunk = chunk // KEY_BLOCK
    width = min(chunk, n_blocks * KEY_BLOCK)
    # reused buffers: fresh multi-MB allocations each step cost more than the arithmetic (page faults)
    kbuf = torch.empty(inits, width, d, device=device, dtype=dtype)
    ebuf = torch.empty(inits, queries, width, device=device, dtype=torch.float64)
    pbuf = torch.empty_like(ebuf) if any(r_ != 1 for r_ in rs) else None
    bar = None
    if progress or (progress is None and T * inits * queries * len(betas) > 2e9):
        from ._montecarlo import progress_bar
        bar = progress_bar(n_blocks, desc="keys")
    for start in range(0, n_blocks, per_chunk):
        c = 0
        for b in range(start, min(n_blocks, start + per_chunk)):
            size = min(KEY_BLOCK, T - b * KEY_BLOCK)
            if b == 0:
                kbuf[:, :size] = first
            else:
                keys(b, out=kbuf[:, c:c + size])
            c += size
        kv = kbuf[:, :c] @ wk.transpose(-1, -2)
        rel = (qv @ kv.transpose(-1, -2)).double()  # (n, Q, c) logits / b
        del kv
        top = rel.amax(-1)  # (n, Q)
        rel.sub_(top[..., None])  # <= 0
        e, pw = ebuf[..., :c], (None if pbuf is None else pbuf[..., :c])
        for j, b_ in enumerate(bs):
            chunk_max = b_ * top
            new_max = torch.maximum(run_max[j], chunk_max)
            old = torch.exp(run_max[j] - new_max)
            here = torch.exp(chunk_max - new_max)
            torch.mul(rel, b_, out=e).exp_()  # entries in (0, 1]
            e_sum = e.sum(-1)
            s1[j] = s1[j] * old + e_sum * here
            for k, r_ in enumerate(rs):
                if r_ == 1:
                    part = e_sum
                elif r_ == int(r_) and 2 <= r_ <= 4:
                    torch.mul(e, e, out=pw)
                    for _ in range(int(r_) - 2):
                        pw.mul_(e)
                    part = pw.sum(-1)
                else:
                    part = torch.pow(e, r_, out=pw).sum(-1)
                sr[j, ..., k] = sr[j, ..., k] * old**r_ + part * here**r_
            run_max[j] = new_max
        if bar is not None:
            bar.update(min(n_blocks, start + per_chunk) - start)
    if bar is not None:
        bar.close()
    rt = torch.as_tensor(rs, device=device, dtype=torch.float64)
    y = sr / s1[..., None] ** rt  # (B, n, Q, R)
    per_init = y.mean(2)  # (B, n, R)
    mean = per_init.mean(1)
    se = per_init.std(1, unbiased=True) / math.sqrt(inits)
    return Estimate(mean, se, inits)
