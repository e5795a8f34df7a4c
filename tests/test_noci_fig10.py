"""Tests for sigprop.experiments.noci_fig10: the width ladder of Noci et al. (2022), Fig. 10.

The committed record is replayed (its smallest rung and one unstated-choice row, re-run from their seeds);
the estimators and the fit are checked against exact cases; the uniform-attention network is checked
against Lemma 3.3 as a whole depth curve.
"""
import math

import numpy as np
import pytest
import torch

import sigprop as sp
from sigprop.experiments import noci_fig10 as fig10

#: A replay runs the same float64 computation from the same seeds; on another CPU, kernel or thread count the last
#: bits differ. It must agree with the record in distribution: every recorded mean within Z combined standard
#: errors (the comparison of two independent draws; the project's per-point z).
Z = 4.0


@pytest.fixture(scope="module")
def record():
    return fig10.load()


def test_record_has_provenance_and_the_stated_ladder(record):
    prov = record["provenance"]
    assert prov["command"].startswith("python -m sigprop.experiments noci-fig10")
    assert {"date", "torch", "seeds"} <= set(prov)
    assert [(r["d"], r["networks"], r["seed"]) for r in record["ladder"]["rungs"]] == list(fig10.LADDER)
    assert [(c["n"], c["activation"], c["networks"], c["seed"]) for c in record["choices"]] == list(fig10.CHOICES)


def _within(fresh, fresh_se, recorded, recorded_se, what):
    fresh, fresh_se, recorded, recorded_se = (np.asarray(v, dtype=float)
                                              for v in (fresh, fresh_se, recorded, recorded_se))
    allowed = Z * np.hypot(fresh_se, recorded_se) + 1e-9 * np.abs(recorded)      # + float64 rounding
    bad = np.flatnonzero(np.abs(fresh - recorded) > allowed)
    assert not len(bad), [(what, int(l), float(fresh[l]), float(recorded[l]), float(allowed[l])) for l in bad]


def test_smallest_rung_replays(record):
    d, networks, seed = fig10.LADDER[0]
    rec = record["ladder"]["rungs"][0]
    s = fig10.fig10_samples(d, networks, **fig10.SETTING, generator=seed, diagnostics=True)
    gap = fig10.relative_gap(s["softmax"], s["uniform"])
    _within(gap.mean, gap.stderr, rec["gap"], rec["gap_se"], "gap")
    for key in ("softmax_norm", "uniform_norm", "cosine", "ipr"):     # recorded as means: their SE is the replay's
        est = sp.estimate(s[key.removesuffix("_norm")])
        _within(est.mean, est.stderr, rec[key], est.stderr, key)


def test_one_choice_replays(record):
    replay = fig10.run_choices([fig10.CHOICES[0]])[0]
    rec = record["choices"][0]
    _within(replay["gap"], replay["gap_se"], rec["gap"], rec["gap_se"], "gap")


def test_record_fit_is_the_fit_of_its_rungs(record):
    rungs = record["ladder"]["rungs"]
    fit = fig10.fit_inverse_width([r["d"] for r in rungs], [r["gap"][-1] for r in rungs],
                                  [r["gap_se"][-1] for r in rungs])
    for key, value in fit.as_dict().items():
        assert math.isclose(value, record["ladder"]["fit"][key], rel_tol=1e-12, abs_tol=1e-15), key


def test_uniform_network_follows_lemma33_over_depth():
    # The uniform-attention twin is Lemma 3.3's network: its mean norm, averaged over the N(0, 1/d) inputs too
    # (E||X||^2 = E C(X) = n), is 2^l [(2^l - 1) + n] at every depth. The points share networks: curve-level test
    # at level 1e-3 (a CI check); per-network norms are strongly skewed, so the studentised bootstrap (n = 400 >= 50).
    n, d, depth = 10, 16, 6
    s = fig10.fig10_samples(d, 400, n=n, depth=depth, generator=3)
    l = np.arange(depth + 1)
    theory = 2.0**l * ((2.0**l - 1) + n)
    result = sp.curve_agreement(s["uniform"][:, 1:] / torch.as_tensor(theory[1:]), 1.0, level=1e-3,
                                method="bootstrap", n_resamples=9999)
    assert result.passed, str(result)


def test_relative_gap_is_a_paired_ratio_of_means():
    g = torch.Generator().manual_seed(0)
    fu = 1.0 + torch.rand(50, 3, generator=g, dtype=torch.float64)
    fs = fu * 1.25
    est = fig10.relative_gap(fs, fu)
    torch.testing.assert_close(est.mean, torch.full((3,), 0.25, dtype=torch.float64))
    assert float(est.stderr.max()) < 1e-14          # perfectly paired: no spread left
    fs = fu + 0.1 * torch.randn(50, 3, generator=g, dtype=torch.float64)
    est = fig10.relative_gap(fs, fu)
    r = fs.mean(0) / fu.mean(0)
    torch.testing.assert_close(est.mean, r - 1)
    torch.testing.assert_close(est.stderr, (fs - r * fu).std(0) / (math.sqrt(50) * fu.mean(0)))
    with pytest.raises(ValueError, match="paired"):
        fig10.relative_gap(fs, fu[:, :2])


def test_fit_inverse_width_recovers_an_exact_law_and_flags_a_bad_one():
    d = np.array([30.0, 60.0, 120.0, 240.0, 480.0])
    fit = fig10.fit_inverse_width(d, 9.0 / d + 0.01, np.full(5, 0.01))
    assert math.isclose(fit.a, 9.0, rel_tol=1e-10) and math.isclose(fit.b, 0.01, rel_tol=1e-8)
    assert fit.chi2 < 1e-20 and fit.p > 0.999 and fit.dof == 3
    const = fig10.fit_inverse_width(d, 9.0 / d + 0.01, np.full(5, 0.01), gamma=0)
    assert const.a == 0.0 and const.dof == 4 and const.p < 1e-6
    with pytest.raises(ValueError, match="equal length"):
        fig10.fit_inverse_width(d[:2], [0.1, 0.2], [0.01, 0.01])


def test_config_validation_and_relu_variances():
    c = fig10.fig10_config(8, activation="relu")
    assert c.sigma_w2 == 2.0 and math.isclose(c.branch_mlp**2 * c.sigma_w2, 1.0)   # W^F2 effectively 1/d
    assert fig10.fig10_config(8, uniform=True).logit_scale == 0.0
    with pytest.raises(ValueError, match="activation"):
        fig10.fig10_config(8, activation="tanh")
