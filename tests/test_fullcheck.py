"""``python -m sigprop.fullcheck --size quick``: every chapter's Monte Carlo core runs outside Jupyter and
agrees with its theory (curve-level statistic at level 1e-3 per figure; see sigprop/fullcheck.py)."""
import json
import subprocess
import sys

import pytest
import torch

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
    assert proc.returncode == 2 and "no folder" in proc.stderr
    # issue 26, item 15: a device the machine lacks is a usage error naming it, not a traceback, and nothing is
    # written before the check
    if not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        out = tmp_path / "x.json"
        proc = subprocess.run([sys.executable, "-m", "sigprop.fullcheck", "--device", "mps", "--json", str(out)],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert "Apple MPS is not available on this machine" in proc.stderr and not out.exists()
    with pytest.raises(ValueError, match="size"):
        fullcheck.run(size="huge")
    with pytest.raises(ValueError, match="unknown cores"):
        fullcheck.run(only=["nope"])
