"""Tests for sigprop.attention._uniform: Noci et al. (2022) Lemmas 3.2-3.3, Theorem 3.3, Lemma A.7.

Monte Carlo runs use sp.BlockConfig(norm="none", activation="linear", logit_scale=0.0, ...):
logit scale 0 makes every attention matrix exactly uniform (Assumption 3.1), the MLP is
linear with W1, W2 of variance 1/d (Eq. 3 with sigma = identity). Depth curves (layers of the
same networks) are tested as a whole with sp.curve_agreement at level 1e-3; single points from
independent draws with |MC - theory| <= 4 SE; exact identities with the float64 tolerance.
"""
import math

import numpy as np
import pytest
import torch

import sigprop as sp
from conftest import Z
from sigprop.attention._dictionary import glorot_variance
from sigprop.attention._uniform import (
    logit_second_moment,
    residual_scaling,
    uniform_deviation,
    uniform_gram_sum,
    uniform_gram_sum_limit,
    uniform_mean_correlation,
    uniform_mean_correlation_limit,
    uniform_sq_norm,
    uniform_sq_norm_limit,
)



def noci_config(d, a1, a2, *, norm="none", uniform=True):
    return sp.BlockConfig(d=d, norm=norm, activation="linear", branch_sa=a1, branch_mlp=a2, sigma_w2=1.0,
                          sigma_v2=1.0, sigma_b2=0.0, d_ff=d, logit_scale=0.0 if uniform else None)


def equal_norm_input(n, d, seed, *, centred=False):
    g = torch.Generator().manual_seed(seed)
    if centred:  # a regular simplex: orthonormal u_k minus their mean (equal norms, zero mean token)
        u = torch.linalg.qr(torch.randn(d, n, generator=g, dtype=torch.float64))[0].T  # (n, d)
        return u - u.mean(0)
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    return x / x.norm(dim=-1, keepdim=True)  # equal token norms (Theorem 3.3's hypothesis)


def run(x, config, depth, inits, seed):
    p = sp.sample_transformer(config, depth, inits=inits, generator=seed, dtype=torch.float64)
    out = sp.transformer_forward(x.unsqueeze(0), p, config)  # (L+1, inits, 1, n, d)
    return out[:, :, 0]


@pytest.mark.parametrize("a1,a2", [(1.0, 1.0), (0.6, 0.3)])
def test_lemma32_lemma33_monte_carlo(a1, a2):
    n, d, depth, N = 6, 16, 5, 1000
    x = equal_norm_input(n, d, 1)
    xs = run(x, noci_config(d, a1, a2), depth, N, seed=2)
    c = sp.gram_sum(xs)  # (L+1, N)
    f = xs.pow(2).sum((-2, -1))
    c0, f0 = float(sp.gram_sum(x)), float(x.pow(2).sum())
    L = np.arange(depth + 1)
    th_c = uniform_gram_sum(c0, L, branch_sa=a1, branch_mlp=a2)
    th_f = uniform_sq_norm(f0, c0, n, L, branch_sa=a1, branch_mlp=a2)
    # The layers of one network are correlated: the whole depth curve is one test (sp.curve_agreement) at level
    # 1e-3, bootstrap-calibrated because per-network C and ||X||^2 are skewed (N = 1000 >= 50). Layer 0 is the
    # input (no spread) and is left out. Eqs. (10) and (12) together, per network divided by the theory:
    per_net = torch.cat([c[1:] / torch.as_tensor(th_c[1:, None]), f[1:] / torch.as_tensor(th_f[1:, None])]).T
    result = sp.curve_agreement(per_net, 1.0, level=1e-3, method="bootstrap", n_resamples=3999)
    assert result.passed, str(result)
    # The correlation (A.4) is a ratio of means: per network, C - (1 + (n-1) rho) ||X||^2 has mean zero exactly
    # when the ratio equals the theory rho, so the correlation curve is tested through it.
    th_rho = uniform_mean_correlation(f0, c0, n, L, branch_sa=a1, branch_mlp=a2)
    resid = (c - torch.as_tensor(1 + (n - 1) * th_rho[:, None]) * f) / f.mean(1, keepdim=True)
    result = sp.curve_agreement(resid[1:].T, 0.0, level=1e-3, method="bootstrap", n_resamples=3999)
    assert result.passed, str(result)
    # and the curve-level test has power here: a theory 3% off in the growth rate of C fails
    wrong = c[1:] / torch.as_tensor(th_c[1:, None] * 1.03 ** L[1:, None])
    assert not sp.curve_agreement(wrong.T, 1.0, level=1e-3, method="bootstrap", n_resamples=3999).passed


def test_depth_zero_is_identity():
    assert uniform_gram_sum(3.0, 0, branch_sa=2.0) == 3.0
    assert uniform_sq_norm(5.0, 3.0, 4, 0) == 5.0
    assert math.isclose(uniform_mean_correlation(4.0, 4.0, 4, 0), 0.0, abs_tol=1e-15)


def test_eq12_matches_the_papers_sum_form():
    f0, c0, n, L, a1, a2 = 7.0, 3.0, 5, 6, 0.7, 1.3
    xbar2 = c0 / n**2
    paper = n * (a2**2 + 1) ** L * a1**2 * sum((a1**2 + 1) ** k for k in range(L)) * xbar2 + (a2**2 + 1) ** L * f0
    assert math.isclose(uniform_sq_norm(f0, c0, n, L, branch_sa=a1, branch_mlp=a2), paper, rel_tol=1e-12)


def test_limits_eqs_11_13_15():
    f0, c0, n, t1, t2 = 6.0, 2.5, 6, 1.3, 0.4
    L = 10**7
    a1, a2 = residual_scaling(t1, L), residual_scaling(t2, L)
    kw = dict(branch_sa=a1, branch_mlp=a2)
    assert math.isclose(uniform_gram_sum(c0, L, **kw), uniform_gram_sum_limit(c0, alpha1_tilde=t1, alpha2_tilde=t2),
                        rel_tol=1e-6)
    assert math.isclose(uniform_sq_norm(f0, c0, n, L, **kw),
                        uniform_sq_norm_limit(f0, c0, n, alpha1_tilde=t1, alpha2_tilde=t2), rel_tol=1e-6)
    assert math.isclose(uniform_mean_correlation(f0, c0, n, L, **kw),
                        uniform_mean_correlation_limit(f0, c0, n, alpha1_tilde=t1), rel_tol=1e-6)


def test_eq16_constant_alphas_go_to_one_when_mean_token_nonzero():
    rho = uniform_mean_correlation(6.0, 2.0, 6, np.array([10, 100, 1000]))
    assert np.all(np.diff(rho) >= 0) and rho[0] < rho[1] and rho[-1] > 1 - 1e-12


def test_eq16_fails_for_centred_input():
    """Erratum: with C(X) = 0 the correlation stays at -1/(n-1) at every depth (exactly)."""
    n, d = 5, 12
    x = equal_norm_input(n, d, 3, centred=True)
    assert float(sp.gram_sum(x)) < 1e-24            # ||sum of n unit-scale tokens||^2: float64 rounding squared
    xs = run(x, noci_config(d, 1.0, 1.0), 8, 64, seed=4)
    c = sp.gram_sum(xs)
    f = xs.pow(2).sum((-2, -1))
    assert float((c / f).abs().max()) < 1e-20       # C / ||X||^2 stays at rounding level (~(1e-16)^2 x depth)
    assert uniform_mean_correlation(float(x.pow(2).sum()), 0.0, n, 1000) == pytest.approx(-1 / (n - 1), abs=1e-15)


def test_lemmaA7_logit_second_moment():
    n, d_v, d_k, N = 4, 6, 40, 20000
    g = torch.Generator().manual_seed(5)
    x = torch.randn(n, d_v, generator=g, dtype=torch.float64)
    s2 = glorot_variance(d_v, d_k)
    wq = math.sqrt(s2) * torch.randn(N, d_v, d_k, generator=g, dtype=torch.float64)
    wk = math.sqrt(s2) * torch.randn(N, d_v, d_k, generator=g, dtype=torch.float64)
    m = (x @ wq) @ (x @ wk).transpose(-1, -2) / math.sqrt(d_k)
    # the n x n entries share their weight draws: one curve-level test over the matrix (level 1e-3), on means of
    # 100 draws each (200 i.i.d. nearly Gaussian batch means, so sign flips are calibrated)
    batches = lambda v: v.reshape(200, 100, n, n).mean(1)
    result = sp.curve_agreement(batches(m.pow(2)), logit_second_moment(x, s2), level=1e-3, n_resamples=9999)
    assert result.passed, str(result)
    result = sp.curve_agreement(batches(m), 0.0, level=1e-3, n_resamples=9999)
    assert result.passed, str(result)


def test_uniform_deviation_leading_order():
    n, d_v, d_k, N = 5, 8, 512, 3000
    g = torch.Generator().manual_seed(6)
    x = torch.randn(n, d_v, generator=g, dtype=torch.float64)
    s2 = glorot_variance(d_v, d_k)
    wq = math.sqrt(s2) * torch.randn(N, d_k, d_v, generator=g, dtype=torch.float64)
    wk = math.sqrt(s2) * torch.randn(N, d_k, d_v, generator=g, dtype=torch.float64)
    wv = torch.randn(N, d_v, d_v, generator=g, dtype=torch.float64)
    _, a = sp.self_attention(x.expand(N, n, d_v), wq, wk, wv)
    stat = (a - 1.0 / n).pow(2).sum((-2, -1)) / n**2
    est = sp.estimate(stat)
    assert abs(float(est.zscore(float(uniform_deviation(x, s2))))) <= Z, (str(est), float(uniform_deviation(x, s2)))


def test_fit_power_law_recovers_exponent():
    x = np.array([10.0, 30.0, 100.0, 300.0])
    y = 3.0 * x**-2.0
    b, se, a = sp.fit_power_law(x, y, 0.01 * y)
    assert math.isclose(b, -2.0, rel_tol=1e-10) and math.isclose(a, math.log(3.0), rel_tol=1e-10)
    assert se > 0


def test_ratio_correlation_point_value():
    c = torch.tensor([2.0, 4.0, 6.0], dtype=torch.float64)
    f = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    est = sp.ratio_correlation(c, f, 3)
    assert math.isclose(float(est.mean), (2.0 - 1.0) / 2, rel_tol=1e-12)
    assert float(est.stderr) == pytest.approx(0.0, abs=1e-12)


def test_validation():
    with pytest.raises(ValueError, match="depth"):
        uniform_gram_sum(1.0, 1.5)
    with pytest.raises(ValueError, match="n"):
        uniform_mean_correlation(1.0, 1.0, 1, 3)
    with pytest.raises(ValueError, match="f0"):
        uniform_sq_norm(-1.0, 1.0, 3, 2)
    with pytest.raises(ValueError, match="same shape"):
        sp.ratio_correlation(torch.zeros(3), torch.zeros(4), 3)
    with pytest.raises(TypeError, match="torch.Tensor"):
        sp.gram_sum(np.zeros((3, 2)))
    x = torch.zeros(3, 4)
    with pytest.raises(ValueError, match="last dimension"):
        sp.uniform_self_attention(x, torch.zeros(2, 3), torch.zeros(2, 4), torch.zeros(4, 4))


def test_ratio_correlation_refuses_a_zero_denominator():
    # issue 26, item 16: f = 0 returned inf
    c = torch.tensor([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="f must have a nonzero mean"):
        sp.ratio_correlation(c, torch.zeros(3), 4)
