import math

import numpy as np
import pytest
import torch

import sigprop as sp
from conftest import Z

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
        th.block_map(1.0, 0.0, beta=1.0, activation="gelu")
    with pytest.raises(ValueError, match="beta must be > 0"):
        th.block_map(1.0, 0.0, beta=-1.0)
    with pytest.raises(ValueError, match=r"\|p\| <= q"):
        th.block_map(1.0, 2.0, beta=1.0)


def _mc_cosine(norm, beta, alpha, depth, *, gain=False, T=64, d=128, inits=24, samples=4, seed=0, **extra):
    cfg = sp.BlockConfig(d=d, norm=norm, alpha_sa=alpha, sigma_qk2=sp.gg_qk_variance(beta, T, d),
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
