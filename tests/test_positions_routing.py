"""The positions and routing of 2026 (issue 34) against sigprop's own random network: ALiBi, sliding windows and
mixtures of experts, each at two widths.

Curves over positions or blocks share initialisations: the curve-level test at the book's level 0.001 (16 >= 13
initialisations, 9999 sign-flip resamples). The maps are the d -> infinity limit at fixed T (weights averaged); the
first layer's attention IPR by position is exact there (the Gram map's logits are drawn from their law; the windowed
REM of sp.theory.causal_ipr is exact per row), so it is tested at d = 128 and 256. Each test also rejects the map
without the part (the test has power). The routing factor g of a mixture of experts is a Monte Carlo over router
logits with a fixed seed: its limits are exact, and an independent Monte Carlo agrees with its table within 4
combined standard errors.
"""
import numpy as np
import pytest
import torch

import sigprop as sp
from conftest import Z
from sigprop.block._moe import routing_factor

T, INITS, RHO0, LEVEL = 32, 16, 0.2, 1e-3
G0 = (1 - RHO0) * np.eye(T) + RHO0


def curve(samples, theory, start=0):
    return sp.curve_agreement(np.asarray(samples)[:, start:], np.asarray(theory)[start:], level=LEVEL, n_resamples=9999)


def first_layer_ipr(cfg, seed=0):
    """Block 1's attention IPR of each query row (mean over heads and 2 sequences), per initialisation: (inits, T)."""
    params = sp.sample_transformer(cfg, 1, inits=INITS, generator=seed, dtype=torch.float64)
    x = sp.equicorrelated_tokens(2, T=T, d=cfg.d, rho=RHO0, generator=seed + 1).double()
    record = []
    sp.block.apply_block(x.expand(INITS, *x.shape), params, cfg, 0, record=record)
    return sp.attention_ipr(record[0]["attention"]).mean((1, 2)).numpy()


def test_alibi_slopes_are_hugging_faces():
    assert sp.alibi_slopes(8) == tuple(2.0 ** (-i) for i in range(1, 9))      # 2^(-8i/n), n = 8
    tf = pytest.importorskip("transformers")
    from transformers.models.bloom.modeling_bloom import _get_alibi_slopes   # noqa: PLC0415
    for n in (4, 6, 12, 32):
        assert sp.alibi_slopes(n) == tuple(_get_alibi_slopes(n, "cpu").tolist()), (n, tf.__version__)


@pytest.mark.parametrize("d", [128, 256])
def test_alibi_in_the_gram_map(d):
    H = d // 32
    cfg = sp.BlockConfig(d=d, heads=H, norm="pre", causal=True, alibi_slopes=sp.alibi_slopes(H), sigma_qk2=1.0 / d,
                         sigma_o2=1.0)
    ipr = first_layer_ipr(cfg, seed=1)
    gram = sp.theory.gram_block_map(G0, cfg, samples=4096, generator=0).ipr
    plain = sp.theory.gram_block_map(G0, sp.BlockConfig(**{**cfg.__dict__, "alibi_slopes": None}), samples=4096,
                                     generator=0).ipr
    assert curve(ipr, gram, start=1).passed, (d, ipr.mean(0), gram)
    assert not curve(ipr, plain, start=1).passed
    with pytest.raises(ValueError, match="causal|ALiBi"):   # ALiBi blocks are causal: refused either way
        sp.theory.block_map(1.0, RHO0, cfg, T=T)


@pytest.mark.parametrize("d", [128, 256])
def test_sliding_window_rows_are_rems_over_the_window(d):
    W = 6
    cfg = sp.BlockConfig.from_beta(2.5, T=T, d=d, heads=d // 64, norm="pre", causal=True, window=W, sigma_o2=1.0)
    ipr = first_layer_ipr(cfg, seed=2)
    want = sp.theory.causal_ipr(1.0, RHO0, cfg, T=T)        # row t: a REM over min(t + 1, W) keys
    full = sp.theory.causal_ipr(1.0, RHO0, sp.BlockConfig(**{**cfg.__dict__, "window": None}), T=T)
    assert np.all(want[W - 1:] == want[W - 1])
    assert curve(ipr, want, start=1).passed, (d, ipr.mean(0), want)
    assert not curve(ipr, full, start=1).passed


def test_routing_factor_limits():
    spec = sp.BlockConfig(d=64, norm="pre", experts=8, top_k=8, router_sigma2=1e-12)
    np.testing.assert_allclose(routing_factor(1.0, np.array([-0.5, 0.0, 0.9]), spec), 1 / 8, rtol=1e-9)
    top1 = sp.BlockConfig(d=64, norm="pre", experts=4, top_k=1, router_sigma2=1.0)
    assert abs(routing_factor(1.0, 1.0, top1) - 1.0) < 1e-12                      # one token: its own expert
    assert abs(float(routing_factor(1.0, 0.0, top1)) - 0.25) < 0.01               # independent logits: 1 / E


@pytest.mark.parametrize("experts, k, sigma2, norm", [(8, 2, 1.0, True), (4, 1, 0.3, True), (8, 2, 4.0, False)])
def test_routing_factor_against_an_independent_monte_carlo(experts, k, sigma2, norm):
    c = sp.BlockConfig(d=64, norm="pre", experts=experts, top_k=k, router_sigma2=sigma2, norm_topk=norm)
    g = torch.Generator().manual_seed(99)
    for rho in (-0.3, 0.0, 0.5, 0.95):
        u, v = torch.randn(2, 100_000, experts, generator=g, dtype=torch.float64)
        a = np.sqrt(sigma2) * u
        b = np.sqrt(sigma2) * (rho * u + np.sqrt(1 - rho**2) * v)

        def weights(logits):
            top, idx = torch.topk(torch.softmax(logits, -1), k, -1)
            top = top / top.sum(-1, keepdim=True) if norm else top
            return torch.zeros_like(logits).scatter(-1, idx, top)
        prod = (weights(a) * weights(b)).sum(-1)
        est = sp.estimate(prod)
        assert abs(float(est.mean) - float(routing_factor(1.0, rho, c))) <= Z * np.hypot(float(est.stderr), 0.002), rho


@pytest.mark.parametrize("d", [128, 256])
def test_mixture_of_experts_maps(d):
    cfg = sp.BlockConfig(d=d, heads=4, norm="pre", experts=4, top_k=1, gated=True, activation="silu", d_ff=d,
                         sigma_o2=1.0, sigma_qk2=1.0 / d)
    depth = 4
    mc = sp.mc_cosine_vs_depth(cfg, depth, T=16, inits=INITS, rho0=RHO0, generator=3)
    qp = sp.theory.iterate_block_map(1.0, RHO0, depth, cfg, T=16).cosine
    gram = sp.theory.iterate_gram_map((1 - RHO0) * np.eye(16) + RHO0, depth, cfg, samples=1024, generator=0)
    dense = sp.theory.iterate_block_map(1.0, RHO0, depth, sp.BlockConfig(**{**cfg.__dict__, "experts": None}),
                                        T=16).cosine
    assert curve(mc.samples, qp, start=1).passed, (d, mc.mean, qp)
    assert curve(mc.samples, gram.mean_cosine(), start=1).passed
    assert not curve(mc.samples, dense, start=1).passed      # routing changes the curve: the test has power
