"""Tests for sigprop._rem_gradients (Giorlandino & Goldt 2025, Result 2, Eq. 26)."""
import math

import numpy as np
import pytest
import torch

import sigprop as sp
from sigprop._rem_gradients import _normalised_tokens

Z = 4.0  # Monte Carlo tolerance in standard errors (project default)


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


def test_rem_moments_finite_matches_foundation_ipr_finite():
    for beta, T in [(0.3, 100), (0.9, 1000), (1.6, 4096), (3.0, 50000)]:
        y2, y3, _ = sp.theory.rem_moments(beta, T=T)
        assert y2 == pytest.approx(sp.theory.ipr_finite(beta, T, r=2), rel=1e-5)
        assert y3 == pytest.approx(sp.theory.ipr_finite(beta, T, r=3), rel=1e-5)


def test_rem_moments_uniform_limit():
    y2, y3, y22 = sp.theory.rem_moments(1e-6, T=64)
    assert y2 == pytest.approx(1 / 64, rel=1e-6)
    assert y3 == pytest.approx(1 / 64**2, rel=1e-6)
    assert y22 == pytest.approx(1 / 64**2, rel=1e-6)


def test_rem_moments_continuous_across_quadrature_switch():
    # sigma = beta sqrt(log T) crosses the Gauss-Hermite / grid switch at 1.0
    T = 200
    b0 = 1.0 / math.sqrt(math.log(T))
    lo = np.array(sp.theory.rem_moments(b0 * (1 - 1e-10), T=T))
    hi = np.array(sp.theory.rem_moments(b0 * (1 + 1e-10), T=T))
    np.testing.assert_allclose(lo, hi, rtol=1e-6)


@pytest.mark.parametrize("beta,T", [(0.8, 512), (2.0, 1000), (3.0, 4096)])
def test_rem_moments_finite_against_rem_monte_carlo(beta, T):
    g = torch.Generator().manual_seed(11)
    sigma = beta * math.sqrt(math.log(T))
    A = torch.softmax(sigma * torch.randn(4000, T, generator=g, dtype=torch.float64), -1)
    y2 = A.pow(2).sum(-1)
    stats = torch.stack([y2, A.pow(3).sum(-1), y2**2], -1)
    est = sp.estimate(stats)
    assert est.agrees(np.array(sp.theory.rem_moments(beta, T=T)), z=Z)


def test_jacobian_identity_against_full_autograd_jacobian():
    g = torch.Generator().manual_seed(0)
    T, d = 6, 5
    x = torch.randn(T, d, generator=g, dtype=torch.float64)
    wq, wk, wv = (torch.randn(d, d, generator=g, dtype=torch.float64) for _ in range(3))

    def S(w):
        A = torch.softmax((x @ w.T) @ (x @ wk.T).T / math.sqrt(d), -1)
        return A @ (x @ wv.T)

    J = torch.autograd.functional.jacobian(S, wq)
    rtol, atol = sp.TOL[torch.float64]
    assert float(sp.query_jacobian_norm(x, wq, wk, wv)) == pytest.approx(float(J.pow(2).sum()), rel=rtol)


def test_autograd_mc_agrees_with_exact_jacobian_mc():
    """The random read-out G averages to ||J||^2 / T^2: compare the two estimators."""
    beta, T, d, n = 2.0, 64, 32, 400
    est = sp.query_grad_norm_mc(beta, T, d, n, generator=5, device="cpu", dtype=torch.float64)
    g = torch.Generator().manual_seed(6)
    s_qk = math.sqrt(beta * math.sqrt(math.log(T)) / d)
    x = _normalised_tokens(n, T, d, 0.0, g, "cpu", torch.float64)
    w = [s * torch.randn(n, d, d, generator=g, dtype=torch.float64) for s in (s_qk, s_qk, math.sqrt(1 / d))]
    exact = sp.estimate(sp.query_jacobian_norm(x, *w) / (T * d**2 * math.sqrt(math.log(T))))
    diff = float(est.mean - exact.mean)
    se = math.hypot(float(est.stderr), float(exact.stderr))
    assert abs(diff) <= Z * se


@pytest.mark.parametrize("beta", [0.7, 2.5])
def test_result2_corrected_after_one_over_d_extrapolation(beta):
    """MC at d = 64, 128, 256 extrapolated linearly in 1/d matches the corrected finite-T theory."""
    T, ds = 128, np.array([64, 128, 256])
    ests = [sp.query_grad_norm_mc(beta, T, int(d), 150, generator=3, device="cpu", progress=False) for d in ds]
    m = np.array([float(e.mean) for e in ests])
    s = np.array([float(e.stderr) for e in ests])
    X = np.stack([np.ones(3), 1.0 / ds], 1)
    W = np.diag(1 / s**2)
    cov = np.linalg.inv(X.T @ W @ X)
    coef = cov @ X.T @ W @ m
    theory = sp.theory.query_grad_norm(beta, T=T)
    assert abs(coef[0] - theory) <= Z * math.sqrt(cov[0, 0])


def test_printed_eq26_is_negative_in_condensed_phase():
    betas = np.array([2.0, 3.0, 5.0])
    paper = sp.theory.query_grad_norm(betas, 1.0, 0.0, form="paper")
    m = math.sqrt(2) / betas
    np.testing.assert_allclose(paper, -betas * (1 - m) ** 2, rtol=1e-12)
    assert np.all(paper < 0)
    corrected = sp.theory.query_grad_norm(betas, 1.0, 0.0)
    np.testing.assert_allclose(corrected, betas * m * (1 - m) / 3, rtol=1e-12)
    np.testing.assert_allclose(sp.theory.query_grad_norm(betas, form="mean-field"), 0.0, atol=1e-14)


def test_validation():
    with pytest.raises(ValueError, match="form"):
        sp.theory.query_grad_norm(1.0, form="nope")
    with pytest.raises(ValueError, match="T"):
        sp.theory.rem_moments(1.0, T=1)
    with pytest.raises(ValueError, match="beta"):
        sp.theory.rem_moments(-1.0)
    with pytest.raises(ValueError, match="rho"):
        sp.query_grad_norm_mc(1.0, 16, 8, 4, rho=1.5)
