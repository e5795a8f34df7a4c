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
* ``sigprop-notebooks-V.zip`` -- what a class runs (:func:`notebooks_tree`): every page as a Jupyter-native
  notebook in two editions (``reader/``: solutions folded; ``student/``: without them; book/notebooks.py, written
  by ``make book`` into the site's ``_notebooks/``), the student version of every assignment with its public tests
  (``assignments/<name>/``), this release's wheel, a ``requirements.txt`` and a README that installs the wheel
  with what the pages and the assignments need (PyTorch's CPU build first: on Linux a plain ``torch`` is the
  ~5 GB CUDA build). The same tree, without the wheel, is what the publishing workflow commits to the
  ``notebooks`` branch at the tag ``notebooks-vV`` for Colab and Binder (``--notebooks-tree``);
* ``sigprop-autograder-<assignment>-V.zip`` -- otter's autograder of each assignment (Gradescope, or
  ``otter run -a <zip> -o <folder> <submission>``), rewritten with sorted entries and one timestamp (otter's own
  zip changes on every build). It holds the hidden tests: the masters with their solutions are in
  the public repository anyway (``book/assignments``), so this discloses nothing new; instructors who
  need private tests keep their own masters;
* ``sigprop-solutions-V.zip`` -- each assignment solved (otter's solutions notebook, ``<name>/<name>.ipynb``):
  what an instructor grades to check an autograder before the term (the masters in ``book/assignments`` carry
  no assignment name, and otter refuses them);
* ``sigprop-V-release-notes.md`` -- this version's section of ``CHANGELOG.md`` (refused without one);
* ``SHA256SUMS`` -- ``sha256sum -c SHA256SUMS`` checks the files above.

Zips, the sdist and the wheel are written with sorted entries and one timestamp (the last commit's, or
``$SOURCE_DATE_EPOCH``), so an unchanged tree gives the same files, byte for byte (the same ``SHA256SUMS``). Usage::

    .venv/bin/python book/release.py [--dist dist] [--html _build/html] [--no-pdf]
    .venv/bin/python book/release.py --notebooks-tree DIR [--html _build/html]   # the published notebooks only

The arguments are checked before anything is built (one line each: a missing site, a ``--dist`` that is a file
or holds other files, no Chromium for the PDF, no CHANGELOG section). ``tests/test_release.py`` builds the same
artefacts from a small book and one assignment, twice (the zips' SHA256 must agree), and follows the instructors'
page (book/instructors.md, "Trying a release") step by step from them: install into a fresh environment, run a
student notebook, grade it blank and solved.
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import importlib.util
import io
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from html.parser import HTMLParser
from urllib.parse import unquote, urlsplit

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
PY = sys.executable
#: the built notebooks' folder in the site (book/_ext/sigprop_notebooks.py writes it)
NOTEBOOKS = "_notebooks"


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
            "solutions": f"sigprop-solutions-{v}.zip",
            "notes": f"sigprop-{v}-release-notes.md", "sums": "SHA256SUMS"}


# ----------------------------------------------------------------------------- archives

def epoch() -> int:
    """The release's one timestamp: ``$SOURCE_DATE_EPOCH``, else the last commit's time (1980-01-01 without git,
    the earliest a zip can hold)."""
    value = os.environ.get("SOURCE_DATE_EPOCH")
    if value is None:
        try:
            value = subprocess.run(["git", "log", "-1", "--format=%ct"], cwd=ROOT, capture_output=True,
                                   text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            value = ""
    return max(int(value), 315532800) if value else 315532800


def _timestamp() -> tuple:
    """:func:`epoch` as a zip timestamp."""
    t = time.gmtime(epoch())
    return (t.tm_year, t.tm_mon, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec)


def retar(path: pathlib.Path) -> pathlib.Path:
    """A ``.tar.gz`` rewritten reproducibly: entries sorted, one mtime (:func:`epoch`, in the gzip header too),
    owner root, modes 644/755 (setuptools' sdist takes each file's mtime and the clock's)."""
    stamp = epoch()
    with tarfile.open(path, "r:gz") as src:
        members = sorted(((m, src.extractfile(m).read() if m.isfile() else None) for m in src.getmembers()),
                         key=lambda item: item[0].name)
    with path.open("wb") as raw, gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=stamp) as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as out:
        for member, data in members:
            member.mtime, member.uid, member.gid, member.uname, member.gname = stamp, 0, 0, "root", "root"
            member.mode = 0o755 if member.isdir() else 0o644
            member.pax_headers = {}
            out.addfile(member, io.BytesIO(data) if data is not None else None)
    return path


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
    built, env = [], {**os.environ, "SOURCE_DATE_EPOCH": str(epoch())}     # the wheel's entries take it
    for hook in ("build_sdist", "build_wheel"):   # one process each: after build_sdist, build_wheel in the
        code = f"import sys; from setuptools import build_meta as b; print('BUILT', b.{hook}(sys.argv[1]))"
        out = subprocess.run([PY, "-c", code, str(dist)], cwd=ROOT, capture_output=True, text=True, env=env)
        if out.returncode:                        # same process names a wheel it does not leave (setuptools 84)
            raise RuntimeError(f"{hook} failed:\n{out.stderr[-3000:]}")
        built.append(dist / out.stdout.split("BUILT ")[-1].strip())
    expected = [dist / names(version())[k] for k in ("sdist", "wheel")]
    if built != expected or not all(p.is_file() for p in built):
        raise RuntimeError(f"expected {[p.name for p in expected]}, setuptools wrote {[p.name for p in built]}")
    retar(built[0])
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


def notebooks_readme(v: str, assignments: list[str], wheel: str | None) -> str:
    """The README of the notebooks zip (``wheel``: the wheel's file name in it) or of the published branch."""
    src = sources.source()
    otter = _make_assignments().OTTER_REQUIREMENT
    here = f"pip install \"{wheel}[notebooks]\" {otter} jupyterlab" if wheel else "pip install -r requirements.txt"
    example = f"assignments/{assignments[0]}/{assignments[0]}.ipynb" if assignments else "reader/book/primer.ipynb"
    lines = [
        f"# sigprop {v}: the notebooks", "",
        f"The pages of the sigprop book {v} (tag `{src['ref']}`; the book: {src['pages']}) as notebooks, and the",
        "student version of each assignment:", "",
        "* `reader/`: every page, solutions folded under each exercise (click to open);",
        "* `student/`: every page without the solutions (for exercises set as homework);",
        "* `assignments/<name>/`: the autograded assignments (otter-grader): the notebook and its public tests, kept",
        "  side by side.", "",
        "## Run them", "",
        "In a new virtual environment, from this folder:", "",
        "    python3 -m venv .venv && . .venv/bin/activate",
        f"    pip install torch --index-url {sources.TORCH_CPU_INDEX}   # Linux: PyTorch's CPU build first",
        f"    {here}",
        f"    jupyter lab {example}", "",
        "On Linux, a plain `pip install torch` (and so any install that pulls torch without the CPU index) is the",
        "CUDA build: about 5 GB of libraries (a fresh Python 3.12 environment grew to 6.0 GB). The CPU build is",
        "about 200 MB and runs every page; for a GPU, install your CUDA build of torch instead.",
        ("The wheel is this release's library; its dependencies (numpy, scipy, matplotlib, pandas, transformers,"
         if wheel else "The requirements install this release of the library from its tag, with its dependencies"),
        "otter-grader, ...) come from PyPI." if wheel else "(numpy, scipy, matplotlib, pandas, transformers, "
        "otter-grader, ...) from PyPI.", "",
        "On Colab or Binder nothing needs installing: open a notebook from the book's launch button, or",
        f"`https://colab.research.google.com/github/{src['github']}/blob/{src['notebooks_ref']}/"
        "<path in this folder>`;",
        "the first cell of every notebook installs the release on Colab.", "",
        "## Grade an assignment", "",
        f"With the assignment's autograder from the release's downloads ({src['release']}):", "",
        f"    mkdir -p results && otter run -a sigprop-autograder-<name>-{v}.zip -o results <submission>.ipynb", "",
        f"Assignments: {', '.join(assignments) or 'none'}. The instructors' page of the book says more:",
        f"{src['pages']}book/instructors.html", ""]
    return "\n".join(lines)


def notebooks_tree(html: pathlib.Path, students: dict[str, pathlib.Path], dest: pathlib.Path | None,
                   wheel: pathlib.Path | None = None) -> dict[str, bytes | pathlib.Path]:
    """The published notebooks as ``{path: bytes or file}`` (written under ``dest`` when it is given a folder):
    the site's built notebooks (``<html>/_notebooks/<edition>/...``), the student folders (``{name: folder}``)
    under ``assignments/``, ``requirements.txt`` (Binder builds from it), ``runtime.txt`` (Binder's Python), a
    README, and ``wheel`` when given (the zip)."""
    built = html / NOTEBOOKS
    if not built.is_dir():
        raise FileNotFoundError(f"{built} is missing: the site was built without its notebooks (make book)")
    members: dict[str, bytes | pathlib.Path] = {}
    for edition in ("reader", "student"):
        members.update(tree(built / edition, edition))
    for name, folder in students.items():
        for path in sorted(folder.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                members[f"assignments/{name}/{path.relative_to(folder).as_posix()}"] = path
    otter = _make_assignments().OTTER_REQUIREMENT
    members["requirements.txt"] = sources.notebook_requirements(sources.source(), otter).encode()
    members["runtime.txt"] = b"python-3.11\n"
    members["README.md"] = notebooks_readme(version(), sorted(students), wheel.name if wheel else None).encode()
    if wheel is not None:
        members[wheel.name] = wheel
    if dest is not None:
        for name, data in members.items():
            out = dest / name
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(data if isinstance(data, bytes) else data.read_bytes())
    return members


def notebooks_zip(dist: pathlib.Path, v: str, html: pathlib.Path, students: dict[str, pathlib.Path],
                  wheel: pathlib.Path) -> pathlib.Path:
    """:func:`notebooks_tree` with the wheel, under ``sigprop-notebooks-V/``."""
    prefix = f"sigprop-notebooks-{v}"
    members = notebooks_tree(html, students, None, wheel)
    return write_zip(dist / names(v)["notebooks"], {f"{prefix}/{k}": m for k, m in members.items()})


def _make_assignments():
    return _module("sigprop_make_assignments", HERE / "assignments" / "make_assignments.py")


def assignments(out: pathlib.Path, only: list[str] | None = None, run_tests: bool = True) -> dict[str, dict]:
    """``otter assign`` on every master (or ``only`` those), into ``out``; see make_assignments.build."""
    ma = _make_assignments()
    return {p.stem: ma.build(p, out, run_tests=run_tests) for p in ma.masters() if not only or p.stem in only}


def rezip(source: pathlib.Path, dest: pathlib.Path) -> pathlib.Path:
    """A zip rewritten by :func:`write_zip`: the same files, sorted, one timestamp (otter writes its autograder
    zip with the build's clock and in the order it walks the folder, so its SHA256 changed on every build)."""
    with zipfile.ZipFile(source) as z:
        members = {info.filename: z.read(info) for info in z.infolist() if not info.is_dir()}
    return write_zip(dest, members)


def autograders(dist: pathlib.Path, v: str, built: dict[str, dict]) -> list[pathlib.Path]:
    return [rezip(paths["autograder"], dist / names(v)["autograder"].format(name=name))
            for name, paths in sorted(built.items())]


def solutions_zip(dist: pathlib.Path, v: str, built: dict[str, dict]) -> pathlib.Path:
    """Each assignment solved, ``sigprop-solutions-V/<name>/<name>.ipynb``: gradable by its autograder."""
    prefix = f"sigprop-solutions-{v}"
    return write_zip(dist / names(v)["solutions"],
                     {f"{prefix}/{name}/{name}.ipynb": paths["solutions"] for name, paths in sorted(built.items())})


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


_OURS = re.compile(r"^(sigprop[-_].*|SHA256SUMS)$")


def check_dist(dist: pathlib.Path) -> None:
    """Refuse a ``--dist`` that is not a folder, or a folder holding anything but a previous release."""
    if dist.exists() and not dist.is_dir():
        raise ValueError(f"--dist {dist}: a file, not a folder")
    other = sorted(p.name for p in dist.iterdir() if not _OURS.match(p.name) or p.is_dir()) if dist.exists() else []
    if other:
        raise ValueError(f"--dist {dist} holds files that are not a release's ({', '.join(other[:5])}): "
                         "choose another folder")


def check_site(html: pathlib.Path, v: str) -> None:
    """Refuse a ``--html`` that is not a site built by ``make book`` for version ``v``, with its notebooks."""
    index = html / "index.html"
    if not index.is_file():
        raise ValueError(f"--html {html}: no built site there (no index.html): run `make book`")
    if f"sigprop {v} " not in landing_page(index).read_text(encoding="utf-8"):
        raise ValueError(f"--html {html}: not built for version {v} (its footer says otherwise): run `make book`")
    if not (html / NOTEBOOKS).is_dir():
        raise ValueError(f"--html {html}: the site has no {NOTEBOOKS}/ (built without its notebooks): run `make book`")


def clean(dist: pathlib.Path) -> None:
    """Empty ``dist`` of a previous release (:func:`check_dist` first)."""
    check_dist(dist)
    dist.mkdir(parents=True, exist_ok=True)
    for p in dist.iterdir():
        p.unlink()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dist", default=str(ROOT / "dist"), help="output folder (default: dist)")
    parser.add_argument("--html", default=str(ROOT / "_build" / "html"), help="the built site (make book)")
    parser.add_argument("--no-pdf", action="store_true", help="leave the PDF out (no Chromium here)")
    parser.add_argument("--notebooks-tree", metavar="DIR", default=None,
                        help="write only the published notebooks into DIR (an empty or new folder; for CI)")
    args = parser.parse_args(argv)
    v, t0 = version(), time.monotonic()
    dist, html = pathlib.Path(args.dist).resolve(), pathlib.Path(args.html).resolve()
    try:                                        # every argument checked before anything is built
        check_site(html, v)
        if args.notebooks_tree:
            out = pathlib.Path(args.notebooks_tree).resolve()
            if out.exists() and (not out.is_dir() or any(out.iterdir())):
                raise ValueError(f"--notebooks-tree {out}: not an empty folder")
        else:
            check_dist(dist)
            if not args.no_pdf and release_pdf.chromium() is None:
                raise ValueError("the PDF needs Chromium (apt-get install chromium, or $SIGPROP_CHROMIUM); "
                                 "--no-pdf leaves it out")
            with tempfile.TemporaryDirectory() as tmp:
                release_notes(pathlib.Path(tmp), v)
    except (ValueError, RuntimeError) as exc:
        print(f"release.py: error: {exc}", file=sys.stderr)
        return 2
    step = lambda what: print(f"[{time.monotonic() - t0:6.0f} s] {what}", flush=True)  # noqa: E731
    if args.notebooks_tree:
        with tempfile.TemporaryDirectory(prefix="sigprop-release-") as tmp:
            step("assignments (otter assign)")
            built = assignments(pathlib.Path(tmp), run_tests=False)
            notebooks_tree(html, {name: paths["student_dir"] for name, paths in built.items()}, out)
        step(f"done: {out}")
        return 0
    clean(dist)
    step("release notes (CHANGELOG.md)")
    release_notes(dist, v)
    step("wheel and sdist")
    wheel = python_packages(dist)[1]
    step("HTML archive")
    html_zip(html, dist, v)
    with tempfile.TemporaryDirectory(prefix="sigprop-release-") as tmp:
        step("assignments (otter assign, solutions graded)")
        built = assignments(pathlib.Path(tmp))
        autograders(dist, v, built)
        solutions_zip(dist, v, built)
        step("notebooks archive")
        notebooks_zip(dist, v, html, {name: paths["student_dir"] for name, paths in built.items()}, wheel)
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
