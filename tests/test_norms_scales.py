"""The norms and scales of 2026 (issue 33) against sigprop's own random network: QK-norm, branch (sandwich, Peri-LN)
norms and soft-capped logits, each at two widths.

Curves over depth share initialisations: the curve-level test at the book's level 0.001 (16 >= 13 initialisations,
9999 sign-flip resamples). The maps are the d -> infinity limit at fixed T (mean field over the weights); with a
QK-norm the Gram map draws the logits' exact law at the config's d_k while the (q, p) map takes the Gaussian
d_k -> infinity law, so their difference is O(1/d_k): both are tested at d_k = 32 and 64 and the gap at the last
block is reported by the assertion messages. Soft-capped rows: the exact quadrature (sp.theory.capped_ipr) against
Monte Carlo with z <= 4 from the standard error, and its two limits (a cap far above every energy gives
sp.theory.ipr_finite to 1e-9: the same integral with a wider rule; the bound e^{2c}/(e^{2c} + T - 1) exactly).
"""
import math

import numpy as np
import pytest
import torch

import sigprop as sp
from conftest import Z

T, DEPTH, INITS, RHO0, LEVEL = 32, 6, 16, 0.2, 1e-3
G0 = (1 - RHO0) * np.eye(T) + RHO0


def curve(mc, theory):
    return sp.curve_agreement(mc.samples[:, 1:], np.asarray(theory)[1:], level=LEVEL, n_resamples=9999)


def network(cfg, seed=0):
    return sp.mc_cosine_vs_depth(cfg, DEPTH, T=T, inits=INITS, rho0=RHO0, generator=seed)


@pytest.mark.parametrize("qk_norm", ["head", "all"])
@pytest.mark.parametrize("d", [64, 128])
def test_qk_norm_pins_the_logit_scale(qk_norm, d):
    # two heads of d_k = d / 2; logit scale 5 / sqrt(d_k): beta_eff = 5 / sqrt(log T) = 2.7 > beta_c(1, 0.2) = 1.6
    base = dict(d=d, heads=2, norm="pre", qk_norm=qk_norm, logit_scale=5 / math.sqrt(d / 2), sigma_o2=1.0)
    gram = sp.theory.iterate_gram_map(G0, DEPTH, sp.BlockConfig(**base), samples=2048, generator=0).mean_cosine()
    qp = sp.theory.iterate_block_map(1.0, RHO0, DEPTH, sp.BlockConfig(**base), T=T).cosine
    for sigma_qk2 in (0.01 / d, 100.0 / d):      # the weights' scale: four orders of magnitude, the same curve
        mc = network(sp.BlockConfig(**base, sigma_qk2=sigma_qk2), seed=1)
        check = curve(mc, gram)
        gap = float(mc.mean[-1]) - qp[-1]
        assert check.passed, (d, sigma_qk2, mc.mean, gram, check)
        assert abs(gap) <= Z * float(mc.stderr[-1]) + 0.02, (d, gap, "(q, p) map's d_k -> infinity gap")


@pytest.mark.parametrize("d", [64, 128])
def test_sandwich_and_peri_norms(d):
    for extra in (dict(norm="pre"), dict(norm="none", qk_norm="head")):   # Gemma2/3's sandwich; OLMo2's placement
        cfg = sp.BlockConfig(d=d, heads=2, branch_norm=True, sigma_qk2=2.0 / d, sigma_o2=1.0, **extra)
        gram = sp.theory.iterate_gram_map(G0, DEPTH, cfg, samples=2048, generator=0).mean_cosine()
        qp = sp.theory.iterate_block_map(1.0, RHO0, DEPTH, cfg, T=T)
        assert curve(network(cfg, seed=2), qp.cosine).passed, (d, extra)
        assert curve(network(cfg, seed=2), gram).passed, (d, extra)
        # a normalised branch adds branch^2 = 1 to q per sub-layer: the stream grows linearly with depth
        np.testing.assert_allclose(qp.q, 1.0 + 2.0 * np.arange(DEPTH + 1), rtol=1e-12)


def test_branch_norm_network_norm_grows_linearly():
    cfg = sp.BlockConfig(d=128, heads=2, norm="pre", branch_norm=True, sigma_o2=1.0)
    params = sp.sample_transformer(cfg, DEPTH, inits=INITS, generator=3, dtype=torch.float64)
    x = sp.equicorrelated_tokens(2, T=T, d=128, rho=RHO0, generator=4).double()
    q = sp.transformer_forward(x, params, cfg, measure=lambda h: h.pow(2).mean((-1, -2, -3)))   # (L+1, inits)
    est = sp.estimate(q.T)
    want = float(est.mean[0]) + 2.0 * np.arange(1, DEPTH + 1)   # from the sample's own input norm
    assert np.all(np.abs(est.mean.numpy()[1:] - want) <= Z * est.stderr.numpy()[1:]), (est.mean, want)


@pytest.mark.parametrize("d", [64, 128])
def test_soft_capped_logits_in_the_gram_map(d):
    cfg = sp.BlockConfig(d=d, heads=2, norm="pre", causal=True, logit_cap=1.0, sigma_qk2=8.0 / d, sigma_o2=1.0)
    gram = sp.theory.iterate_gram_map(G0, DEPTH, cfg, samples=2048, generator=0).mean_cosine()
    uncapped = sp.theory.iterate_gram_map(G0, DEPTH, sp.BlockConfig(**{**cfg.__dict__, "logit_cap": None}),
                                          samples=2048, generator=0).mean_cosine()
    mc = network(cfg, seed=5)
    assert curve(mc, gram).passed, (d, mc.mean, gram)
    assert not curve(mc, uncapped).passed            # the cap changes the curve: the test has power
    with pytest.raises(ValueError, match="soft-capped"):
        sp.theory.iterate_block_map(1.0, RHO0, DEPTH, cfg.__class__(**{**cfg.__dict__, "causal": False}), T=T)


@pytest.mark.parametrize("beta, T_, cap", [(3.0, 64, 3.0), (3.0, 64, 1.0), (1.0, 256, 2.0), (4.0, 4096, 5.0)])
def test_capped_ipr_against_monte_carlo(beta, T_, cap):
    mc = sp.mc_capped_ipr(beta, T=T_, cap=cap, n=8000, q=1.0, p=0.2, generator=0)
    assert abs(float(mc.mean) - sp.theory.capped_ipr(beta, T_, cap, 1.0, 0.2)) <= Z * float(mc.stderr)


def test_capped_ipr_limits():
    assert abs(sp.theory.capped_ipr(3.0, 64, 1e6, 1.0, 0.2) - sp.theory.ipr_finite(3.0, 64, 1.0, 0.2)) < 1e-9
    for T_, cap in ((64, 1.0), (4096, 2.0)):       # every weight <= e^{2c} / (e^{2c} + T - 1)
        assert sp.theory.capped_ipr(6.0, T_, cap) <= math.exp(2 * cap) / (math.exp(2 * cap) + T_ - 1)
    with pytest.raises(ValueError, match="cap"):
        sp.theory.capped_ipr(1.0, 64, 0.0)
