"""pytest plugin (loaded by .ci/run): a notebook the book build just executed is not executed again by nbval.

``.ci/run`` builds the book first (``make book``: every notebook executed once, a failing cell stops the
build, outputs cached in ``_build/.jupyter_cache``), then runs ``make test``, whose nbval half would execute
every notebook a second time to check the same thing -- that it runs without error (``--nbval-lax``: no
notebook compares its outputs). With this plugin, nbval's cells of a notebook are deselected when

* the jupyter-cache of the build holds a successful execution of exactly this notebook's code (the key
  myst-nb uses: every code cell's source and the kernelspec; a failed execution is never cached), and
* ``_build/.sigprop-source`` -- the hash of ``lib/sigprop`` that ``make book`` wrote when it built -- equals
  the hash of ``lib/sigprop`` now (the Makefile's formula, :func:`library_hash`).

Anything else (no cache, another library, a notebook edited or failed) runs under nbval as before; the
terminal summary lists what was reused. Not for local use: a cache from an earlier environment would be
trusted. tests/test_ci_reuse.py checks the hash against the Makefile's shell pipeline.
"""
from __future__ import annotations

import hashlib
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
CACHE = ROOT / "_build" / ".jupyter_cache"
STAMP = ROOT / "_build" / ".sigprop-source"

_reused: list[str] = []
_reason: list[str] = []


def library_hash(root: pathlib.Path = ROOT) -> str:
    """sha256 of lib/sigprop's .py and .json files concatenated in byte order of their paths, as the
    Makefile computes it (``find lib/sigprop ... | LC_ALL=C sort | xargs cat | sha256sum``)."""
    lib = root / "lib" / "sigprop"
    files = sorted((str(p.relative_to(root)) for p in lib.rglob("*")
                    if p.is_file() and p.suffix in (".py", ".json") and "__pycache__" not in p.parts),
                   key=lambda s: s.encode())
    digest = hashlib.sha256()
    for name in files:
        digest.update((root / name).read_bytes())
    return digest.hexdigest()


def executed_by_the_build(notebooks) -> set[pathlib.Path]:
    """The notebooks whose current code the build's cache holds a successful execution of."""
    if not CACHE.is_dir():
        _reason.append(f"no {CACHE}")
        return set()
    if not STAMP.is_file() or STAMP.read_text().strip() != library_hash():
        _reason.append("lib/sigprop changed since the book was built")
        return set()
    import nbformat
    from jupyter_cache import get_cache

    cache, found = get_cache(str(CACHE)), set()
    for path in notebooks:
        try:
            cache.match_cache_notebook(nbformat.read(str(path), as_version=4))
        except KeyError:
            continue
        found.add(path)
    return found


def pytest_collection_modifyitems(session, config, items):
    cells = [item for item in items if type(item).__name__ == "IPyNbCell"]
    if not cells:
        return
    notebooks = {pathlib.Path(str(item.fspath)) for item in cells}
    reused = executed_by_the_build(sorted(notebooks))
    if not reused:
        return
    deselected = [item for item in cells if pathlib.Path(str(item.fspath)) in reused]
    dropped = set(deselected)
    items[:] = [item for item in items if item not in dropped]
    config.hook.pytest_deselected(items=deselected)
    _reused.extend(sorted(str(p.relative_to(ROOT)) for p in reused))


def pytest_sessionfinish(session, exitstatus):
    """Every notebook reused: nothing is left to run, which pytest calls 'no tests collected' (exit 5); that is
    a pass here, since the build executed each of them without error."""
    if exitstatus == 5 and _reused:
        session.exitstatus = 0


def pytest_terminal_summary(terminalreporter):
    if _reused:
        terminalreporter.write_sep("-", f"{len(_reused)} notebooks executed without error by the book build "
                                        "(same code, same lib/sigprop): not executed again")
        for name in _reused:
            terminalreporter.write_line(f"  {name}")
    elif _reason:
        terminalreporter.write_line(f"nbval_reuse: every notebook executed here ({'; '.join(_reason)})")
