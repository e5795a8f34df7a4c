"""sigprop.stats._fits: the one place the book fits a curve (issue 24: three fitting helpers in one module)."""
import math

import numpy as np
import pytest

import sigprop as sp


def _ladder(a=0.3, b=0.01, gamma=1.0, seed=0, k=6):
    x = np.array([16.0, 32, 64, 128, 256, 512])[:k]
    se = np.full(k, 1e-3)
    y = a * x**-gamma + b + se * np.random.default_rng(seed).standard_normal(k)
    return x, y, se


def test_fit_gap_recovers_the_limit_within_its_standard_error():
    # 6 rungs with unit-normal noise in SE units: b within 4 SE of the truth, chi2/dof of order 1
    x, y, se = _ladder()
    fits = sp.fit_gap(x, y, se)
    assert list(fits) == ["gamma=1", "gamma=1/2", "free"]
    f = fits["gamma=1"]
    assert abs(f.b - 0.01) <= 4 * f.b_se and abs(f.a - 0.3) <= 4 * f.a_se and f.dof == 4 and f.p > 1e-3
    ext = sp.extrapolate(x, y, se)
    assert ext.primary == "gamma=1" and ext.fits_well and ext.limit == f.b and not ext.consistent_with_zero
    assert "gap(d -> inf)" in ext.summary()


def test_fit_inverse_width_and_power_law():
    x, y, se = _ladder(b=0.0, seed=1)
    fit = sp.fit_inverse_width(x, y, se)
    assert abs(fit.b) <= 4 * fit.b_se and fit.gamma == 1.0
    # an exactly known power law y = 2 x^-0.5 with 1% errors: slope -0.5 within its SE
    xs = np.array([1.0, 2, 4, 8, 16])
    b, se_b, a = sp.fit_power_law(xs, 2 * xs**-0.5, 0.01 * 2 * xs**-0.5)
    assert b == pytest.approx(-0.5, abs=1e-12) and a == pytest.approx(math.log(2), abs=1e-12) and se_b > 0


def test_the_old_experiments_names_give_the_same_numbers():
    # sigprop.experiments keeps its own copy until its callers switch (h23): the same fits to rounding
    from sigprop.experiments import fit_gap as old
    x, y, se = _ladder(seed=3)
    new = sp.fit_gap(x, y, se)
    for name, f in old(x, y, se).items():
        np.testing.assert_allclose(list(f.as_dict().values())[1:], list(new[name].as_dict().values())[1:],
                                   rtol=1e-8)


@pytest.mark.parametrize("args, match", [
    (([1.0, 1.0, 1.0], [0.1, 0.2, 0.3], [0.01] * 3), "at least two distinct values"),   # issue 26, item 16
    (([1.0, 2.0, np.inf], [0.1, 0.2, 0.3], [0.01] * 3), "must be finite"),
    (([1.0, 2.0, 3.0], [0.1, np.nan, 0.3], [0.01] * 3), "must be finite"),
    (([1.0, 2.0, 3.0], [0.1, 0.2, 0.3], [0.01, 0.0, 0.01]), r"must be > 0"),
    (([1.0, 2.0], [0.1, 0.2], [0.01] * 2), "equal length >= 3"),
])
def test_degenerate_ladders_are_refused(args, match):
    for fit in (sp.fit_gap, sp.fit_inverse_width, sp.fit_power_law):
        with pytest.raises(ValueError, match=match):
            fit(*args)


def test_power_law_needs_positive_means():
    with pytest.raises(ValueError, match=r"mean must be > 0 \(its logarithm"):
        sp.fit_power_law([1.0, 2.0, 4.0], [0.1, -0.2, 0.3], [0.01] * 3)
