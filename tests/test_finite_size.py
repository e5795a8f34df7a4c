"""The finite-size study (sigprop.experiments._finite_size, ._scaling): fits, samplers, records, CLI.

* The fit: on synthetic ladders with known ``a, gamma, b`` and Gaussian noise of known SE the weighted fits
  recover the parameters (within 4 SE: the project's per-point z), their standard errors are calibrated (the
  coverage of ``b +- 2 SE`` over 400 ladders is 0.95 within a 4-sigma binomial band), noiseless data are fitted
  exactly, and bad input is refused.
* The samplers: each has the law of the library function it stands in for (same mean within 4 SE at a small size).
* The records: every committed record replays in distribution -- the first batch of its smallest rung is re-run from
  its seed and its mean of every recorded quantity agrees with the stored batch's within 4 combined standard errors
  (a rerun on another CPU, kernel or thread count changes the last bits, never the distribution); the stored theory
  is the library's current theory to within the record's resolution, and the stored per-network gaps follow from the
  raw values and the theory.
"""
import json
import math
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import torch

import sigprop as sp
from sigprop.experiments import _finite_size as fs
from sigprop.experiments import extrapolate, finite_size_ladder, fit_gap, load_finite_size
from sigprop.experiments._finite_size_mc import gram_chain, ipr_samples, qgrad_samples

Z = 4.0
RECORDS = pathlib.Path(fs.__file__).parent / "records"
RECORDED = sorted(c for c in fs.CASES if (RECORDS / f"{fs.record_name(c)}.json").is_file())


# ----------------------------------------------------------------------------- the fit


def _ladder(a, gamma, b, se, seed, x=(64, 128, 256, 512, 1024)):
    rng = np.random.default_rng(seed)
    x = np.asarray(x, dtype=float)
    s = np.full(len(x), se) * np.sqrt(x / x[0])          # wider rungs have fewer networks: larger SE
    return x, a * x**-gamma + b + s * rng.standard_normal(len(x)), s


@pytest.mark.parametrize("a, gamma, b", [(-1.0, 1.0, 0.0), (2.5, 1.0, 0.06), (-0.4, 0.5, 0.01)])
def test_fit_recovers_known_parameters(a, gamma, b):
    x, y, s = _ladder(a, gamma, b, 1e-3, seed=1)
    fits = fit_gap(x, y, s)
    exact = fits["gamma=1" if gamma == 1 else "gamma=1/2"]
    assert abs(exact.b - b) <= Z * exact.b_se and abs(exact.a - a) <= Z * exact.a_se
    free = fits["free"]
    assert abs(free.gamma - gamma) <= Z * free.gamma_se and abs(free.b - b) <= Z * free.b_se
    assert exact.dof == len(x) - 2 and free.dof == len(x) - 3


def test_fit_is_exact_on_noiseless_data():
    x = np.array([64.0, 128, 256, 512])
    y = 0.3 / x - 0.02
    f = fit_gap(x, y, np.full(4, 1e-3))["gamma=1"]
    assert f.a == pytest.approx(0.3, rel=1e-9) and f.b == pytest.approx(-0.02, abs=1e-12) and f.chi2 < 1e-12
    assert f.predict(1e12) == pytest.approx(-0.02, abs=1e-12)


def test_fit_standard_errors_are_calibrated():
    # 400 synthetic ladders: b +- 2 SE covers the truth 95 % of the time; chi2/dof averages 1
    hits, red = [], []
    for seed in range(400):
        x, y, s = _ladder(-0.8, 1.0, 0.004, 2e-3, seed=100 + seed)
        f = fit_gap(x, y, s)["gamma=1"]
        hits.append(abs(f.b - 0.004) <= 2 * f.b_se)
        red.append(f.chi2_dof)
    p, n = 0.9545, len(hits)
    assert abs(np.mean(hits) - p) <= 4 * math.sqrt(p * (1 - p) / n), np.mean(hits)
    assert abs(np.mean(red) - 1) <= 4 * math.sqrt(2 / 3 / n), np.mean(red)      # Var(chi2_3 / 3) = 2/3


def test_extrapolation_verdict():
    x, y, s = _ladder(-1.0, 1.0, 0.0, 5e-4, seed=3)
    assert extrapolate(x, y, s).consistent_with_zero
    x, y, s = _ladder(-1.0, 1.0, 0.05, 5e-4, seed=3)
    ex = extrapolate(x, y, s)
    assert not ex.consistent_with_zero and ex.limit == pytest.approx(0.05, abs=Z * ex.limit_se)
    assert "gap(d -> inf)" in ex.summary()


def test_primary_model_is_the_first_that_fits():
    # 1/d data: gamma = 1 is used; d^-1/2 data with small errors: gamma = 1 fails the goodness of fit and the
    # free exponent (which fits) is used, recovering gamma = 1/2 and b
    x, y, s = _ladder(-1.0, 1.0, 0.0, 1e-3, seed=5)
    assert extrapolate(x, y, s).primary == "gamma=1"
    x, y, s = _ladder(-0.3, 0.5, 0.02, 2e-4, seed=5)
    ex = extrapolate(x, y, s)
    assert ex.fits["gamma=1"].p < 0.01 and ex.primary == "free" and ex.fits_well
    assert abs(ex.best.gamma - 0.5) <= Z * ex.best.gamma_se and abs(ex.limit - 0.02) <= Z * ex.limit_se
    assert "free" in ex.summary()


@pytest.mark.parametrize("bad, match", [
    (dict(x=[1, 2], gap=[0, 0], se=[1, 1]), "equal length >= 3"),
    (dict(x=[1, 2, 3], gap=[0, 0], se=[1, 1, 1]), "equal length"),
    (dict(x=[1, 2, 3], gap=[0, 0, 0], se=[1, 0, 1]), "se must be > 0"),
    (dict(x=[1, 2, 3], gap=[0, np.nan, 0], se=[1, 1, 1]), "finite"),
])
def test_fit_refuses_bad_input(bad, match):
    with pytest.raises(ValueError, match=match):
        fit_gap(**bad)


# ----------------------------------------------------------------------------- the samplers


def test_ipr_sampler_has_the_law_of_mc_attention_ipr():
    betas = [1.0, 3.0]
    mine = sp.estimate(torch.as_tensor(ipr_samples(betas, T=512, d=32, inits=64, seed=1)))
    lib = sp.mc_attention_ipr(betas, T=512, d=32, inits=64, queries=32, generator=2, device="cpu")
    z = (mine.mean.numpy() - lib.mean[:, 0].numpy()) / np.hypot(mine.stderr.numpy(), lib.stderr[:, 0].numpy())
    assert np.all(np.abs(z) <= Z), z


def test_qgrad_sampler_has_the_law_of_query_grad_norm_mc():
    mine = sp.estimate(torch.as_tensor(qgrad_samples([2.0], T=32, d=32, n=300, seed=1)[:, 0]))
    lib = sp.mc_rem_query_grad_sq_norm(2.0, 32, 32, 300, generator=2, device="cpu", progress=False)
    z = (float(mine.mean) - float(lib.mean)) / math.hypot(float(mine.stderr), float(lib.stderr))
    assert abs(z) <= Z, z


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_gram_chain_is_the_wide_limit_of_the_map(norm):
    # d = infinity, small beta: the chain follows the finite-T map (exact Y2, Y_p) to its own Monte Carlo error
    cfg = sp.BlockConfig.from_beta(0.1, T=16, d=64, norm=norm, alpha_sa=1.0, **sp.presets.GG_APP_C1)
    chain = gram_chain(cfg, 10, T=16, chains=64, rho0=0.1, seed=3)
    q, p = sp.theory.iterate_block_map(1.0, 0.1, 10, cfg, T=16)
    est = sp.estimate(torch.as_tensor(chain[:, 1:]))
    assert np.all(np.abs(est.mean.numpy() - (p / q)[1:]) <= Z * est.stderr.numpy() + 2e-4)
    with pytest.raises(ValueError, match="ReLU"):
        gram_chain(sp.BlockConfig(d=8, activation="tanh"), 2, T=4, chains=2, rho0=0.1, seed=0)


def test_batches_are_reproducible_and_independent():
    case = fs.CASES["fig4-qgrad"]
    a = fs.run_batch(case, "d", 32, 128, 4, 0)
    np.testing.assert_array_equal(a, fs.run_batch(case, "d", 32, 128, 4, 0))
    assert not np.allclose(a, fs.run_batch(case, "d", 32, 128, 4, 1))
    assert len({fs.batch_seed(case, ax, v, b) for ax in "dT" for v in (32, 64) for b in range(3)}) == 12


# ----------------------------------------------------------------------------- the committed records


def test_every_case_has_a_record():
    assert RECORDED == sorted(fs.CASES), f"missing records: {sorted(set(fs.CASES) - set(RECORDED))}"


def _agree_in_distribution(fresh, stored, z=Z, floor=1e-6):
    """Column by column, the means of two batches of per-network values (rows) agree within ``z`` combined SEs, plus
    a float32 rounding floor (the networks run in float32: 1e-6 relative)."""
    fresh, stored = np.asarray(fresh, dtype=float), np.asarray(stored, dtype=float)
    se = lambda v: v.std(0, ddof=1) / np.sqrt(len(v))
    allowed = z * np.hypot(se(fresh), se(stored)) + floor * np.abs(stored.mean(0)) + 1e-12
    bad = np.flatnonzero(np.abs(fresh.mean(0) - stored.mean(0)) > allowed)
    return [(int(j), float(fresh.mean(0)[j]), float(stored.mean(0)[j]), float(allowed[j])) for j in bad]


@pytest.mark.parametrize("case", RECORDED)
def test_record_replays(case):
    record, prov = load_finite_size(case)
    assert prov["command"].startswith("python -m sigprop.experiments finite-size") and prov["torch"]
    c = fs.CASES[case]
    rung = min((r for r in record["rungs"] if r["axis"] == "d"), key=lambda r: r["d"])
    assert rung["seeds"][0] == fs.batch_seed(c, "d", rung["d"], 0)
    raw = fs.rung_values(c, "d", rung["d"], rung["T"], rung["inits"], batches=[0])
    stored = np.asarray(rung["raw_first_batch"])
    assert raw.shape == stored.shape
    bad = _agree_in_distribution(raw.reshape(len(raw), -1), stored.reshape(len(stored), -1))
    assert not bad, f"(column, replayed mean, recorded mean, allowed difference): {bad}"


@pytest.mark.parametrize("case", RECORDED)
def test_record_theory_is_the_librarys_and_gaps_follow(case):
    record, _ = load_finite_size(case)
    c = fs.CASES[case]
    T = record["params"]["T"]
    stored = record["theory"][str(T)]
    # The record's resolution: the SE of its extrapolated gap. A theory that moved by less than a tenth of it (a
    # quadrature made more precise) leaves every conclusion of the record standing; more needs a re-record.
    resolution = 0.1 * finite_size_ladder(record, fs._primary_key(c)).fit.best.b_se
    if c.kind == "blocks":
        cfg = fs._config(c, 128, T)
        for key, kw in (("map_1/T", dict(cross_overlap="1/T")), ("map_rem", {}), ("map_inf", dict(limit=True))):
            q, p = sp.theory.iterate_block_map(1.0, c.params["rho0"], c.params["depth"], cfg, T=T, **kw)
            np.testing.assert_allclose(stored[key], p / q, rtol=1e-6, atol=resolution, err_msg=key)
        th = {k: np.asarray(v) for k, v in stored.items() if k != "chain"}
        th["chain"] = np.asarray(stored["chain"]["mean"])[None]
    else:
        th = {k: np.asarray(v) for k, v in stored.items()}
        rel = c.kind == "qgrad"          # the qgrad gap is relative to the theory: its resolution is relative too
        np.testing.assert_allclose(th["rem" if c.kind == "ipr" else "theory"],
                                   fs.theory(c, T)["rem" if c.kind == "ipr" else "theory"],
                                   rtol=max(1e-6, resolution if rel else 0.0), atol=0.0 if rel else resolution)
    rung = next(r for r in record["rungs"] if r["axis"] == "d")
    again = fs.metrics(c, np.asarray(rung["raw_first_batch"]), th)
    for key, values in again.items():
        np.testing.assert_allclose(np.asarray(rung["metrics"][key])[:c.batch], values, rtol=1e-6, atol=1e-7,
                                   err_msg=key)


@pytest.mark.parametrize("case", RECORDED)
def test_record_ladders_span_a_factor_eight(case):
    record, _ = load_finite_size(case)
    lad = finite_size_ladder(record, fs._primary_key(fs.CASES[case]))
    assert len(lad.x) >= 4 and lad.x.max() / lad.x.min() >= 8
    assert np.all(lad.se > 0)


def test_load_and_analyse_validate():
    with pytest.raises(ValueError, match="case must be one of"):
        load_finite_size("nope")
    record, _ = load_finite_size(RECORDED[0]) if RECORDED else pytest.skip("no records")
    with pytest.raises(ValueError, match="metric must be one of"):
        finite_size_ladder(record, "nope")
    with pytest.raises(ValueError, match="no 'x' ladder"):
        finite_size_ladder(record, fs._primary_key(fs.CASES[RECORDED[0]]), axis="x")


# ----------------------------------------------------------------------------- the command line


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "sigprop.experiments", *args], capture_output=True, text=True,
                          timeout=600)


def test_cli_checks_options_and_output_before_working(tmp_path):
    bad_case = _cli("finite-size", "--case", "nope", "--out-dir", str(tmp_path))
    assert bad_case.returncode == 2 and "invalid choice" in bad_case.stderr
    bad_size = _cli("finite-size", "--size", "huge", "--out-dir", str(tmp_path))
    assert bad_size.returncode == 2 and "invalid choice" in bad_size.stderr
    missing = _cli("finite-size", "--case", "fig4-qgrad", "--out-dir", str(tmp_path / "no" / "such"))
    assert missing.returncode != 0 and "not an existing folder" in missing.stderr and "d-ladder" not in missing.stdout
    threads = _cli("finite-size", "--threads", "0", "--out-dir", str(tmp_path))
    assert threads.returncode == 2


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine has CUDA")
def test_cli_refuses_cuda_without_it_before_creating_a_file(tmp_path):
    # issue 26, item 15: the regimes run printed a traceback after creating an empty output file
    out = tmp_path / "r.json"
    proc = _cli("regimes", "--device", "cuda", "--out", str(out))
    assert proc.returncode != 0 and "CUDA is not available" in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists()
    proc = _cli("locater", "--out", str(tmp_path / "no" / "r.json"))
    assert proc.returncode != 0 and "no folder" in proc.stderr and not (tmp_path / "no").exists()


def test_cli_quick_run_writes_a_record(tmp_path):
    proc = _cli("finite-size", "--case", "fig4-qgrad", "--size", "quick", "--out-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    data = json.loads((tmp_path / "finite_size_fig4-qgrad_quick.json").read_text())
    assert data["provenance"]["command"].endswith("--out-dir " + str(tmp_path))
    assert {"date", "machine", "torch", "cpu_seconds", "seeds"} <= set(data["provenance"])
    assert data["record"]["size"] == "quick" and len(data["record"]["rungs"]) == 7
