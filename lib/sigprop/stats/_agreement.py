r"""Whole-curve agreement between Monte Carlo and theory, calibrated over initialisations.

A theory curve (a cosine against depth, an IPR against :math:`\beta`) is checked against
Monte Carlo from :math:`n` independent initialisations, each giving one value per point:
``samples`` :math:`x \in \mathbb R^{n\times k}`, rows i.i.d. with mean :math:`\mu` and an
unknown covariance :math:`\Sigma` (the points of one curve share their initialisations, so
:math:`\Sigma` is far from diagonal). The null hypothesis is :math:`\mu = \theta`, the theory.

Why per-point :math:`|z_j| \le 4` is not enough. With :math:`z_j = \sqrt n(\bar x_j-\theta_j)/s_j`
(:meth:`Estimate.zscore`), a theory that is off by a *systematic* amount -- a curve drifting
to :math:`z=-3` over 60 layers, a constant offset of 1 SE -- passes every per-point check,
although under the null a long run of same-sign :math:`z` is improbable. A curve needs one
statistic for the whole curve and a null law that knows how its points are correlated.

Statistics (functions of :math:`z\in\mathbb R^k`):

* ``mean_z`` :math:`=\bar z=\frac1k\sum_j z_j`, tested through :math:`|\bar z|`: the average
  deviation; the most powerful of the three against a constant offset, blind to a tilt with
  zero average and to a single point.
* ``chi2`` :math:`=\sum_j z_j^2`: omnibus. It would be :math:`\chi^2_k` for independent points
  and large :math:`n`; here its null law comes from resampling. For strongly correlated points
  that null is dominated by the leading principal components of the correlation, which for a
  curve are the smooth ones, so ``chi2`` keeps power against drifts and tilts. It is
  deliberately *not* weighted by an inverse covariance: a Hotelling-type
  :math:`\bar d^\top\hat\Sigma^{-1}\bar d` (singular for :math:`k\ge n`; regularised by
  Ledoit & Wolf 2004 shrinkage toward the diagonal) up-weights the rough, low-variance
  directions in which smooth alternatives carry no signal (Bai & Saranadasa 1996). Measured
  on AR(1) :math:`\phi=0.9`, :math:`k=60`, a drift :math:`0\to-3` SE, level 0.05, sign-flip
  calibration, 300 datasets each (SE :math:`\le 0.03`): power 0.82 (:math:`n=16`) and 0.85
  (:math:`n=64`) for ``chi2``, 0.55 and 0.51 for the shrunk Hotelling statistic.
* ``max_z`` :math:`=\max_j|z_j|`: the worst point (max-T, Westfall & Young 1993), with power
  against one bad point that the sums dilute.

Combination. The curve fails when any statistic is extreme *for its own null law*: the
minimum of the three p-values is itself calibrated on the same resamples (min-P; Westfall &
Young 1993; Pesarin 2001), so the level holds whatever the dependence between the
statistics. With the observed statistics :math:`T^{(0)}`, resampled :math:`T^{(1..B)}`, the
pool of :math:`N=B+1`, :math:`F_s(c)=\#\{c': T_s^{(c')}\ge T_s^{(c)}\}` and
:math:`Q(c)=\min_s F_s(c)`:

.. math:: p = \#\{c: Q(c)\le Q(0)\}/N, \qquad \text{passed} \iff p \ge \text{level}.

Equivalently each statistic has a threshold (the :math:`r`-th largest resampled value;
:math:`r/N` is ``adjusted_level``, level/3.3 to level/2.3 for these statistics, depending on the
correlation between points) and the curve passes exactly when no statistic exceeds its threshold.
For rows symmetric about the theory, a correct curve is rejected with probability between
:math:`(K-2)/N` and :math:`K/N \le` level, :math:`K` the number of counts with :math:`K/N <` level
(ties between the three minima cost at most two counts).

Calibration: resampling whole initialisations keeps the correlation between points intact;
every statistic, including each point's standard error, is recomputed on every resample
(studentised).

* ``"signflip"`` (default): with :math:`d_i = x_i-\theta` and rows symmetric about
  :math:`\theta` under the null (e.g. Gaussian), :math:`(\epsilon_i d_i)_i` has the law of
  :math:`(d_i)_i` for any signs :math:`\epsilon\in\{\pm1\}^n` (Fisher 1935; Pitman 1937), whatever
  statistic is computed from them. Exact: over all :math:`2^{n-1}` sign patterns when that is at
  most ``n_resamples + 1``, else over ``n_resamples`` uniform random patterns plus the identity
  (Hemerik & Goeman 2018). *Skewed rows*: the studentised mean of a point is then biased by
  :math:`-\gamma/(2\sqrt n)` (:math:`\gamma` the skewness of its values), symmetric sign flips do not
  see it, and over weakly correlated points the biases add up: plain sign flips rejected correct
  curves of exponential rows 0.26 of the time at level 0.01 (:math:`n=16`, AR(1) :math:`\phi=0.5`).
  So every z-score, observed and resampled alike, is corrected by Hall's (1992) monotone transform
  with the sample skewness (``sigprop.stats._resampling.skew_corrected_z``), which removes the
  :math:`O(n^{-1/2})` term of its law. The skewness is the curve's pooled one (its noise at
  :math:`n=16` averages out over the points); where the points' skewnesses differ (``skew_spread``
  above 3, e.g. a skewness that changes sign along the curve) each point's own correction is run as
  well, and the curve fails only when both runs fail it (the larger p is reported: a valid p-value,
  since each run's is). For symmetric rows the test stays exact (any statistic computed the same way
  on every sign pattern is); measured sizes over the grid of ``sigprop.stats._calibration`` are in
  ``tests/test_agreement.py``'s docstring and its committed record.
* ``"bootstrap"``: the bootstrap-t null :math:`z^*_j=\sqrt n(\bar x^*_j-\bar x_j)/s^*_j` from
  rows drawn with replacement (Efron & Tibshirani 1993, ch. 12; Hall 1992): second-order
  correct for skewed rows, but for small :math:`n` the :math:`z^*` have heavy tails
  (resamples with few distinct rows have small :math:`s^*`) and ``chi2`` and ``max_z`` lose
  power (a single 6-SE point at :math:`n=16`, level 0.01: rejected 0.32 against 0.69 by
  sign flips).

Measured rejection rates of correct curves (Gaussian and skewed rows) and powers against offsets, drifts
and single bad points are in ``tests/test_agreement.py`` (its docstring), which checks them against the
committed study (``python -m sigprop.stats._calibration``). In short: the default holds the level for
symmetric and skewed values alike; the bootstrap is an alternative for large :math:`n`.

What no test can detect. The information about a deviation :math:`\delta` (in units of the
per-point SE) is :math:`\delta^\top R^{-1}\delta`, :math:`R` the correlation between points.
For a constant offset :math:`c`, :math:`\bar z` has null standard deviation
:math:`1/\sqrt{k_\mathrm{eff}}`, :math:`k_\mathrm{eff}=k^2/\mathbf 1^\top R\mathbf 1`
(reported as ``k_eff``: how many independent points the curve is worth), so the offset is
a :math:`c\sqrt{k_\mathrm{eff}}`-sigma event. Perfectly correlated points have
:math:`k_\mathrm{eff}=1`: a 1-SE offset is one 1-sigma event and no test sees it. AR(1)
:math:`\phi=0.9` over 60 points has :math:`k_\mathrm{eff}=3.75`, and a 1-SE offset is
rejected at level 0.05 only 0.36 (:math:`n=16`) to 0.45 (:math:`n=64`) of the time; with
:math:`\phi=0.5` (:math:`k_\mathrm{eff}=20`) almost always. The drift :math:`0\to-3` SE over
60 layers with :math:`\phi=0.9` carries :math:`\delta^\top R^{-1}\delta=14.5`, i.e. 3.8 sigma
even for an oracle that knows its shape. A systematic error in the theory grows like
:math:`\sqrt n` in SE units, so more initialisations always help.

Points with no spread across initialisations (a layer-0 value fixed by the input) agree
when :math:`|\bar x_j-\theta_j|\le` ``atol`` and then drop out; otherwise their :math:`z` is
infinite and the curve fails.

References: O. Ledoit & M. Wolf, J. Multivar. Anal. 88, 365 (2004); Z. Bai & H. Saranadasa,
Statistica Sinica 6, 311 (1996); B. Efron & R. Tibshirani, *An Introduction to the
Bootstrap* (1993); P. Hall, *The Bootstrap and Edgeworth Expansion* (1992); P. Hall, JRSS B 54, 221 (1992)
(the skewness-removing transform); P. Westfall &
S. Young, *Resampling-Based Multiple Testing* (1993); F. Pesarin, *Multivariate Permutation
Tests* (2001); J. Hemerik & J. Goeman, TEST 27, 811 (2018); R. A. Fisher, *The Design of
Experiments* (1935); E. J. G. Pitman, JRSS Suppl. 4, 119 (1937).
"""
from __future__ import annotations

import dataclasses
import enum
import math

import numpy as np
import torch

from ._estimate import Estimate
from ._resampling import (SPREAD_MAX, _all_signs, _bootstrap_counts, _bootstrap_stats, _calibrate, _k_eff,
                          _positions, _random_signs, _raw_stats, _signflip_stats, _statistics, observed_sums,
                          skew_corrected_z, skew_spread, skewness)
from ._random import as_generator
from ._validate import _as_array, check_int, check_memory, check_option, check_real

__all__ = ["CurveAgreement", "curve_agreement", "min_initialisations"]

#: The statistics, in the order used throughout.
_STATISTICS = ("mean_z", "chi2", "max_z")
#: A point counts as having no spread when max - min <= this many ulps of its largest |value|
#: (rounding of a value that is the same for every initialisation).
_CONSTANT_ULPS = 8


class Method(str, enum.Enum):
    SIGNFLIP = "signflip"
    BOOTSTRAP = "bootstrap"


@dataclasses.dataclass(frozen=True)
class CurveAgreement:
    """Result of :func:`curve_agreement`; ``passed`` is ``p >= level``.

    Statistics of the z-scores :math:`z_j=(\\bar x_j-\\theta_j)/\\mathrm{SE}_j` (as
    :meth:`Estimate.zscore`): ``mean_z`` (the average :math:`\\bar z`, tested through
    :math:`|\\bar z|`), ``chi2`` :math:`=\\sum_j z_j^2` and ``max_z``
    :math:`=\\max_j|z_j|`. Each has its resampling p-value (``*_p``) and the threshold it must
    not exceed for the curve to pass (``*_threshold``; ``inf`` when the resamples are too few
    for one statistic alone to fail the curve); ``adjusted_level`` is the per-statistic level
    behind the thresholds. ``worst_*``: the point with the largest :math:`|z|` (a flat index
    into ``shape``). ``n_resamples``: resampled statistics behind ``p``; ``exact``: all
    :math:`2^{n-1}-1` non-trivial sign patterns were used. ``k_eff``
    :math:`=k^2/\\mathbf 1^\\top\\hat R\\mathbf 1`: how many independent points the curve is
    worth for an offset (``nan`` when no point varies; a diagnostic with relative error about
    :math:`\\sqrt{2/(n-1)}`, not used by the test). ``skewness``: the mean sample skewness of the
    points' values over initialisations, ``skew_spread`` how much the points' skewnesses differ
    (in units of one sample skewness's normal-theory variance); ``calibration`` says which
    calibration decided (module docstring: sign flips of skewness-corrected z-scores, pooled, and
    per point as well where ``skew_spread > 3``; or the bootstrap-t). ``drift_z``: change of the least-squares line through :math:`z_j` from the first to
    the last point (descriptive, not tested).
    """

    passed: bool
    p: float
    level: float
    mean_z: float
    mean_z_p: float
    mean_z_threshold: float
    drift_z: float
    chi2: float
    chi2_p: float
    chi2_threshold: float
    max_z: float
    max_z_p: float
    max_z_threshold: float
    adjusted_level: float
    worst_index: int
    worst_z: float
    worst_mean: float
    worst_theory: float
    n: int
    k: int
    shape: tuple
    k_eff: float
    skewness: float
    skew_spread: float
    method: str
    n_resamples: int
    exact: bool
    calibration: str

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    def _point(self) -> str:
        if len(self.shape) <= 1:
            return str(self.worst_index)
        return str(tuple(int(i) for i in np.unravel_index(self.worst_index, self.shape)))

    def __str__(self):
        head = "curve agrees" if self.passed else "curve DISAGREES"
        cmp = ">=" if self.passed else "<"
        return (
            f"{head}: p = {self.p:.3g} {cmp} {self.level:g} (mean z {self.mean_z:+.2f} p {self.mean_z_p:.2g}, "
            f"drift {self.drift_z:+.2f}; chi2 {self.chi2:.4g} p {self.chi2_p:.2g}; "
            f"max|z| = {self.max_z:.3g} at point {self._point()}, threshold {self.max_z_threshold:.3g}); "
            f"n = {self.n}, k = {self.k}, k_eff = {self.k_eff:.3g}"
        )


def min_initialisations(level: float) -> int:
    """Smallest n for which one statistic alone can fail a curve at ``level`` under sign flips.

    With :math:`n` initialisations there are :math:`2^{n-1}` distinct sign patterns, and with
    three statistics combined by min-P the smallest p-value a single extreme statistic can
    reach is about :math:`3/2^{n-1}`; it must be below ``level`` (n >= 10 at 0.01).
    """
    level = _check_level(level)
    n = 4
    while len(_STATISTICS) / 2 ** (n - 1) >= level:
        n += 1
    return n


def curve_agreement(
    samples,
    theory,
    *,
    level: float = 0.01,
    method: str = "signflip",
    n_resamples: int = 1999,
    generator=0,
    atol: float = 0.0,
) -> CurveAgreement:
    """Test a whole theory curve against Monte Carlo over ``n`` independent initialisations.

    ``samples``: per-initialisation values, shape ``(n, k)`` or ``(n, ...)`` (trailing dims
    are flattened, in C order; rows must be independent initialisations), as a tensor, an
    array, or an :class:`Estimate` carrying ``.samples``. ``theory``: shape ``(k,)``, the
    trailing shape, or a scalar. ``level``: the largest rate at which a correct curve fails;
    needs ``n >= min_initialisations(level)`` (10 at 0.01, 13 at 0.001) and
    ``n_resamples > 3 / level - 1``. ``method``: ``"signflip"`` (default: skewness-corrected
    z-scores, exact for rows symmetric about the theory and calibrated for skewed rows; module
    docstring) or ``"bootstrap"`` (the bootstrap-t). ``n_resamples``: random resamples (all sign
    patterns are used instead when :math:`2^{n-1}\\le` ``n_resamples + 1``); their memory is
    estimated before they are drawn. ``generator``: int seed, ``torch.Generator`` or None; the
    result is a deterministic function of ``(samples, theory, generator)``. ``atol``: tolerance
    for points with no spread across initialisations.

    Values of any finite magnitude work (each point is scaled by its largest deviation before
    anything is squared; a z-score does not depend on the scale). Per-point checks
    (:meth:`Estimate.agrees`) remain right for points from independent runs; a curve whose points
    share initialisations is tested here (STYLE.md, convention 8). About 0.1 s for n = k = 200
    with 1999 resamples.
    """
    x, shape, eps = _as_samples(samples)
    n, k = x.shape
    theta = _as_theory(theory, shape, k)
    level, meth, n_resamples, atol = _check_options(level, method, n_resamples, atol, n)
    gen = as_generator(generator)
    d, scale, constant = _deviations(x, theta, eps, atol)
    vary = ~constant
    sums = observed_sums(d)
    exact = meth is Method.SIGNFLIP and 2 ** (n - 1) <= n_resamples + 1
    if meth is Method.SIGNFLIP:  # draws up front, then a deterministic kernel
        signs = _all_signs(n) if exact else _random_signs(n, n_resamples, gen)  # (B, n)
        runs = [_run(d, sums, vary, level, lambda u, skew: _signflip_stats(d, signs, u, vary, skew), "pooled")]
        if skew_spread(sums, n, vary) > SPREAD_MAX:  # the points' skewness differs: each point's own, too
            runs.append(_run(d, sums, vary, level, lambda u, skew: _signflip_stats(d, signs, u, vary, skew), "point"))
        calibration = "skewness-corrected" if len(runs) == 1 else "skewness-corrected, pooled and per point"
    else:
        counts = _bootstrap_counts(n, n_resamples, gen)  # (B, n)
        centred = np.where(constant[None], 0.0, d - d.mean(0))
        runs = [_run(d, sums, vary, level, lambda u, skew: _bootstrap_stats(centred, counts, u, vary), None)]
        calibration = "bootstrap-t"
    # the curve fails only when every calibration run fails it (a run's p is valid: so is the largest);
    # the statistics and thresholds shown are those of the run with the largest p, so they agree with `passed`
    z, pool, result = max(runs, key=lambda r: r[2][1])
    return _result(pool, result, z, d, scale, theta, sums, vary, level=level, shape=shape, method=meth.value,
                   exact=exact, n_resamples=len(pool) - 1, calibration=calibration)


def _run(d, sums, vary, level, replicate, skew):
    """One calibration: observed z (k,), the pool (N, 3) of observed and resampled statistics, its calibration."""
    n, k = d.shape
    u = _positions(k)
    z = skew_corrected_z(sums, n, vary, skew)
    pool = _statistics(np.concatenate([_raw_stats(z[None], u), replicate(u, skew)]))  # |mean z|, chi2, max_z
    return z, pool, _calibrate(pool, level)


def _result(pool, calibrated, z, d, scale, theta, sums, vary, **fields) -> CurveAgreement:
    p_each, p, thresholds, r = calibrated
    n, k = d.shape
    u = _positions(k)
    worst = int(np.argmax(np.abs(z)))
    mean_z, slope = float(np.mean(z)), float(z @ u / k)
    return CurveAgreement(
        passed=bool(p >= fields["level"]), p=float(p),
        mean_z=mean_z if not math.isnan(mean_z) else math.inf, mean_z_p=float(p_each[0]),
        mean_z_threshold=float(thresholds[0]),
        drift_z=slope * float(u[-1] - u[0]) if not math.isnan(slope) else math.inf,
        chi2=float(pool[0, 1]), chi2_p=float(p_each[1]), chi2_threshold=float(thresholds[1]),
        max_z=float(pool[0, 2]), max_z_p=float(p_each[2]), max_z_threshold=float(thresholds[2]),
        adjusted_level=r / len(pool), worst_index=worst, worst_z=float(z[worst]),
        worst_mean=float(theta[worst] + d[:, worst].mean() * scale[worst]), worst_theory=float(theta[worst]),
        n=n, k=k, k_eff=_k_eff(d, vary), skewness=float(skewness(sums, vary)[vary].mean()) if vary.any() else 0.0,
        skew_spread=skew_spread(sums, n, vary), **fields,
    )


# ----------------------------------------------------------------------------- validation
def _as_samples(samples):
    """(n, ...) values -> float64 (n, k) array, the trailing shape, and the input's float eps."""
    if isinstance(samples, Estimate) or hasattr(samples, "samples"):
        inner = getattr(samples, "samples", None)
        if inner is None:
            raise ValueError(
                "samples must carry per-initialisation values; got an Estimate without .samples "
                "(build it with sp.estimate(samples) or pass the (n, k) samples themselves)"
            )
        samples = inner
    if isinstance(samples, torch.Tensor):
        eps = torch.finfo(samples.dtype).eps if samples.is_floating_point() else 0.0
    else:
        try:
            kind = np.asarray(samples).dtype
        except (TypeError, ValueError):
            kind = np.dtype(object)
        eps = float(np.finfo(kind).eps) if np.issubdtype(kind, np.floating) else 0.0
    arr = _as_array(samples, "samples")  # numbers only: strings, bools, complex and objects refused
    if arr.ndim < 2 or arr.shape[0] == 0 or arr[0].size == 0:
        raise ValueError(
            f"samples must have shape (n, k): n initialisations by k points (trailing dims are flattened); "
            f"got shape {arr.shape}"
        )
    bad = ~np.isfinite(arr)
    if bad.any():
        first = np.argwhere(bad)[0]
        raise ValueError(
            f"samples must be finite; got {int(bad.sum())} NaN/inf entries (first at initialisation {first[0]}, "
            f"point {tuple(int(i) for i in first[1:])})"
        )
    check_memory(arr.size * 8 * 6, f"curve_agreement on samples of shape {arr.shape}")
    shape = tuple(arr.shape[1:])
    return arr.reshape(arr.shape[0], -1), shape, eps


def _as_theory(theory, shape, k):
    th = _as_array(theory, "theory")  # numbers only: theory="0" is refused, not read as 0
    if th.ndim == 0:
        th = np.full(k, float(th))
    elif th.shape == shape or th.shape == (k,):
        th = th.reshape(k)
    else:
        raise ValueError(
            f"theory must have the trailing shape of samples, {shape}, or ({k},); got shape {th.shape}"
        )
    if not np.all(np.isfinite(th)):
        raise ValueError(f"theory must be finite; got NaN/inf at points {np.flatnonzero(~np.isfinite(th))[:5].tolist()}")
    return th


def _check_options(level, method, n_resamples, atol, n):
    level = _check_level(level)
    meth = check_option(method, Method, "method")
    n_resamples = check_int(n_resamples, "n_resamples", minimum=1)
    atol = check_real(atol, "atol", minimum=0.0)
    n_min = min_initialisations(level)
    if n < n_min:
        raise ValueError(
            f"samples needs at least {n_min} initialisations (rows) at level={level:g}: with n rows the smallest "
            f"p-value a single extreme statistic reaches is about {len(_STATISTICS)}/2^(n-1); got n={n} "
            f"({len(_STATISTICS)}/2^{n - 1} = {len(_STATISTICS) / 2 ** (n - 1):.3g})"
        )
    if len(_STATISTICS) / (n_resamples + 1) >= level:
        raise ValueError(
            f"n_resamples must exceed {len(_STATISTICS)}/level - 1 = {len(_STATISTICS) / level - 1:.0f} so that one "
            f"statistic alone can fail the curve at level={level:g}; got {n_resamples}"
        )
    # the resamples' draws (B x n int64 indices or signs, float64 weights) and their (B, 4) statistics
    check_memory(n_resamples * (24.0 * n + 64.0), f"n_resamples={n_resamples} with n={n} initialisations")
    return level, meth, n_resamples, atol


def _deviations(x, theta, eps, atol):
    """Deviations from theory, each point scaled by its largest |deviation| (z does not depend on it, and
    squares of 1e200 or 1e-200 stay finite), with points of no spread set exactly constant: returns
    (scaled d (n, k), scale (k,), constant (k,))."""
    spread = x.max(0) - x.min(0)  # (k,)
    constant = spread <= _CONSTANT_ULPS * eps * np.abs(x).max(0)
    x = np.where(constant[None], x[:1], x)  # exactly constant columns
    with np.errstate(over="ignore", invalid="ignore"):
        d = x - theta  # (n, k)
    if not np.all(np.isfinite(d)):
        j = int(np.flatnonzero(~np.isfinite(d).all(0))[0])
        raise ValueError(f"samples - theory overflows float64 at point {j} (values near 1.8e308 of opposite signs); "
                         "rescale samples and theory")
    d[:, constant & (np.abs(d[0]) <= atol)] = 0.0
    scale = np.abs(d).max(0)
    scale = np.where(scale > 0, scale, 1.0)
    return d / scale, scale, constant


def _check_level(level):
    if isinstance(level, bool) or not isinstance(level, (int, float, np.floating, np.integer)):
        raise TypeError(f"level must be a number in (0, 1); got {type(level).__name__}")
    level = float(level)
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie in (0, 1) (the false-alarm rate for a correct curve); got {level!r}")
    return level
