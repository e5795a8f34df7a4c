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
``tests/test_sources.py``) fails when any copy differs; ``--version`` prints the version.
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
    """Where this release lives. Keys: ``repository``, ``ref`` (the tag), ``version``, ``pip`` (what a notebook
    installs), ``release`` (its downloads), ``pages`` (its HTML, published by CI under the tag's name on the
    project's GitHub Pages site), ``notebooks_ref`` (the tag of the published notebooks: the ``notebooks`` branch
    at this release, which Colab and Binder open; see :func:`published`)."""
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    repo = meta["tool"]["sigprop"]["repository"]
    ref = "v" + version()
    m = re.fullmatch(r"https://github\.com/([\w.-]+)/([\w.-]+?)/?", repo)
    if not m:
        raise SystemExit(f"pyproject.toml [tool.sigprop] repository: expected https://github.com/<owner>/<name>; "
                         f"got {repo!r}")
    owner, name = m.groups()
    return {"repository": repo, "ref": ref, "version": version(), "pip": f"sigprop[notebooks] @ git+{repo}@{ref}",
            "release": f"{repo}/releases/tag/{ref}", "github": f"{owner}/{name}",
            "pages": f"https://{owner.lower()}.github.io/{name}/{ref}/", "notebooks_ref": f"notebooks-{ref}"}


#: The published notebooks: ``<edition>/<page>.ipynb`` (book/notebooks.py), ``assignments/<name>/<name>.ipynb``
#: with its public tests, the Binder environment and a README, at the root of the ``notebooks`` branch; the
#: publishing workflow (.github/workflows/release.yml) commits them there at each release and tags the commit
#: ``notebooks-v<version>``, which every launch link and badge names: a link never moves.
NOTEBOOKS_BRANCH = "notebooks"
#: PyTorch's CPU wheels: on Linux a plain ``pip install torch`` is the CUDA build (about 5 GB with its libraries)
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def published(src: dict, path: str) -> dict[str, str]:
    """The launch links of one published notebook (``path`` inside the published tree, e.g.
    ``reader/book/primer.ipynb``): ``colab``, ``binder`` (JupyterLab) and ``github``, pinned to the release."""
    tag = src["notebooks_ref"]
    return {"colab": f"https://colab.research.google.com/github/{src['github']}/blob/{tag}/{path}",
            "binder": f"https://mybinder.org/v2/gh/{src['github']}/{tag}?urlpath=lab/tree/{path}",
            "github": f"{src['repository']}/blob/{tag}/{path}"}


def notebook_requirements(src: dict, otter: str) -> str:
    """``requirements.txt`` of the published notebooks (Binder builds from it) and of the notebooks zip: the CPU
    build of PyTorch, this release of sigprop with what the pages import, and the assignments' otter-grader."""
    return "\n".join([
        "# sigprop's notebooks: pip install -r requirements.txt (Binder builds its image from this file)",
        "# PyTorch's CPU build: on Linux a plain `torch` from PyPI is the CUDA build, about 5 GB",
        f"--extra-index-url {TORCH_CPU_INDEX}",
        src["pip"], otter, ""])


def setup_cell(src: dict, edition: str, page_url: str) -> str:
    """The first cell of a built notebook (book/notebooks.py; collapsed under its first line, Colab's ``@title``):
    what it is, how to install the release, and the numbers the text quotes shown under the cells that compute
    them (myst-nb's ``glue`` records them unseen)."""
    return (f"# @title Set-up: run this cell first (on Colab it installs sigprop {src['version']})\n"
            f"# The {edition}'s edition of {page_url}\n"
            "# On Binder sigprop is installed. Elsewhere install it once (on Linux the extra index gives PyTorch's\n"
            "# CPU build; a plain `torch` from PyPI is the ~5 GB CUDA build):\n"
            f"#   pip install \"{src['pip']}\" --extra-index-url {TORCH_CPU_INDEX}\n"
            "import os, sys\n"
            "if \"google.colab\" in sys.modules:\n"
            f"    SIGPROP = os.environ.get(\"SIGPROP_INSTALL\", \"{src['pip']}\")\n"
            "    %pip install -q \"$SIGPROP\"\n"
            "\n"
            "# Each number the text quotes is recorded by glue(name, value) in the cell that computes it; shown here.\n"
            "def _show_glued(publish):\n"
            "    def show(data, metadata=None, *args, **kwargs):\n"
            "        record = (metadata or {}).get(\"scrapbook\") or {}\n"
            "        key = record.get(\"mime_prefix\", \"\") + \"text/plain\"\n"
            "        if record.get(\"mime_prefix\") and key in data:\n"
            "            data = {\"text/plain\": record[\"name\"] + \": \" + data[key].strip(\"'\")}\n"
            "        return publish(data, metadata, *args, **kwargs)\n"
            "    show.sigprop = True\n"
            "    return show\n"
            "\n"
            "_shell = get_ipython()\n"
            "if not getattr(_shell.display_pub.publish, \"sigprop\", False):\n"
            "    _shell.display_pub.publish = _show_glued(_shell.display_pub.publish)")


def release_links(src: dict, text: str) -> str:
    """``text`` with every link to one of this repository's releases pointed at this release's downloads."""
    return re.sub(re.escape(src["repository"]) + r"/releases(?:/tag/[\w.+-]+)?", src["release"], text)


def pinned_downloads(src: dict, text: str) -> str:
    """``text`` with the release's file names (``sigprop-notebooks-V.zip``, ``sigprop-V-py3-none-any.whl``, ...),
    Colab links to the published notebooks and the notebooks tag at this version."""
    text = re.sub(r"\bsigprop-(notebooks|solutions|book|autograder-[a-z0-9<>-]+?)-\d+\.\d+\.\d+(?=[-./])",
                  lambda m: f"sigprop-{m[1]}-{src['version']}", text)
    text = re.sub(r"\bsigprop-\d+\.\d+\.\d+(?=-py3-none-any\.whl|\.tar\.gz|-release-notes)",
                  f"sigprop-{src['version']}", text)
    text = re.sub(r"\bnotebooks-v\d+\.\d+\.\d+\b", src["notebooks_ref"], text)
    text = re.sub(r"(https://colab\.research\.google\.com/github/)[\w.-]+/[\w.-]+/blob/",
                  rf"\g<1>{src['github']}/blob/", text)
    return re.sub(r"(https://mybinder\.org/v2/gh/)[\w.-]+/[\w.-]+/", rf"\g<1>{src['github']}/", text)


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
    out[page] = release_links(src, pinned_downloads(src, re.sub(r"sigprop @ git\+[^\"\s]*", pinned, page.read_text())))
    intro = ROOT / "book" / "intro.md"
    out[intro] = release_links(src, intro.read_text())
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    unknown = [a for a in argv if a not in ("--check", "--version")]
    if unknown:   # an unknown argument rewrote the generated files instead of stopping (issue 37, item 10)
        raise SystemExit(f"book/sources.py: unknown arguments {unknown}; usage: python book/sources.py [--check | "
                         "--version]")
    if "--version" in argv:                         # the release workflow checks its tag against it
        print(version())
        return 0
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
