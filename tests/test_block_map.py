import dataclasses
import math

import numpy as np
import pytest
import torch

import sigprop as sp
from conftest import Z
from sigprop.block import ACTIVATIONS

th = sp.theory


def test_relu_kernel_values():
    assert th.relu_kernel(1.0) == pytest.approx(1.0)
    assert th.relu_kernel(0.0) == pytest.approx(1 / math.pi)
    # E[relu(u) relu(v)] by quadrature-free Monte Carlo
    g = torch.Generator().manual_seed(0)
    z = torch.randn(200000, 2, generator=g, dtype=torch.float64)
    rho = 0.4
    u, v = z[:, 0], rho * z[:, 0] + math.sqrt(1 - rho**2) * z[:, 1]
    assert sp.estimate(torch.relu(u) * torch.relu(v)).agrees(th.relu_kernel(rho) / 2, z=Z)


@pytest.mark.parametrize("activation", ["relu", "tanh", "linear"])
def test_mlp_map_against_monte_carlo(activation):
    q, p, sw, sb = 1.3, 0.4, 1.5, 0.1
    g = torch.Generator().manual_seed(1)
    n, d = 4000, 64
    x = torch.randn(n, 2, d, generator=g, dtype=torch.float64)
    # two tokens with overlaps q, p
    x = math.sqrt(q) * torch.stack([x[:, 0], (p / q) * x[:, 0] + math.sqrt(1 - (p / q) ** 2) * x[:, 1]], 1)
    w1 = torch.randn(n, d, d, generator=g, dtype=torch.float64) * math.sqrt(sw / d)
    b1 = torch.randn(n, 1, d, generator=g, dtype=torch.float64) * math.sqrt(sb)
    w2 = torch.randn(n, d, d, generator=g, dtype=torch.float64) * math.sqrt(sw / d)
    b2 = torch.randn(n, 1, d, generator=g, dtype=torch.float64) * math.sqrt(sb)
    phi = {"relu": torch.relu, "tanh": torch.tanh, "linear": lambda z: z}[activation]
    y = phi(x @ w1.transpose(-1, -2) + b1) @ w2.transpose(-1, -2) + b2
    qq = (y[:, 0] * y[:, 0]).mean(-1)
    pp = (y[:, 0] * y[:, 1]).mean(-1)
    tq, tp = th.mlp_map(q, p, sigma_w2=sw, sigma_b2=sb, activation=activation)
    assert sp.estimate(qq).agrees(tq, z=Z) and sp.estimate(pp).agrees(tp, z=Z)


def test_attention_map_phases():
    qn, pn = th.attention_map(1.0, 0.2, beta=0.5)  # spread phase: every token -> the mean
    assert qn == pytest.approx(0.2) and pn == pytest.approx(0.2)
    qn, pn = th.attention_map(1.0, 0.0, beta=4.0)  # localised phase: q keeps (1 - beta_c/beta)
    assert qn == pytest.approx(1 - math.sqrt(2) / 4) and pn == 0
    qn, pn = th.attention_map(1.0, 0.2, beta=0.5, gain_control=True)
    assert qn == 0 and pn == 0


def test_block_map_fixed_points_and_broadcasting():
    q, p = th.block_map(1.0, 1.0, beta=0.1)
    assert (q, p) == (pytest.approx(1.0), pytest.approx(1.0))  # rank collapse is a fixed point
    beta = np.linspace(0.1, 3, 7)[:, None]
    alpha = np.linspace(0.5, 2, 5)[None, :]
    q, p = th.block_map(1.0, 0.3, beta=beta, alpha_sa=alpha)
    assert q.shape == (7, 5) and np.all((p >= 0) & (p <= q + 1e-12))
    qs, ps = th.iterate_block_map(1.0, 0.0, 60, beta=beta, alpha_sa=alpha, norm="pre")
    assert qs.shape == (61, 7, 5) and np.all(np.isfinite(ps))


def test_block_map_no_ln_is_algorithm_without_normalisation():
    # norm="none": attention + residual then MLP + residual, no division by q
    q, p = th.block_map(1.0, 0.0, beta=0.1, alpha_sa=1.0, alpha_mlp=1.0, sigma_w2=1.0, activation="linear", norm="none")
    # attention: q = 0 + 1, p = 0; linear MLP: q2 = 1, p2 = 0; residual: q = 2, p = 0
    assert (q, p) == (pytest.approx(2.0), pytest.approx(0.0))


def test_block_map_rejects_bad_options():
    with pytest.raises(ValueError, match="norm must be one of"):
        th.block_map(1.0, 0.0, beta=1.0, norm="middle")
    with pytest.raises(ValueError, match="activation must be one of"):
        th.block_map(1.0, 0.0, beta=1.0, activation="swish")
    with pytest.raises(ValueError, match="beta must be >= 0"):
        th.block_map(1.0, 0.0, beta=-1.0)
    with pytest.raises(ValueError, match=r"\|p\| <= q"):
        th.block_map(1.0, 2.0, beta=1.0)


def _mc_cosine(norm, beta, alpha, depth, *, gain=False, T=64, d=128, inits=24, samples=4, seed=0, **extra):
    cfg = sp.BlockConfig(d=d, norm=norm, alpha_sa=alpha, sigma_qk2=sp.theory.qk_variance_for_beta(beta, T=T, d=d),
                         logit_scale=1 / math.sqrt(d), gain_control=gain, **extra)

    def sample(n, g):
        params = sp.sample_transformer(cfg, depth, inits=n, generator=g)
        x = sp.gaussian_tokens(n, samples, T=T, d=d, generator=g)
        return sp.transformer_forward(x, params, cfg, measure=lambda y: sp.mean_cosine(y).mean(-1)).T

    return sp.monte_carlo(sample, inits, generator=seed, chunk=8, device="cpu")


@pytest.mark.parametrize("norm, alpha, gain, extra", [
    ("post", 1.0, False, {}), ("post", 2.0, False, {}), ("post", 1.0, True, {}),
    ("none", 1.0, False, dict(branch_sa=0.5, branch_mlp=0.5)),
])
def test_block_map_against_random_transformers(norm, alpha, gain, extra):
    # Algorithms 1 and 3 (and the no-LN map with Noci-style branch weights) vs Monte Carlo of
    # real random transformers (T = 64, d = 128, small beta).
    depth, T = 6, 64
    est = _mc_cosine(norm, 0.1, alpha, depth, gain=gain, T=T, **extra)
    q, p = th.iterate_block_map(1.0, 0.0, depth, beta=0.1, alpha_sa=alpha, norm=norm, gain_control=gain, **extra)
    z = est.zscore(p / q)
    print("z-scores", z.round(2))
    assert est.agrees(p / q, z=Z)


# ---------------------------------------------------------------- finite T


def test_finite_T_block_map_against_random_transformers():
    """Post-LN, spread phase (Fig. 1(d) setting, 6 layers): finite-T map vs sigprop random transformers.

    At T = 32 the T -> infinity map is visibly off: uniform attention adds (q-p)/T to both q and
    p, which is not small next to p ~ 0.1 (a finite-size effect, not an error of the theory).
    """
    T, d, depth = 32, 256, 6
    cfg = sp.BlockConfig.from_beta(0.05, T=T, d=d, norm="post", alpha_sa=1.0, **sp.presets.GG_APP_C1)
    est = sp.mc_cosine_vs_depth(cfg, depth, T=T, inits=32, rho0=0.1, generator=0)
    rho_in = float(est.mean[0])
    q, p = sp.theory.iterate_block_map(1.0, rho_in, depth, cfg, T=T)
    assert est[1:].agrees(p[1:] / q[1:], z=4.0)
    q_inf, p_inf = sp.theory.iterate_block_map(1.0, rho_in, depth, cfg, T=T, limit=True)
    assert not est[1:].agrees(p_inf[1:] / q_inf[1:], z=4.0)


def test_finite_T_block_map_without_layer_norm_stays_finite():
    # no LN: q grows with depth, the score scale with it; the quadrature's cost does not grow with sigma
    for norm in ("none", "pre", "post"):
        q, p = sp.theory.iterate_block_map(1.0, 0.0, 12, T=64, beta=1.2, alpha_sa=1.3, norm=norm)
        assert np.all(np.isfinite(q)) and np.all(np.isfinite(p)) and np.all(np.abs(p) <= q * (1 + 1e-12))


def test_one_config_drives_the_map_and_the_random_block():
    # block_map(q, p, config, T=T) is exactly the keyword map at the config's beta, finite-T or the limit
    cfg = sp.BlockConfig.from_beta(1.7, T=64, d=128, norm="pre", alpha_sa=1.3, gain_control=True, **sp.presets.GG_APP_C1)
    kw = dict(beta=1.7, alpha_sa=1.3, norm="pre", gain_control=True, **sp.presets.GG_APP_C1)
    for limit in (True, False):
        got = th.block_map(1.0, 0.2, cfg, T=64, limit=limit)
        want = th.block_map(1.0, 0.2, T=None if limit else 64, **kw)
        np.testing.assert_allclose(got, want, rtol=1e-12)
    # the random block without its MLP, and the map without its MLP
    no_mlp = dataclasses.replace(cfg, mlp=False)
    q, p = th.block_map(1.0, 0.2, no_mlp, T=64, limit=True)
    qa, pa = th.attention_map(1.0, 0.2, beta=1.7, sigma_v2=0.2, gain_control=True)
    np.testing.assert_allclose((q, p), (1.3**2 + qa, 1.3**2 * 0.2 + pa), rtol=1e-12)
    with pytest.raises(ValueError, match="pass T"):
        th.block_map(1.0, 0.2, cfg)
    with pytest.raises(TypeError, match="not both"):
        th.block_map(1.0, 0.2, cfg, T=64, beta=1.0)


# ---------------------------------------------------------------- off-the-shelf pieces


def _gelu_tanh(z):
    return 0.5 * z * (1 + torch.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z**3)))


_PHI = {"relu": torch.relu, "tanh": torch.tanh, "linear": lambda z: z, "gelu": lambda z: z * 0.5 * (1 + torch.erf(z / math.sqrt(2))),
        "gelu_tanh": _gelu_tanh, "silu": lambda z: z * torch.sigmoid(z)}


@pytest.mark.parametrize("activation", ["gelu", "gelu_tanh", "relu", "tanh", "linear", "silu"])
@pytest.mark.parametrize("a, b, c", [(0.7, 1.9, 0.5), (1.0, 1.0, -0.3), (4.0, 0.25, 0.9)])
def test_activation_kernel_against_monte_carlo(activation, a, b, c):
    # E[phi(u) phi(v)] for unequal variances (the Gram map's case): closed form (GELU, ReLU) or quadrature
    # against 400,000 Gaussian pairs, |MC - theory| <= Z SE
    g = torch.Generator().manual_seed(3)
    z = torch.randn(400_000, 2, generator=g, dtype=torch.float64)
    r = c / math.sqrt(a * b)
    u, v = math.sqrt(a) * z[:, 0], math.sqrt(b) * (r * z[:, 0] + math.sqrt(1 - r * r) * z[:, 1])
    phi = _PHI[activation]
    assert sp.estimate(phi(u) * phi(v)).agrees(th.activation_kernel(a, b, c, activation=activation), z=Z)


def test_gelu_kernel_closed_form_is_exact():
    # the closed form against a 200 x 200 Gauss-Hermite rule (GELU is entire: the rule converges spectrally)
    _gelu = ACTIVATIONS["gelu"].numpy
    x, w = np.polynomial.hermite_e.hermegauss(200)
    w = w / w.sum()
    for a, b, c in [(1.0, 1.0, 0.3), (0.3, 2.0, 0.5), (2.0, 2.0, 2.0), (0.5, 0.5, -0.4), (5.0, 1.0, 1.9)]:
        r = c / math.sqrt(a * b)
        u = math.sqrt(a) * x[:, None]
        v = math.sqrt(b) * (r * x[:, None] + math.sqrt(max(1 - r * r, 0.0)) * x[None, :])
        quad = float((w[:, None] * w[None, :] * _gelu(u) * _gelu(v)).sum())
        assert th.activation_kernel(a, b, c, activation="gelu") == pytest.approx(quad, rel=1e-12, abs=1e-14)
    # c = 0: the product of the means, (a / sqrt(2 pi (1 + a))) (b / sqrt(2 pi (1 + b)))
    assert th.activation_kernel(0.7, 1.9, 0.0, activation="gelu") == pytest.approx(
        0.7 * 1.9 / (2 * math.pi * math.sqrt(1.7 * 2.9)), rel=1e-14)


@pytest.mark.parametrize("activation", ["tanh", "gelu_tanh", "silu"])
def test_kernel_table_matches_the_quadrature(activation):
    # large arrays with one variance pair are tabulated in the correlation (Chebyshev): same values to 1e-10
    # (600 entries engage the table; 40 of them are checked point by point)
    act = ACTIVATIONS[activation]
    r = np.random.default_rng(0).uniform(-1, 1, 600)
    for q1 in (0.3, 1.0, 6.0):
        a = np.full(r.shape, q1)
        np.testing.assert_allclose(act.kernel(a, a, r * q1)[:40], act.kernel_quadrature(a[:40], a[:40], r[:40] * q1),
                                   rtol=0, atol=1e-10 * max(1.0, q1))


def test_mlp_map_second_layer_variances_against_monte_carlo():
    # W_2 and b_2 with their own variances (off-the-shelf MLPs), GELU, d_ff != d
    q, p, sw, sb, sw_out, sb_out = 1.0, 0.35, 0.8, 0.05, 1.7, 0.02
    g = torch.Generator().manual_seed(5)
    n, d, f = 3000, 48, 96
    x = torch.randn(n, 2, d, generator=g, dtype=torch.float64)
    x = math.sqrt(q) * torch.stack([x[:, 0], (p / q) * x[:, 0] + math.sqrt(1 - (p / q) ** 2) * x[:, 1]], 1)
    w1 = torch.randn(n, f, d, generator=g, dtype=torch.float64) * math.sqrt(sw / d)
    b1 = torch.randn(n, 1, f, generator=g, dtype=torch.float64) * math.sqrt(sb)
    w2 = torch.randn(n, d, f, generator=g, dtype=torch.float64) * math.sqrt(sw_out / f)
    b2 = torch.randn(n, 1, d, generator=g, dtype=torch.float64) * math.sqrt(sb_out)
    y = _PHI["gelu"](x @ w1.transpose(-1, -2) + b1) @ w2.transpose(-1, -2) + b2
    tq, tp = th.mlp_map(q, p, sigma_w2=sw, sigma_b2=sb, activation="gelu", sigma_w2_out=sw_out, sigma_b2_out=sb_out)
    assert sp.estimate((y[:, 0] ** 2).mean(-1)).agrees(tq, z=Z) and sp.estimate((y[:, 0] * y[:, 1]).mean(-1)).agrees(tp, z=Z)


@pytest.mark.parametrize("kw", [
    dict(norm="post", heads=4, d_ff=256, activation="gelu", sigma_o2=0.6, sigma_bv2=0.05, sigma_bo2=0.02,
         sigma_w2=0.5, sigma_w2_out=1.5, sigma_b2=0.01, sigma_b2_out=0.03, sigma_v2=0.8),
    dict(norm="pre", heads=2, d_ff=64, activation="gelu_tanh", sigma_o2=0.3, sigma_bv2=0.05, sigma_w2=0.5,
         sigma_w2_out=0.4, sigma_v2=0.8),
    dict(norm="post", gain_control=True, sigma_bv2=0.2, sigma_o2=0.5, activation="gelu", **sp.presets.GG_APP_C1),
])
def test_off_the_shelf_block_map_against_random_transformers(kw):
    # the generalised map (W_O, value/output biases, heads, d_ff != d, GELU, second-layer variances) against
    # sigprop's random blocks at finite T; the blocks share initialisations: one curve-level test, level 1e-3
    # (16 >= 13 initialisations, 9999 sign-flip resamples)
    T, d, depth = 32, 128, 6
    cfg = sp.BlockConfig.from_beta(1.2, T=T, d=d, **kw)
    est = sp.mc_cosine_vs_depth(cfg, depth, T=T, inits=16, seqs=2, rho0=0.2, generator=0)
    q, p = th.iterate_block_map(1.0, float(est.mean[0]), depth, cfg, T=T)
    assert sp.curve_agreement(est.samples[:, 1:], (p / q)[1:], level=1e-3, n_resamples=9999).passed


def test_w_o_is_a_factor_and_the_value_bias_an_offset():
    # q_SA = sigma_o2 (sigma_v2 (p + (q-p) Y2) + sigma_bv2) + sigma_bo2 (no residual: alpha = 0, no LN, no MLP)
    kw = dict(beta=2.5, sigma_v2=0.7, alpha_sa=0.0, norm="none", mlp=False)
    qa, pa = th.attention_map(1.0, 0.3, beta=2.5, sigma_v2=0.7)
    q, p = th.block_map(1.0, 0.3, sigma_o2=0.4, sigma_bv2=0.2, sigma_bo2=0.05, **kw)
    assert (q, p) == (pytest.approx(0.4 * (qa + 0.2) + 0.05), pytest.approx(0.4 * (pa + 0.2) + 0.05))
    q, p = th.block_map(1.0, 0.3, sigma_o2=0.4, sigma_bv2=0.2, gain_control=True, **kw)   # gain control drops b_V
    qg, pg = th.attention_map(1.0, 0.3, beta=2.5, sigma_v2=0.7, gain_control=True)
    assert (q, p) == (pytest.approx(0.4 * qg), pytest.approx(0.4 * pg))


def test_value_bias_reproduces_the_authors_theory_code():
    # Giorlandino & Goldt's repository (theory_update_relu.py) adds var_b after attention; Algorithm 1 as printed
    # does not. The map with sigma_bv2 = sigma_b2 is their code's update (T -> infinity, post-LN, ReLU).
    def authors(p, beta, var_w, var_v, var_b, alpha_a, alpha_mlp):
        bc = math.sqrt(2 / (1 - p))
        q_att = p if beta < bc else p + (1 - p) * (1 - bc / beta)
        p0 = (var_v * p + var_b + alpha_a**2 * p) / (var_v * q_att + var_b + alpha_a**2)
        q1, p1 = var_w + var_b, var_w * p0 + var_b
        c = p1 / q1
        f = (math.sqrt(1 - c * c) + c * (math.pi - math.acos(c))) / math.pi
        return (var_w * q1 / 2 * f + var_b + alpha_mlp**2 * p0) / (var_w * q1 / 2 + var_b + alpha_mlp**2)

    for beta, alpha, rho in [(0.5, 1.0, 0.2), (3.0, 1.5, 0.1), (3.0, 2.0, 0.6)]:
        q, p = th.block_map(1.0, rho, beta=beta, alpha_sa=alpha, sigma_bv2=0.0004, **sp.presets.GG_APP_C1)
        assert p / q == pytest.approx(authors(rho, beta, 0.2, 0.2, 0.0004, alpha, 1.0), rel=1e-12)
        q0, p0 = th.block_map(1.0, rho, beta=beta, alpha_sa=alpha, **sp.presets.GG_APP_C1)
        assert p0 / q0 != pytest.approx(p / q, rel=1e-9)       # Algorithm 1 as printed differs


def test_block_map_refuses_a_causal_config():
    cfg = sp.BlockConfig.from_beta(1.0, T=16, d=32, causal=True)
    with pytest.raises(ValueError, match="iterate_gram_map"):
        th.block_map(1.0, 0.2, cfg, T=16)
    th.block_map(1.0, 0.2, dataclasses.replace(cfg, causal=False), T=16)


# ---------------------------------------------------------------- the map's domain (issue 26, item 5)


def test_limit_map_refuses_negative_overlaps():
    # T equicorrelated tokens need p/q >= -1/(T-1): the T -> infinity map is defined for p >= 0 only (it returned
    # q' = -1 at the issue's point)
    with pytest.raises(ValueError, match="p >= 0"):
        th.block_map(1, -1, beta=0.5, alpha_sa=0, sigma_w2=0, norm="pre")
    with pytest.raises(ValueError, match="p >= 0"):
        th.cosine_vs_depth(3, beta=0.5, rho0=-0.1)
    # at finite T the boundary -1/(T-1) is accepted and every output norm is positive; beyond it refused
    with pytest.raises(ValueError, match=r"-1/\(T-1\)"):
        th.block_map(1, -0.2, beta=0.5, T=8)
    grid = [(q, q * r, beta, a, norm) for q in (0.5, 2.0) for r in (-1 / 7, -0.1, 0.5) for beta in (0.5, 3.0)
            for a in (0.0, 1.0) for norm in ("pre", "none")]
    for q, p, beta, a, norm in grid:
        qn, pn = th.block_map(q, p, beta=beta, alpha_sa=a, sigma_w2=0.0, norm=norm, T=8)
        assert qn > 0 and abs(pn) <= qn * (1 + 1e-12), (q, p, beta, a, norm, qn, pn)


def test_maps_return_named_results():
    out = th.block_map(1.0, 0.2, beta=0.5)
    assert isinstance(out, sp.Overlaps) and out.cosine == pytest.approx(out.p / out.q)
    traj = th.iterate_block_map(1.0, 0.2, 4, beta=0.5)
    q, p = traj                                                  # unpacking keeps working
    assert isinstance(traj, sp.BlockTrajectory) and np.allclose(traj.cosine, p / q) and traj.cosine.shape == (5,)
    curve = th.cosine_vs_depth(4, beta=0.5, rho0=0.2)
    np.testing.assert_allclose(curve.rho, traj.cosine, rtol=1e-12)
    np.testing.assert_allclose(th.cosine_vs_depth(depth=4, beta=0.5, rho0=0.2).rho, curve.rho, rtol=0)
