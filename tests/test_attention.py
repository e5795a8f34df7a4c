"""Tests for sigprop.attention._layer: the layer, its maps (Giorlandino & Goldt 2025, App. B.1-B.2, Eq. 3) and its Monte Carlo."""
import math

import numpy as np
import pytest
import torch

import sigprop as sp
from conftest import Z


def _w(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_attention_matches_reference_formula():
    x, wq, wk, wv = _w(2, 5, 8), _w(4, 8, seed=1), _w(4, 8, seed=2), _w(3, 8, seed=3)
    out, A = sp.self_attention(x, wq, wk, wv)
    logits = (x @ wq.T) @ (x @ wk.T).transpose(-1, -2) / math.sqrt(4)
    ref_A = torch.exp(logits) / torch.exp(logits).sum(-1, keepdim=True)
    assert torch.allclose(A, ref_A, atol=1e-12)
    assert torch.allclose(out, ref_A @ (x @ wv.T), atol=1e-12)


def test_joint_wqk_equals_factored():
    x, wq, wk = _w(5, 6), _w(6, 6, seed=1), _w(6, 6, seed=2)
    _, a1 = sp.self_attention(x, wq, wk, logit_scale=0.3)
    _, a2 = sp.self_attention(x, w_qk=wq.T @ wk, logit_scale=0.3)
    assert torch.allclose(a1, a2, atol=1e-12)


def test_causal_mask_and_rows_sum_to_one():
    x, wq, wk = _w(7, 4), _w(4, 4, seed=1), _w(4, 4, seed=2)
    _, A = sp.self_attention(x, wq, wk, causal=True)
    assert torch.allclose(A.sum(-1), torch.ones(7, dtype=torch.float64))
    assert torch.all(A.triu(1) == 0)
    assert A[0, 0] == 1


def test_gain_control_removes_uniform_output():
    # with zero logits attention is uniform, so gain-controlled output vanishes exactly
    x = _w(6, 4)
    zero = torch.zeros(4, 4, dtype=torch.float64)
    out, _ = sp.self_attention(x, zero, zero, gain_control=True)
    assert torch.allclose(out, torch.zeros_like(out), atol=1e-12)


def test_softmax_is_stable_for_huge_logits():
    x = _w(5, 4) * 1e3
    _, A = sp.self_attention(x, _w(4, 4, seed=1), _w(4, 4, seed=2))
    assert torch.isfinite(A).all() and torch.allclose(A.sum(-1), torch.ones(5, dtype=torch.float64))


def test_multihead_by_broadcasting():
    x, wq, wk = _w(3, 5, 8), _w(2, 4, 8, seed=1), _w(2, 4, 8, seed=2)
    _, A = sp.self_attention(x[:, None], wq, wk)
    assert A.shape == (3, 2, 5, 5)
    _, A0 = sp.self_attention(x, wq[0], wk[0])
    assert torch.allclose(A[:, 0], A0)


def test_layer_norm_rms():
    y = sp.layer_norm(_w(3, 10))
    assert torch.allclose(y.pow(2).mean(-1), torch.ones(3, dtype=torch.float64))
    assert torch.isfinite(sp.layer_norm(torch.zeros(2, 4))).all()


@pytest.mark.parametrize("kwargs, match", [
    (dict(w_q=_w(4, 7), w_k=_w(4, 8)), "w_q must have shape"),
    (dict(w_q=_w(4, 8), w_k=_w(3, 8)), "share d_k"),
    (dict(w_qk=_w(8, 8), w_q=_w(4, 8), w_k=_w(4, 8)), "either w_qk"),
    (dict(), "needs w_q and w_k"),
])
def test_attention_bad_inputs(kwargs, match):
    with pytest.raises(ValueError, match=match):
        sp.self_attention(_w(5, 8), **kwargs)


# ---------------------------------------------------------------- maps and Monte Carlo (App. B.1-B.2, Eq. 3)


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
    mc = sp.mc_attention_layer(beta, T=T, d=d, n=48, rho=rho, generator=2, device="cpu")
    rem = sp.mc_cross_overlap(beta, T=T, n=4000, p=rho, generator=3, device="cpu")
    y2, yp = sp.theory.ipr_finite(beta, T, 1.0, rho), float(rem.mean[1])
    den = rho + (1 - rho) * y2
    pred = (rho + (1 - rho) * yp) / den
    se = math.hypot(float(mc.rho_out.stderr), (1 - rho) / den * float(rem.stderr[1]))
    assert abs(float(mc.rho_out.mean) - pred) <= Z * se
    # ... and the appendix form of B.2.3 is excluded by far
    app = sp.theory.cosine_map(rho, beta, form="appendix")
    assert abs(float(mc.rho_out.mean) - app) > 20 * se


def test_cross_overlap_independent_rows_is_one_over_T():
    est = sp.mc_cross_overlap(2.5, T=128, n=20000, p=0.0, generator=4, device="cpu")
    assert est[1].agrees(1 / 128, z=Z)


def test_cross_overlap_rem_matches_attention_layer():
    beta, rho, T = 3.0, 0.7, 256
    mc = sp.mc_attention_layer(beta, T=T, d=512, n=48, rho=rho, generator=7, device="cpu")
    rem = sp.mc_cross_overlap(beta, T=T, n=4000, p=rho, generator=8, device="cpu")
    diff = float(mc.y_p.mean - rem.mean[1])
    assert abs(diff) <= Z * math.hypot(float(mc.y_p.stderr), float(rem.stderr[1]))


def test_cross_overlap_is_subleading_in_T():
    """B.2.2: Y_p -> 0 as T grows while Y2 stays O(1) (condensed phase)."""
    small = sp.mc_cross_overlap(3.0, T=256, n=3000, p=0.3, generator=9, device="cpu")
    large = sp.mc_cross_overlap(3.0, T=8192, n=600, p=0.3, generator=9, device="cpu")
    assert float(large.mean[1]) + Z * float(large.stderr[1]) < float(small.mean[1]) - Z * float(small.stderr[1])
    assert float(large.mean[0]) > 0.4


def test_attention_layer_outputs_follow_eqs_20_23():
    """With an exactly equicorrelated Gram matrix, Eqs. (20)-(23) are identities per draw:
    q_out = rho + (1 - rho) Y2 and p_out = rho + (1 - rho) Y_p (sigma_v^2 = 1, W_V averaged exactly)."""
    rho = 0.3
    mc = sp.mc_attention_layer(2.0, T=32, d=64, n=8, rho=rho, generator=1, device="cpu")
    q_in, p_in, y2, yp, q_out, p_out = (float(e.mean) for e in (mc.q_in, mc.p_in, mc.y2, mc.y_p, mc.q_out, mc.p_out))
    assert q_in == pytest.approx(1.0, abs=1e-5) and p_in == pytest.approx(rho, abs=1e-5)
    assert q_out == pytest.approx(rho + (1 - rho) * y2, abs=1e-5)
    assert p_out == pytest.approx(rho + (1 - rho) * yp, abs=1e-5)
    with pytest.raises(ValueError, match="T \\+ 1 <= d"):
        sp.mc_attention_layer(2.0, T=64, d=64, n=2, generator=1, device="cpu")
    gauss = sp.mc_attention_layer(2.0, T=64, d=64, n=4, rho=rho, tokens="gaussian", generator=1, device="cpu")
    assert all(math.isfinite(float(e.mean)) for e in (gauss.y2, gauss.q_out, gauss.rho_out))


def test_attention_map_finite_T():
    # beta -> 0: uniform rows, Y2 = Y_p = 1/T, so q' = p' = (q - p)/T + p; gain control removes the mean value
    q, p = sp.theory.attention_map(1.0, 0.0, beta=1e-6, T=100)
    assert q == pytest.approx(0.01, rel=1e-5) and p == pytest.approx(0.01)
    qg, pg = sp.theory.attention_map(1.0, 0.0, beta=1e-6, T=100, gain_control=True)
    assert abs(qg) < 1e-6 and abs(pg) < 1e-12
    # T -> infinity is the limit of the finite-T map (Y2 -> 1 - beta_c/beta only like 1/sqrt(log T))
    q_inf, _ = sp.theory.attention_map(1.0, 0.0, beta=4.0)
    q_big, _ = sp.theory.attention_map(1.0, 0.0, beta=4.0, T=10**12)
    assert abs(q_big - q_inf) < abs(sp.theory.attention_map(1.0, 0.0, beta=4.0, T=100)[0] - q_inf)


def test_validation():
    with pytest.raises(ValueError, match="form"):
        sp.theory.cosine_map(0.1, 2.0, form="x")
    with pytest.raises(ValueError, match="rho"):
        sp.theory.cosine_map(1.5, 2.0)
    with pytest.raises(TypeError, match="x"):
        sp.theory.score_covariance(np.ones((3, 3)), beta=1.0)
