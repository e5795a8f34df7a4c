"""Tests for sigprop._rem_corrections (Giorlandino & Goldt 2025, App. B.1-B.2, Eq. 3)."""
import math

import numpy as np
import pytest
import torch

import sigprop as sp

Z = 4.0


def test_score_covariance_eq9_against_monte_carlo():
    """Eq. (9) is exact for fixed tokens at any d: every entry of E[a_ts a_tau sigma]."""
    g = torch.Generator().manual_seed(0)
    T, d, beta = 4, 8, 1.3
    x = sp.equicorrelated_tokens(T=T, d=d, rho=0.4, generator=g, dtype=torch.float64)
    theory = sp.theory.score_covariance(x, beta=beta)                   # (T, T, T, T)
    a = sp.sample_scores(x, 100_000, beta=beta, generator=1)            # (n, T, T)
    prod = (a[:, :, :, None, None] * a[:, None, None, :, :]).reshape(a.shape[0], -1)
    est = sp.estimate(prod)
    # 256 entries: a Bonferroni bound at family-wise level 1e-3 is z = 4.6
    z = np.abs(est.zscore(theory.reshape(-1)))
    assert z.max() <= 4.6, z.max()


def test_score_covariance_structure():
    x = torch.eye(3, 3, dtype=torch.float64) * math.sqrt(3)              # orthonormal tokens, q = 1, p = 0
    C = sp.theory.score_covariance(x, beta=2.0)
    s2 = 4.0 * math.log(3)
    assert float(C[0, 1, 0, 1]) == pytest.approx(s2)
    assert float(C[0, 1, 0, 2]) == 0.0 and float(C[0, 1, 2, 1]) == 0.0


def test_cosine_map_closed_forms():
    rho = np.array([0.0, 0.2, 0.6])
    beta = 3.0
    bc = np.sqrt(2 / (1 - rho))
    expected = np.where(beta > bc, rho / (1 - np.sqrt(2 * (1 - rho)) / beta), 1.0)
    np.testing.assert_allclose(sp.theory.cosine_map(rho, beta), expected, rtol=1e-12)
    assert sp.theory.cosine_map(0.3, 1.0) == 1.0                         # spread phase: rank collapse
    y = 1 - sp.theory.beta_c(1.0, 0.2) / beta
    assert sp.theory.cosine_map(0.2, beta, form="appendix") == pytest.approx(0.2 / (1 + 0.8 * y))


@pytest.mark.parametrize("beta,rho", [(3.0, 0.3), (2.0, 0.5)])
def test_cosine_map_finite_T_against_monte_carlo(beta, rho):
    """rho' = (rho + (1-rho) Y_p) / (rho + (1-rho) Y2) with finite-T Y2 (quadrature) and Y_p (two-row REM)."""
    T, d = 256, 512
    mc = sp.attention_layer_mc(beta, T=T, d=d, n=48, rho=rho, generator=2, device="cpu")
    rem = sp.cross_overlap_rem(beta, T=T, n=4000, p=rho, generator=3, device="cpu")
    y2, yp = sp.theory.ipr_finite(beta, T, 1.0, rho), float(rem.mean[1])
    den = rho + (1 - rho) * y2
    pred = (rho + (1 - rho) * yp) / den
    se = math.hypot(float(mc.stderr[7]), (1 - rho) / den * float(rem.stderr[1]))
    assert abs(float(mc.mean[7]) - pred) <= Z * se
    # ... and the appendix form of B.2.3 is excluded by far
    app = sp.theory.cosine_map(rho, beta, form="appendix")
    assert abs(float(mc.mean[7]) - app) > 20 * se


def test_cross_overlap_independent_rows_is_one_over_T():
    est = sp.cross_overlap_rem(2.5, T=128, n=20000, p=0.0, generator=4, device="cpu")
    assert est[1].agrees(1 / 128, z=Z)


def test_cross_overlap_rem_matches_attention_layer():
    beta, rho, T = 3.0, 0.7, 256
    mc = sp.attention_layer_mc(beta, T=T, d=512, n=48, rho=rho, generator=7, device="cpu")
    rem = sp.cross_overlap_rem(beta, T=T, n=4000, p=rho, generator=8, device="cpu")
    diff = float(mc.mean[4] - rem.mean[1])
    assert abs(diff) <= Z * math.hypot(float(mc.stderr[4]), float(rem.stderr[1]))


def test_cross_overlap_is_subleading_in_T():
    """B.2.2: Y_p -> 0 as T grows while Y2 stays O(1) (condensed phase)."""
    small = sp.cross_overlap_rem(3.0, T=256, n=3000, p=0.3, generator=9, device="cpu")
    large = sp.cross_overlap_rem(3.0, T=8192, n=600, p=0.3, generator=9, device="cpu")
    assert float(large.mean[1]) + Z * float(large.stderr[1]) < float(small.mean[1]) - Z * float(small.stderr[1])
    assert float(large.mean[0]) > 0.4


def test_attention_layer_outputs_follow_eqs_20_23():
    """With an exactly equicorrelated Gram matrix, Eqs. (20)-(23) are identities per draw:
    q_out = rho + (1 - rho) Y2 and p_out = rho + (1 - rho) Y_p (sigma_v^2 = 1, W_V averaged exactly)."""
    rho = 0.3
    mc = sp.attention_layer_mc(2.0, T=32, d=64, n=8, rho=rho, generator=1, device="cpu")
    q_in, p_in, y2, y3, yp, q_out, p_out, _ = mc.mean.numpy()
    assert q_in == pytest.approx(1.0, abs=1e-5) and p_in == pytest.approx(rho, abs=1e-5)
    assert q_out == pytest.approx(rho + (1 - rho) * y2, abs=1e-5)
    assert p_out == pytest.approx(rho + (1 - rho) * yp, abs=1e-5)
    with pytest.raises(ValueError, match="T \\+ 1 <= d"):
        sp.attention_layer_mc(2.0, T=64, d=64, n=2, generator=1, device="cpu")
    gauss = sp.attention_layer_mc(2.0, T=64, d=64, n=4, rho=rho, tokens="gaussian", generator=1, device="cpu")
    assert torch.isfinite(gauss.mean).all()


def test_attention_map_finite():
    q, p = sp.theory.attention_map_finite(1.0, 0.0, beta=1e-6, T=100)
    assert q == pytest.approx(0.01, rel=1e-5) and p == pytest.approx(0.01)
    qg, pg = sp.theory.attention_map_finite(1.0, 0.0, beta=1e-6, T=100, gain_control=True)
    assert abs(qg) < 1e-6 and abs(pg) < 1e-12


def test_finite_T_block_map_against_random_transformers():
    """Post-LN, spread phase (Fig. 1(d) setting, 6 layers): finite-T map vs sigprop random transformers.

    At T = 32 the T -> infinity map is visibly off: uniform attention adds (q-p)/T to both q and
    p, which is not small next to p ~ 0.1 (a finite-size effect, not an error of the theory).
    """
    PAPER = dict(sigma_w2=0.2, sigma_b2=0.0004, sigma_v2=0.2, alpha_mlp=1.0)
    T, d, depth, alpha, beta = 32, 256, 6, 1.0, 0.05
    cfg = sp.BlockConfig(d=d, norm="post", alpha_sa=alpha, sigma_qk2=sp.gg_qk_variance(beta, T, d), **PAPER)
    g = torch.Generator().manual_seed(0)
    params = sp.sample_transformer(cfg, depth, inits=32, generator=g)
    x = sp.equicorrelated_tokens(32, 1, T=T, d=d, rho=0.1, generator=g)
    rho = sp.transformer_forward(x, params, cfg, measure=sp.mean_cosine)   # (depth+1, inits, 1)
    est = sp.estimate(rho[:, :, 0].T.double())                             # over inits
    rho_in = float(est.mean[0])
    q, p = sp.theory.iterate_block_map_finite(1.0, rho_in, depth, T=T, beta=beta, alpha_sa=alpha, **PAPER)
    assert est[1:].agrees(p[1:] / q[1:], z=4.0)
    q_inf, p_inf = sp.theory.iterate_block_map(1.0, rho_in, depth, beta=beta, alpha_sa=alpha, **PAPER)
    assert not est[1:].agrees(p_inf[1:] / q_inf[1:], z=4.0)


def test_validation():
    with pytest.raises(ValueError, match="form"):
        sp.theory.cosine_map(0.1, 2.0, form="x")
    with pytest.raises(ValueError, match="rho"):
        sp.theory.cosine_map(1.5, 2.0)
    with pytest.raises(TypeError, match="x"):
        sp.theory.score_covariance(np.ones((3, 3)), beta=1.0)


def test_finite_T_block_map_without_layer_norm_stays_finite():
    # no LN: q grows with depth, the score scale with it; the quadrature hands over to the
    # condensed-phase limit instead of allocating a grid that grows with sigma
    for norm in ("none", "pre", "post"):
        q, p = sp.theory.iterate_block_map_finite(1.0, 0.0, 12, T=64, beta=1.2, alpha_sa=1.3, norm=norm)
        assert np.all(np.isfinite(q)) and np.all(np.isfinite(p)) and np.all(np.abs(p) <= q * (1 + 1e-12))
