"""Tests for sigprop.attention._query_gradient (Giorlandino & Goldt 2025, Result 2, Eq. 26)."""
import math

import numpy as np
import pytest
import torch

import sigprop as sp
from conftest import Z


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
    assert float(sp.query_jacobian_sq_norm(x, wq, wk, wv)) == pytest.approx(float(J.pow(2).sum()), rel=rtol)


def test_autograd_mc_agrees_with_exact_jacobian_mc():
    """The random read-out G averages to ||J||^2 / T^2: compare the two estimators."""
    beta, T, d, n = 2.0, 64, 32, 400
    est = sp.mc_rem_query_grad_sq_norm(beta, T, d, n, generator=5, device="cpu", dtype=torch.float64)
    g = torch.Generator().manual_seed(6)
    s_qk = math.sqrt(beta * math.sqrt(math.log(T)) / d)
    x = sp.equicorrelated_tokens(n, T=T, d=d, rho=0.0, normalised=True, generator=g, dtype=torch.float64)
    w = [s * torch.randn(n, d, d, generator=g, dtype=torch.float64) for s in (s_qk, s_qk, math.sqrt(1 / d))]
    exact = sp.estimate(sp.query_jacobian_sq_norm(x, *w) / (T * d**2 * math.sqrt(math.log(T))))
    diff = float(est.mean - exact.mean)
    se = math.hypot(float(est.stderr), float(exact.stderr))
    assert abs(diff) <= Z * se


@pytest.mark.parametrize("beta", [0.7, 2.5])
def test_result2_corrected_after_one_over_d_extrapolation(beta):
    """MC at d = 64, 128, 256 extrapolated linearly in 1/d matches the corrected finite-T theory."""
    T, ds = 128, np.array([64, 128, 256])
    ests = [sp.mc_rem_query_grad_sq_norm(beta, T, int(d), 150, generator=3, device="cpu", progress=False) for d in ds]
    m = np.array([float(e.mean) for e in ests])
    s = np.array([float(e.stderr) for e in ests])
    X = np.stack([np.ones(3), 1.0 / ds], 1)
    W = np.diag(1 / s**2)
    cov = np.linalg.inv(X.T @ W @ X)
    coef = cov @ X.T @ W @ m
    theory = sp.theory.rem_query_grad_sq_norm(beta, T=T)
    assert abs(coef[0] - theory) <= Z * math.sqrt(cov[0, 0])


def test_printed_eq26_is_negative_in_condensed_phase():
    betas = np.array([2.0, 3.0, 5.0])
    paper = sp.theory.rem_query_grad_sq_norm(betas, 1.0, 0.0, form="paper")
    m = math.sqrt(2) / betas
    np.testing.assert_allclose(paper, -betas * (1 - m) ** 2, rtol=1e-12)
    assert np.all(paper < 0)
    corrected = sp.theory.rem_query_grad_sq_norm(betas, 1.0, 0.0)
    np.testing.assert_allclose(corrected, betas * m * (1 - m) / 3, rtol=1e-12)
    np.testing.assert_allclose(sp.theory.rem_query_grad_sq_norm(betas, form="mean-field"), 0.0, atol=1e-14)


def test_validation():
    with pytest.raises(ValueError, match="form"):
        sp.theory.rem_query_grad_sq_norm(1.0, form="nope")
    with pytest.raises(ValueError, match="rho"):
        sp.mc_rem_query_grad_sq_norm(1.0, 16, 8, 4, rho=1.5)
