r"""The inverse participation ratio of random attention layers: Monte Carlo and its finite-width theory.

Giorlandino & Goldt 2025, Result 1 and Fig. 3. A random attention layer of width ``d`` (``W_Q, W_K``
entries ``N(0, beta sqrt(log T)/d)``) has rows whose logits are, given ``W_Q, W_K`` and the query,
exactly i.i.d. Gaussian over the other keys: a REM (``sigprop.attention._rem``) whose energy scale fluctuates by
``O(d^{-1/2})`` from row to row. :func:`mc_ipr_finite_width` averages the exact finite-T REM over that
spread; :func:`mc_attention_ipr` measures the IPR of real random layers with a streaming log-sum-exp
that never builds a ``T x T`` matrix (the fast kernel; ``tests/test_attention_ipr.py`` checks it against
the plain softmax of :func:`sigprop.self_attention`).

Used in ``chapters/giorlandino-goldt2025/01_rem_transition.ipynb`` and ``02_rem_in_depth.ipynb``.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from ..stats._config import as_device, float64_device, threads_for, widest_float
from ..stats._estimate import Estimate
from ..stats._montecarlo import progress_bar
from ..stats._random import as_generator, block_generator, draw_seed
from ._rem import _check_r, rem_quadrature
from ..stats._validate import check_float_dtype, check_int, check_memory, check_overlaps, check_positive, check_range

__all__ = ["mc_attention_ipr", "mc_ipr_finite_width"]


def mc_ipr_finite_width(beta, *, T: int, d: int, q: float = 1.0, p: float = 0.0, r: float = 2, samples: int = 256,
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
    dev = g.device   # a theory computation: the generator's device (the CPU for an int seed)
    gq = torch.randn(samples, d, d, generator=g, device=dev, dtype=widest_float(dev))
    gk = torch.randn(samples, d, d, generator=g, device=dev, dtype=gq.dtype)
    x = math.sqrt(float(qa)) * torch.randn(samples, d, generator=g, device=dev, dtype=gq.dtype)
    w = torch.einsum("nji,nj->ni", gk, torch.einsum("nij,nj->ni", gq, x))  # G_K^T G_Q x_t
    unit = (w.norm(dim=-1) * math.sqrt(math.log(T)) / d**1.5 * math.sqrt(float(qa - pa))).double().cpu().numpy()
    means, ses = [], []
    for b in betas:
        sig = b * unit
        grid = np.linspace(sig.min(), sig.max(), 9)
        vals = np.array([rem_quadrature(float(s_), float(T), (r,))[0] for s_ in grid])
        y = CubicSpline(grid, vals)(sig) if np.ptp(grid) > 0 else np.full_like(sig, vals[0])
        means.append(y.mean())
        ses.append(y.std(ddof=1) / math.sqrt(samples))
    cpu = torch.device("cpu")
    return Estimate(torch.tensor(means, dtype=torch.float64, device=cpu), torch.tensor(ses, dtype=torch.float64, device=cpu),
                    samples)


#: Keys are drawn in blocks of this many tokens, each from its own seed, so results do not
#: depend on the memory chunk (a multiple of the block).
KEY_BLOCK = 1024


class _Draws:
    """The random objects of :func:`mc_attention_ipr`, drawn block by block: init ``i``'s weights and shared token
    component from block 0 of its seed, the keys of block ``b`` from block ``b + 1`` (so the numbers do not
    depend on the memory chunk)."""

    def __init__(self, base, *, inits, T, d, q, rho, device, dtype):
        self.base, self.inits, self.T, self.d, self.q, self.rho = base, inits, T, d, q, rho
        self.device, self.dtype = device, dtype
        self.n_blocks = -(-T // KEY_BLOCK)
        gq, gk, common = [], [], []
        for i in range(inits):
            g = self.gen(i, 0)
            gq.append(torch.randn(d, d, generator=g, device=device, dtype=dtype))
            gk.append(torch.randn(d, d, generator=g, device=device, dtype=dtype))
            common.append(torch.randn(1, d, generator=g, device=device, dtype=dtype))
        self.wq, self.wk = torch.stack(gq), torch.stack(gk)  # (n, d, d)
        self.shared = math.sqrt(rho) * torch.stack(common)  # (n, 1, d)
        self.first = self.keys(0)

    def gen(self, i, b):
        return block_generator(self.base, i * (self.n_blocks + 1) + b, self.device)

    def keys(self, b, out=None):
        """x_s = sqrt(q) (sqrt(rho) g + sqrt(1 - rho) z_s) for the keys of block b, (n, size, d), into ``out``."""
        size = min(KEY_BLOCK, self.T - b * KEY_BLOCK)
        if b == 0 and out is not None and hasattr(self, "first"):
            out.copy_(self.first)
            return out
        z = torch.empty(self.inits, size, self.d, device=self.device, dtype=self.dtype) if out is None else out
        for i in range(self.inits):
            torch.randn(size, self.d, generator=self.gen(i, b + 1), device=self.device, dtype=self.dtype, out=z[i])
        return z.mul_(math.sqrt(1 - self.rho)).add_(self.shared).mul_(math.sqrt(self.q))

    def query_vectors(self, queries):
        """``W_Q x_t`` of the first ``queries`` tokens (several key blocks when queries > KEY_BLOCK), (n, Q, d)."""
        qtok = torch.cat([self.first] + [self.keys(b) for b in range(1, -(-queries // KEY_BLOCK))], dim=1)
        return qtok[:, :queries] @ self.wq.transpose(-1, -2)


def _power_sum(e, r_, pw, e_sum):
    """``sum_s e_s^r`` over the last axis (integer r up to 4 by products into the buffer ``pw``)."""
    if r_ == 1:
        return e_sum
    if r_ == int(r_) and 2 <= r_ <= 4:
        torch.mul(e, e, out=pw)
        for _ in range(int(r_) - 2):
            pw.mul_(e)
        return pw.sum(-1)
    return torch.pow(e, r_, out=pw).sum(-1)


def _streamed_sums(draws: _Draws, qv, bs, rs, chunk, bar):
    r"""Streaming log-sum-exp over key chunks (issue 9): ``(S_1, S_r)`` of every beta, each relative to its running
    maximum. The logits of every beta are ``b * base`` with ``b = beta * unit > 0``, so each chunk's maximum is
    ``b max(base)`` and ``base - max(base)`` is shared by all betas. For each beta, with running maximum ``m``,
    sums ``S_r = sum_s exp(r (a_s - m))`` and a chunk maximum ``b M_c``, the update is ``m' = max(m, b M_c)``,
    ``S_r <- S_r exp(r (m - m')) + exp(r (b M_c - m')) sum_{s in chunk} exp(r b (base_s - M_c))``. One beta at a
    time on reused (inits, queries, chunk) buffers: peak memory O(inits queries chunk), independent of beta, T."""
    inits, queries = qv.shape[:2]
    shape, acc, device = (len(bs), inits, queries), widest_float(draws.device), draws.device
    run_max = torch.full(shape, -math.inf, device=device, dtype=acc)
    s1 = torch.zeros(shape, device=device, dtype=acc)
    sr = torch.zeros(*shape, len(rs), device=device, dtype=acc)
    per_chunk, width = chunk // KEY_BLOCK, min(chunk, draws.n_blocks * KEY_BLOCK)
    # reused buffers: fresh multi-MB allocations each step cost more than the arithmetic (page faults)
    kbuf = torch.empty(inits, width, draws.d, device=device, dtype=draws.dtype)
    ebuf = torch.empty(inits, queries, width, device=device, dtype=acc)
    pbuf = torch.empty_like(ebuf) if any(r_ != 1 for r_ in rs) else None
    for start in range(0, draws.n_blocks, per_chunk):
        c = 0
        for b in range(start, min(draws.n_blocks, start + per_chunk)):
            size = min(KEY_BLOCK, draws.T - b * KEY_BLOCK)
            draws.keys(b, out=kbuf[:, c:c + size])
            c += size
        rel = (qv @ (kbuf[:, :c] @ draws.wk.transpose(-1, -2)).transpose(-1, -2)).to(acc)  # (n, Q, c) logits / b
        top = rel.amax(-1)  # (n, Q)
        rel.sub_(top[..., None])  # <= 0
        e, pw = ebuf[..., :c], (None if pbuf is None else pbuf[..., :c])
        for j, b_ in enumerate(bs):
            new_max = torch.maximum(run_max[j], b_ * top)
            old, here = torch.exp(run_max[j] - new_max), torch.exp(b_ * top - new_max)
            torch.mul(rel, b_, out=e).exp_()  # entries in (0, 1]
            e_sum = e.sum(-1)
            s1[j] = s1[j] * old + e_sum * here
            for k, r_ in enumerate(rs):
                sr[j, ..., k] = sr[j, ..., k] * old**r_ + _power_sum(e, r_, pw, e_sum) * here**r_
            run_max[j] = new_max
        if bar is not None:
            bar.update(min(draws.n_blocks, start + per_chunk) - start)
    return s1, sr


def mc_attention_ipr(beta, *, T: int, d: int, inits: int = 16, queries: int = 32, r=(2,), q: float = 1.0,
                     p: float = 0.0, chunk: int = 8192, generator=None, device=None,
                     dtype=torch.float32, progress: bool | None = None) -> Estimate:
    """Monte Carlo of the mean IPR of attention rows in random attention layers.

    For each of ``inits`` independent draws of ``W_Q, W_K`` (entries ``N(0, beta sqrt(log T)/d)``)
    and of a sequence of ``T`` tokens ``x_s = sqrt(q)(sqrt(p/q) g + sqrt(1-p/q) z_s)`` in
    ``R^d``, the first ``queries`` tokens attend over all ``T`` tokens (themselves included);
    ``sum_s A_ts^r`` is streamed over key chunks with a running log-sum-exp (:func:`_streamed_sums`), so
    memory is ``O(inits queries chunk)`` (one beta at a time) and no ``T x T`` matrix is built.

    Returns an :class:`Estimate` of shape ``(len(beta), len(r))``: mean over queries and
    inits, standard error over the ``inits`` independent networks (rows of one network are
    correlated), and ``.samples`` ``(inits, len(beta), len(r))``: all beta are measured on the same
    networks, so a curve over beta needs :func:`sigprop.curve_agreement`. The logits of all ``beta`` are
    computed from one draw (they scale linearly in beta), so the curves are smooth in beta.
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
    check_float_dtype(dtype)
    chunk = check_int(chunk, "chunk", minimum=KEY_BLOCK)
    if chunk % KEY_BLOCK:
        raise ValueError(f"chunk must be a multiple of {KEY_BLOCK}; got {chunk}")
    device = as_device(device)
    check_memory(inits * (min(chunk, T) * (d + 3 * queries) + 2 * d * d) * 8.0, "mc_attention_ipr at these sizes")
    bar = progress_bar(-(-T // KEY_BLOCK), desc="keys") if progress or (
        progress is None and T * inits * queries * len(betas) > 2e9) else None
    unit = math.sqrt(math.log(T)) / d / math.sqrt(d)  # logits = beta * unit * (G_Q x_t).(G_K x_s)
    with threads_for(inits * min(chunk, T) * d * d):  # the key products (issue 29, item 11)
        draws = _Draws(draw_seed(as_generator(generator)), inits=inits, T=T, d=d, q=float(q), rho=float(p / q),
                       device=device, dtype=dtype)
        s1, sr = _streamed_sums(draws, draws.query_vectors(queries), [float(v) for v in betas * unit], rs, chunk, bar)
    if bar is not None:
        bar.close()
    y = sr / s1[..., None] ** torch.as_tensor(rs, device=device, dtype=s1.dtype)  # (B, n, Q, R)
    per_init = y.mean(2).to(float64_device(device), torch.float64)  # (B, n, R)
    mean = per_init.mean(1)
    se = per_init.std(1, unbiased=True) / math.sqrt(inits)
    return Estimate(mean, se, inits, per_init.movedim(1, 0))  # samples (inits, B, R): for curve-level tests
