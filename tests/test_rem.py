import math

import numpy as np
import pytest
import torch

import sigprop as sp
from conftest import Z

th = sp.theory


def test_beta_c_values_and_types():
    assert th.beta_c(1.0, 0.0) == pytest.approx(math.sqrt(2))
    assert th.beta_c(2.0, 1.0) == pytest.approx(1.0)
    assert isinstance(th.beta_c(1.0, 0.0), float)
    assert th.beta_c(np.array([1.0, 2.0]), 0.0).shape == (2,)
    assert isinstance(th.beta_c(torch.tensor([1.0]), 0.0), torch.Tensor)


@pytest.mark.parametrize("q, p, match", [(0.0, 0.0, "q must be > 0"), (1.0, 1.5, r"\|p\| <= q"),
                                         (1.0, 1.0, "p < q"), (float("nan"), 0.0, "finite")])
def test_beta_c_rejects_bad_overlaps(q, p, match):
    with pytest.raises(ValueError, match=match):
        th.beta_c(q, p)


def test_ipr_limit_formulas():
    beta = np.array([0.5, math.sqrt(2), 2.0, 4.0])
    m = math.sqrt(2) / beta
    assert np.allclose(th.ipr(beta), np.maximum(0, 1 - m))  # Eq. (4)
    y3 = np.where(m < 1, (1 - m) * (2 - m) / 2, 0.0)  # Poisson-Dirichlet, r = 3
    assert np.allclose(th.ipr(beta, r=3), y3)
    assert np.allclose(th.ipr(beta, r=1), 1.0)
    assert th.ipr(2.0, q=1.0, p=1.0) == 0.0  # collapsed tokens: uniform attention
    with pytest.raises(ValueError, match="beta must be > 0"):
        th.ipr(0.0)
    with pytest.raises(ValueError, match="r"):
        th.ipr(2.0, r=0.5)


def test_ipr_finite_small_beta_and_order_one():
    assert th.ipr_finite(1e-6, 500) == pytest.approx(1 / 500, rel=1e-6)
    assert th.ipr_finite(1e-6, 500, r=3) == pytest.approx(500 ** -2, rel=1e-5)
    assert th.ipr_finite(2.0, 1000, r=1) == pytest.approx(1.0, abs=1e-8)


def test_ipr_finite_against_direct_rem_simulation():
    # independent check of the quadrature: T i.i.d. Gaussian energies, exact softmax
    T, beta = 500, 1.5
    sigma = beta * math.sqrt(math.log(T))
    g = torch.Generator().manual_seed(0)
    a = sigma * torch.randn(20000, T, generator=g, dtype=torch.float64)
    y = (torch.softmax(a, -1) ** 2).sum(-1)
    assert sp.estimate(y).agrees(th.ipr_finite(beta, T), z=Z)


def test_ipr_finite_tends_to_limit():
    # the finite-T value approaches Eq. (4) as T grows (slowly, in log T)
    for beta in (0.8, 3.0):
        gaps = [abs(th.ipr_finite(beta, T) - th.ipr(beta)) for T in (1e2, 1e4, 1e6)]
        assert gaps[0] > gaps[1] > gaps[2]


def test_mc_attention_ipr_matches_finite_width_rem():
    betas = [0.5, 1.0, 2.0, 3.0]
    mc = sp.mc_attention_ipr(betas, T=2000, d=128, inits=64, queries=16, r=(2, 3), generator=1, device="cpu")
    for j, r in enumerate((2, 3)):
        pred = sp.ipr_finite_width(betas, T=2000, d=128, r=r, samples=512, generator=2)
        se = np.hypot(mc.stderr[:, j].numpy(), pred.stderr.numpy())
        assert np.all(np.abs(mc.mean[:, j].numpy() - pred.mean.numpy()) <= Z * se)


def test_mc_attention_ipr_chunk_invariant_and_seeded():
    kw = dict(T=3000, d=16, inits=3, queries=4, generator=0, device="cpu", dtype=torch.float64)
    a = sp.mc_attention_ipr([1.0, 2.0], chunk=1024, **kw)
    b = sp.mc_attention_ipr([1.0, 2.0], chunk=4096, **kw)
    assert torch.allclose(a.mean, b.mean, rtol=1e-10)
    c = sp.mc_attention_ipr([1.0, 2.0], chunk=1024, **kw)
    assert torch.equal(a.mean, c.mean)


def test_mc_attention_ipr_rejects_bad_input():
    with pytest.raises(ValueError, match="beta"):
        sp.mc_attention_ipr([-1.0], T=100, d=8)
    with pytest.raises(ValueError, match="queries"):
        sp.mc_attention_ipr([1.0], T=10, d=8, queries=20)
    with pytest.raises(ValueError, match="multiple"):
        sp.mc_attention_ipr([1.0], T=100, d=8, chunk=1500)
