"""Recorded training experiments over seeds (sigprop.experiments: locater, aghajanyan_sec9, seed summaries).

A training run is one draw: on another CPU kernel or thread count the same seed ends elsewhere. Each record keeps
every seed with its provenance; the ledger reads the mean over seeds with its standard error; a fresh seed is
checked against the recorded spread -- within 4 SD sqrt(1 + 1/n) of the mean, the prediction interval of one new
draw (false alarm 0.5 % for n = 8 recorded seeds: Student t with 7 degrees of freedom) -- never against the
recorded bits. Replaying one seed of each record takes a few seconds. The regimes record
(``python -m sigprop.experiments regimes``) is replayed by ``tests/test_training.py``; here, its seeds per regime
and its partial re-recording.
"""
import json
import math

import numpy as np
import pytest

from sigprop import claims
from sigprop.experiments import (RECORD_SEEDS, REGIMES, SIZES, aghajanyan_sec9, load_record, locater, run_regimes,
                                 seed_prediction, seed_summary)
from sigprop.experiments._regimes import save_record

PROVENANCE = {"command", "date", "git_commit", "machine", "torch", "cpu_capability", "threads", "seeds"}


def test_seed_summary_and_prediction():
    rec = {"seeds": [{"x": v} for v in (1.0, 2.0, 3.0, 4.0)]}
    s = seed_summary(rec, "x")
    sd = float(np.std([1, 2, 3, 4], ddof=1))
    assert (s["mean"], s["n"]) == (2.5, 4) and math.isclose(s["se"], sd / 2) and math.isclose(s["sd"], sd)
    mean, half = seed_prediction(rec, "x", z=4.0)
    assert mean == 2.5 and math.isclose(half, 4 * sd * math.sqrt(1.25))
    with pytest.raises(ValueError, match="at least 2 seeds"):
        seed_summary({"seeds": [{"x": 1.0}]}, "x")


def test_locater_record_is_complete():
    rec = locater.load()
    assert PROVENANCE <= set(rec["provenance"]) and rec["provenance"]["command"].startswith(
        "python -m sigprop.experiments locater")
    assert [s["seed"] for s in rec["seeds"]] == list(locater.SEEDS) and rec["setting"] == locater.LOCATER_RUN
    assert all(math.isclose(s["ratio"], s["ppl_locater"] / s["ppl_none"]) for s in rec["seeds"])
    row = claims.load_record("bao2024")["bao2024-sec7-locater-perplexity"]
    s = seed_summary(rec, "ratio")
    assert (row.measured, row.stderr, row.uncertainty) == (pytest.approx(s["mean"]), pytest.approx(s["se"]), "seeds")


def test_locater_seed_replays_in_distribution():
    rec = locater.load()
    none = locater.locater_run(0.0, 0.0, seed=0)
    loc = locater.locater_run(locater.LOCATER_RUN["kappa1"], locater.LOCATER_RUN["kappa2"], seed=0)
    mean, half = seed_prediction(rec, "ratio")
    assert abs(loc / none - mean) <= half, (loc / none, mean, half)
    mean, half = seed_prediction(rec, "ppl_none")
    assert abs(none - mean) <= half, (none, mean, half)


def test_sec9_record_is_complete():
    rec = aghajanyan_sec9.load()
    assert PROVENANCE <= set(rec["provenance"]) and rec["provenance"]["command"].startswith(
        "python -m sigprop.experiments aghajanyan-sec9")
    assert [s["seed"] for s in rec["seeds"]] == list(aghajanyan_sec9.SEEDS)
    assert rec["setting"]["steps"] == aghajanyan_sec9.STEPS
    row = claims.load_record("aghajanyan2025")["aghajanyan2025-sec9-training-correlation"]
    s = seed_summary(rec, "corr2")
    assert (row.measured, row.stderr, row.uncertainty) == (pytest.approx(s["mean"]), pytest.approx(s["se"]), "seeds")


def test_sec9_seed_replays_in_distribution():
    rec = aghajanyan_sec9.load()
    fresh = aghajanyan_sec9.run_seed(aghajanyan_sec9.SEEDS[0])
    for key in ("init_corr2", "corr2", "corr1"):
        mean, half = seed_prediction(rec, key)
        assert abs(fresh[key] - mean) <= half, (key, fresh[key], mean, half)


def test_the_regimes_record_holds_the_seeds_of_its_size():
    runs, _ = load_record()
    assert {label: r.eval_loss.shape[1] for label, r in runs.items()} == {
        r.label: RECORD_SEEDS.get(r.label, SIZES["record"]["seeds"]) for r in REGIMES}


def test_record_seeds_and_a_partial_rerecording(tmp_path, monkeypatch):
    # the record size trains RECORD_SEEDS where three seeds do not decide a status; --only replaces those regimes in
    # an existing record, each with its own provenance
    rank, gain = REGIMES[0], REGIMES[4]
    monkeypatch.setitem(RECORD_SEEDS, rank.label, 5)
    runs = run_regimes("record", regimes=[rank, gain], stop_at=0, progress=False)
    assert runs[rank.label].eval_loss.shape[1] == 5 and runs[gain.label].eval_loss.shape[1] == 3
    path = tmp_path / "record.json"
    save_record(runs, str(path), size="record", command="python -m sigprop.experiments regimes --size record")
    again = run_regimes("record", regimes=[gain], stop_at=0, progress=False, generator=8)
    save_record(again, str(path), size="record", command="python -m sigprop.experiments regimes --only 4", update=True)
    data = json.loads(path.read_text())
    assert list(data["runs"]) == [rank.label, gain.label]
    assert data["provenance"]["command"].endswith("--size record") and PROVENANCE - {"seeds"} <= set(data["provenance"])
    assert data["provenance"]["reruns"][gain.label]["command"].endswith("--only 4")
    assert data["runs"][gain.label]["eval_loss"] == again[gain.label].to_dict()["eval_loss"]
    with pytest.raises(ValueError, match="of size 'record'"):
        save_record(again, str(path), size="quick", command="x", update=True)
