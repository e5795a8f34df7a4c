"""Where the book lives, written once: every install cell, badge and requirements file is generated here.

The repository address and the release are read from ``pyproject.toml`` (``[tool.sigprop] repository``
and ``[project] version``; the release ref is the tag ``v<version>``, never a moving branch), and written
into:

* the first cell of every notebook (``chapters/``, ``book/``): it installs ``sigprop`` on Colab only, from
  the release, or from ``$SIGPROP_INSTALL`` when that is set (a wheel, a path, another ref -- the Colab
  simulation in ``tests/test_colab.py`` sets it to a locally built wheel);
* ``_config.yml`` (the repository button and launch links);
* ``book/assignments/requirements.txt`` (the autograder's sigprop) and the assignments' install cells.

``python book/sources.py`` rewrites them; ``python book/sources.py --check`` (and
``tests/test_sources.py``) fails when any copy differs.
"""
from __future__ import annotations

import json
import pathlib
import re
import sys
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[1]
MARK = "# Colab only: install sigprop (does nothing elsewhere)"


def source() -> dict:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    repo = meta["tool"]["sigprop"]["repository"]
    ref = "v" + meta["project"]["version"]
    return {"repository": repo, "ref": ref, "pip": f"sigprop[notebooks] @ git+{repo}@{ref}"}


def install_cell(src: dict) -> str:
    return (f"{MARK}\n"
            "import os, sys\n"
            "if \"google.colab\" in sys.modules:\n"
            f"    SIGPROP = os.environ.get(\"SIGPROP_INSTALL\", \"{src['pip']}\")\n"
            "    %pip install -q \"$SIGPROP\"")


def notebooks():
    for path in sorted((ROOT / "chapters").rglob("*.ipynb")) + sorted((ROOT / "book").rglob("*.ipynb")):
        if ".ipynb_checkpoints" not in path.parts and "assignments" not in path.parts:
            yield path


def _lines(text: str) -> list[str]:
    """A cell's text as the ``source`` list Jupyter writes: lines keep their newline, no empty last entry."""
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def expected_files(src: dict) -> dict[pathlib.Path, str]:
    """Every generated file's expected content (whole text)."""
    out = {}
    cell = install_cell(src)
    for path in notebooks():
        nb = json.loads(path.read_text())
        first = nb["cells"][0]
        if first["cell_type"] != "code" or "remove-cell" not in first.get("metadata", {}).get("tags", []):
            raise SystemExit(f"{path}: the first cell must be the hidden install cell (tag remove-cell)")
        first["source"] = _lines(cell)
        out[path] = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
    cfg = (ROOT / "_config.yml").read_text()
    cfg = re.sub(r"(?m)^  url: .*$", f"  url: {src['repository']}", cfg)
    cfg = re.sub(r"(?m)^  branch: .*$", f"  branch: {src['ref']}", cfg)
    out[ROOT / "_config.yml"] = cfg
    req = ROOT / "book" / "assignments" / "requirements.txt"
    out[req] = re.sub(r"(?m)^sigprop @ .*$", f"sigprop @ git+{src['repository']}@{src['ref']}", req.read_text())
    pinned = f"sigprop @ git+{src['repository']}@{src['ref']}"
    for path in sorted((ROOT / "book" / "assignments").glob("*.ipynb")):
        nb = json.loads(path.read_text())
        for cell in nb["cells"]:
            cell["source"] = _lines(re.sub(r"sigprop @ git\+[^\"\s]*", pinned, "".join(cell["source"])))
        out[path] = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
    page = ROOT / "book" / "instructors.md"
    out[page] = re.sub(r"sigprop @ git\+[^\"\s]*", pinned, page.read_text())
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    src = source()
    stale = [p for p, text in expected_files(src).items() if p.read_text() != text]
    if "--check" in argv:
        for p in stale:
            print(f"stale: {p.relative_to(ROOT)} (run python book/sources.py)")
        return 1 if stale else 0
    for p, text in expected_files(src).items():
        if p in stale:
            p.write_text(text)
            print(f"wrote {p.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
