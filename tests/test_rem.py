"""Tests for sigprop.attention._rem: the REM of one attention row (Giorlandino & Goldt 2025, Result 1, App. B.1-B.3)."""
import math

import numpy as np
import pytest
import torch

import sigprop as sp
from conftest import Z

th = sp.theory


def test_beta_c_values_and_types():
    assert th.beta_c(1.0, 0.0) == pytest.approx(math.sqrt(2))
    assert th.beta_c(2.0, 1.0) == pytest.approx(1.0)
    assert isinstance(th.beta_c(1.0, 0.0), float)
    assert th.beta_c(np.array([1.0, 2.0]), 0.0).shape == (2,)
    assert isinstance(th.beta_c(torch.tensor([1.0]), 0.0), torch.Tensor)


@pytest.mark.parametrize("q, p, match", [(0.0, 0.0, "q must be > 0"), (1.0, 1.5, r"\|p\| <= q"),
                                         (1.0, 1.0, "p < q"), (float("nan"), 0.0, "finite")])
def test_beta_c_rejects_bad_overlaps(q, p, match):
    with pytest.raises(ValueError, match=match):
        th.beta_c(q, p)


def test_ipr_limit_formulas():
    beta = np.array([0.5, math.sqrt(2), 2.0, 4.0])
    m = math.sqrt(2) / beta
    assert np.allclose(th.ipr(beta), np.maximum(0, 1 - m))  # Eq. (4)
    y3 = np.where(m < 1, (1 - m) * (2 - m) / 2, 0.0)  # Poisson-Dirichlet, r = 3
    assert np.allclose(th.ipr(beta, r=3), y3)
    assert np.allclose(th.ipr(beta, r=1), 1.0)
    assert th.ipr(2.0, q=1.0, p=1.0) == 0.0  # collapsed tokens: uniform attention
    with pytest.raises(ValueError, match="beta must be > 0"):
        th.ipr(0.0)
    with pytest.raises(ValueError, match="r"):
        th.ipr(2.0, r=0.5)


def test_ipr_finite_small_beta_and_order_one():
    assert th.ipr_finite(1e-6, 500) == pytest.approx(1 / 500, rel=1e-6)
    assert th.ipr_finite(1e-6, 500, r=3) == pytest.approx(500 ** -2, rel=1e-5)
    assert th.ipr_finite(2.0, 1000, r=1) == pytest.approx(1.0, abs=1e-8)


def test_ipr_finite_against_direct_rem_simulation():
    # independent check of the quadrature: T i.i.d. Gaussian energies, exact softmax
    T, beta = 500, 1.5
    sigma = beta * math.sqrt(math.log(T))
    g = torch.Generator().manual_seed(0)
    a = sigma * torch.randn(20000, T, generator=g, dtype=torch.float64)
    y = (torch.softmax(a, -1) ** 2).sum(-1)
    assert sp.estimate(y).agrees(th.ipr_finite(beta, T), z=Z)


def test_ipr_finite_tends_to_limit():
    # the finite-T value approaches Eq. (4) as T grows (slowly, in log T)
    for beta in (0.8, 3.0):
        gaps = [abs(th.ipr_finite(beta, T) - th.ipr(beta)) for T in (1e2, 1e4, 1e6)]
        assert gaps[0] > gaps[1] > gaps[2]


def test_rem_moments_limit_matches_poisson_dirichlet_ipr():
    betas = np.array([0.5, 1.2, 1.5, 2.0, 3.0, 10.0])
    y2, y3, y22 = sp.theory.rem_moments(betas, 1.0, 0.2)
    np.testing.assert_allclose(y2, sp.theory.ipr(betas, 1.0, 0.2, r=2), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(y3, sp.theory.ipr(betas, 1.0, 0.2, r=3), rtol=1e-12, atol=1e-15)
    # Y2 in [0, 1] so E[Y2]^2 <= E[Y2^2] <= E[Y2], strictly inside the condensed phase
    cond = y2 > 0
    assert np.all(y22[cond] > y2[cond] ** 2) and np.all(y22[cond] < y2[cond])
    # closed form (1 - m)(3 - 2m)/3
    m = sp.theory.beta_c(1.0, 0.2) / betas[cond]
    np.testing.assert_allclose(y22[cond], (1 - m) * (3 - 2 * m) / 3, rtol=1e-12)


def test_rem_moments_uniform_limit():
    y2, y3, y22 = sp.theory.rem_moments(1e-6, T=64)
    assert y2 == pytest.approx(1 / 64, rel=1e-6)
    assert y3 == pytest.approx(1 / 64**2, rel=1e-6)
    assert y22 == pytest.approx(1 / 64**2, rel=1e-6)


@pytest.mark.parametrize("beta,T", [(0.8, 512), (2.0, 1000), (3.0, 4096)])
def test_rem_moments_finite_against_rem_monte_carlo(beta, T):
    g = torch.Generator().manual_seed(11)
    sigma = beta * math.sqrt(math.log(T))
    A = torch.softmax(sigma * torch.randn(4000, T, generator=g, dtype=torch.float64), -1)
    y2 = A.pow(2).sum(-1)
    stats = torch.stack([y2, A.pow(3).sum(-1), y2**2], -1)
    # E Y2, E Y3 and E Y2^2 of the same rows: one curve, tested as a whole at level 1e-3
    ca = sp.curve_agreement(stats, np.array(sp.theory.rem_moments(beta, T=T)), level=1e-3, n_resamples=9999)
    assert ca.passed, str(ca)




# Independent check of the one quadrature over its whole range, in particular small T with large
# energy scales (where an earlier version's y-grid stopped too early): direct simulation of T i.i.d.
# Gaussian energies, exact softmax. 40,000 rows give SE ~ 1e-3; the quadrature is ~1e-12.
@pytest.mark.parametrize("sigma,T", [(20.0, 2), (59.0, 3), (10.0, 6), (200.0, 6), (3.0, 64), (0.3, 1000)])
def test_quadrature_against_direct_simulation_over_its_range(sigma, T):
    beta = sigma / math.sqrt(math.log(T))
    est = sp.mc_rem_moments(beta, T=T, n=40_000, generator=17, device="cpu")
    # the three moments of the same rows are correlated; Bonferroni over 3 points at family-wise level 1e-3
    # (|z| <= 3.4) holds under any dependence (mc_rem_moments streams its sums and keeps no per-row values)
    assert np.all(np.abs(est.zscore(np.array(th.rem_moments(beta, T=T)))) <= 3.4)
    y2, y3 = (th.ipr_finite(beta, T, r=r) for r in (2, 3))
    assert (y2, y3) == (pytest.approx(th.rem_moments(beta, T=T)[0], rel=1e-12),
                        pytest.approx(th.rem_moments(beta, T=T)[1], rel=1e-12))


def test_quadrature_sum_rule_and_resolution():
    # E Y^(1) = E sum_s A_s = 1 exactly: a check of the whole quadrature at every scale
    for T in (2, 7, 300, 1e6, 1e12):
        for sigma in (1e-3, 0.7, 1.0, 4.0, 40.0, 1e4):
            beta = sigma / math.sqrt(math.log(T))
            assert th.ipr_finite(beta, T, r=1) == pytest.approx(1.0, abs=1e-10)
    # a grid four times finer changes nothing at the 1e-10 level
    from sigprop.attention import _rem
    for sigma, T in [(3.0, 6), (10.0, 1000), (0.5, 1e5), (500.0, 64)]:
        coarse = _rem.rem_quadrature(sigma, T, (2.0, 3.0), square=True)
        old = (_rem._X_LO, _rem._X_HI, _rem._DX)
        try:
            _rem._DX = old[2] / 4
            fine = _rem.rem_quadrature(sigma, T, (2.0, 3.0), square=True)
        finally:
            _rem._X_LO, _rem._X_HI, _rem._DX = old
        np.testing.assert_allclose(coarse, fine, rtol=1e-10)


@pytest.mark.parametrize("T", [1e13, 1e20, 1e50, 1e100])
def test_huge_T_keeps_the_one_over_T_floor(T):
    # High-temperature phase (beta = sigma / sqrt(log T) far below beta_c / 2): E Y2 = e^{sigma^2} / T up to a
    # finite-T correction of relative order e^{3 sigma^2} / T (measured 6e-10 at sigma = 2, T = 1e13), so
    # sigma = 2 only from T = 1e20. The grid used to stop at -(log T + 40)/2 and lost the 1/T floor: T E Y2
    # read 0.25 (T = 1e20, sigma = 1e-3) and 0 (T = 1e30).
    for sigma in (1e-3, 0.3, 1.0) + ((2.0,) if T >= 1e20 else ()):
        assert sp.attention.rem_quadrature(sigma, T)[0] * T == pytest.approx(math.exp(sigma**2), rel=1e-10)
    assert th.ipr_finite(1e-3 / math.sqrt(math.log(T)), T) * T == pytest.approx(math.exp(1e-6), rel=1e-10)


def test_T_beyond_the_domain_is_refused():
    with pytest.raises(ValueError, match=r"T \(sequence length\) must be <= 1e\+100 \(the finite-T quadrature"):
        th.ipr_finite(1.0, 1e300)
    with pytest.raises(ValueError, match=r"must be <= 1e\+100"):
        th.rem_moments(1.0, T=1e101)


def test_finite_T_approaches_poisson_dirichlet_at_large_scale():
    # deep in the condensed phase the finite-T moments tend to the T -> infinity ones (no switch, no jump)
    T = 100
    betas = np.array([10.0, 20.0, 40.0]) / math.sqrt(math.log(T))
    finite = np.array(th.rem_moments(betas, T=T))
    limit = np.array(th.rem_moments(betas))
    gaps = np.abs(finite - limit).max(0)
    assert np.all(np.diff(gaps) < 0)


def test_rem_validation():
    with pytest.raises(ValueError, match="T"):
        th.rem_moments(1.0, T=1)
    with pytest.raises(ValueError, match="beta"):
        th.rem_moments(-1.0)
    with pytest.raises(ValueError, match=r"r \(order of the participation ratio\) must lie in \[1.0, 64.0\]"):
        th.ipr_finite(1.0, 10, r=200)
