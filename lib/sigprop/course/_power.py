r"""What a curve test could have detected: its power against a stated offset, by simulation.

A verdict "agrees" from the curve-level test (:func:`sigprop.course.curve_test`) is worth what the test could have
rejected. With :math:`n` initialisations close to the test's minimum (13 at level 0.001, where all :math:`2^{12}`
sign patterns are used and the smallest p is :math:`2.4\cdot10^{-4}`) a theory that is wrong by a few standard
errors may pass. :func:`curve_power` measures the probability that the test rejects a stated alternative:

* the rows are drawn Gaussian, with the covariance between points measured on the page's own initialisations
  (:math:`\hat\Sigma`, from ``samples``: the correlation along a depth curve is what decides how much a systematic
  offset is worth), centred on the theory plus an ``offset``;
* the offset is ``size`` standard errors *of the page's measurement* (:math:`\mathrm{SE}_j = s_j/\sqrt{n_0}`, the
  error bars the reader sees) on the points from ``start`` (a fraction of the curve) to its end -- by default 2 SE
  over the last half of the curve, a gap the figure would show as clearly as error bars can -- or, with ``spread``,
  that many standard deviations *between initialisations* (:math:`s_j`, an effect size): an offset fixed by the
  model, not by the number of initialisations, so that more initialisations make it easier to see (half the
  spread is 1.8 SE at :math:`n = 13` and 3.6 SE at :math:`n = 52`). Against "2 SE" the power hardly grows with
  :math:`n`: at level 0.001 a depth curve whose points move together is almost one number, and a 2-SE offset of
  one number has :math:`p \approx 0.05`;
* each simulated curve of ``n`` rows (default :math:`n_0`; more rows make the same absolute offset easier to see)
  is tested exactly as the page tests (:func:`~sigprop.course.curve_test`, level 0.001, 9999 sign-flip resamples),
  ``repeats`` times; the power is the fraction rejected, with its binomial standard error.

Drawing rows as :math:`G\,D/\sqrt{n_0 - 1}` (:math:`G` standard Gaussian :math:`n\times n_0`, :math:`D` the centred
measured rows) gives exactly the covariance :math:`\hat\Sigma` without inverting it (a curve of :math:`k \ge n_0`
points has a singular :math:`\hat\Sigma`). Gaussian rows are symmetric, so the test holds its level on them; the
power is that of the page's test on data like the page's, not a bound. A test costs 0.02-0.2 s (exact enumeration
at :math:`n = 13` is the cheap case), so a power of 200 repeats takes seconds to a minute: pages quote a committed
study rather than run it.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from ..stats._estimate import Estimate, estimate
from ..stats._random import as_generator
from ._tables import curve_test

__all__: list[str] = []
__theory__: list[str] = []
__course__ = ["curve_power", "depth_power", "offset_alternative", "power_text", "largest_power", "POWER_REPEATS"]

#: Simulated curves per power on a page (quick profile: the power to about +-0.08; full: +-0.03)
POWER_REPEATS = 40


def _rows(samples) -> torch.Tensor:
    rows = samples.samples if isinstance(samples, Estimate) else samples
    rows = torch.as_tensor(np.asarray(rows, dtype=float) if not torch.is_tensor(rows) else rows).double()
    if rows.ndim != 2 or rows.shape[0] < 3 or rows.shape[1] < 1:
        raise ValueError(f"samples must be rows (n >= 3, k >= 1) of per-initialisation values; got {tuple(rows.shape)}")
    return rows


def offset_alternative(samples, *, size: float = 2.0, start: float = 0.5, spread: float | None = None) -> np.ndarray:
    """The offset ``(k,)`` of the alternative: ``size`` standard errors of the measured means (``s_j / sqrt(n)``),
    or ``spread`` standard deviations between initialisations (``s_j``; ``size`` is then ignored), on the points
    from index ``ceil(start * k)`` on (``start = 0.5``: the last half of the curve), 0 before."""
    rows = _rows(samples)
    scale, name = (size, "size") if spread is None else (spread, "spread")
    if not (isinstance(scale, (int, float)) and math.isfinite(scale) and scale > 0):
        raise ValueError(f"{name} must be a positive number of standard {'errors' if spread is None else 'deviations'}"
                         f"; got {scale!r}")
    if not 0.0 <= start < 1.0:
        raise ValueError(f"start must be a fraction of the curve in [0, 1); got {start!r}")
    n, k = rows.shape
    sd = rows.std(0, unbiased=True).numpy()
    shift = np.zeros(k)
    first = math.ceil(start * k)
    shift[first:] = scale * (sd[first:] if spread is not None else sd[first:] / math.sqrt(n))
    return shift


def curve_power(samples, theory, *, size: float = 2.0, start: float = 0.5, n: int | None = None,
                repeats: int = POWER_REPEATS, generator=0, spread: float | None = None) -> Estimate:
    """The probability that the page's curve test rejects ``theory + offset`` (:func:`offset_alternative`), for
    Gaussian rows with the covariance of ``samples`` (rows ``(n0, k)`` or an Estimate with ``.samples``); ``n`` rows
    per simulated curve (default ``n0``). Returns a scalar :class:`~sigprop.Estimate`: the fraction of ``repeats``
    simulated curves rejected and its binomial standard error (module docstring)."""
    rows = _rows(samples)
    n0, k = rows.shape
    theory = np.asarray(theory, dtype=float).reshape(-1)
    if theory.shape != (k,):
        raise ValueError(f"theory must have one value per point ({k}); got shape {theory.shape}")
    n = n0 if n is None else int(n)
    if n < 13:
        raise ValueError(f"n must be at least 13 (the curve test's minimum at level 0.001); got {n}")
    if not isinstance(repeats, int) or repeats < 10:
        raise ValueError(f"repeats must be an integer >= 10; got {repeats!r}")
    shift = torch.as_tensor(theory + offset_alternative(rows, size=size, start=start, spread=spread))
    centred = rows - rows.mean(0)
    g = as_generator(generator)
    rejected = []
    for _ in range(repeats):
        draw = torch.randn(n, n0, generator=g, dtype=torch.float64) @ centred / math.sqrt(n0 - 1) + shift
        rejected.append(0.0 if curve_test(draw, theory, generator=g).passed else 1.0)
    return estimate(torch.tensor(rejected, dtype=torch.float64))


def depth_power(samples, theory, *, size: float = 2.0, start: float = 0.5, n: int | None = None,
                repeats: int = POWER_REPEATS, generator=0, spread: float | None = None) -> Estimate:
    """:func:`curve_power` of the test :func:`~sigprop.course.depth_test` makes: a curve over depth from block 1 on
    (column 0, the measured input, is no prediction and is left out, as there)."""
    rows = _rows(samples)
    theory = np.asarray(theory, dtype=float).reshape(-1)
    if theory.shape != (rows.shape[1],) or rows.shape[1] < 2:
        raise ValueError(f"need rows (n, depth + 1) and a curve (depth + 1,) with depth >= 1; got "
                         f"{tuple(rows.shape)} and {theory.shape}")
    return curve_power(rows[:, 1:], theory[1:], size=size, start=start, n=n, repeats=repeats, generator=generator,
                       spread=spread)


def power_text(test, samples, theory, *, depth: bool = False, repeats: int = POWER_REPEATS,
               spread: float | None = None) -> str:
    """A table's power cell for one check: "—" for a curve the test rejected (it found its offset), else the power
    against 2 SE of the measurement (or ``spread`` standard deviations between initialisations) over the last half
    of the curve and the count behind it: ``"0.05 (2 of 40)"`` (a binomial count: its SE is sqrt(p(1-p)/n), and 0 of
    40 means a power below about 0.07, not 0). ``depth=True`` for a check made with
    :func:`~sigprop.course.depth_test` (block 0 left out)."""
    if not test.passed:
        return "—"
    power = (depth_power if depth else curve_power)(samples, theory, repeats=repeats, spread=spread)
    return f"{float(power.mean):.2f} ({round(float(power.mean) * power.n)} of {power.n})"


def largest_power(*tables) -> float:
    """The largest power in the power columns (headers starting with "power") of :class:`~sigprop.course.Table`
    objects, for the prose ("rejected in at most ... of simulated curves"); nan when no check was accepted."""
    found = []
    for table in tables:
        for k, head in enumerate(table.header):
            if head.startswith("power"):
                found += [float(row[k].split()[0]) for row in table.rows if row[k][:1].isdigit()]
    return max(found) if found else float("nan")
