"""``python -m sigprop.fullcheck --size quick``: every chapter's Monte Carlo core runs outside Jupyter and
agrees with its theory (curve-level statistic at level 1e-3 per figure; see sigprop/fullcheck.py)."""
import json
import subprocess
import sys

import pytest

from sigprop import fullcheck


def test_quick_run_agrees_and_writes_json(tmp_path):
    out = tmp_path / "fullcheck.json"
    proc = subprocess.run([sys.executable, "-m", "sigprop.fullcheck", "--size", "quick", "--device", "cpu",
                           "--json", str(out)], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(out.read_text())
    assert result["device"] == "cpu" and {c["name"] for c in result["checks"]} == set(fullcheck.CORES)
    assert all(c["passed"] and c["seconds"] > 0 for c in result["checks"])


def test_options_are_checked_before_working(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "sigprop.fullcheck", "--json", str(tmp_path / "no" / "x.json")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "cannot write" in proc.stderr
    with pytest.raises(ValueError, match="size"):
        fullcheck.run(size="huge")
    with pytest.raises(ValueError, match="unknown cores"):
        fullcheck.run(only=["nope"])
