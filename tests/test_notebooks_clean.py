"""Notebooks are committed without outputs or widget state, start with the Colab cell, and
are listed in the table of contents."""
import json
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p for p in ROOT.glob("**/*.ipynb")
                   if not any(part.startswith((".", "_build")) for part in p.relative_to(ROOT).parts))


def test_there_are_notebooks():
    assert NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_notebook_is_clean(path):
    nb = json.loads(path.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert not any(c.get("outputs") for c in code), "commit notebooks without outputs"
    assert not any(c.get("execution_count") for c in code), "commit notebooks without execution counts"
    assert "widgets" not in nb.get("metadata", {}), "commit notebooks without widget state"
    first = code[0]
    assert "google.colab" in "".join(first["source"]), "the first code cell installs sigprop on Colab"
    assert "remove-cell" in first.get("metadata", {}).get("tags", []), "the Colab cell is hidden in the HTML"
    # the build must survive a busy machine: threads are set once by the library (sp.threads_for), not per page
    assert not any("set_num_threads" in "".join(c["source"]) for c in code), "no per-notebook thread pinning"
