""".ci/nbval_reuse.py (used by .ci/run): the library hash it compares is the Makefile's, and without a
matching build cache every notebook is executed by nbval."""
from __future__ import annotations

import importlib.util
import pathlib
import re
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _plugin():
    spec = importlib.util.spec_from_file_location("nbval_reuse", ROOT / ".ci" / "nbval_reuse.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _makefile_pipeline() -> str:
    """The shell pipeline of the Makefile's `book` target that writes _build/.sigprop-source."""
    text = (ROOT / "Makefile").read_text()
    m = re.search(r"sum=\$\$\((find lib/sigprop .*?sha256sum \| cut -c1-64)\)", text)
    assert m, "the Makefile's book target no longer computes sum=$$(find lib/sigprop ... | sha256sum ...)"
    return m.group(1).replace("$$", "$")


@pytest.mark.skipif(shutil.which("sha256sum") is None, reason="no sha256sum")
def test_library_hash_is_the_makefiles():
    shell = subprocess.run(["bash", "-c", _makefile_pipeline()], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.strip()
    assert _plugin().library_hash() == shell


def test_without_a_build_cache_nothing_is_reused(tmp_path, monkeypatch):
    plugin = _plugin()
    monkeypatch.setattr(plugin, "CACHE", tmp_path / "no-cache")
    assert plugin.executed_by_the_build([ROOT / "book" / "primer.ipynb"]) == set()


def test_a_changed_library_reuses_nothing(tmp_path, monkeypatch):
    plugin = _plugin()
    (tmp_path / "cache").mkdir()
    (tmp_path / "stamp").write_text("0" * 64)
    monkeypatch.setattr(plugin, "CACHE", tmp_path / "cache")
    monkeypatch.setattr(plugin, "STAMP", tmp_path / "stamp")
    assert plugin.executed_by_the_build([ROOT / "book" / "primer.ipynb"]) == set()
    assert "changed" in plugin._reason[-1]


def test_everything_reused_is_a_pass_not_no_tests_collected(monkeypatch):
    # CI: with every notebook executed by the build, nbval is left nothing and pytest exits 5 ("no tests
    # collected"), which failed `make test` although nothing had failed
    reuse = _plugin()
    session = type("Session", (), {"exitstatus": 5})()
    monkeypatch.setattr(reuse, "_reused", ["chapters/x.ipynb"])
    reuse.pytest_sessionfinish(session, 5)
    assert session.exitstatus == 0
    monkeypatch.setattr(reuse, "_reused", [])
    session.exitstatus = 5
    reuse.pytest_sessionfinish(session, 5)        # nothing reused: an empty selection stays an error
    assert session.exitstatus == 5
