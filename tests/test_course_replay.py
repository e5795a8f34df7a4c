"""sp.course.replayed: a page's Monte Carlo recorded once, replayed after its first initialisations are recomputed."""
import json

import pytest
import torch

import sigprop as sp
from sigprop.course import _replay


def _compute(calls, offset=0.0):
    def compute(inits):                     # each initialisation from its own seed, as sp.mc_model_cosine draws them
        calls.append(inits)
        rows = [torch.randn(5, generator=torch.Generator().manual_seed(100 + i), dtype=torch.float64) + offset
                for i in range(inits)]
        return sp.estimate(torch.stack(rows))
    return compute


@pytest.fixture
def records(tmp_path, monkeypatch):
    monkeypatch.setattr(_replay, "RECORDS", tmp_path)
    return tmp_path


def test_records_then_replays_the_same_estimate_after_recomputing_two_initialisations(records, monkeypatch):
    calls = []
    monkeypatch.setenv("SIGPROP_RECORD", "page-x")
    made = sp.course.replayed("page-x", "case a", _compute(calls), inits=20, params={"d": 128, "seed": 1})
    data = json.loads((records / "page-x.json").read_text())
    assert data["entries"]["case a"]["inits"] == 20 and data["provenance"]["command"].startswith("SIGPROP_RECORD=")
    monkeypatch.delenv("SIGPROP_RECORD")
    again = sp.course.replayed("page-x", "case a", _compute(calls), inits=20, params={"seed": 1, "d": 128})
    assert calls == [20, sp.course.CHECK_INITS]                              # the replay ran 2 initialisations only
    assert torch.equal(again.samples, made.samples) and torch.equal(again.stderr, made.stderr)


def test_a_replay_refuses_other_params_a_missing_entry_and_rows_the_code_no_longer_computes(records, monkeypatch):
    monkeypatch.setenv("SIGPROP_RECORD", "all")
    sp.course.replayed("page-y", "k", _compute([]), inits=16, params={"d": 64})
    monkeypatch.delenv("SIGPROP_RECORD")
    monkeypatch.setenv("SIGPROP_PROFILE", "quick")
    with pytest.raises(ValueError, match=r"expected params \{'d': 128\} at 16 initialisations, got params"):
        sp.course.replayed("page-y", "k", _compute([]), inits=16, params={"d": 128})
    with pytest.raises(ValueError, match="at 32 initialisations.*SIGPROP_RECORD=page-y"):
        sp.course.replayed("page-y", "k", _compute([]), inits=32, params={"d": 64})
    with pytest.raises(ValueError, match="got no entry"):
        sp.course.replayed("page-y", "other", _compute([]), inits=16, params={"d": 64})
    with pytest.raises(ValueError, match="no longer computes the recorded rows"):     # 0.04 SE: the code changed
        sp.course.replayed("page-y", "k", _compute([], offset=0.01), inits=16, params={"d": 64})
    with pytest.raises(ValueError, match="inits must be an integer > 2"):
        sp.course.replayed("page-y", "k", _compute([]), inits=2, params={})
    with pytest.raises(ValueError, match="file stem"):
        sp.course.replayed("../x", "k", _compute([]), inits=16, params={})
    with pytest.raises(TypeError, match="JSON-able"):
        sp.course.replayed("page-y", "k", _compute([]), inits=16, params={"x": object()})


def test_the_full_profile_computes_what_has_no_record(records, monkeypatch):
    monkeypatch.setenv("SIGPROP_PROFILE", "full")
    calls = []
    est = sp.course.replayed("page-z", "k", _compute(calls), inits=16, params={"d": 512})
    assert calls == [16] and est.samples.shape == (16, 5) and not (records / "page-z.json").exists()
