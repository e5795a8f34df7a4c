r"""Weighted fits of Monte Carlo results with standard errors: the one place the book fits a curve.

Three fits, one weighted least-squares core (errors taken as known, ``absolute_sigma``):

* :func:`fit_gap` / :func:`extrapolate` -- a Monte Carlo-minus-theory gap against the width (or ``T``),
  ``gap(x) = a x^-gamma + b`` with ``gamma = 1``, ``1/2`` and free. The leading finite-width correction of the
  mean of an O(1) statistic -- a cosine, an IPR, a gradient norm -- is of second order in the ``O(d^{-1/2})``
  fluctuations it depends on, hence ``O(1/d)``: ``gamma = 1`` is the primary model; the free exponent and
  ``gamma = 1/2`` are fitted beside it, so that a limit ``b`` that depends on the model is seen to. When the
  ``1/d`` model does not fit (goodness-of-fit p below :data:`P_FIT` = 0.01), the free fit is used if it fits,
  then ``gamma = 1/2``; the choice is reported (:attr:`Extrapolation.primary`) and a ladder no model fits is
  flagged. For fixed ``gamma`` the model is linear in ``(a, b)`` and solved exactly; the free fit uses
  :func:`scipy.optimize.curve_fit` started from the best fixed fit. ``b`` is the gap at ``x -> infinity``.
* :func:`fit_inverse_width` -- one fixed-``gamma`` fit of the same model whose standard errors are inflated by
  ``sqrt(chi2/dof)`` when that exceeds 1 (a bad fit is not hidden); Noci et al. 2022, Fig. 10 (the ladder of
  ``sigprop.experiments``).
* :func:`fit_power_law` -- ``log y = a + b log x`` with weights from the delta method, the same inflation;
  the ``d_k``-exponent of Noci et al. 2022, Fig. 7 (Lemma A.7).

Each input is validated (finite, positive where a logarithm or a weight needs it, enough distinct points for
the parameters), and a fit that comes out non-finite is refused instead of returned.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
from scipy import optimize, stats

from ._validate import check_finite, check_positive, check_real

__all__ = ["GapFit", "Extrapolation", "InverseWidthFit", "fit_gap", "extrapolate", "fit_inverse_width",
           "fit_power_law"]

#: A limit is "consistent with zero" when ``|b| <= Z_LIMIT * SE(b)`` (the project's per-point z, CONTRIBUTING.md).
Z_LIMIT = 4.0
#: The models fitted; the primary one is the first of :data:`PREFERENCE` whose fit has p >= :data:`P_FIT`.
MODELS = ("gamma=1", "gamma=1/2", "free")
PREFERENCE = ("gamma=1", "free", "gamma=1/2")
#: Goodness-of-fit p-value below which a model is taken not to describe the ladder.
P_FIT = 0.01
_FIXED = {"gamma=1": 1.0, "gamma=1/2": 0.5}
#: Largest exponent of a fixed-gamma fit (beyond it x^-gamma leaves float64 over any ladder of widths).
GAMMA_MAX = 10.0


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


@dataclasses.dataclass(frozen=True)
class InverseWidthFit:
    """Weighted least-squares fit ``gap = a d^-gamma + b``: ``b`` is the gap extrapolated to ``d -> infinity``.

    Standard errors are the usual WLS ones, inflated by ``sqrt(chi2/dof)`` when that exceeds 1 (as
    :func:`fit_power_law`); ``p`` is the chi-square probability of a worse fit under the model.
    ``gamma = 0`` is the constant model (``a = 0``, only ``b``)."""

    gamma: float
    a: float
    a_se: float
    b: float
    b_se: float
    chi2: float
    dof: int
    p: float

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def _ladder(x, y, s, names, *, minimum):
    """Validated 1-d float64 arrays of equal length >= ``minimum``, ``x`` and ``s`` positive, ``y`` finite."""
    x = check_positive(x, names[0]).ravel()
    y = check_finite(y, names[1]).ravel()
    s = check_positive(s, names[2]).ravel()
    if not (x.shape == y.shape == s.shape) or x.size < minimum:
        raise ValueError(f"{', '.join(names)} must be 1-d of equal length >= {minimum}; got shapes {x.shape}, "
                         f"{y.shape}, {s.shape}")
    if np.unique(x).size < 2:
        raise ValueError(f"{names[0]} must hold at least two distinct values to fit a slope; got {x.tolist()}")
    return x, y, s


def _chi2(resid, dof):
    chi2 = float(np.sum(resid**2))
    if dof <= 0:
        return chi2, math.nan, math.nan
    return chi2, chi2 / dof, float(stats.chi2.sf(chi2, dof))


def _finite(fit, what):
    """Refuse a fit with a non-finite parameter (``chi2_dof`` and ``p`` are NaN, by definition, at zero dof)."""
    values = {k: v for k, v in dataclasses.asdict(fit).items() if isinstance(v, float)}
    if fit.dof <= 0:
        values = {k: v for k, v in values.items() if k not in ("chi2_dof", "p")}
    if not all(math.isfinite(v) for v in values.values()):
        raise ValueError(f"the {what} fit is not finite at these values (degenerate or extreme weights): {fit}")
    return fit


def _fixed(x, y, s, gamma):
    """Weighted least squares of ``a x^-gamma + b`` at fixed ``gamma`` (``gamma = 0``: the constant ``b``, ``a = 0``)."""
    with np.errstate(over="ignore"):
        X = np.ones((len(x), 1)) if gamma == 0 else np.stack([x**-gamma, np.ones_like(x)], 1)   # columns: (a,) b
    W = 1.0 / s**2
    try:
        cov = np.linalg.inv(X.T @ (X * W[:, None]))
    except np.linalg.LinAlgError:
        raise ValueError(f"x^-gamma is constant or degenerate over x at gamma = {gamma:g}: a and b cannot both be "
                         "fitted") from None
    coef = cov @ X.T @ (W * y)
    dof = len(x) - X.shape[1]
    chi2, red, p = _chi2((y - X @ coef) / s, dof)
    a, a_se = (0.0, 0.0) if gamma == 0 else (float(coef[0]), math.sqrt(cov[0, 0]))
    return GapFit(f"gamma={'1' if gamma == 1 else '1/2' if gamma == 0.5 else gamma}", a, a_se, float(gamma), 0.0,
                  float(coef[-1]), math.sqrt(cov[-1, -1]), chi2, dof, red, p)


def _free(x, y, s, start: GapFit):
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
    x, y, s = _ladder(x, gap, se, ("x", "gap", "se"), minimum=3)
    fits = {name: _finite(_fixed(x, y, s, g), name) for name, g in _FIXED.items()}
    if len(x) >= 4:
        free = _free(x, y, s, min(fits.values(), key=lambda f: f.chi2))
        if free is not None:
            fits["free"] = free
    return fits


def extrapolate(x, gap, se) -> Extrapolation:
    """:func:`fit_gap` and the verdict on the limit ``b`` of the primary model (``gamma = 1`` when it fits)."""
    return Extrapolation(fit_gap(x, gap, se))


def fit_inverse_width(d, gap, stderr, *, gamma: float = 1.0) -> InverseWidthFit:
    """Fit ``gap = a d^-gamma + b`` with weights ``1/stderr^2`` (``gamma = 0``: a constant ``b``); the standard
    errors are inflated by ``sqrt(chi2/dof)`` when that exceeds 1 (as :func:`fit_power_law` does)."""
    d, y, s = _ladder(d, gap, stderr, ("d", "gap", "stderr"), minimum=3)
    gamma = check_real(gamma, "gamma", minimum=0.0, maximum=GAMMA_MAX)
    f = _finite(_fixed(d, y, s, gamma), f"gamma={gamma:g}")
    inflate = math.sqrt(max(1.0, f.chi2_dof))
    return InverseWidthFit(gamma, f.a, f.a_se * inflate, f.b, f.b_se * inflate, f.chi2, f.dof, f.p)


def fit_power_law(x, mean, stderr):
    r"""Weighted least-squares fit of :math:`\log y = a + b\log x`; returns ``(b, se_b, a)``.

    Weights :math:`1/\mathrm{se}(\log y)^2` with :math:`\mathrm{se}(\log y) = \mathrm{se}(y)/y`
    (delta method). Used for the :math:`d_k`-exponent of Fig. 7 (Noci et al. 2022, Lemma A.7).
    The slope's standard error is the usual WLS one, inflated by
    :math:`\sqrt{\chi^2/\nu}` when the residuals exceed their error bars (a bad fit is not hidden).
    ``x`` and ``mean`` must be positive (logarithms) with two distinct ``x`` at least, ``stderr > 0``.
    """
    x, y, s = _ladder(x, mean, stderr, ("x", "mean", "stderr"), minimum=3)
    if np.any(y <= 0):
        raise ValueError(f"mean must be > 0 (its logarithm is fitted); got {y.tolist()}")
    lx, ly, w = np.log(x), np.log(y), (y / s) ** 2
    Xd = np.stack([np.ones_like(lx), lx], 1)
    cov = np.linalg.inv(Xd.T @ (Xd * w[:, None]))
    a, b = cov @ Xd.T @ (w * ly)
    chi2 = float(np.sum(w * (ly - a - b * lx) ** 2)) / (x.size - 2)
    out = (float(b), float(np.sqrt(cov[1, 1] * max(1.0, chi2))), float(a))
    if not all(math.isfinite(v) for v in out):
        raise ValueError(f"the power-law fit is not finite at these values (degenerate weights); got {out}")
    return out
