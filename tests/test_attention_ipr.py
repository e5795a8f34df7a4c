"""Tests for sigprop._attention_ipr: the IPR of random attention layers (streaming kernel, finite-width REM)."""
import math

import numpy as np
import pytest
import torch

import sigprop as sp
from conftest import Z


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
