"""The eighteen defects of the public-API fuzz report (issue "Bad inputs, low precision and extreme scales"),
each as a regression test: the reproducer from the report, and what it must do now.

``th = sp.theory``, ``x = torch.randn(5, 8)``, ``w = torch.randn(8, 8)`` as in the report.
"""
import dataclasses
import json
import math
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

import sigprop as sp
from conftest import Z

th = sp.theory


@pytest.fixture
def xw():
    g = torch.Generator().manual_seed(0)
    return torch.randn(5, 8, generator=g), torch.randn(8, 8, generator=g)


def test_01_rem_moments_right_at_small_T_and_large_scale():
    # was 0.829 (the quadrature stopped its grid too early); direct simulation of the REM decides
    beta = 24.02
    y2 = th.rem_moments(beta, T=2)[0]
    assert y2 == pytest.approx(th.ipr_finite(beta, 2), rel=1e-10)
    assert sp.mc_rem_moments(beta, T=2, n=40_000, generator=0, device="cpu")[0].agrees(y2, z=Z)
    # no jump where the old code switched to the T -> infinity limit (sigma = 60 at T = 100)
    s = np.array([59.9, 60.0, 60.1]) / math.sqrt(math.log(100))
    y = th.rem_moments(s, T=100)[0]
    assert np.all(np.diff(y) > 0) and np.ptp(y) < 1e-3


def test_02_finite_T_maps_validate():
    P = dict(beta=1.0, T=64)
    for bad in (dict(activation="RELU"), dict(norm="Post"), dict(sigma_w2=-1.0), dict(alpha_sa=-0.5)):
        with pytest.raises(ValueError):
            th.iterate_block_map(1.0, 0.1, 3, **P, **bad)
    with pytest.raises(ValueError, match=r"\|p\| <= q"):
        th.iterate_block_map(1.0, 2.0, 3, **P)               # p0 > q0
    for q0 in (-1.0, 0.0, float("nan")):
        with pytest.raises(ValueError, match="q"):
            th.iterate_block_map(q0, 0.0, 3, **P)
    with pytest.raises(ValueError, match="y2"):
        th.attention_map(1.0, 0.2, beta=1.0, T=64, y2=2.0)


def test_03_layer_norm_survives_overflow_underflow_and_half_precision():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4, 64, generator=g)
    for big in (1e19 * x, (256 * torch.randn(4, 64, generator=g)).half(), (1e-4 * x).half()):
        y = sp.layer_norm(big).float()
        assert torch.isfinite(y).all()
        assert torch.allclose(y.pow(2).mean(-1), torch.ones(4), rtol=1e-2)
    assert torch.equal(sp.layer_norm(torch.zeros(3, 8, dtype=torch.float16)), torch.zeros(3, 8, dtype=torch.float16))


def test_04_half_precision_logits_and_measures(xw):
    x, w = xw
    _, A = sp.self_attention((100 * x).half(), w.half(), w.half())
    assert torch.isfinite(A).all()
    cfg = sp.BlockConfig(d=8)
    params = sp.sample_transformer(cfg, 2, generator=0, dtype=torch.float16)
    out = sp.transformer_forward((300 * x[None]).half(), params, cfg)
    assert torch.isfinite(out).all()
    assert torch.isfinite(sp.cosine_matrix(torch.zeros(3, 4, dtype=torch.float16))).all()
    q, p = sp.token_overlaps((100 * x).half())
    assert torch.isfinite(q) and torch.isfinite(p)


def test_05_huge_logit_scales(xw):
    x, w = xw
    _, A = sp.self_attention(x, w, w, logit_scale=1e39)
    assert torch.isfinite(A).all() and torch.allclose(A.sum(-1), torch.ones(5))
    grads = sp.softmax_param_grad_sq_norms(x, w, w, w, logit_scale=1e30)
    assert all(torch.isfinite(v).all() for v in grads.values())


def test_06_more_queries_than_a_key_block():
    est = sp.mc_attention_ipr([1.0], T=5000, d=4, inits=2, queries=1500, device="cpu", generator=0)
    assert torch.isfinite(est.mean).all()


def test_07_devices_are_checked(monkeypatch):
    g = torch.Generator()
    with pytest.raises(ValueError, match="'meta' holds shapes without values"):   # issue 26, item 15
        sp.gaussian_tokens(2, T=3, d=4, generator=g, device="meta")
    for bad in ("bogus", "meta", " META ", "cuda:99" if torch.cuda.is_available() else "cuda"):
        monkeypatch.setenv("SIGPROP_DEVICE", bad)
        with pytest.raises(ValueError, match="SIGPROP_DEVICE"):
            sp.default_device()
    # one rule for SIGPROP_DEVICE and SIGPROP_PROFILE (and device= arguments): case and surrounding spaces ignored
    for spelled in ("CPU", " cpu", "Cpu\n"):
        monkeypatch.setenv("SIGPROP_DEVICE", spelled)
        assert sp.default_device() == torch.device("cpu") and sp.as_device(spelled) == torch.device("cpu")
    for spelled in ("FULL", " full", "Full\t"):
        monkeypatch.setenv("SIGPROP_PROFILE", spelled)
        assert sp.profile() == "full"


def test_08_block_config_stores_what_it_validated():
    with pytest.raises(TypeError):
        sp.BlockConfig(d=8, alpha_sa="0.5")
    with pytest.raises(TypeError):
        sp.BlockConfig(d=8, gain_control="no")
    with pytest.raises(TypeError):
        sp.BlockConfig(d=8, alpha_sa=np.array([1.0, 2.0]))
    cfg = sp.BlockConfig(d=np.int64(8), sigma_qk2=torch.tensor(0.1), alpha_sa=np.float32(1.5))
    assert (type(cfg.d), type(cfg.sigma_qk2), type(cfg.alpha_sa)) == (int, float, float)
    json.dumps(dataclasses.asdict(cfg))


def test_09_seeds():
    assert torch.equal(torch.randn(3, generator=sp.as_generator(np.int64(5))),
                       torch.randn(3, generator=sp.as_generator(5)))
    for bad in (2**64, -1):
        with pytest.raises(ValueError, match="seed"):
            sp.as_generator(bad)


def test_10_forward_checks_its_inputs():
    cfg = sp.BlockConfig(d=8)
    params = sp.sample_transformer(cfg, 1, generator=0)
    for x in (torch.zeros(0, 4, 8), torch.zeros(2, 0, 8)):
        with pytest.raises(ValueError, match="empty|at least one"):
            sp.transformer_forward(x, params, cfg)
    x = torch.randn(2, 4, 8)
    with pytest.raises(ValueError, match="params do not match config"):
        sp.transformer_forward(x, sp.sample_transformer(sp.BlockConfig(d=8, d_k=2), 1, generator=0), cfg)
    with pytest.raises(ValueError, match="params do not match config"):
        sp.transformer_forward(x, sp.sample_transformer(sp.BlockConfig(d=8, d_ff=16), 1, generator=0), cfg)


def test_11_finite_width_rem_is_fast_at_large_scale():
    start = time.perf_counter()
    est = sp.mc_ipr_finite_width(40.0, T=1000, d=4, samples=16, generator=0)
    assert time.perf_counter() - start < 10.0 and torch.isfinite(est.mean).all()   # was 28 s


def test_12_attention_weights_must_be_rows_of_probabilities():
    with pytest.raises(ValueError, match="sum to 1"):
        sp.attention_ipr(torch.full((3, 4), 5.0))
    with pytest.raises(ValueError, match="sum to 1"):
        sp.attention_entropy(torch.full((3, 4), 5.0))


def test_13_errors_name_the_argument_at_fault():
    task = sp.MaskedTask(sp.MarkovSource(8, generator=0), T=6)
    with pytest.raises(FloatingPointError, match="lr"):
        sp.train_masked_lm(sp.BlockConfig(d=8), 2, task, seeds=1, steps=20, batch=8, lr=1e6, generator=0,
                           progress=False)
    try:
        d = th.trainability_diagram([0.5], [1.0], depth=300, norm="none")
        assert np.all(np.isfinite(d.rho_final))
    except ValueError as exc:
        assert "q must be finite" not in str(exc) and "LayerNorm" in str(exc)


def test_14_errors_come_from_sigprop_not_from_torch_or_numpy(xw):
    x, w = xw
    with pytest.raises(TypeError, match="dtype"):
        sp.uniform_self_attention(x, w.double(), w, w)
    with pytest.raises(ValueError, match="broadcast"):
        sp.self_attention(torch.randn(3, 5, 8), torch.randn(2, 8, 8), torch.randn(2, 8, 8))
    for bad, err in ((torch.ones(3, 4, dtype=torch.int64), TypeError), (np.ones((3, 4)), TypeError),
                     (torch.full((3, 4), float("nan")), ValueError)):
        with pytest.raises(err):
            sp.layer_norm(bad)
    assert torch.isfinite(sp.stable_rank(x.half()))
    with pytest.raises(ValueError, match="broadcast"):
        th.ipr(np.ones(3), r=np.array([2.0, 3.0]))
    assert np.size(th.ipr_finite([], 10)) == 0
    with pytest.raises(ValueError, match="r "):
        th.ipr_finite(1.0, 10, r=200)
    with pytest.raises(ValueError, match="dim"):
        sp.estimate(torch.ones(4), dim=5)


def test_15_markov_source_refuses_what_it_cannot_hold():
    start = time.perf_counter()
    for vocab in (20_000, 2**25):
        with pytest.raises(ValueError, match="vocab"):
            sp.MarkovSource(vocab)
    assert time.perf_counter() - start < 1.0


@pytest.mark.parametrize("argv,match", [
    (["-m", "sigprop.claims", "--json", "/nonexistent/dir/x.json"], "no folder"),
    (["-m", "sigprop.bench", "--threads", "-3"], "must be from 1 to"),
    (["-m", "sigprop.bench", "--threads", "0"], "must be from 1 to"),
    (["-m", "sigprop.bench", "--threads", "100000"], "this machine's CPUs"),     # issue 26, item 9: was rc 139
    (["-m", "sigprop.bench", "--json", "/nonexistent/dir/x.json", "--tiny"], "no folder"),
    (["-m", "sigprop.bench", "--tiny", "--load"], "needs --pages"),             # issue 26, item 15
])
def test_16_command_lines_check_before_working(argv, match):
    proc = subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and match in proc.stderr and "Traceback" not in proc.stderr


def test_17_extreme_scales():
    assert th.beta_c(1e-200, 0.0) == pytest.approx(math.sqrt(2) * 1e200)
    assert th.beta_c(1e200, 0.0) == pytest.approx(math.sqrt(2) * 1e-200)
    with pytest.raises(ValueError, match="r "):
        th.ipr(2.0, r=1e16)
    with pytest.raises(ValueError, match="rho"):
        th.relu_kernel(2.0)
    with pytest.raises(ValueError, match="requires grad"):      # theory is float64 closed forms: not differentiable
        th.relu_kernel(torch.tensor(0.3, requires_grad=True))
    assert math.isfinite(float(th.relu_kernel(torch.tensor(0.3, requires_grad=True).detach())))
    for bad in (dict(rank_threshold=2.0), dict(tol=-1.0), dict(lo=-1.0)):
        with pytest.raises(ValueError):
            th.critical_alpha_sa(4, beta=0.5, **bad)


def test_18_flags_are_bools(xw):
    x, w = xw
    with pytest.raises(TypeError, match="causal must be True or False"):
        sp.self_attention(x, w, w, causal="no")
    with pytest.raises(TypeError, match="gain_control must be True or False"):
        sp.BlockConfig(d=8, gain_control="False")
    with pytest.raises(TypeError, match="beta"):
        th.ipr(True)
