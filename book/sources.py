"""Where the book lives, written once: every install cell, badge and requirements file is generated here.

The repository address is read from ``pyproject.toml`` (``[tool.sigprop] repository``) and the version from
``sigprop.__version__`` (``lib/sigprop/__init__.py``, read without importing the library; ``pyproject.toml``
takes it from there too: ``dynamic = ["version"]``). The release ref is the tag ``v<version>``, never a moving
branch; its downloads (``make release``, ``book/release.py``) are attached to ``<repository>/releases/tag/v<version>``.
Both are written into:

* the first cell of every notebook (``chapters/``, ``book/``): it installs ``sigprop`` on Colab only, from
  the release, or from ``$SIGPROP_INSTALL`` when that is set (a wheel, a path, another ref -- the Colab
  simulation in ``tests/test_colab.py`` sets it to a locally built wheel);
* ``_config.yml`` (the repository button and launch links, and the footer of every page: the version and the
  release's downloads);
* ``CITATION.cff`` (``version``, ``repository-code``), and the links to the release's downloads in
  ``book/intro.md`` and ``book/instructors.md``;
* ``book/assignments/requirements.txt`` (the autograder's sigprop) and the assignments' install cells.

``python book/sources.py`` rewrites them; ``python book/sources.py --check`` (and
``tests/test_sources.py``) fails when any copy differs.
"""
from __future__ import annotations

import ast
import json
import pathlib
import re
import sys
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[1]
MARK = "# Colab only: install sigprop (does nothing elsewhere)"


def version(root: pathlib.Path = ROOT) -> str:
    """``sigprop.__version__``, read from ``lib/sigprop/__init__.py`` without importing the library (or torch)."""
    tree = ast.parse((root / "lib" / "sigprop" / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["__version__"]:
            return ast.literal_eval(node.value)
    raise SystemExit("lib/sigprop/__init__.py: no __version__ = \"...\" assignment")


def source() -> dict:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    repo = meta["tool"]["sigprop"]["repository"]
    ref = "v" + version()
    return {"repository": repo, "ref": ref, "version": version(), "pip": f"sigprop[notebooks] @ git+{repo}@{ref}",
            "release": f"{repo}/releases/tag/{ref}"}


def release_links(src: dict, text: str) -> str:
    """``text`` with every link to one of this repository's releases pointed at this release's downloads."""
    return re.sub(re.escape(src["repository"]) + r"/releases(?:/tag/[\w.+-]+)?", src["release"], text)


def footer(src: dict) -> str:
    """The footer of every page (``html: extra_footer`` in ``_config.yml``): the version and its downloads."""
    return (f'<p>sigprop {src["version"]} · <a href="{src["release"]}">downloads of this release</a> '
            "(wheel, offline HTML, PDF, notebooks)</p>")


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
    cfg = re.sub(r"(?m)^  extra_footer: .*$", lambda m: f"  extra_footer: '{footer(src)}'", cfg)
    out[ROOT / "_config.yml"] = cfg
    cff = ROOT / "CITATION.cff"
    text = re.sub(r'(?m)^version: .*$', f'version: "{src["version"]}"', cff.read_text())
    out[cff] = re.sub(r"(?m)^repository-code: .*$", f'repository-code: "{src["repository"]}"', text)
    req = ROOT / "book" / "assignments" / "requirements.txt"
    out[req] = re.sub(r"(?m)^sigprop @ .*$", f"sigprop @ git+{src['repository']}@{src['ref']}", req.read_text())
    pinned = f"sigprop @ git+{src['repository']}@{src['ref']}"
    for path in sorted((ROOT / "book" / "assignments").glob("*.ipynb")):
        nb = json.loads(path.read_text())
        for cell in nb["cells"]:
            cell["source"] = _lines(re.sub(r"sigprop @ git\+[^\"\s]*", pinned, "".join(cell["source"])))
        out[path] = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
    page = ROOT / "book" / "instructors.md"
    out[page] = release_links(src, re.sub(r"sigprop @ git\+[^\"\s]*", pinned, page.read_text()))
    intro = ROOT / "book" / "intro.md"
    out[intro] = release_links(src, intro.read_text())
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
