"""The page helpers of the Noci and Bao chapters (``sigprop.course``: ``_one_layer``, ``_gram_depth``, ``_reversal``,
``_propagation_mc``): each helper's contract, and a Monte Carlo or known-value check where it computes science.

Tolerances: a Monte Carlo mean against its theory at ``|z| <= 4`` (``sp.course.Z_POINT``, the book's point level);
curve-level tests at the book's level 0.001 (``sp.course.curve_test``). Sizes are small: every test runs in seconds.
"""
from __future__ import annotations

import dataclasses
import math

import matplotlib
import numpy as np
import pytest
import torch

import sigprop as sp
from sigprop.course import _gram_depth, _propagation_mc, _reversal

matplotlib.use("Agg")
Z = sp.course.Z_POINT


# ---- _one_layer: Noci et al. 2022, Sec. 3 (one attention layer) ------------------------------------------------

def test_layer_weights_shapes_order_and_variance():
    w = sp.course.layer_weights(3, d=8, d_k=4, d_v=5, scale=2.0, generator=0)
    assert [t.shape for t in w] == [(3, 4, 8), (3, 4, 8), (3, 5, 8)] and w.w_v is w[2]
    again = sp.course.layer_weights(3, d=8, d_k=4, d_v=5, scale=2.0, generator=0)
    assert all(torch.equal(a, b) for a, b in zip(w, again))                     # reproducible from the seed
    big = sp.course.layer_weights(d=50, scale=2.0, generator=1).w_q.flatten()   # 2500 entries of variance 4/50
    var, n = float(big.var()), big.numel()
    assert abs(var - 4 / 50) <= Z * (4 / 50) * math.sqrt(2 / (n - 1))        # SE of a Gaussian sample variance
    with pytest.raises(ValueError):
        sp.course.layer_weights(d=0)


def test_mc_uniform_deviation_agrees_with_lemma_a7_at_small_variance():
    """Fig. 7: at d_k >> d_v the leading order sigma_k^4 ||X||^2 ||LX||^2 / n^4 (Lemma A.7) is accurate
    (relative corrections O(sigma_k^4 ||x||^4) ~ 1.4 % here, far below the 4 SE tolerance)."""
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    s2 = sp.theory.glorot_variance(8, 128)
    est = sp.course.mc_uniform_deviation(x, 128, sigma_k2=s2, draws=200, generator=1)
    assert est.mean.shape == () and est.n == 200
    assert abs(est.zscore(float(sp.theory.uniform_deviation(x, s2)))) <= Z
    # known value: with tiny weights the attention is uniform, the deviation ~ 0
    assert float(sp.course.mc_uniform_deviation(x, 4, sigma_k2=1e-12, draws=4, generator=2).mean) < 1e-20


def test_mc_query_value_ratio_is_the_uniform_theory_at_small_inputs():
    """Figs. 11-13: with sigma_x = 0.1 the logits are ~1e-2 and softmax is uniform to ~1e-4, so the measured log
    ratio agrees with the exact uniform-attention value (|z| <= 4); the log ratio is the log of the ratio of the
    two mean squared norms."""
    r = sp.course.mc_query_value_ratio(4, 6, 0.3, 0.1, runs=400, generator=0)
    assert isinstance(r, sp.course.QueryValueRatio) and r.query.n == r.value.n == 400
    assert float(r.log_ratio.mean) == pytest.approx(math.log(float(r.query.mean) / float(r.value.mean)), rel=1e-12)
    theory = sp.theory.query_value_log_ratio(4, 6, 0.3, 0.1**2, exact=True)
    assert abs(r.log_ratio.zscore(float(theory))) <= Z


def test_mc_query_value_ratio_delta_method_se_matches_the_spread_of_repeats():
    """The delta-method SE against the standard deviation of 24 independent repeats; the ratio of the two is 1
    within 4 times the relative SE of a standard deviation over 24 repeats, 1/sqrt(46) = 0.15."""
    g = torch.Generator().manual_seed(3)
    reps = [sp.course.mc_query_value_ratio(3, 4, 0.2, 1.0, runs=60, generator=g).log_ratio for _ in range(24)]
    spread = float(np.std([float(r.mean) for r in reps], ddof=1))
    se = float(np.mean([float(r.stderr) for r in reps]))
    assert abs(spread / se - 1) <= 4 / math.sqrt(46)


# ---- _gram_depth: Noci et al. 2022, Sec. 3.2, Lemmas 3.2-3.3, Eq. (A.4) -----------------------------------------

def test_equal_norm_tokens():
    x = sp.course.equal_norm_tokens(5, 7, generator=0)
    assert x.shape == (5, 7) and torch.allclose(x.norm(dim=-1), torch.ones(5, dtype=torch.float64))
    c = sp.course.equal_norm_tokens(5, 7, generator=0, centred=True)
    norms = c.norm(dim=-1)
    assert torch.allclose(norms, norms[0].expand(5)) and float(c.sum(0).abs().max()) < 1e-12
    assert float(sp.gram_sum(c)) == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="n <= d"):
        sp.course.equal_norm_tokens(8, 4, centred=True)


@pytest.fixture(scope="module")
def gram_run():
    x = sp.course.equal_norm_tokens(4, 8, generator=1)
    config = sp.BlockConfig(d=8, branch_sa=0.7, branch_mlp=0.7, **sp.presets.NOCI_SEC32)
    return x, sp.course.mc_gram_depth(x, config, 3, inits=400, generator=2)


def test_mc_gram_depth_agrees_with_lemmas_32_33(gram_run):
    x, mc = gram_run
    assert mc.gram_sum.shape == mc.sq_norm.shape == (4, 400) and mc.depth == 3 and mc.n == 4
    assert torch.allclose(mc.sq_norm[0], x.pow(2).sum().expand(400))                  # row 0: the input
    depths = np.arange(4)
    c0, f0 = float(sp.gram_sum(x)), float(x.pow(2).sum())
    tc = sp.theory.uniform_gram_sum(c0, depths, branch_sa=0.7, branch_mlp=0.7)
    tf = sp.theory.uniform_sq_norm(f0, c0, 4, depths, branch_sa=0.7, branch_mlp=0.7)
    for est, th in ((sp.estimate(mc.gram_sum[1:], dim=1), tc[1:]), (sp.estimate(mc.sq_norm[1:], dim=1), tf[1:])):
        assert np.all(np.abs(np.asarray(est.zscore(torch.as_tensor(th)))) <= Z)    # 6 points, each |z| <= 4
    assert mc.growth_test(tc, tf).passed
    assert not mc.growth_test(tc, 1.3 * tf).passed                                # a 30 % wrong norm is rejected


def test_gram_depth_correlation_is_eq_a4(gram_run):
    x, mc = gram_run
    th = sp.theory.uniform_mean_correlation(float(x.pow(2).sum()), float(sp.gram_sum(x)), 4, np.arange(4),
                                            branch_sa=0.7, branch_mlp=0.7)
    rho = mc.correlation()
    assert rho.mean.shape == (4,) and float(rho.mean[0]) == pytest.approx(float(th[0]), abs=1e-12)
    assert mc.correlation_test(th).passed
    assert not mc.correlation_test(np.clip(np.asarray(th) + 0.3, -1, 1)).passed


def test_gram_depth_refuses_a_batch():
    with pytest.raises(ValueError, match="one input"):
        sp.course.mc_gram_depth(torch.zeros(2, 4, 8), sp.BlockConfig(d=8, **sp.presets.NOCI_SEC32), 2, inits=2)


def test_fig10_ladder_reads_the_committed_record():
    from sigprop.experiments import noci_fig10
    ladder = sp.course.fig10_ladder(noci_fig10.load())
    k = len(ladder.d)
    assert k >= 2 and ladder.gap.shape[0] == ladder.gap_se.shape[0] == ladder.cosine.shape[0] == k
    assert ladder.ipr.shape[1] == ladder.gap.shape[1] - 1 and np.all(ladder.gap_se[:, 1:] > 0)   # block 0: the input, no gap
    assert all({"n", "activation", "networks", "gap", "gap_se"} <= set(c) for c in ladder.choices)


def test_correlation_panel_draws_points_over_the_line():
    import matplotlib.pyplot as plt
    ax = sp.course.correlation_panel(depth=3, nets=8, n=4, d=8)
    assert len(ax.lines) >= 1 and ax.get_xlabel() == "layer"
    plt.close("all")


# ---- _reversal: Noci et al. 2022, App. C.1 and Sec. 3.4 -------------------------------------------------------

def test_reversal_task_and_model():
    c = sp.presets.NOCI_APP_C1
    x, y = sp.course.reversal_batch(0, batch=5)
    assert x.shape == y.shape == (5, c["T"]) and torch.equal(y, x.flip(1)) and int(x.max()) < c["vocab"]
    logits = sp.course.reversal_model(seed=0)(x)
    assert logits.shape == (5, c["T"], c["vocab"])


def test_train_reversal_adam_logs_effective_learning_rates():
    run = sp.course.train_reversal_adam(3, every=1)
    depth = sp.presets.NOCI_APP_C1["depth"]
    assert list(run.steps) == [1, 2, 3] and run.loss.shape == (3,)
    for name in "qkv":
        lr = run.effective_lr[name]
        assert lr.shape == (3, depth) and np.all(lr > 0)
    # known value: after one step Adam's bias-corrected second moment is g^2, so lr/(|g| + eps) <= lr/eps
    assert np.all(run.effective_lr["v"] <= sp.presets.NOCI_APP_C1["lr"] / 1e-8)


def test_train_reversal_sgd_and_table():
    r = sp.course.train_reversal_sgd(0, 10, norm="post", branch=1.0)
    assert 0.0 <= r.accuracy <= 1.0 and r.solved is None                         # 10 steps do not solve it
    S = _reversal.SGDRun
    table = sp.course.sgd_table({"a": [S(10, 0.99), S(20, 1.0)], "b": [S(None, 0.5)]})
    assert list(table.index) == ["a", "b"]
    assert table.loc["a", "mean steps"] == "15 ± 5" and table.loc["b", "mean steps"] == "0/1 solved"
    assert table.loc["b", "held-out accuracy"] == "0.5"


# ---- _propagation_mc: Bao et al. 2024, Definition 1, Eq. (6), Fig. 5 -------------------------------------------

def test_propagation_cell_contract_and_uniform_limit():
    """Known value: with W_QK ~ 0 every logit is 0, softmax is uniform, mass T E[S_i] = 1 and gain 1 exactly."""
    cell = sp.course.mc_propagation_cell(0.0, 1e-9, d=8, T=6, draws=2, walks=10, generator=0)
    assert cell.indicator.shape == (2, 10, 6) and cell.gauss.shape == cell.paper.shape == (2, 6)
    assert cell.per_draw.shape == (2, 6) and cell.counted.mean.shape == (6,)
    assert torch.allclose(cell.mass.mean, torch.ones(6, dtype=cell.mass.mean.dtype))
    assert torch.allclose(cell.gain.mean, torch.ones(6, dtype=cell.gain.mean.dtype))
    assert cell.layer_gap < 1e-12 and cell.entropy == pytest.approx(math.log(6), rel=1e-9)
    with pytest.raises(ValueError, match="equal groups"):
        cell.test("gauss", groups=3)


def test_propagation_counts_agree_with_the_exact_moment_gaussian_at_large_d():
    """At d = 256 the Gaussian law of Z_i with the exact finite-T moments describes the counts (its gap shrinks
    like d^-1/2, chapter page 2): the curve-level test over the T positions passes at level 0.001, and the same
    counts reject a prediction shifted by 0.1."""
    cell = sp.course.mc_propagation_cell(0.0, 0.5, d=256, T=8, draws=10, walks=40, generator=5, entropy_walks=0)
    assert cell.entropy is None
    assert cell.test("gauss").passed
    shifted = _propagation_mc.PropagationCell(**{**cell.__dict__, "gauss": np.clip(cell.gauss + 0.1, 0, 1)})
    assert not shifted.test("gauss").passed


def test_propagation_test_accepts_a_zero_count_within_its_bound():
    """A position counted 0 in every walk agrees with predictions ~1e-5 that differ slightly by draw (their rows
    would otherwise have a tiny spread and a huge z); a prediction of 0.05 there (beyond 3 / (draws walks)) fails."""
    draws, walks, T = 10, 40, 4
    ind = torch.zeros(draws, walks, T)
    ind[..., 1] = 1.0                                                   # position 1 counted in every walk
    pred = np.zeros((draws, T))
    pred[:, 1] = 1.0
    pred[:, 2] = np.linspace(1e-5, 9e-5, draws)                         # tiny, draw-dependent probabilities
    est = sp.estimate(torch.ones(5, T, dtype=torch.float64))
    cell = _propagation_mc.PropagationCell(indicator=ind, gauss=pred, paper=pred, corrected_s=pred, xi=0.0, eta=0.0,
                                           entropy=None, mass=est, gain=est, layer_gap=0.0)
    assert cell.test("gauss").passed
    far = pred.copy()
    far[:, 2] = 0.05
    assert not dataclasses.replace(cell, gauss=far).test("gauss").passed
