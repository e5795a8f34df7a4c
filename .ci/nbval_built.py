"""pytest plugin (``make test-notebooks``): a built notebook runs under nbval where its code differs from its page's.

``make book`` writes every page as a Jupyter-native notebook (``_build/html/_notebooks/<edition>/<page>.ipynb``,
book/notebooks.py): its Markdown is rewritten, its code cells are the page's, except the page's hidden install cell,
which becomes the set-up cell of book/sources.py (``tests/test_colab.py`` runs it on Colab's terms). ``make
test-notebooks`` gives nbval the pages and the built notebooks. Executing a built notebook whose other code cells
equal its page's would execute the page's code a second time (a third, with the book build): its cells are
deselected when

* its page (``metadata.sigprop.source``) is among the notebooks collected in this session -- nbval runs the page,
  or ``.ci/nbval_reuse.py`` stands the book build's execution of it in -- and
* every code cell but the set-up cell is its page's, in order (book/notebooks.py, ``code_cells``).

A built notebook whose page has no code (a Markdown page: its only cell is the set-up cell) is deselected too. Any
other built notebook -- code that differs, a page not collected -- runs under nbval as written. The terminal
summary says how many were deselected and why; ``tests/test_ci_reuse.py`` checks the rule.
"""
from __future__ import annotations

import importlib.util
import json
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

_standing_in: list[str] = []


def _notebooks_module():
    spec = importlib.util.spec_from_file_location("sigprop_book_notebooks_ci", ROOT / "book" / "notebooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_code = _notebooks_module().code_cells      # code cells but the install / set-up cell


def page_of(path: pathlib.Path) -> pathlib.Path | None:
    """The page a built notebook was made from (None for any other notebook)."""
    try:
        source = json.loads(path.read_text(encoding="utf-8")).get("metadata", {}).get("sigprop", {}).get("source")
    except (OSError, ValueError):
        return None
    return ROOT / source if source else None


def stands_in(built: pathlib.Path, collected: set[pathlib.Path]) -> bool:
    """Whether the page of ``built`` stands in for it: a Markdown page, or a collected notebook with its code."""
    page = page_of(built)
    if page is None or not page.is_file():
        return False
    nb = json.loads(built.read_text(encoding="utf-8"))
    if page.suffix != ".ipynb":
        return not _code(nb)
    return page.resolve() in collected and _code(nb) == _code(json.loads(page.read_text(encoding="utf-8")))


@pytest.hookimpl(tryfirst=True)      # before nbval_reuse.py deselects the pages themselves
def pytest_collection_modifyitems(session, config, items):
    cells = [item for item in items if type(item).__name__ == "IPyNbCell"]
    notebooks = {pathlib.Path(str(item.fspath)).resolve() for item in cells}
    built = {path for path in notebooks if page_of(path) is not None}
    covered = {path for path in built if stands_in(path, notebooks - built)}
    if not covered:
        return
    deselected = [item for item in cells if pathlib.Path(str(item.fspath)).resolve() in covered]
    dropped = set(deselected)
    items[:] = [item for item in items if item not in dropped]
    config.hook.pytest_deselected(items=deselected)
    _standing_in.extend(sorted(str(p) for p in covered))



def pytest_sessionfinish(session, exitstatus):
    """Nothing left to run because every built notebook had its page stand in, and every page was reused by
    nbval_reuse.py or not given: pytest's 'no tests collected' (exit 5) is then a pass."""
    if exitstatus == 5 and _standing_in:
        session.exitstatus = 0


def pytest_terminal_summary(terminalreporter):
    if _standing_in:
        terminalreporter.write_sep("-", f"{len(_standing_in)} built notebooks not executed: their code is their "
                                        "page's (executed by nbval or by the book build), the set-up cell aside")
