"""The ledger: its machinery, and every claim's status equal to the status it is expected to have.

The expected statuses are the regression test of the library: a change that moves a measurement across
its tolerance fails here (the claims appendix, book/claims.ipynb, shows the same run)."""
import json
import subprocess
import sys

import pytest

from sigprop import claims
from sigprop.claims import Measured, Nature, Status


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


def test_cli_json_schema(tmp_path):
    out = tmp_path / "ledger.json"
    # run the CLI on one (fast) document and check the schema
    proc = subprocess.run([sys.executable, "-m", "sigprop.claims", "--document", "aghajanyan2025",
                           "--json", str(out)], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    assert "claims:" in proc.stdout
    rows = json.loads(out.read_text())
    keys = {"id", "document", "source", "claim", "stated", "measured", "stderr", "tolerance", "status"}
    assert rows and all(keys <= set(r) for r in rows)
    assert all(r["status"] in {s.value for s in Status} for r in rows)


def test_cli_checks_its_output_path_before_working(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "sigprop.claims", "--json", str(tmp_path / "no" / "such" / "f.json")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "cannot write" in proc.stderr and "claims:" not in proc.stdout


@pytest.mark.parametrize("document", claims.DOCUMENTS)
def test_every_claim_has_its_expected_status_and_matches_the_record(document):
    results = claims.run(document)
    assert results, document
    wrong = [(r.id, r.status, r.expected) for r in results if r.status != r.expected]
    assert not wrong, wrong
    # the committed record (what the book quotes) is this run, up to rounding: 1 % of a standard error,
    # or 1e-9 relative for exact (SE = 0) rows -- a changed claim needs `make ledger`
    record = claims.load_record(document)
    for r in results:
        assert r.id in record, f"{r.id} is not in the record: run `python -m sigprop.claims --document {document} --record`"
        old = record[r.id]
        assert old.status == r.status, (r.id, old.status, r.status)
        for field in ("stated", "measured", "corrected", "tolerance"):
            a, b = getattr(old, field), getattr(r, field)
            assert (a is None) == (b is None), (r.id, field)
            if a is not None:
                assert abs(a - b) <= max(0.01 * r.stderr, 1e-9 * max(abs(a), abs(b)), 1e-12), (r.id, field, a, b)


@pytest.mark.parametrize("document", claims.DOCUMENTS)
def test_record_has_exactly_the_registered_claims(document):
    assert list(claims.load_record(document)) == [c.id for c in claims.registry(document)]


def test_run_order_is_the_record_order():
    """The claims appendix compares the run with the record row by row (book/claims.ipynb)."""
    assert [c.id for c in claims.registry()] == list(claims.load_record())
