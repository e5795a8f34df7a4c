r"""Weighted fits of a Monte Carlo-minus-theory gap against the width: ``gap(d) = a d^-gamma + b``.

A theory that becomes exact as ``d -> infinity`` (at fixed ``T``) leaves a gap whose mean at width ``d``
is a finite-width correction. The leading correction of the mean of an O(1) statistic -- a cosine, an
IPR, a gradient norm -- is of second order in the ``O(d^{-1/2})`` fluctuations of the Gram matrices,
logit scales and norms it depends on, hence ``O(1/d)``: ``gamma = 1`` is the primary model. The free
exponent and ``gamma = 1/2`` (a first-order, sign-definite effect) are fitted beside it, so that a
limit ``b`` that depends on the model is seen to. When the ``1/d`` model does not fit the ladder
(goodness-of-fit p-value below :data:`P_FIT` = 0.01: e.g. a ``1/d^2`` term still visible at the smallest
width), the free-exponent fit is used if it fits, then ``gamma = 1/2``; the choice is reported
(:attr:`Extrapolation.primary`) and a ladder that no model fits is flagged.

Each rung of a ladder gives a gap with a standard error over independent initialisations (the rungs
are independent runs); the fits are weighted least squares with those errors taken as known
(``absolute_sigma``): for fixed ``gamma`` the model is linear in ``(a, b)`` and solved exactly, the
free fit uses :func:`scipy.optimize.curve_fit` started from the best fixed-``gamma`` fit. Each fit
reports its parameters with standard errors, ``chi2``, degrees of freedom, ``chi2/dof`` and the
goodness-of-fit p-value; ``b`` is the extrapolated gap at ``d -> infinity`` and ``z = b / SE(b)``.
The same functions fit ``T``-ladders (``x = T``) or anything else of the form ``a x^-gamma + b``.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

__all__ = ["GapFit", "Extrapolation", "fit_gap", "extrapolate", "Z_LIMIT", "P_FIT"]

#: A limit is "consistent with zero" when ``|b| <= Z_LIMIT * SE(b)`` (the project's per-point z, CONTRIBUTING.md).
Z_LIMIT = 4.0
#: The models fitted; the primary one is the first of :data:`PREFERENCE` whose fit has p >= :data:`P_FIT`.
MODELS = ("gamma=1", "gamma=1/2", "free")
PREFERENCE = ("gamma=1", "free", "gamma=1/2")
#: Goodness-of-fit p-value below which a model is taken not to describe the ladder.
P_FIT = 0.01
_FIXED = {"gamma=1": 1.0, "gamma=1/2": 0.5}


@dataclasses.dataclass(frozen=True)
class GapFit:
    """One weighted fit ``a x^-gamma + b`` (``gamma_se = 0`` when gamma is fixed)."""

    model: str
    a: float
    a_se: float
    gamma: float
    gamma_se: float
    b: float
    b_se: float
    chi2: float
    dof: int
    chi2_dof: float
    p: float

    @property
    def z(self) -> float:
        """``b / SE(b)``: how many standard errors the extrapolated gap is from zero."""
        return self.b / self.b_se if self.b_se > 0 else math.inf * np.sign(self.b)

    def predict(self, x):
        return self.a * np.asarray(x, dtype=float) ** -self.gamma + self.b

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Extrapolation:
    """The gap at ``x -> infinity``: the primary fit (``gamma = 1``), the others, and the verdict."""

    fits: dict

    @property
    def primary(self) -> str:
        """The model used: the first of ``gamma=1``, ``free``, ``gamma=1/2`` that fits (p >= P_FIT), else the
        one with the largest p (:attr:`fits_well` is then False)."""
        for name in PREFERENCE:
            f = self.fits.get(name)
            if f is not None and (f.dof == 0 or f.p >= P_FIT):
                return name
        return max(self.fits, key=lambda k: self.fits[k].p if math.isfinite(self.fits[k].p) else -1.0)

    @property
    def fits_well(self) -> bool:
        f = self.best
        return f.dof == 0 or f.p >= P_FIT

    @property
    def best(self) -> GapFit:
        return self.fits[self.primary]

    @property
    def limit(self) -> float:
        return self.best.b

    @property
    def limit_se(self) -> float:
        return self.best.b_se

    @property
    def consistent_with_zero(self) -> bool:
        return abs(self.best.b) <= Z_LIMIT * self.best.b_se

    def summary(self) -> str:
        f = self.best
        alt = "; ".join(f"{k}: b = {g.b:+.2g} ± {g.b_se:.2g}" + (f", gamma = {g.gamma:.2f} ± {g.gamma_se:.2f}"
                                                               if k == "free" else "")
                        for k, g in self.fits.items() if k != self.primary)
        verdict = "consistent with 0" if self.consistent_with_zero else "not 0"
        model = self.primary + ("" if self.fits_well else ", no model fits")
        gamma = f" gamma = {f.gamma:.2f} ± {f.gamma_se:.2f}," if self.primary == "free" else ""
        return (f"gap(d -> inf) = {f.b:+.3g} ± {f.b_se:.2g} ({model},{gamma} chi2/dof = {f.chi2_dof:.2f}, "
                f"p = {f.p:.2g}; {verdict} at {Z_LIMIT:g} SE); {alt}")


def _chi2(resid, dof):
    from scipy import stats

    chi2 = float(np.sum(resid**2))
    if dof <= 0:
        return chi2, math.nan, math.nan
    return chi2, chi2 / dof, float(stats.chi2.sf(chi2, dof))


def _fixed(x, y, s, gamma):
    """Weighted least squares of ``a x^-gamma + b`` at fixed ``gamma`` (``gamma = 0``: the constant ``b``, ``a = 0``)."""
    X = np.ones((len(x), 1)) if gamma == 0 else np.stack([x**-gamma, np.ones_like(x)], 1)   # columns: (a,) b
    W = 1.0 / s**2
    cov = np.linalg.inv(X.T @ (X * W[:, None]))
    coef = cov @ X.T @ (W * y)
    dof = len(x) - X.shape[1]
    chi2, red, p = _chi2((y - X @ coef) / s, dof)
    a, a_se = (0.0, 0.0) if gamma == 0 else (float(coef[0]), math.sqrt(cov[0, 0]))
    return GapFit(f"gamma={'1' if gamma == 1 else '1/2' if gamma == 0.5 else gamma}", a, a_se, float(gamma), 0.0,
                  float(coef[-1]), math.sqrt(cov[-1, -1]), chi2, dof, red, p)


def _free(x, y, s, start: GapFit):
    from scipy import optimize

    def f(xx, a, g, b):
        return a * xx**-g + b

    try:
        popt, pcov = optimize.curve_fit(f, x, y, p0=[start.a, start.gamma, start.b], sigma=s, absolute_sigma=True,
                                        maxfev=20000)
    except (RuntimeError, ValueError, optimize.OptimizeWarning):
        return None
    perr = np.sqrt(np.clip(np.diag(pcov), 0.0, None))
    if not np.all(np.isfinite(perr)):
        return None
    chi2, red, p = _chi2((y - f(x, *popt)) / s, len(x) - 3)
    return GapFit("free", float(popt[0]), float(perr[0]), float(popt[1]), float(perr[1]), float(popt[2]),
                  float(perr[2]), chi2, len(x) - 3, red, p)


def fit_gap(x, gap, se) -> dict:
    """Weighted fits of ``gap(x) = a x^-gamma + b`` with ``gamma = 1``, ``1/2`` and free.

    ``x`` (k,) positive rung values (``d`` or ``T``), ``gap`` (k,) mean gaps, ``se`` (k,) their standard
    errors (> 0). Needs ``k >= 3`` (``k >= 4`` for the free fit, which is omitted when it fails to converge
    or its covariance is undetermined). Returns ``{model: GapFit}`` in the order of :data:`MODELS`.
    """
    x, y, s = (np.asarray(v, dtype=float).ravel() for v in (x, gap, se))
    if not (x.shape == y.shape == s.shape):
        raise ValueError(f"x, gap and se must have the same length; got {x.shape}, {y.shape}, {s.shape}")
    if len(x) < 3:
        raise ValueError(f"a ladder needs at least 3 rungs to fit a x^-gamma + b; got {len(x)}")
    if np.any(x <= 0) or np.any(s <= 0) or not np.all(np.isfinite(np.concatenate([x, y, s]))):
        raise ValueError("x and se must be positive and every value finite")
    fits = {name: _fixed(x, y, s, g) for name, g in _FIXED.items()}
    if len(x) >= 4:
        free = _free(x, y, s, min(fits.values(), key=lambda f: f.chi2))
        if free is not None:
            fits["free"] = free
    return fits


def extrapolate(x, gap, se) -> Extrapolation:
    """:func:`fit_gap` and the verdict on the limit ``b`` of the primary model (``gamma = 1`` when it fits)."""
    return Extrapolation(fit_gap(x, gap, se))
