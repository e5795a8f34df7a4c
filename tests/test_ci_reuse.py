""".ci/nbval_reuse.py (used by .ci/run): the library hash it compares is the Makefile's, and without a
matching build cache every notebook is executed by nbval. .ci/nbval_built.py (make test-notebooks): a built
notebook whose code is its page's runs through its page (nbval on small notebooks, ~15 s)."""
from __future__ import annotations

import pathlib
import re
import shutil
import subprocess

import pytest

from conftest import load_script

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _plugin():
    return load_script("nbval_reuse_t", ROOT / ".ci" / "nbval_reuse.py")


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


# ----------------------------------------------------------------------------- .ci/nbval_built.py

def _nb(path: pathlib.Path, code: list[str], source: pathlib.Path | None = None) -> pathlib.Path:
    """A notebook with an install (or set-up) cell and ``code``; built from ``source`` when given."""
    cells = [{"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {}, "outputs": [],
              "source": text} for i, text in enumerate(['import sys\nif "google.colab" in sys.modules:\n    pass']
                                                       + code)]
    meta = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    if source is not None:
        meta["sigprop"] = {"source": str(source), "edition": "reader"}
    path.write_text(__import__("json").dumps({"cells": cells, "metadata": meta, "nbformat": 4, "nbformat_minor": 5}))
    return path


def _nbval(*paths, tmp_path) -> subprocess.CompletedProcess:
    import os
    import sys

    env = {**os.environ, "PYTHONPATH": str(ROOT / ".ci"), "PYTEST_ADDOPTS": ""}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "nbval_built", "--nbval-lax", "--nbval-current-env",
                           "-p", "no:cacheprovider", "-rA", "--rootdir", str(tmp_path), *map(str, paths)],
                          cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)


def test_a_built_notebook_runs_through_its_page_when_their_code_is_equal(tmp_path):
    """The page's two cells run; its built notebook's are deselected. A built notebook whose code differs runs,
    and so does one whose page is not given; a Markdown page's (its set-up cell alone) is deselected."""
    page = _nb(tmp_path / "page.ipynb", ["x = 1", "assert x == 1"])
    same = _nb(tmp_path / "same.ipynb", ["x = 1", "assert x == 1"], source=page)
    other = _nb(tmp_path / "other.ipynb", ["x = 2", "assert x == 2"], source=page)
    (tmp_path / "notes.md").write_text("# Notes\n")
    notes = _nb(tmp_path / "notes.ipynb", [], source=tmp_path / "notes.md")
    run = _nbval(page, same, other, notes, tmp_path=tmp_path)
    assert run.returncode == 0, run.stdout[-3000:]
    ran = {line.split("::")[0].split()[-1] for line in run.stdout.splitlines() if line.startswith("PASSED")}
    assert ran == {"page.ipynb", "other.ipynb"}, run.stdout[-3000:]
    assert "2 built notebooks not executed" in run.stdout
    alone = _nbval(same, tmp_path=tmp_path)               # its page not collected: it runs
    assert alone.returncode == 0 and "PASSED same.ipynb" in alone.stdout, alone.stdout[-2000:]
