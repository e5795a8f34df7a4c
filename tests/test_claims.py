"""The ledger's machinery. Every registered claim runs in the claims appendix notebook
(book/claims.ipynb), whose hidden cell asserts each status equals the expected one."""
import json
import subprocess
import sys

import pytest

from sigprop import claims
from sigprop.claims import Measured, Status


def test_status_rules():
    assert Measured(1.0, 1.05, 0.02, 0.08).status() is Status.REPRODUCED
    assert Measured(1.0, 1.5, 0.02, 0.08, corrected=1.48).status() is Status.ERRATUM
    assert Measured(1.0, 1.5, 0.02, 0.08, corrected=2.0).status() is Status.DEVIATES
    assert Measured(1.0, 1.5, 0.02, 0.08).status() is Status.DEVIATES


def test_registration_validates():
    with pytest.raises(ValueError, match="document must be one of"):
        claims.claim(id="x", document="nobody2030", source="-", claim="-")
    with pytest.raises(ValueError, match="expected must be one of"):
        claims.claim(id="x", document="noci2022", source="-", claim="-", expected="maybe")


def test_every_document_has_claims_and_ids_are_unique():
    all_claims = claims.registry()
    ids = [c.id for c in all_claims]
    assert len(ids) == len(set(ids))
    assert {c.document for c in all_claims} <= set(claims.DOCUMENTS)
    assert any(c.document == "giorlandino-goldt2025" for c in all_claims)


def test_cli_json_schema(tmp_path):
    out = tmp_path / "ledger.json"
    # the core Result 1 claim alone is fast; run the CLI on one document and check the schema
    proc = subprocess.run([sys.executable, "-m", "sigprop.claims", "--document", "giorlandino-goldt2025",
                           "--json", str(out)], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    assert "claims:" in proc.stdout
    rows = json.loads(out.read_text())
    keys = {"id", "document", "source", "claim", "stated", "measured", "stderr", "tolerance", "status"}
    assert rows and all(keys <= set(r) for r in rows)
    assert all(r["status"] in {"reproduced", "deviates", "erratum"} for r in rows)
