r"""Resampling kernels of :func:`sigprop.curve_agreement`: studentised statistics over resampled initialisations.

Sign flips (Fisher 1935; Hemerik & Goeman 2018) and the bootstrap-t (Efron & Tibshirani 1993), vectorised
over resamples in chunks of a fixed memory budget; the statistics ``mean_z``, ``chi2`` and ``max_z`` and
their min-P calibration (Westfall & Young 1993). See ``sigprop.stats._agreement`` for the maths.

Every statistic is a function of the power sums :math:`S_p=\frac1n\sum_i d_i^p` (``p = 1, 2, 3``) of each point's
deviations: a sign flip changes the odd sums only (``S_p^* = \epsilon^{\odot p}\cdot d^p / n``), a bootstrap
resample reweights rows (``S_p^* = c\cdot d^p / n``), so both are matrix products. The sign-flip test scores each
point by its self-normalised sum corrected for the rows' skewness (:func:`skew_corrected_z`: Hall's 1992 monotone
cubic transform, with the curve's pooled skewness, and with each point's own where they differ: :func:`skew_spread`).
"""
from __future__ import annotations

import math

import numpy as np
import torch

#: Float64 elements per temporary array in the resampling kernel (32 MiB each).
_CHUNK_ELEMENTS = 2**22
#: Heterogeneity of the points' skewness above which the per-point calibration is added (see
#: :func:`skew_spread`): 3 times the normal-theory variance of a sample skewness. Gaussian curves measured
#: well below it, a curve whose skewness changes sign (exponential rows, half of them mirrored) far above.
SPREAD_MAX = 3.0


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


def _central(S):
    """Raw power sums ``S = [mean(d), mean(d^2), mean(d^3)]`` -> central moments ``(M2, M3)`` (``M3`` None
    without the third sum: the bootstrap-t needs no skewness)."""
    m = S[0]
    return S[1] - m * m, (S[2] - 3.0 * m * S[1] + 2.0 * m**3 if len(S) > 2 else None)


def skewness(S, vary):
    """Each point's sample skewness ``M3 / M2^{3/2}`` (0 for points with no spread), shape ``(..., k)``."""
    M2, M3 = _central(S)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        return np.where(vary & (M2 > 0), M3 / np.where(M2 > 0, M2, 1.0) ** 1.5, 0.0)


def self_normalised(S, n):
    r"""The self-normalised sum :math:`V=\sqrt n\,S_1/\sqrt{S_2}` of each point (0 where every deviation is 0).

    :math:`S_2` is the second moment about the *theory*, not about the sample mean, so :math:`|V|\le\sqrt n`
    (Cauchy-Schwarz; equality when every deviation has the same value). :math:`V` is a monotone function of
    Student's :math:`t`, :math:`t=V\sqrt{(n-1)/(n-V^2)}` (Efron 1969), so a single point is tested alike by
    either; they differ by :math:`O(1/n)` where :math:`|t|` is moderate, which leaves the :math:`O(n^{-1/2})`
    Edgeworth term, and Hall's correction of it, the same. Where they differ is where a point's values happen to
    lie close together: skewed rows (a :math:`\chi^2_1` margin at its lower bound, a Bernoulli point whose 20
    draws are all 0) give :math:`|t|` of 30 to infinity by chance, which no sign flip reproduces, and a sum over
    points of such :math:`t` is decided by that one point (issue 37, item 3). :math:`V` stays bounded.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        v = S[0] * math.sqrt(n) / np.sqrt(S[1])
    return np.where(S[1] > 0, v, 0.0)


def skew_corrected_z(S, n, vary, skew="pooled"):
    r"""Scores ``(..., k)`` of each point from power sums ``S`` (``[mean(d), mean(d^2), mean(d^3)]``, each
    ``(..., k)``): the self-normalised sum :func:`self_normalised` (bounded by :math:`\sqrt n`), corrected for
    skewness.

    ``skew``: Hall's (1992) transform :math:`V + b + 2bV^2 + \tfrac43 b^2V^3` with
    :math:`b=\hat\gamma/(6\sqrt n)`, monotone in ``V`` (its derivative is :math:`(1+2bV)^2`); it removes the
    :math:`O(n^{-1/2})` skewness term of the studentised mean's law (Edgeworth: :math:`P(t\le x)=\Phi(x)+
    \frac{\gamma}{6\sqrt n}(2x^2+1)\phi(x)+O(n^{-1})`, the same for :math:`V`), whose bias
    :math:`-\gamma/(2\sqrt n)` adds up coherently over weakly correlated points. ``"pooled"``: :math:`\hat\gamma`
    the mean sample skewness of the points (one skewness for the curve: its noise at small ``n`` averages out);
    ``"point"``: each point's own; None: :math:`V` with no correction (the bootstrap, whose resamples carry the
    skewness themselves).
    """
    v = self_normalised(S, n)
    if skew is None:
        return v
    g = skewness(S, vary)
    if skew == "pooled":
        g = np.broadcast_to(g.sum(-1, keepdims=True) / max(int(vary.sum()), 1), g.shape)
    b = g / (6.0 * math.sqrt(n))
    return v + b + 2.0 * b * v * v + (4.0 / 3.0) * b * b * v**3


def plain_z(S, n):
    """Each point's z-score ``(mean - theory) / SE`` (Student's t, as :meth:`Estimate.zscore`): what the result
    reports; +-inf for a point with no spread off the theory."""
    return _z(S[0], n / (n - 1) * np.clip(_central(S)[0], 0.0, None), n)


def observed_sums(d):
    """Power sums of the observed deviations: ``[mean(d), mean(d^2), mean(d^3)]``, each ``(k,)``."""
    return [np.mean(d**p, axis=0) for p in (1, 2, 3)]


def _signflip_stats(d, signs, u, vary, skew):
    """Statistics of the sign-flipped deviations (eps_i d_i), one row per pattern: flips change the odd power
    sums only (``eps . d^p / n``)."""
    n, k = d.shape
    second, cubes = np.mean(d * d, axis=0), d**3
    chunk = max(1, _CHUNK_ELEMENTS // max(n, k))
    out = []
    for start in range(0, len(signs), chunk):
        s = signs[start:start + chunk]
        S = [s @ d / n, second, s @ cubes / n]
        out.append(_raw_stats(skew_corrected_z(S, n, vary, skew), u))
    return np.concatenate(out)


def skew_spread(S, n, vary) -> float:
    """How much the points' sample skewnesses differ, in units of the normal-theory variance of one sample
    skewness, ``6(n-2)/((n+1)(n+3))``: about 1 or less for a common skewness (points correlated: less)."""
    g = skewness(S, vary)[vary]
    if g.size < 2:
        return 0.0
    return float(np.mean((g - g.mean()) ** 2) / (6.0 * (n - 2) / ((n + 1) * (n + 3))))


def _bootstrap_stats(centred, counts, u, vary):
    """Statistics of the self-normalised sums ``V* = sqrt(n) mean(c*) / sqrt(mean(c*^2))`` of the centred rows
    ``c = d - mean(d)`` resampled with ``counts``: per point a monotone function of the bootstrap-t's
    ``t* = sqrt(n)(mean* - mean)/s*`` (the same test for one point), bounded where ``t*`` is infinite (a resample
    of one repeated value). No skewness correction: the resamples reproduce the skewness themselves."""
    n, k = centred.shape
    sq = centred * centred
    chunk = max(1, _CHUNK_ELEMENTS // max(n, k))
    out = []
    for start in range(0, len(counts), chunk):
        w = counts[start:start + chunk]
        S = [w @ centred / n, w @ sq / n]
        out.append(_raw_stats(skew_corrected_z(S, n, vary, skew=None), u))
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


def _k_eff(d, vary):
    """k'^2 / var(sum_j (d_ij - mean_j)/s_j) over the k' points that vary, clipped to [1, k']."""
    xv = d[:, vary]
    kv = xv.shape[1]
    if kv == 0:
        return 0.0   # no point varies: the curve carries no statistical information
    u = ((xv - xv.mean(0)) / xv.std(0, ddof=1)).sum(1)  # (n,)
    total = float(u.var(ddof=1))  # 1' R 1 with R the sample correlation
    return float(np.clip(kv * kv / total, 1.0, kv)) if total > 0 else float(kv)
