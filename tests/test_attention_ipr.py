"""Tests for sigprop.attention._ipr: the IPR of random attention layers (streaming kernel, finite-width REM)."""
import math

import numpy as np
import pytest
import torch

import sigprop as sp


def test_mc_attention_ipr_matches_finite_width_rem():
    # All betas and both orders are measured on the same networks: one curve, tested as a whole
    # (sp.curve_agreement at level 1e-3: a correct curve fails once in a thousand runs). Each sample is the
    # mean over one call of two independent networks (the Estimate keeps no per-network values).
    betas = [0.5, 1.0, 2.0, 3.0]
    pairs = torch.stack([sp.mc_attention_ipr(betas, T=2000, d=128, inits=2, queries=16, r=(2, 3), generator=100 + i,
                                             device="cpu").mean for i in range(16)])          # (16, betas, 2)
    preds = [sp.mc_ipr_finite_width(betas, T=2000, d=128, r=r, samples=2048, generator=2) for r in (2, 3)]
    theory = np.stack([p.mean.numpy() for p in preds], -1)                                  # (betas, 2)
    # the theory's own Monte Carlo error (2048 draws of the logit scale) is small against the networks' standard
    # error (below 0.3 of it: ignoring it understates the combined error by under 5 %)
    assert np.all(np.stack([p.stderr.numpy() for p in preds], -1) < 0.3 * pairs.std(0).numpy() / math.sqrt(16))
    ca = sp.curve_agreement(pairs, theory, level=1e-3, n_resamples=9999)
    assert ca.passed, str(ca)
    # and the test has power here: the T -> infinity law (Result 1) is rejected
    limit = np.stack([sp.theory.ipr(betas, r=r) for r in (2, 3)], -1)
    assert not sp.curve_agreement(pairs, limit, level=1e-3, n_resamples=9999).passed


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
