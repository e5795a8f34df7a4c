"""The ledger: its machinery, every claim's status equal to the status it is expected to have, and a fresh run
in agreement with the committed record -- in distribution, not in bits.

The expected statuses are the regression test of the library: a change that moves a measurement across its
tolerance fails here. The committed record (what the book quotes and the claims appendix, book/claims.ipynb, shows)
must agree with a fresh run within ``Z_RERUN`` combined standard errors (sigprop.claims._record), and no recorded
status may sit so near its boundary that a rerun on another machine could flip it.
``tests/test_other_kernel.py`` repeats the comparison in a fresh process on PyTorch's plainest CPU kernels.
"""
import json
import math
import subprocess
import sys

import pytest
import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook

import sigprop as sp
from sigprop import claims
from sigprop.claims import ClaimResult, Measured, Nature, Status, Uncertainty
from sigprop.experiments import _aghajanyan_sec9, _locater, _regimes, provenance

#: What every recorded row's provenance states (sigprop.experiments.provenance).
PROVENANCE = {"command", "date", "git_commit", "machine", "torch", "cpu_capability", "threads"}
#: Recorded rows known to sit too near their status boundary, each with the re-recording that fixes it. Kept exact
#: (tested): a row that clears its margin must leave this list, and no other row may join it. Empty since the
#: rank-collapse regime was re-recorded with eight seeds (0.328 +- 0.027 of the gap closed, 6.3 SE from 0.5; three
#: seeds had given 0.34 +- 0.08, 2.1 SE).
PENDING: dict[str, str] = {}


def test_status_rules():
    assert Measured(1.0, 1.05, 0.02, 0.08).status() is Status.REPRODUCED
    assert Measured(1.0, 1.5, 0.02, 0.08, corrected=1.48).status() is Status.ERRATUM
    assert Measured(1.0, 1.5, 0.02, 0.08, corrected=2.0).status() is Status.DEVIATES
    assert Measured(1.0, 1.5, 0.02, 0.08).status() is Status.DEVIATES
    # the nature of the statement decides what a matching correction means
    m = Measured(1.0, 1.5, 0.02, 0.08, corrected=1.48)
    assert m.status(Nature.APPROXIMATION) is Status.APPROXIMATION
    assert m.status(Nature.CONDITION) is Status.MISSING_HYPOTHESIS
    # a miss away from the document's setting is "not reproduced at this scale", not a deviation
    assert Measured(1.0, 1.5, 0.02, 0.08).status(at_paper_scale=False) is Status.NOT_REPRODUCED
    assert Measured(1.0, 1.05, 0.02, 0.08).status(at_paper_scale=False) is Status.REPRODUCED


def test_a_standard_error_of_zero_is_for_exact_rows_only():
    Measured(0.0, 0.0, 0.0, 1e-12, uncertainty="exact").check("x")
    Measured(1.0, 1.1, 0.05, 0.2, uncertainty="seeds").check("x")
    with pytest.raises(ValueError, match="exact rows only"):
        Measured(1.0, 2.7, 0.0, 0.5).check("x")                       # a single training run, published bare
    with pytest.raises(ValueError, match="exact rows only"):
        Measured(0.0, 0.0, 1e-3, 1e-2, uncertainty="exact").check("x")
    with pytest.raises(ValueError, match="uncertainty must be one of"):
        Measured(0.0, 0.0, 1e-3, 1e-2, uncertainty="guess").check("x")
    with pytest.raises(ValueError, match="non-finite"):
        Measured(0.0, float("nan"), 1e-3, 1e-2).check("x")


def test_scale_decides_whether_a_miss_is_at_the_papers_setting():
    from sigprop.claims import _at_paper_scale
    assert _at_paper_scale(None)
    assert _at_paper_scale({"measured": {"d": 30, "n": 10}, "paper": {"d": 30}})       # n unstated by the paper
    assert not _at_paper_scale({"measured": {"d": 128, "T": 64}, "paper": {"d": 600}})
    with pytest.raises(ValueError, match="scale must be"):
        claims.claim(id="x", document="noci2022", source="-", claim="-", scale={"sizes": 1})


def test_registration_validates():
    with pytest.raises(ValueError, match="document must be one of"):
        claims.claim(id="x", document="nobody2030", source="-", claim="-")
    with pytest.raises(ValueError, match="expected must be one of"):
        claims.claim(id="x", document="noci2022", source="-", claim="-", expected="maybe")
    with pytest.raises(ValueError, match="nature must be one of"):
        claims.claim(id="x", document="noci2022", source="-", claim="-", nature="guess")


def test_every_document_has_claims_and_ids_are_unique():
    all_claims = claims.registry()
    ids = [c.id for c in all_claims]
    assert len(ids) == len(set(ids))
    assert {c.document for c in all_claims} <= set(claims.DOCUMENTS)
    assert any(c.document == "giorlandino-goldt2025" for c in all_claims)


def test_a_duplicated_id_is_refused_even_between_functions_of_one_name():
    # issue 24: the guard compared __qualname__, which is "_" for every claim of aghajanyan2025.py, so a second
    # claim under an existing id silently replaced the first
    existing = claims.registry("aghajanyan2025")[0]

    def _():
        raise AssertionError("never run")

    with pytest.raises(ValueError, match="registered twice"):
        claims.claim(id=existing.id, document="aghajanyan2025", source="-", claim="-")(_)
    assert claims.registry("aghajanyan2025")[0].fn is existing.fn


def test_cli_checks_its_output_path_before_working(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "sigprop.claims", "--json", str(tmp_path / "no" / "such" / "f.json")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "no folder" in proc.stderr and "claims:" not in proc.stdout
    empty = subprocess.run([sys.executable, "-m", "sigprop.claims", "--json", ""], capture_output=True, text=True,
                           timeout=60)       # issue 26, item 15: an empty name wrote nothing, silently
    assert empty.returncode == 2 and "empty string" in empty.stderr and "claims:" not in empty.stdout


# ----------------------------------------------------------------------------- agreement in distribution


def _row(measured=1.0, stderr=0.01, *, stated=1.0, tolerance=None, corrected=None, uncertainty="sampling",
         status=None, id="x"):
    tol = 4 * stderr if tolerance is None else tolerance
    st = status or Measured(stated, measured, stderr, tol, corrected).status().value
    return ClaimResult(id, "noci2022", "-", "-", stated, measured, stderr, tol, st, st, corrected, "", 0.0,
                       uncertainty=uncertainty)


def test_a_fresh_run_agrees_within_z_combined_standard_errors():
    rec = _row(1.00, 0.01, tolerance=1.0)
    allowed = claims.Z_RERUN * math.hypot(0.01, 0.012)
    assert claims.disagreements(_row(1.01, 0.01, tolerance=1.0), rec) == []     # 1 SE apart: a rerun elsewhere
    assert claims.disagreements(_row(1.0 + 0.95 * allowed, 0.012, tolerance=1.0), rec) == []
    far = claims.disagreements(_row(1.0 + 1.05 * allowed, 0.012, stated=1.08, tolerance=1.0), rec)
    assert [m.split(" ")[1] for m in far] == ["stated", "measured"] and "re-record" in far[1]
    flipped = claims.disagreements(_row(1.05, 0.01), _row(1.00, 0.01))          # 5 SE: another status
    assert any("status deviates, recorded reproduced" in m for m in flipped)
    assert any(" corrected " in m for m in claims.disagreements(_row(1.0, 0.01, corrected=1.0), _row(1.0, 0.01)))
    # exact rows agree to rounding: a count differing by one draw does not
    exact = _row(0.0, 0.0, stated=0.0, tolerance=0.5 / 300, uncertainty="exact")
    assert claims.disagreements(_row(5e-14, 0.0, stated=0.0, tolerance=0.5 / 300, uncertainty="exact"), exact) == []
    assert claims.disagreements(_row(1 / 300, 0.0, stated=0.0, tolerance=0.5 / 300, uncertainty="exact"), exact)


def test_margins_flag_statuses_that_could_flip_elsewhere():
    assert claims.fragile(_row(1.00, 0.01)) is None                              # centred: 4 SE inside
    assert claims.fragile(_row(1.035, 0.01)) and claims.fragile(_row(1.045, 0.01))   # 0.5 SE from the boundary
    assert claims.fragile(_row(1.025, 0.01)) is None                             # 1.5 SE: same draws elsewhere
    # a mean over training seeds is a fresh draw elsewhere: 2 sqrt(2) SE of room needed
    seeds = dict(stated=0.0, tolerance=0.5, uncertainty="seeds")
    assert claims.fragile(_row(0.336, 0.0764, **seeds))                          # 2.1 SE from 0.5
    assert claims.fragile(_row(0.25, 0.05, **seeds)) is None                     # 5 SE from 0.5
    # an exact count scored with tolerance 0 sits on its boundary; half a count clears it
    assert claims.fragile(_row(0.0, 0.0, stated=0.0, tolerance=0.0, uncertainty="exact"))
    assert claims.fragile(_row(0.0, 0.0, stated=0.0, tolerance=0.5 / 300, uncertainty="exact")) is None
    assert claims.status_margin(_row(1.5, 0.02, stated=1.0, tolerance=0.08, corrected=1.48)) == pytest.approx(0.06)


def test_write_record_keeps_the_provenance_of_the_run(tmp_path):
    rows = [_row(1.0, 0.01, id="a"), _row(2.0, 0.01, stated=2.0, id="b")]
    prov = provenance("python -m sigprop.claims --record")
    path = claims.write_record(rows, "noci2022", provenance=prov, path=tmp_path / "noci2022.json")
    back = [ClaimResult(**r) for r in json.loads(path.read_text())]
    assert [r.id for r in back] == ["a", "b"] and all(PROVENANCE <= set(r.provenance) for r in back)
    assert back[0].provenance["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    text = claims.provenance_text(back[0].provenance)
    assert f"CPU kernels {torch.backends.cpu.get_cpu_capability()}" in text and "`python -m sigprop.claims --record`" in text
    assert claims.provenance_text(None) == "recorded without provenance"


def test_recording_some_claims_keeps_the_other_rows_and_their_provenance(tmp_path):
    path = tmp_path / "noci2022.json"
    old = provenance("python -m sigprop.claims --record")
    claims.write_record([_row(1.0, 0.01, id="a"), _row(2.0, 0.01, stated=2.0, id="c")], "noci2022", provenance=old,
                        path=path)
    new = dict(old, command="python -m sigprop.claims --record --claim b")
    claims.write_record([_row(3.0, 0.01, stated=3.0, id="b")], "noci2022", provenance=new, path=path,
                        order=["a", "b", "c"])
    back = [ClaimResult(**r) for r in json.loads(path.read_text())]
    assert [r.id for r in back] == ["a", "b", "c"] and back[1].measured == 3.0
    assert [r.provenance["command"] for r in back] == [old["command"], new["command"], old["command"]]
    with pytest.raises(ValueError, match="no row for"):
        claims.write_record([], "noci2022", provenance=new, path=path, order=["a", "b", "c", "d"])


# ----------------------------------------------------------------------------- the committed record


@pytest.mark.parametrize("document", claims.DOCUMENTS)
def test_record_has_exactly_the_registered_claims(document):
    assert list(claims.load_record(document)) == [c.id for c in claims.registry(document)]


def test_run_order_is_the_record_order():
    """The claims appendix shows the record in the ledger's order (book/claims.ipynb)."""
    assert [c.id for c in claims.registry()] == list(claims.load_record())


def test_every_recorded_row_has_provenance_and_an_uncertainty():
    record = claims.load_record()
    for r in record.values():
        assert r.provenance and PROVENANCE <= set(r.provenance), (r.id, r.provenance)
        Measured(r.stated, r.measured, r.stderr, r.tolerance, r.corrected, r.note, r.uncertainty).check(r.id)
    exact = sorted(r.id for r in record.values() if r.uncertainty == Uncertainty.EXACT.value)
    assert all(record[i].stderr == 0 for i in exact) and all(r.stderr > 0 for i, r in record.items() if i not in exact)


def test_no_recorded_status_sits_on_its_boundary():
    """A status must clear its boundary by more than a rerun elsewhere can move it (sigprop.claims._record)."""
    flagged = {r.id: claims.fragile(r) for r in claims.load_record().values() if claims.fragile(r)}
    new = [msg for id, msg in flagged.items() if id not in PENDING]
    assert not new, "\n".join(new)
    fixed = sorted(set(PENDING) - set(flagged))
    assert not fixed, f"these rows now clear their margin: remove them from PENDING: {fixed}"


def _spy(monkeypatch, module, name, seen):
    original = getattr(module, name)

    def spy(*args, **kwargs):
        seen.add(_spy.current)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, spy)


_spy.current = None          # the claim running (set by the ledger test)


@pytest.mark.parametrize("document", claims.DOCUMENTS)
def test_every_claim_has_its_expected_status_and_agrees_with_the_record(document, monkeypatch):
    """A fresh run: every status is its expected status, every row agrees with the record in distribution, every
    training result (a claim that steps an optimiser or reads a recorded training run) is a mean over seeds, and
    the ledger leaves torch's global RNG alone."""
    trained = set()
    for module, name in ((_regimes, "load_record"), (_locater, "load"), (_aghajanyan_sec9, "load")):
        _spy(monkeypatch, module, name, trained)
    hook = register_optimizer_step_pre_hook(lambda *args: trained.add(_spy.current))
    rng = torch.get_rng_state()
    try:
        results = []
        for c in claims.registry(document):
            _spy.current = c.id
            results.append(claims.run_one(c))
    finally:
        hook.remove()
    assert torch.equal(torch.get_rng_state(), rng), "a claim drew from torch's global RNG"
    assert results, document
    wrong = [(r.id, r.status, r.expected) for r in results if r.status != r.expected]
    assert not wrong, wrong
    bare = [r.id for r in results if r.id in trained and r.uncertainty != Uncertainty.SEEDS.value]
    assert not bare, f"training results without a standard error over seeds: {bare}"
    record = claims.load_record(document)
    missing = [r.id for r in results if r.id not in record]
    assert not missing, f"not in the record: run `python -m sigprop.claims --document {document} --record`: {missing}"
    problems = [p for r in results for p in claims.disagreements(r, record[r.id])]
    assert not problems, "\n".join(problems)


def test_rope_width_ladder_record_replays_in_distribution():
    """The committed width ladder behind gg2025-modern-rope-depth (python -m sigprop.claims.modern_models): its
    settings are the module's, and the first batch of its smallest RoPE rung, rerun here, agrees with the recorded
    batch within Z_RERUN combined SE (the same seeds: the same draws up to rounding, on any CPU)."""
    import numpy as np

    from sigprop.claims import modern_models as mm

    record = json.loads(mm.ROPE_RECORD.read_text())
    assert record["settings"]["widths"] == list(mm.ROPE_LADDER["widths"]) and record["provenance"]["command"]
    rung = next(r for r in record["rungs"] if r["d"] == min(mm.ROPE_LADDER["widths"]) and r["positions"] == "rope")
    s = record["settings"]
    fresh = sp.mc_cosine_vs_depth(mm.llama_rope_block(rung["d"], "rope", s["beta"]), s["depth"], T=s["T"],
                                  inits=len(rung["first"]), seqs=s["seqs"], rho0=s["rho0"], generator=rung["seed"],
                                  chunk=s["chunk"]).samples[:, -1].double().numpy()
    first = np.asarray(rung["first"])
    se = math.hypot(first.std(ddof=1), fresh.std(ddof=1)) / math.sqrt(len(first))
    assert abs(fresh.mean() - first.mean()) <= claims.Z_RERUN * se, (fresh.mean(), first.mean(), se)
    fits = mm.rope_width_fits(record)
    assert all(f.fits_well for *_, f in fits.values())           # the 1/d law describes both ladders
