"""The Gram-matrix (position-resolved, causal) block map against the (q, p) map and random transformers.

Tolerance bases: the map integrates the softmax average by Monte Carlo over logits (fixed seed), so its own
error is measured here from independent seeds (``_spread``) and compared with z = 4 standard errors; curves
against random transformers share initialisations and are tested with ``sp.curve_agreement`` at level 1e-3
(16 >= 13 initialisations, 9999 sign-flip resamples).
"""
import math

import numpy as np
import pytest
import torch

import sigprop as sp
from conftest import Z

th = sp.theory


def _G0(T, rho):
    return (1 - rho) * np.eye(T) + rho


def _spread(fn, seeds):
    """Mean and standard error over independent seeds of the map's Monte Carlo integration."""
    vals = np.array([fn(s) for s in seeds])
    return vals.mean(0), vals.std(0, ddof=1) / math.sqrt(len(seeds))


@pytest.mark.parametrize("beta, norm", [(0.4, "post"), (2.2, "post"), (1.6, "pre")])
def test_unmasked_equicorrelated_reduces_to_the_block_map(beta, norm):
    # no mask, equicorrelated G: the Gram map is the finite-T (q, p) map (exact REM quadratures for Y2 and Y_p)
    T, depth = 32, 3
    cfg = sp.BlockConfig.from_beta(beta, T=T, d=64, heads=2, norm=norm, activation="gelu", sigma_o2=0.6,
                                   sigma_bv2=0.05, sigma_w2=0.8, sigma_w2_out=1.3)
    runs = [th.iterate_gram_map(_G0(T, 0.2), depth, cfg, samples=1024, generator=s) for s in range(5)]
    mean, se = _spread(lambda k: runs[k].mean_cosine(), range(5))
    q, p = th.iterate_block_map(1.0, 0.2, depth, cfg, T=T)
    assert np.all(np.abs(mean - p / q) <= Z * se + 1e-12)
    # the first layer's IPR is the REM's, row by row (equicorrelated input: every row the same REM)
    ipr, ipr_se = _spread(lambda k: runs[k].ipr[0].mean(), range(5))
    assert abs(ipr - th.ipr_finite(cfg.beta(T), T, 1.0, 0.2)) <= Z * ipr_se


def test_causal_ipr_is_the_rem_with_t_plus_one_keys():
    # causal rows on equicorrelated tokens: direct simulation of t + 1 i.i.d. energies per row (rows independent:
    # a per-point test) against the quadrature
    T = 24
    cfg = sp.BlockConfig.from_beta(1.3, T=T, d=64, heads=2, causal=True)
    rem = th.causal_ipr(1.0, 0.3, cfg, T=T)
    sigma = math.sqrt(cfg.beta(T) ** 2 * math.log(T) * 0.7)
    g = torch.Generator().manual_seed(0)
    for t in (0, 1, 3, 10, 23):
        a = sigma * torch.randn(20000, t + 1, generator=g, dtype=torch.float64)
        assert sp.estimate(torch.softmax(a, -1).pow(2).sum(-1)).agrees(rem[t], z=Z) if t else rem[0] == 1.0
    # and the Gram map's first-layer IPR by position (pre-LN: its attention sees q = 1, p = rho)
    cfg_pre = sp.BlockConfig.from_beta(1.3, T=T, d=64, heads=2, causal=True, norm="pre")
    mean, se = _spread(lambda s: th.iterate_gram_map(_G0(T, 0.3), 1, cfg_pre, samples=1024, generator=s).ipr[0],
                       range(6))
    assert np.all(np.abs(mean - th.causal_ipr(1.0, 0.3, cfg_pre, T=T)) <= Z * se + 1e-12)


@pytest.mark.parametrize("beta, norm", [(0.5, "pre"), (1.6, "post")])
def test_causal_map_against_random_causal_transformers(beta, norm):
    # position profile after the last block and mean cosine of early / late pairs through depth
    T, d, depth = 32, 128, 5
    cfg = sp.BlockConfig.from_beta(beta, T=T, d=d, heads=2, norm=norm, causal=True, activation="gelu_tanh",
                                   sigma_v2=1.0, sigma_o2=1.0, sigma_w2=1.0, sigma_w2_out=2.0)
    params = sp.sample_transformer(cfg, depth, inits=16, generator=1)
    x = sp.equicorrelated_tokens(16, 2, T=T, d=d, rho=0.1, generator=2)
    cos = sp.transformer_forward(x, params, cfg, measure=sp.cosine_matrix).double().mean(2)  # (depth+1, inits, T, T)
    traj = th.iterate_gram_map(_G0(T, float(sp.mean_cosine(x).mean())), depth, cfg, samples=1024, generator=0)
    theory = traj.cosine_matrix()
    profile = ((cos[-1].sum(-1) - 1) / (T - 1)).numpy()                                  # (inits, T)
    assert sp.curve_agreement(profile, (theory[-1].sum(-1) - 1) / (T - 1), level=1e-3, n_resamples=9999).passed
    for idx in (np.arange(8), np.arange(T - 8, T)):
        sub = cos[:, :, idx[:, None], idx[None, :]]
        k = len(idx)
        curve = ((sub.sum((-1, -2)) - k) / (k * (k - 1))).T.numpy()                        # (inits, depth+1)
        assert sp.curve_agreement(curve[:, 1:], traj.mean_cosine(idx)[1:], level=1e-3, n_resamples=9999).passed


def test_gram_map_precision_and_reproducibility():
    T = 48
    cfg = sp.BlockConfig.from_beta(1.0, T=T, d=64, norm="pre", causal=True)
    a = th.iterate_gram_map(_G0(T, 0.1), 4, cfg, generator=3)
    b = th.iterate_gram_map(_G0(T, 0.1), 4, cfg, generator=3)
    c = th.iterate_gram_map(_G0(T, 0.1), 4, cfg, generator=4)
    assert np.array_equal(a.gram, b.gram)
    # the docstring's precision: two seeds at the default 1024 draws differ by < 1e-3 in the mean cosine
    assert np.abs(a.mean_cosine() - c.mean_cosine()).max() < 1e-3
    assert a.gram.shape == (5, T, T) and a.ipr.shape == (4, T) and np.allclose(a.ipr[:, 0], 1.0)


def test_gram_map_validation():
    cfg = sp.BlockConfig(d=8, sigma_qk2=0.1)
    with pytest.raises(ValueError, match=r"\(T, T\)"):
        th.gram_block_map(np.ones((3, 4)), cfg)
    with pytest.raises(ValueError, match="positive diagonal"):
        th.gram_block_map(np.zeros((3, 3)), cfg)
    with pytest.raises(ValueError, match="symmetric"):
        th.gram_block_map(np.array([[1.0, 0.5], [0.1, 1.0]]), cfg)
    with pytest.raises(TypeError, match="BlockConfig"):
        th.iterate_gram_map(np.eye(3), 2, {"d": 8})
    with pytest.raises(ValueError, match="samples must be >= 2"):
        th.iterate_gram_map(np.eye(3), 2, cfg, samples=1)
    G, ipr = th.gram_block_map(torch.eye(4, dtype=torch.float64), cfg, samples=3)   # odd samples: rounded up
    assert G.shape == (4, 4) and ipr.shape == (4,)


# ---------------------------------------------------------------- inputs and edges (issue 26, items 4 and 12)


def test_gram_inputs_must_be_gram_matrices():
    cfg = sp.BlockConfig(d=8, sigma_qk2=0.1)
    with pytest.raises(ValueError, match=r"cosines in \[-1, 1\]"):
        th.iterate_gram_map([[1, 2], [2, 1]], 1, cfg)                      # returned cosines of 2
    with pytest.raises(ValueError, match="positive semi-definite"):
        th.iterate_gram_map(_G0(16, -0.5), 1, cfg)                        # rho0 < -1/(T-1)
    th.iterate_gram_map(_G0(16, -1 / 15), 1, cfg, samples=16)             # the boundary is a Gram matrix
    with pytest.raises(TypeError, match="real Gram matrix"):
        th.gram_block_map(torch.eye(3, dtype=torch.complex128), cfg)
    with pytest.raises(TypeError, match="real Gram matrix"):
        th.gram_block_map(np.eye(3, dtype=bool), cfg)
    with pytest.raises(ValueError, match="float64 range"):                 # returned an inf Gram unchecked
        th.gram_block_map(1e307 * np.eye(4), sp.BlockConfig(d=8, sigma_qk2=0.1, norm="none"))


def test_mean_cosine_positions():
    traj = th.iterate_gram_map(_G0(6, 0.3), 1, sp.BlockConfig(d=8, sigma_qk2=0.1), samples=16)
    np.testing.assert_allclose(traj.mean_cosine([0, 1, 2, 3, 4, 5]), traj.mean_cosine())
    np.testing.assert_allclose(traj.mean_cosine([-1, 0]), traj.mean_cosine(slice(0, 6, 5)))
    for bad, err, match in (([2], ValueError, "at least two"), ([], ValueError, "at least two"),
                            ([0, 6], ValueError, r"\[-6, 6\)"), ([1, 1, 2], ValueError, "distinct"),
                            ([0.5, 1.0], TypeError, "ints")):
        with pytest.raises(err, match=match):
            traj.mean_cosine(bad)


def test_causal_ipr_needs_an_int_length_and_is_fast_at_a_million():
    cfg = sp.BlockConfig.from_beta(1.3, T=64, d=64, causal=True)
    with pytest.raises(TypeError, match="T must be an int"):
        th.causal_ipr(1.0, 0.3, cfg, T=2.5)                                # was truncated to 2
    import time
    t = time.process_time()
    big = th.causal_ipr(1.0, 0.3, cfg, T=10**6)
    assert time.process_time() - t < 10.0 and big.shape == (10**6,) and np.all(np.diff(big[1:]) < 0)
    # rows beyond 1024 keys are interpolated in log(keys): against the quadrature at a few rows, < 1e-9
    from sigprop.attention import rem_quadrature
    sigma = math.sqrt(cfg.logit_var * 0.7)
    for t_row in (1500, 40_000, 999_999):
        assert big[t_row] == pytest.approx(rem_quadrature(sigma, float(t_row + 1))[0], abs=1e-9)
