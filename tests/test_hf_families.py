"""Today's HF families: sp.read_init's prediction against Monte Carlo of each HF model itself (issues 32, 33), replayed
from the committed record lib/sigprop/experiments/records/hf_families_record.json (``python -m sigprop.experiments
hf-families``: 20 families x 2 initialisation scales, 16 draws by each model's own initialiser, width 128, 6 blocks,
T = 32; sigprop.experiments._hf_families).

* Every entry passes the curve-level test at the book's level 0.001 (9999 sign-flip resamples over blocks 1..6),
  recomputed here from the recorded per-draw curves and prediction.
* The reader has not changed since the record: each family, built and drawn again (seed 0), is read into the recorded
  architecture, and every variance lies within 6 relative standard errors of a mean square pooled over the blocks
  (``6 sqrt(2 / entries)``; under another transformers version the draws differ, not the law).
* The finite-width gap the record shows at the scale 0.3 (Monte Carlo above the map at the last block) closes as
  1/d: the width ladder's fit ``gap = a/d + b`` has ``b`` within 4 of its standard errors of 0.
"""
import json

import numpy as np
import pytest

import sigprop as sp
from sigprop.stats._fits import fit_inverse_width

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()
from sigprop.experiments import _hf_families as H  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")
RECORD = H.load()
ARCHITECTURE = ("d", "heads", "d_k", "d_v", "d_ff", "kv_heads", "norm", "activation", "causal", "ln_center", "gated",
                "parallel", "positions", "rope_fraction", "qk_norm", "branch_norm", "logit_cap",
                "branch_sa", "branch_mlp", "logit_scale", "window")
VARIANCES = ("sigma_qk2", "sigma_v2", "sigma_o2", "sigma_w2", "sigma_w2_out")


def test_the_record_covers_every_family_at_both_scales():
    got = {(e["family"], str(e["scale"])) for e in RECORD["entries"]}
    assert got == {(n, str(s)) for n in H.FAMILIES for s in H.SCALES}


@pytest.mark.parametrize("entry", RECORD["entries"], ids=lambda e: f"{e['family']}-{e['scale']}")
def test_prediction_agrees_with_the_hf_models_monte_carlo(entry):
    samples = np.asarray(entry["samples"])
    check = sp.curve_agreement(samples[:, 1:], np.asarray(entry["prediction"])[1:], level=H.LEVEL,
                               n_resamples=H.RESAMPLES)
    assert check.passed and entry["passed"], (entry["family"], entry["scale"], check)


@pytest.mark.parametrize("name", sorted(H.FAMILIES))
def test_the_reading_is_the_recorded_one(name):
    entry = next(e for e in RECORD["entries"] if e["family"] == name and e["scale"] == 0.3)
    model = H.build(name, 0.3)
    if name == "qk_bias":
        sp.reinitialise(model, H._bias_config(model, 0.3), generator=0)
    else:
        H.own_initialiser(model, 0)
    read = sp.read_init(model)
    got = H.config_fields(read.config)
    want = entry["config"]
    assert {k: got[k] for k in ARCHITECTURE} == {k: want[k] for k in ARCHITECTURE}, name
    if got["positions"] == "rope":   # the rotation frequencies, however the config spells them (base or list)
        np.testing.assert_allclose(frequencies(read.config), frequencies(sp.BlockConfig(**{
            k: tuple(v) if isinstance(v, list) else v for k, v in want.items()})), rtol=1e-6)
    for k in VARIANCES:
        if want[k]:
            tol = H.variance_tolerance(k, read.config, read.depth)
            assert abs(got[k] / want[k] - 1) <= tol, (name, k, got[k], want[k], tol)


def frequencies(c):
    r = c.rotary_dims
    if c.rope_freqs is not None:
        return np.asarray(c.rope_freqs)
    return 1.0 / (c.rope_theta ** (np.arange(0, r, 2, dtype=np.float32) / r))


def test_the_finite_width_gap_closes_as_one_over_d():
    ladder = RECORD["ladder"]
    fit = fit_inverse_width([r["d"] for r in ladder], [r["gap"] for r in ladder], [r["stderr"] for r in ladder])
    assert abs(fit.b) <= 4 * fit.b_se, fit
    assert fit.a > 0, fit


def test_the_record_says_where_it_came_from():
    prov = RECORD["provenance"]
    assert prov["command"].startswith("python -m sigprop.experiments hf-families") and prov["transformers"]
    assert json.dumps(RECORD["sizes"]) == json.dumps(dict(d=H.D, depth=H.DEPTH, heads=H.HEADS, T=H.T, inits=H.INITS,
                                                          seqs=H.SEQS, rho0=H.RHO0, window=H.WINDOW,
                                                          level=H.LEVEL, n_resamples=H.RESAMPLES))
