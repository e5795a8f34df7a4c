"""Resampling kernels of :func:`sigprop.curve_agreement`: studentised statistics over resampled initialisations.

Sign flips (Fisher 1935; Hemerik & Goeman 2018) and the bootstrap-t (Efron & Tibshirani 1993), vectorised
over resamples in chunks of a fixed memory budget; the statistics ``mean_z``, ``chi2`` and ``max_z`` and
their min-P calibration (Westfall & Young 1993). See ``sigprop.stats._agreement`` for the maths.
"""
from __future__ import annotations

import math

import numpy as np
import torch

#: Float64 elements per temporary array in the resampling kernel (32 MiB each).
_CHUNK_ELEMENTS = 2**22

def _z(mean, var, n):
    """z = mean / sqrt(var / n), elementwise; 0 where both are 0, +-inf where only var is 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        z = mean * math.sqrt(n) / np.sqrt(var)
    return np.where(var > 0, z, np.where(mean == 0, 0.0, np.copysign(np.inf, mean)))


def _positions(k):
    """Standardised point positions u (mean 0, mean square 1; zeros when k = 1), shape (k,)."""
    u = np.arange(k, dtype=float) - (k - 1) / 2
    scale = math.sqrt(np.mean(u * u))
    return u / scale if scale > 0 else u


def _raw_stats(z, u):
    """(B, k) z-scores -> (B, 4): mean z, mean(u z) (the OLS slope of z on u), sum z^2, max |z|."""
    out = np.empty((z.shape[0], 4))
    with np.errstate(invalid="ignore"):
        out[:, 0] = z.mean(1)
        out[:, 1] = z @ u / z.shape[1]
    out[:, 2] = np.einsum("bk,bk->b", z, z)
    out[:, 3] = np.abs(z).max(1)
    return out


def _signflip_stats(d, signs, u):
    """Studentised statistics of the sign-flipped deviations (eps_i d_i), one row per pattern."""
    n, k = d.shape
    second = np.einsum("ik,ik->k", d, d) / n  # (k,) unchanged by sign flips
    chunk = max(1, _CHUNK_ELEMENTS // max(n, k))
    out = []
    for start in range(0, len(signs), chunk):
        m = signs[start:start + chunk] @ d / n  # (b, k) means of the flipped rows
        var = n / (n - 1) * np.clip(second - m * m, 0.0, None)  # unbiased variance of the flipped rows
        out.append(_raw_stats(_z(m, var, n), u))
    return np.concatenate(out)


def _bootstrap_stats(centred, counts, u):
    """Studentised statistics z* = sqrt(n)(mean* - mean)/s* of rows resampled with ``counts``."""
    n, k = centred.shape
    sq = centred * centred
    chunk = max(1, _CHUNK_ELEMENTS // max(n, k))
    out = []
    for start in range(0, len(counts), chunk):
        w = counts[start:start + chunk]
        m = w @ centred / n  # (b, k)
        var = n / (n - 1) * np.clip(w @ sq / n - m * m, 0.0, None)
        out.append(_raw_stats(_z(m, var, n), u))
    return np.concatenate(out)


def _all_signs(n):
    """All 2^(n-1) - 1 non-identity sign patterns with eps_0 = +1, shape (2^(n-1) - 1, n)."""
    codes = np.arange(1, 2 ** (n - 1))[:, None]
    bits = (codes >> np.arange(n - 1)[None]) & 1
    return np.concatenate([np.ones((len(codes), 1)), 1.0 - 2.0 * bits], axis=1)


def _random_signs(n, size, gen):
    bits = torch.randint(0, 2, (size, n), generator=gen, device=gen.device).cpu().numpy()
    return 1.0 - 2.0 * bits


def _bootstrap_counts(n, size, gen):
    """How often each row is drawn in each of ``size`` resamples with replacement, (size, n)."""
    idx = torch.randint(0, n, (size, n), generator=gen, device=gen.device).cpu().numpy()
    flat = idx + n * np.arange(size)[:, None]
    return np.bincount(flat.ravel(), minlength=size * n).reshape(size, n).astype(float)


def _statistics(raw):
    """Pool (N, 4) of (mean z, slope, sum z^2, max|z|) -> (N, 3) of |mean z|, chi2, max_z.

    Non-finite entries (points with no spread that disagree) make a statistic +inf.
    """
    out = np.stack([np.abs(raw[:, 0]), raw[:, 2], raw[:, 3]], axis=1)
    return np.nan_to_num(out, nan=np.inf)  # +inf and -inf in one mean: infinitely bad


def _calibrate(pool, level):
    """min-P combination over the pool (row 0 observed, rows 1.. resampled); see the module docstring.

    Returns the per-statistic p-values, the combined p, the per-statistic thresholds and r:
    a statistic fails alone iff it exceeds the r-th largest resampled value, and the curve
    passes iff p >= level iff no statistic exceeds its threshold.
    """
    size = len(pool)
    ordered = np.sort(pool, axis=0)
    exceed = np.stack([size - np.searchsorted(ordered[:, s], pool[:, s], side="left")
                       for s in range(pool.shape[1])], axis=1)  # (N, S): pool members >= each value
    p_each = exceed[0] / size
    q = exceed.min(1)
    p = np.count_nonzero(q <= q[0]) / size
    allowed = np.count_nonzero(np.arange(1, size + 1) / size < level)  # largest count with count/N < level
    r = int(np.sort(q)[allowed]) - 1
    descending = -np.sort(-pool[1:], axis=0)
    thresholds = descending[r - 1] if r >= 1 else np.full(pool.shape[1], np.inf)
    return p_each, p, thresholds, r


def _k_eff(x, constant):
    """k'^2 / var(sum_j (x_ij - mean_j)/s_j) over the k' points that vary, clipped to [1, k']."""
    xv = x[:, ~constant]
    kv = xv.shape[1]
    if kv == 0:
        return 0.0   # no point varies: the curve carries no statistical information
    u = ((xv - xv.mean(0)) / xv.std(0, ddof=1)).sum(1)  # (n,)
    total = float(u.var(ddof=1))  # 1' R 1 with R the sample correlation
    return float(np.clip(kv * kv / total, 1.0, kv)) if total > 0 else float(kv)
