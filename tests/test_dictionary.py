"""The notation dictionary: each conversion checked against Monte Carlo of the logits."""
import math

import pytest
import torch

import sigprop as sp
from conftest import Z

th = sp.theory


def _logits(cfg, n, T=2, seed=0):
    params = sp.sample_transformer(cfg, 1, inits=n, generator=seed, dtype=torch.float64)
    x = sp.gaussian_tokens(n, 1, T=T, d=cfg.d, generator=seed + 1, dtype=torch.float64)
    qv = torch.einsum("nbtd,nkd->nbtk", x, params.w_q[:, 0, 0])
    kv = torch.einsum("nbtd,nkd->nbtk", x, params.w_k[:, 0, 0])
    return cfg.scale * (qv[:, 0, 0] * kv[:, 0, 1]).sum(-1)  # a_12 for each init


def test_logit_variance_xavier():
    d, dk = 64, 16
    cfg = sp.BlockConfig(d=d, heads=4, d_k=dk)  # Xavier default, logit scale 1/sqrt(d_k)
    a = _logits(cfg, 2000)
    var = th.logit_variance(logit_scale=cfg.scale, d=d, d_k=dk, sigma_qk2=cfg.qk_variance)
    assert sp.estimate(a**2).agrees(var, z=Z)
    beta = th.beta_xavier(d=d, d_k=dk, T=100)
    assert beta == pytest.approx(th.beta_equivalent(logit_scale=cfg.scale, d=d, d_k=dk, sigma_qk2=cfg.qk_variance, T=100))
    assert sp.estimate(a**2).agrees(beta**2 * math.log(100), z=Z)


def test_qk_variance_for_beta_inverts_beta_equivalent():
    v = th.qk_variance_for_beta(1.3, T=500, d=64)
    assert v == pytest.approx(1.3 * math.sqrt(math.log(500)) / 64)
    v2 = th.qk_variance_for_beta(1.3, T=500, d=64, d_k=16, logit_scale=0.3)
    assert th.beta_equivalent(logit_scale=0.3, d=64, d_k=16, sigma_qk2=v2, T=500) == pytest.approx(1.3)


def test_bao_logit_statistics():
    d, lam, mean, scale, n = 32, math.sqrt(32), 0.3, 0.5, 3000
    W = sp.spectral_qk_matrix(n, d=d, mean=mean, scale=scale, generator=0)  # B diag(w) B^T, Haar B
    x = torch.randn(n, 2, d, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    cross = torch.einsum("ni,nij,nj->n", x[:, 0], W, x[:, 1]) / lam
    self_ = torch.einsum("ni,nij,nj->n", x[:, 0], W, x[:, 0]) / lam
    T = 64
    beta = th.beta_bao(mean=mean, scale=scale, d=d, lam=lam, T=T)
    assert sp.estimate(cross**2).agrees(beta**2 * math.log(T), z=Z)
    assert sp.estimate(self_).agrees(th.bao_self_logit_mean(mean=mean, d=d, lam=lam), z=Z)


def test_branch_from_skip_post_ln_equivalence():
    a = 2.5
    c1 = sp.BlockConfig(d=16, alpha_sa=a, alpha_mlp=1.0, sigma_qk2=0.05)
    c2 = sp.BlockConfig(d=16, branch_sa=th.branch_from_skip(a), sigma_qk2=0.05)
    params = sp.sample_transformer(c1, 3, inits=2, generator=0, dtype=torch.float64)
    x = sp.gaussian_tokens(2, T=5, d=16, generator=1, dtype=torch.float64)
    assert torch.allclose(sp.transformer_forward(x, params, c1), sp.transformer_forward(x, params, c2), atol=1e-10)


def test_dictionary_rejects_bad_input():
    with pytest.raises(ValueError, match="T"):
        th.beta_xavier(d=8, d_k=8, T=1)
    with pytest.raises(ValueError, match="beta must be > 0"):
        th.qk_variance_for_beta(0.0, T=10, d=8)
    with pytest.raises(ValueError, match="lam must be > 0"):
        th.beta_bao(mean=0.1, scale=0.1, d=8, lam=0.0, T=10)
