"""Build a release of sigprop into ``dist/`` (``make release``): what an instructor pins for a term.

After ``make book`` (the HTML site, every notebook executed), this writes, for version ``V``
(``sigprop.__version__``, the tag ``vV``):

* ``sigprop-V-py3-none-any.whl`` and ``sigprop-V.tar.gz`` -- the library (setuptools' own PEP 517 hooks,
  no build isolation: nothing is downloaded);
* ``sigprop-book-V-html.zip`` -- the built site under ``sigprop-book-V/``: unzip and open ``index.html``,
  offline (MathJax, fonts and scripts are in the site; ``tests/test_book_offline.py``). Refused when the
  site's footer names another version (a stale build) or a page links to a file the site lacks;
* ``sigprop-book-V.pdf`` -- the single-page HTML build (``jupyter-book build --builder singlehtml``, which
  reuses the execution cache: nothing re-runs) printed by headless Chromium once MathJax has typeset
  every formula (``book/release_pdf.py``; why not LaTeX is explained there);
* ``sigprop-notebooks-V.zip`` -- every page's notebook without outputs, in the book's folders, plus the
  student version of every assignment (``otter assign``, with its public tests), a README and a
  ``requirements.txt`` pinned to the tag;
* ``sigprop-autograder-<assignment>-V.zip`` -- otter's autograder of each assignment (Gradescope, or
  ``otter run -a <zip> <submission>``). It holds the hidden tests: the masters with their solutions are in
  the public repository anyway (``book/assignments``), so this discloses nothing new; instructors who
  need private tests keep their own masters;
* ``sigprop-V-release-notes.md`` -- this version's section of ``CHANGELOG.md`` (refused without one);
* ``SHA256SUMS`` -- ``sha256sum -c SHA256SUMS`` checks the files above.

Zips are written with sorted entries and one timestamp (the last commit's), so an unchanged tree gives the
same archive. Usage::

    .venv/bin/python book/release.py [--dist dist] [--html _build/html] [--no-pdf]

``tests/test_release.py`` builds the same artefacts from a small book and one assignment, installs the
wheel into a fresh environment without the network and runs a page and the autograder from them.
"""
from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from html.parser import HTMLParser
from urllib.parse import unquote, urlsplit

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
PY = sys.executable


def _module(name: str, path: pathlib.Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


sources = _module("sigprop_book_sources", HERE / "sources.py")
release_pdf = _module("sigprop_release_pdf", HERE / "release_pdf.py")


def version() -> str:
    return sources.version()


def names(v: str) -> dict[str, str]:
    """The artefacts' file names for version ``v`` (autograders: ``autograder`` with ``{name}`` to fill)."""
    return {"wheel": f"sigprop-{v}-py3-none-any.whl", "sdist": f"sigprop-{v}.tar.gz",
            "html": f"sigprop-book-{v}-html.zip", "pdf": f"sigprop-book-{v}.pdf",
            "notebooks": f"sigprop-notebooks-{v}.zip", "autograder": "sigprop-autograder-{name}-" + f"{v}.zip",
            "notes": f"sigprop-{v}-release-notes.md", "sums": "SHA256SUMS"}


# ----------------------------------------------------------------------------- archives

def _timestamp() -> tuple:
    """The last commit's time (or $SOURCE_DATE_EPOCH) as a zip timestamp; 1980-01-01 without git."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch is None:
        try:
            epoch = subprocess.run(["git", "log", "-1", "--format=%ct"], cwd=ROOT, capture_output=True,
                                   text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            epoch = ""
    t = time.gmtime(int(epoch)) if epoch else None
    return (max(t.tm_year, 1980), t.tm_mon, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec) if t else (1980, 1, 1, 0, 0, 0)


def write_zip(dest: pathlib.Path, members: dict[str, bytes | pathlib.Path]) -> pathlib.Path:
    """A zip of ``{archive name: bytes or file}``, entries sorted, one timestamp, deflated."""
    stamp = _timestamp()
    with zipfile.ZipFile(dest, "w") as z:
        for name in sorted(members):
            info = zipfile.ZipInfo(name, stamp)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            data = members[name]
            z.writestr(info, data if isinstance(data, bytes) else data.read_bytes(), compresslevel=6)
    return dest


def tree(folder: pathlib.Path, prefix: str, skip=(".buildinfo",)) -> dict[str, pathlib.Path]:
    """Every file under ``folder`` as ``{prefix/relative path: path}``."""
    return {f"{prefix}/{p.relative_to(folder).as_posix()}": p for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name not in skip}


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.found = []

    def handle_starttag(self, tag, attrs):
        for key, value in attrs:
            if key in ("href", "src") and value:
                self.found.append(value)


def missing_targets(files: dict[str, object], read) -> list[str]:
    """Local links (``href``, ``src``) of the pages among ``files`` that point to no file in it (``_static/``
    holds the themes' template fragments, not pages)."""
    missing = []
    for name in sorted(n for n in files if n.endswith(".html") and "/_static/" not in f"/{n}"):
        parser = _Links()
        parser.feed(read(name).decode("utf-8", errors="replace"))
        base = pathlib.PurePosixPath(name).parent
        for link in parser.found:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or not parts.path or link.startswith(("#", "mailto:", "javascript:")):
                continue
            target = os.path.normpath((base / unquote(parts.path)).as_posix())
            if target not in files and f"{target}/index.html" not in files:
                missing.append(f"{name}: {link}")
    return missing


# ----------------------------------------------------------------------------- the artefacts

def python_packages(dist: pathlib.Path) -> list[pathlib.Path]:
    """Wheel and sdist through setuptools' PEP 517 hooks, in a separate process, without isolation."""
    built = []
    for hook in ("build_sdist", "build_wheel"):   # one process each: after build_sdist, build_wheel in the
        code = f"import sys; from setuptools import build_meta as b; print('BUILT', b.{hook}(sys.argv[1]))"
        out = subprocess.run([PY, "-c", code, str(dist)], cwd=ROOT, capture_output=True, text=True)
        if out.returncode:                        # same process names a wheel it does not leave (setuptools 84)
            raise RuntimeError(f"{hook} failed:\n{out.stderr[-3000:]}")
        built.append(dist / out.stdout.split("BUILT ")[-1].strip())
    expected = [dist / names(version())[k] for k in ("sdist", "wheel")]
    if built != expected or not all(p.is_file() for p in built):
        raise RuntimeError(f"expected {[p.name for p in expected]}, setuptools wrote {[p.name for p in built]}")
    return built


def html_zip(html: pathlib.Path, dist: pathlib.Path, v: str) -> pathlib.Path:
    """The built site as ``sigprop-book-V/...``; refused if stale (another version's footer) or if a page
    links to a file the site lacks."""
    index = html / "index.html"
    if not index.is_file():
        raise FileNotFoundError(f"{index} is missing: run `make book` first")
    if f"sigprop {v} " not in landing_page(index).read_text(encoding="utf-8"):
        raise RuntimeError(f"{html} was not built for version {v} (its footer says otherwise): run `make book`")
    members = tree(html, f"sigprop-book-{v}")
    broken = missing_targets(members, lambda n: members[n].read_bytes())
    if broken:
        raise RuntimeError("pages link to files the site lacks:\n  " + "\n  ".join(broken[:20]))
    return write_zip(dist / names(v)["html"], members)


def singlehtml(root: pathlib.Path = ROOT) -> pathlib.Path:
    """``jupyter-book build --builder singlehtml``: the whole book on one page, from the execution cache."""
    jb = pathlib.Path(PY).with_name("jupyter-book")
    run = subprocess.run([str(jb), "build", str(root), "--builder", "singlehtml", "--keep-going", "-q"],
                         capture_output=True, text=True)
    index = root / "_build" / "singlehtml" / "index.html"
    if run.returncode or not index.is_file():
        raise RuntimeError(f"the single-page build failed:\n{(run.stdout + run.stderr)[-3000:]}")
    return top_level_copy(landing_page(index), index.parent)


def top_level_copy(page: pathlib.Path, top: pathlib.Path) -> pathlib.Path:
    """The single page where its links expect it. Sphinx writes it as ``<root document>.html``
    (``book/intro.html``) but makes every link relative to the build's top (``_static/...``,
    ``_images/...``): from ``book/`` no script, style or figure would load. A copy at the top fixes that."""
    if page.parent == top:
        return page
    out = top / "sigprop-book.html"
    shutil.copyfile(page, out)
    return out


def landing_page(index: pathlib.Path) -> pathlib.Path:
    """The root document's page: jupyter-book's ``index.html`` only redirects to it."""
    m = re.search(r'http-equiv="Refresh" content="0; url=([^"]+)"', index.read_text(encoding="utf-8"))
    return index.parent / unquote(m.group(1)) if m else index


def pdf(page: pathlib.Path, dist: pathlib.Path, v: str) -> tuple[pathlib.Path, dict]:
    """The single page printed by Chromium (every formula typeset, every image loaded: else an error)."""
    out = dist / names(v)["pdf"]
    check = release_pdf.print_pdf(page, out, title=f"sigprop {v}: signal propagation in transformers at "
                                                   "initialisation")
    return out, check


def page_notebooks() -> list[pathlib.Path]:
    """Every notebook page of the book (chapters and book/, not the assignment masters)."""
    return list(sources.notebooks())


def without_outputs(path: pathlib.Path) -> bytes:
    """A notebook with no outputs and no execution counts (as committed; enforced here all the same)."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
    return (json.dumps(nb, indent=1, ensure_ascii=False) + "\n").encode()


def notebooks_readme(v: str, assignments: list[str]) -> str:
    src = sources.source()
    return "\n".join([
        f"# sigprop {v}: the notebooks", "",
        f"The book's pages as notebooks, without outputs (`book/`, `chapters/`), for sigprop {v} (tag `{src['ref']}`),",
        "and the student version of each assignment (`assignments/<name>/`: the notebook and its public tests).", "",
        "Run them with this release of the library:", "",
        f"    pip install \"sigprop-{v}-py3-none-any.whl[notebooks]\"    # the wheel of the same release",
        f"    pip install -r requirements.txt                              # or from the tag: {src['ref']}", "",
        "On Colab the first (hidden) cell of every notebook installs it. Grade a submission with the assignment's",
        f"autograder: `otter run -a sigprop-autograder-<name>-{v}.zip <submission.ipynb>`.", "",
        f"Assignments: {', '.join(assignments)}. The book: {src['release']}", ""])


def notebooks_zip(dist: pathlib.Path, v: str, students: dict[str, pathlib.Path]) -> pathlib.Path:
    """Page notebooks without outputs + the student folders (``{name: student dir}``) + README."""
    prefix = f"sigprop-notebooks-{v}"
    members: dict[str, bytes | pathlib.Path] = {
        f"{prefix}/{p.relative_to(ROOT).as_posix()}": without_outputs(p) for p in page_notebooks()}
    for name, folder in students.items():
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                rel = f"{prefix}/assignments/{name}/{path.relative_to(folder).as_posix()}"
                members[rel] = without_outputs(path) if path.suffix == ".ipynb" else path
    members[f"{prefix}/README.md"] = notebooks_readme(v, sorted(students)).encode()
    members[f"{prefix}/requirements.txt"] = (sources.source()["pip"] + "\n").encode()
    return write_zip(dist / names(v)["notebooks"], members)


def assignments(out: pathlib.Path, only: list[str] | None = None, run_tests: bool = True) -> dict[str, dict]:
    """``otter assign`` on every master (or ``only`` those), into ``out``; see make_assignments.build."""
    ma = _module("sigprop_make_assignments", HERE / "assignments" / "make_assignments.py")
    return {p.stem: ma.build(p, out, run_tests=run_tests) for p in ma.masters() if not only or p.stem in only}


def autograders(dist: pathlib.Path, v: str, built: dict[str, dict]) -> list[pathlib.Path]:
    out = []
    for name, paths in sorted(built.items()):
        out.append(dist / names(v)["autograder"].format(name=name))
        shutil.copyfile(paths["autograder"], out[-1])
    return out


def release_notes(dist: pathlib.Path, v: str, changelog: pathlib.Path = ROOT / "CHANGELOG.md") -> pathlib.Path:
    """This version's section of the CHANGELOG (``## [V]`` up to the next ``## ``)."""
    m = re.search(rf"(?ms)^## \[{re.escape(v)}\].*?(?=^## |\Z)", changelog.read_text(encoding="utf-8"))
    if not m:
        raise RuntimeError(f"{changelog.name} has no section '## [{v}]': write what changed first")
    out = dist / names(v)["notes"]
    out.write_text(m.group(0).rstrip() + "\n", encoding="utf-8")
    return out


def sha256sums(dist: pathlib.Path) -> pathlib.Path:
    """``SHA256SUMS`` of every other file in ``dist`` (the format of ``sha256sum``; ``sha256sum -c`` checks it)."""
    lines = []
    for path in sorted(p for p in dist.iterdir() if p.is_file() and p.name != "SHA256SUMS"):
        digest = hashlib.sha256()
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        lines.append(f"{digest.hexdigest()}  {path.name}\n")
    out = dist / "SHA256SUMS"
    out.write_text("".join(lines))
    return out


def clean(dist: pathlib.Path) -> None:
    """Empty ``dist`` of a previous release; refuse a folder holding anything else."""
    if not dist.exists():
        dist.mkdir(parents=True)
        return
    ours = re.compile(r"^(sigprop[-_].*|SHA256SUMS)$")
    other = sorted(p.name for p in dist.iterdir() if not ours.match(p.name) or p.is_dir())
    if other:
        raise RuntimeError(f"{dist} holds files that are not a release's ({other[:5]}): choose another --dist")
    for p in dist.iterdir():
        p.unlink()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dist", default=str(ROOT / "dist"), help="output folder (default: dist)")
    parser.add_argument("--html", default=str(ROOT / "_build" / "html"), help="the built site (make book)")
    parser.add_argument("--no-pdf", action="store_true", help="leave the PDF out (no Chromium here)")
    args = parser.parse_args(argv)
    v, dist, t0 = version(), pathlib.Path(args.dist).resolve(), time.monotonic()
    if not args.no_pdf and release_pdf.chromium() is None:
        parser.error("the PDF needs Chromium (apt-get install chromium, or $SIGPROP_CHROMIUM); --no-pdf leaves it out")
    clean(dist)
    step = lambda what: print(f"[{time.monotonic() - t0:6.0f} s] {what}", flush=True)  # noqa: E731
    step("release notes (CHANGELOG.md)")
    release_notes(dist, v)
    step("wheel and sdist")
    python_packages(dist)
    step("HTML archive")
    html_zip(pathlib.Path(args.html), dist, v)
    with tempfile.TemporaryDirectory(prefix="sigprop-release-") as tmp:
        step("assignments (otter assign, solutions graded)")
        built = assignments(pathlib.Path(tmp))
        autograders(dist, v, built)
        step("notebooks archive")
        notebooks_zip(dist, v, {name: paths["student_dir"] for name, paths in built.items()})
    if not args.no_pdf:
        step("single-page build")
        page = singlehtml()
        step("PDF (Chromium)")
        _, check = pdf(page, dist, v)
        step(f"PDF: {check['formulas']} formulas typeset, {check['images']} images")
    sha256sums(dist)
    step(f"done: {dist}")
    for p in sorted(dist.iterdir()):
        print(f"  {p.stat().st_size / 1e6:8.2f} MB  {p.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
