"""Tests for sigprop.attention._covariance (Aghajanyan 2025): theory vs Monte Carlo, exact identities.

Monte Carlo checks use |MC - theory| <= Z * SE with fixed seeds (Z = 4) for single numbers; a matrix of
entries estimated from the same draws (all pairs (i, l) of one sample) is one curve-level test,
``_agrees_curve``; exact identities use the float64 row of sp.TOL.
"""
import math

import numpy as np
import pytest
import torch

import sigprop as sp
from conftest import Z

S8 = sp.presets.AGHAJANYAN_SEC8

T = sp.theory
RTOL, ATOL = 1e-10, 1e-12


def _rand_pd(d, g):
    a = torch.randn(d, d, generator=g, dtype=torch.float64)
    return a @ a.T / d + 0.2 * torch.eye(d, dtype=torch.float64)


def _gauss_tokens(n, N, d, sigma, g):
    L = torch.linalg.cholesky(sigma)
    return torch.randn(n, N, d, generator=g, dtype=torch.float64) @ L.T


def _agrees_curve(samples, theory, batches=50):
    """All entries of ``samples (n, ...)`` share their draws: one curve-level test of the whole array against
    ``theory``. Rows are batch means over ``batches`` groups of the i.i.d. draws (nearly Gaussian, so sign flips
    are calibrated); level 1e-3 with 9999 resamples, the CI level of CONTRIBUTING.md."""
    x = samples.reshape(batches, -1, *samples.shape[1:]).mean(1)
    res = sp.curve_agreement(x, theory, level=1e-3, n_resamples=9999)
    assert res.passed, str(res)
    return res


def _weights(d_k, d_v, d, g):
    s = 1 / math.sqrt(d)
    return (torch.randn(d_k, d, generator=g, dtype=torch.float64) * s,
            torch.randn(d_k, d, generator=g, dtype=torch.float64) * s,
            torch.randn(d_v, d, generator=g, dtype=torch.float64) * s)


# ----------------------------------------------------------------------------- Lemma 1
@pytest.mark.parametrize("causal", [False, True])
def test_witness_covariance_matches_monte_carlo(causal):
    g = sp.as_generator(0)
    N, d, d_k, d_v, n = 6, 8, 4, 5, 40_000
    sigma = _rand_pd(d, g)
    wq, wk, wv = _weights(d_k, d_v, d, g)
    u = torch.randn(d_v, generator=g, dtype=torch.float64)
    u = u / u.norm()
    x = _gauss_tokens(n, N, d, sigma, g)
    out, a = sp.self_attention(x, 0 * wq, 0 * wk, wv, causal=causal)  # alpha = 0: uniform rows
    y = out @ u  # (n, N)
    prod = y[:, :, None] * y[:, None, :]  # mean-zero outputs: Cov = E[product]
    theory = T.witness_covariance(wv, N, sigma_x=sigma, causal=causal, u=u)
    _agrees_curve(prod, theory)
    # the test has power: a theory 5% off fails
    x = prod.reshape(50, -1, N, N).mean(1)
    assert not sp.curve_agreement(x, 1.05 * theory, level=1e-3, n_resamples=9999).passed
    full = T.witness_covariance(wv, N, sigma_x=sigma, causal=causal)
    assert torch.allclose(torch.einsum("a,klab,b->kl", u, full, u), theory, rtol=RTOL, atol=ATOL)
    var_m = (u @ wv @ sigma @ wv.T @ u) / N  # the post's Var(u^T M) = u^T W_V Sigma W_V^T u / N
    if not causal:
        assert torch.allclose(theory, torch.full((N, N), float(var_m), dtype=torch.float64), rtol=RTOL)
    else:  # prefix means: Cov = N Var(u^T M) / max(i, l); correlation sqrt(min/max)
        i = torch.arange(1, N + 1, dtype=torch.float64)
        assert torch.allclose(theory, N * var_m / torch.maximum(i[:, None], i[None]), rtol=RTOL)


def test_prefix_mean_factor_values():
    f = T.prefix_mean_factor(4)
    assert f[0, 3] == 0.25 and f[1, 1] == 0.5 and f[2, 0] == pytest.approx(1 / 3)
    assert torch.allclose(T.prefix_mean_factor(4, causal=False), torch.full((4, 4), 0.25, dtype=torch.float64))


# ----------------------------------------------------------------------------- Lemma 5
def _delta(x, wq, wk, wv, causal):
    """d O / d(alpha^2) at alpha = 0 by forward-mode autodiff (queries scaled by t = alpha^2)."""
    def f(t):
        return sp.self_attention(x, t * wq, wk, wv, causal=causal)[0]
    t0 = torch.zeros((), dtype=torch.float64)
    m, delta = torch.func.jvp(f, (t0,), (torch.ones_like(t0),))
    return m, delta


@pytest.mark.parametrize("causal", [False, True])
def test_small_alpha_delta_closed_form(causal):
    g = sp.as_generator(1)
    N, d, d_k, d_v = 5, 6, 3, 4
    wq, wk, wv = _weights(d_k, d_v, d, g)
    x = torch.randn(7, N, d, generator=g, dtype=torch.float64)
    _, delta = _delta(x, wq, wk, wv, causal)
    b = wq.T @ wk / math.sqrt(d_k)
    for i in range(N):
        vis = x[:, : i + 1] if causal else x
        xbar = vis.mean(1, keepdim=True)
        chat = (vis.transpose(1, 2) @ (vis - xbar)) / vis.shape[1]  # (7, d, d)
        closed = (wv @ chat @ b.T @ x[:, i, :, None])[..., 0]
        assert torch.allclose(delta[:, i], closed, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("causal", [False, True])
def test_small_alpha_correction_matches_monte_carlo(causal):
    g = sp.as_generator(2)
    N, d, d_k, d_v, n = 5, 6, 3, 4, 100_000
    sigma = _rand_pd(d, g)
    wq, wk, wv = _weights(d_k, d_v, d, g)
    wq, wk = 2 * wq, 2 * wk  # a larger B makes the correction clearly nonzero
    u = torch.randn(d_v, generator=g, dtype=torch.float64)
    x = _gauss_tokens(n, N, d, sigma, g)
    m, delta = _delta(x, wq, wk, wv, causal)
    ym, yd = m @ u, delta @ u
    prod = ym[:, :, None] * yd[:, None, :] + yd[:, :, None] * ym[:, None, :]
    theory = T.small_alpha_correction(wq, wk, wv, N, sigma_x=sigma, causal=causal, u=u)
    _agrees_curve(prod, theory)
    assert np.abs(sp.estimate(prod).zscore(0.0)).max() > 10  # the correction is not trivially zero here
    if not causal:  # full mask: the same matrix for every pair (i, l)
        assert torch.allclose(theory, theory[0, 0].expand_as(theory), rtol=RTOL)


def test_small_alpha_expansion_at_small_alpha():
    """Cov(alpha) = Cov(0) + alpha^2 C1 + O(alpha^4), checked on the real attention (not the linearisation).

    g(alpha) = (y y^T - y0 y0^T) / alpha^2 per sample (common random numbers) has mean C1 + alpha^2 C2 + O(alpha^4);
    the Richardson combination 2 g(alpha) - g(sqrt(2) alpha) removes the alpha^2 term, leaving O(alpha^4).
    """
    g = sp.as_generator(3)
    N, d, d_k, d_v, n = 4, 6, 3, 4, 100_000
    wq, wk, wv = _weights(d_k, d_v, d, g)
    wq, wk = 2 * wq, 2 * wk
    u = torch.randn(d_v, generator=g, dtype=torch.float64)
    x = torch.randn(n, N, d, generator=g, dtype=torch.float64)
    c1 = T.small_alpha_correction(wq, wk, wv, N, u=u)
    y0 = sp.self_attention(x, 0 * wq, wk, wv)[0] @ u

    def gfun(alpha):
        y = sp.self_attention(x, alpha**2 * wq, wk, wv)[0] @ u
        return (y[:, :, None] * y[:, None] - y0[:, :, None] * y0[:, None]) / alpha**2

    alpha = 0.15
    rich = 2 * gfun(alpha) - gfun(math.sqrt(2) * alpha)
    _agrees_curve(rich, c1)
    assert np.abs(sp.estimate(rich).zscore(0.0)).max() > 10


# ----------------------------------------------------------------------------- Step 4
def test_layer2_values_covariance():
    g = sp.as_generator(4)
    N, d, d_k, d_v, n = 5, 8, 4, 8, 40_000
    wq, wk, wv = _weights(d_k, d_v, d, g)
    w2 = torch.randn(6, d_v, generator=g, dtype=torch.float64) / math.sqrt(d_v)
    u = torch.randn(6, generator=g, dtype=torch.float64)
    x = torch.randn(n, N, d, generator=g, dtype=torch.float64)
    out, _ = sp.self_attention(x, 0 * wq, 0 * wk, wv)
    y = (out @ w2.T) @ u
    theory = T.witness_covariance(wv, N, u=w2.T @ u)  # W2 Cov(O_i, O_l) W2^T seen along u
    _agrees_curve(y[:, :, None] * y[:, None], theory)


# ----------------------------------------------------------------------------- Section 2
def test_total_covariance_terms_sum():
    g = sp.as_generator(5)
    N, d, d_k, d_v, n = 5, 12, 2, 6, 60_000
    wq, wk, wv = _weights(d_k, d_v, d, g)
    wq, wk = 3 * wq, 3 * wk
    u = torch.randn(d_v, generator=g, dtype=torch.float64)
    x = torch.randn(n, N, d, generator=g, dtype=torch.float64)
    terms = sp.total_covariance_terms(x, wq, wk, wv, u)
    _agrees_curve(terms["product"] - terms["conditional"] - terms["mean_part"], torch.zeros(N, N, dtype=torch.float64))
    cond, mean = sp.estimate(terms["conditional"]), sp.estimate(terms["mean_part"])
    assert np.abs(cond.zscore(0.0))[0, 1] > 10 and np.abs(mean.zscore(0.0))[0, 1] > 10  # both terms present
    c, r = sp.logit_subspace_split(wq, wk, wv, u)
    assert torch.allclose(c + r, wv.T @ u, rtol=RTOL, atol=ATOL)
    assert abs(float(c @ r)) < 1e-10 and torch.allclose(r @ wq.T, torch.zeros(d_k, dtype=torch.float64), atol=1e-10)


# ----------------------------------------------------------------------------- Section 6, 7
def test_quadratic_form_variance_monte_carlo():
    g = sp.as_generator(6)
    N, n = 6, 200_000
    cov = _rand_pd(N, g)
    a = torch.softmax(torch.randn(N, generator=g, dtype=torch.float64), 0)
    y = torch.randn(n, N, generator=g, dtype=torch.float64) @ torch.linalg.cholesky(cov).T
    est = sp.estimate((y @ a) ** 2)
    assert est.agrees(T.quadratic_form_variance(a, cov), z=Z)
    # norm-only identity is the special case cov = s^2 I
    assert T.quadratic_form_variance(a, 2.0 * torch.eye(N, dtype=torch.float64)) == pytest.approx(2 * float(a @ a))


def test_compound_symmetry():
    N = 7
    lo, hi = T.compound_symmetry_rho_range(N)
    assert lo == pytest.approx(-1 / 6) and hi == 1.0
    for rho in (lo, -0.1, 0.0, 0.4, 1.0):
        ev = torch.linalg.eigvalsh(T.compound_symmetry_covariance(N, 2.0, rho))
        assert ev.min() > -1e-12
    ev = torch.linalg.eigvalsh(2.0 * ((1 - (lo - 0.01)) * torch.eye(N, dtype=torch.float64)
                                      + (lo - 0.01) * torch.ones(N, N, dtype=torch.float64)))
    assert ev.min() < 0  # just outside the range: not PSD
    with pytest.raises(ValueError, match="rho"):
        T.compound_symmetry_covariance(N, 1.0, lo - 0.01)
    g = sp.as_generator(7)
    a = torch.rand(20, N, generator=g, dtype=torch.float64)
    cov = T.compound_symmetry_covariance(N, 1.5, 0.3)
    assert torch.allclose(T.compound_symmetry_variance(a, 1.5, 0.3), T.quadratic_form_variance(a, cov), rtol=RTOL)
    l1, l2 = a.abs().sum(-1), a.norm(dim=-1)
    assert torch.allclose(T.compound_symmetry_variance(a, 1.5, 0.3), 1.5 * (0.7 * l2**2 + 0.3 * l1**2), rtol=RTOL)


def test_common_mode_split():
    g = sp.as_generator(8)
    cov = _rand_pd(6, g)
    cbar, r = T.common_mode_split(cov)
    off = ~torch.eye(6, dtype=torch.bool)
    assert abs(float(r[off].mean())) < 1e-12
    a = torch.rand(6, generator=g, dtype=torch.float64)
    assert float(cbar * a.sum() ** 2 + a @ r @ a) == pytest.approx(float(a @ cov @ a), rel=1e-12)
    cs = T.compound_symmetry_covariance(5, 2.0, 0.25)
    cb, rr = T.common_mode_split(cs)
    assert float(cb) == pytest.approx(0.5) and torch.allclose(rr, 1.5 * torch.eye(5, dtype=torch.float64))


# ----------------------------------------------------------------------------- Section 10
def test_conditional_cosine_is_correlation():
    g = sp.as_generator(9)
    N, n = 6, 100_000
    p = torch.softmax(torch.randn(N, generator=g, dtype=torch.float64), 0)
    q = torch.softmax(torch.randn(N, generator=g, dtype=torch.float64), 0)
    y = 1.7 * torch.randn(n, N, generator=g, dtype=torch.float64)
    est = sp.pearson(y @ p, y @ q)
    assert est.agrees(T.conditional_cosine(p, q), z=Z)


def test_logit_range_bounds():
    g = sp.as_generator(10)
    N = 9
    z1 = torch.randn(5000, N, generator=g, dtype=torch.float64) * torch.rand(5000, 1, generator=g, dtype=torch.float64) * 3
    z2 = torch.randn(5000, N, generator=g, dtype=torch.float64) * torch.rand(5000, 1, generator=g, dtype=torch.float64) * 3
    p, q = torch.softmax(z1, -1), torch.softmax(z2, -1)
    rp, rq = T.logit_range(z1), T.logit_range(z2)
    cos = T.conditional_cosine(p, q)
    post = T.overlap_lower_bound(rp, rq, N)
    ours = T.cosine_lower_bound(rp, rq)
    assert bool(((p * q).sum(-1) >= post * (1 - 1e-12)).all()) and bool((cos >= post).all())
    assert bool((cos >= ours * (1 - 1e-12)).all()) and bool((ours >= post).all())
    # the sech bound is attained: N = 2, p = softmax(0, R), q = softmax(R, 0)
    R = 1.3
    pp = torch.softmax(torch.tensor([0.0, R], dtype=torch.float64), 0)
    qq = torch.softmax(torch.tensor([R, 0.0], dtype=torch.float64), 0)
    assert float(T.conditional_cosine(pp, qq)) == pytest.approx(float(T.cosine_lower_bound(R, R)), rel=1e-12)


# ----------------------------------------------------------------------------- Section 11
def test_common_mode_energy_measure_matches_theory():
    g = sp.as_generator(11)
    N, n = 8, 100_000
    cov = _rand_pd(N, g) + 0.5 * torch.ones(N, N, dtype=torch.float64)
    y = torch.randn(n, N, generator=g, dtype=torch.float64) @ torch.linalg.cholesky(cov).T
    est = sp.common_mode_energy(y)
    assert est.agrees(T.common_mode_energy_of(cov), z=Z)
    e1, e2 = T.uniform_attention_variances(cov)
    assert float(e2 / e1) == pytest.approx(N, rel=1e-12)
    assert float(e1) == pytest.approx(float(T.quadratic_form_variance(torch.full((N,), 1 / N, dtype=torch.float64), cov)))
    # L2-normalised uniform weights: variance N * E_cm, by Monte Carlo
    est2 = sp.estimate((y @ torch.full((N,), N**-0.5, dtype=torch.float64)) ** 2)
    assert est2.agrees(float(e2), z=Z)
    # vector version: the trace of Cov(mean)
    v = torch.randn(n, N, 3, generator=g, dtype=torch.float64)
    assert sp.common_mode_energy(v, vector=True).agrees(3 / N, z=Z)


@pytest.mark.parametrize("tau2", [0.0, 0.7])
def test_shared_plus_noise_regimes(tau2):
    g = sp.as_generator(12)
    n = 50_000
    for N in (4, 16, 64):
        y = math.sqrt(tau2) * torch.randn(n, 1, generator=g, dtype=torch.float64) + torch.randn(n, N, generator=g, dtype=torch.float64)
        assert sp.common_mode_energy(y).agrees(T.shared_plus_noise_energy(N, shared_var=tau2), z=Z)
    assert T.shared_plus_noise_energy(10, noise_var=2.0, mean_offdiag=0.0) == pytest.approx(0.2)


def test_l1_floor():
    g = sp.as_generator(13)
    N = 7
    cov = _rand_pd(N, g)
    lam = float(T.l1_floor_constant(cov))
    ones = torch.ones(N, dtype=torch.float64)
    assert lam == pytest.approx(1 / float(ones @ torch.linalg.solve(cov, ones)), rel=1e-10)
    a = torch.rand(10_000, N, generator=g, dtype=torch.float64)
    assert bool((T.quadratic_form_variance(a, cov) >= lam * a.sum(-1) ** 2 * (1 - 1e-12)).all())
    a_star = torch.linalg.solve(cov, ones)  # equality case
    assert float(a_star @ cov @ a_star) == pytest.approx(lam * float(a_star.sum()) ** 2, rel=1e-10)
    assert float(T.l1_floor_constant(2.0 * torch.eye(N, dtype=torch.float64))) == pytest.approx(2.0 / N)
    # singular PSD with 1 outside the range: floor is 0 (a = e1 - e2 direction has zero variance)
    v = torch.tensor([1.0, -1.0, 0.0], dtype=torch.float64)
    sing = torch.eye(3, dtype=torch.float64) - torch.outer(v, v) / 2  # kills (1,-1,0)... 1 in range
    assert float(T.l1_floor_constant(sing)) == pytest.approx(1 / 3)
    w = torch.tensor([1.0, 1.0, 1.0], dtype=torch.float64) / math.sqrt(3)
    kill1 = torch.eye(3, dtype=torch.float64) - torch.outer(w, w)  # kills 1: floor 0
    assert float(T.l1_floor_constant(kill1)) == 0.0


# ----------------------------------------------------------------------------- Section 12
def test_residual_mixture_correlation_monte_carlo():
    g = sp.as_generator(14)
    n = 200_000
    shared = torch.randn(n, generator=g, dtype=torch.float64)
    r_i = shared + 0.8 * torch.randn(n, generator=g, dtype=torch.float64)
    r_l = shared + 0.5 * torch.randn(n, generator=g, dtype=torch.float64)
    a_i = 1.2 * torch.randn(n, generator=g, dtype=torch.float64)  # update: independent of everything
    a_l = 0.7 * torch.randn(n, generator=g, dtype=torch.float64)
    theory = T.residual_mixture_correlation(1.0, 1.64, 1.25, 1.44, 0.49)
    assert sp.pearson(r_i + a_i, r_l + a_l).agrees(theory, z=Z)
    corr_r = 1.0 / math.sqrt(1.64 * 1.25)
    assert 0 < theory < corr_r  # diluted, not removed
    # deterministic per-position scaling multiplies the covariance by c_i c_l
    est = sp.estimate((2.0 * r_i) * (-0.5 * r_l))
    assert est.agrees(-1.0, z=Z)


# ----------------------------------------------------------------------------- Section 8
def test_value_correlation_limits_and_shapes():
    res = sp.mc_value_correlation([0.0, 1e-3, 1.0], **{**S8, "samples": 400}, generator=[0, 1])
    assert res.correlation.mean.shape == (2, 3)
    assert torch.allclose(res.correlation.mean[:, 0], torch.ones(2, dtype=torch.float64), atol=1e-12)
    assert bool((res.correlation.mean[:, 1] > 1 - 1e-6).all())
    # at alpha = 0 the scalar common-mode energy is Var(u^T M) = u^T W_V W_V^T u / N
    for k in range(2):
        th = float(res.u[k] @ res.w_v[k] @ res.w_v[k].T @ res.u[k]) / 8
        assert res.scalar_energy[k, 0].agrees(th, z=Z)
        assert res.mean_output_trace[k, 0].agrees(float((res.w_v[k] ** 2).sum()) / 8, z=Z)
    # same seed, same numbers (up to rounding: batching over alphas regroups the floating-point sums)
    again = sp.mc_value_correlation([1.0], **{**S8, "samples": 400}, generator=[1])
    assert torch.allclose(again.correlation.mean[0, 0], res.correlation.mean[1, 2], rtol=1e-12, atol=0)


def test_pearson_standard_error():
    g = sp.as_generator(15)
    n, rho = 20_000, 0.6
    a = torch.randn(200, n, generator=g, dtype=torch.float64)
    b = rho * a + math.sqrt(1 - rho**2) * torch.randn(200, n, generator=g, dtype=torch.float64)
    est = sp.pearson(a, b)
    # the reported se matches the spread over 200 replicates (normal theory: (1 - rho^2)/sqrt(n))
    assert float(est.stderr.mean()) == pytest.approx((1 - rho**2) / math.sqrt(n), rel=0.05)
    assert float(est.mean.std()) == pytest.approx(float(est.stderr.mean()), rel=0.25)


# ----------------------------------------------------------------------------- validation
def test_validation_messages():
    with pytest.raises(ValueError, match="w_v"):
        T.witness_covariance(torch.zeros(3), 4)
    with pytest.raises(ValueError, match="sigma_x"):
        T.witness_covariance(torch.zeros(2, 3), 4, sigma_x=torch.eye(2))
    with pytest.raises(ValueError, match="u must"):
        T.witness_covariance(torch.zeros(2, 3), 4, u=torch.zeros(3))
    with pytest.raises(TypeError, match="n_tokens"):
        T.prefix_mean_factor(2.5)
    with pytest.raises(ValueError, match="cov"):
        T.common_mode_energy_of(torch.zeros(3, 4))
    with pytest.raises(ValueError, match="positive semidefinite"):
        T.l1_floor_constant(-torch.eye(3))
    with pytest.raises(ValueError, match="positions"):
        sp.mc_value_correlation([1.0], **{**S8, "samples": 10}, generator=0, positions=(0, 0))
    with pytest.raises(TypeError, match="y must be"):
        sp.common_mode_energy(np.zeros((3, 4)))
    assert isinstance(T.cosine_lower_bound(1.0, 2.0), float)
    assert isinstance(T.overlap_lower_bound(np.array([1.0]), 2.0, 5), np.ndarray)


def test_shapes_are_checked_at_the_boundary():
    # issue 26, item 16: shape errors reached torch.cat / unpacking
    g = torch.Generator().manual_seed(0)
    w_q, w_k, w_v, u = (torch.randn(*s, generator=g) for s in ((2, 4), (2, 5), (3, 4), (3,)))
    with pytest.raises(ValueError, match=r"w_q, w_k \(..., d_k, d\), w_v \(..., d_v, d\) and u \(..., d_v\) must agree"):
        sp.logit_subspace_split(w_q, w_k, w_v, u)
    with pytest.raises(ValueError, match="must agree"):
        sp.logit_subspace_split(w_q, w_q, w_v, torch.randn(2, generator=g))
    for positions in ((0,), (1, 1), (0, 9), "01"):
        with pytest.raises((ValueError, TypeError), match="positions"):
            sp.mc_value_correlation([0.5], generator=0, n_tokens=3, d=4, d_k=2, d_v=2, samples=8, positions=positions)
    with pytest.raises(ValueError, match="alphas must hold at least one value"):
        sp.mc_value_correlation([], generator=0, n_tokens=3, d=4, d_k=2, d_v=2, samples=8)
