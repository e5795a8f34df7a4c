"""A release (``make release``, book/release.py): the version in one place, the artefacts, and a fresh install.

* The version is written once (``sigprop.__version__``): pyproject reads it, and every copy -- the tag, the
  install cells, ``_config.yml``'s footer and repository ref, ``CITATION.cff`` -- is generated from it
  (book/sources.py) and agrees; ``CHANGELOG.md`` has a section for it, and for every tag ``v*`` the tag's
  library says that version and the CHANGELOG's ledger counts are the tag's record.
* The artefacts are built as ``make release`` builds them, on a reduced input to stay fast: a two-page book
  (HTML with its built notebooks, and the single-page build, ~10 s) instead of the whole site, one assignment.
  Built twice, every zip has the same SHA256 (sorted entries, one timestamp; otter's own autograder zip differs
  on every build). ``book/release.py`` refuses bad arguments before it builds anything.
* The instructors' page is followed step by step from the artefacts alone (book/instructors.md, "Trying a
  release": its code block, line by line): unzip, a fresh virtual environment, the wheel from the notebooks zip
  installed with ``pip --no-index`` (this environment's packages stand in for PyPI, as in tests/test_colab.py,
  without sigprop), the student notebook run, graded blank (zero) and solved (full marks) by ``otter run``;
  in that environment a chapter page runs from the wheel. About two minutes on two busy cores.
* The PDF needs Chromium (``apt-get install chromium``): without it those tests skip, saying so.
"""
from __future__ import annotations

import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile

import pytest

from conftest import load_script

ROOT = pathlib.Path(__file__).resolve().parents[1]


release = load_script("sigprop_book_release", ROOT / "book" / "release.py")
changes = load_script("sigprop_ledger_changes", ROOT / "book" / "ledger_changes.py")
colab = load_script("sigprop_test_colab", ROOT / "tests" / "test_colab.py")   # its fresh-environment helpers
sources = release.sources
V = sources.version()
ASSIGNMENT = "aghajanyan2025"          # the fastest master to assign and grade (lib/sigprop/bench records)
PAGE = "chapters/giorlandino-goldt2025/07_claims.ipynb"   # a chapter page in seconds; reads the packaged records
NO_CHROMIUM = "no Chromium here (apt-get install chromium): the PDF is not built or checked"


# ----------------------------------------------------------------------------- the version in one place

def test_the_version_is_written_once():
    import sigprop

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in meta["project"] and "version" in meta["project"]["dynamic"]
    assert meta["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "sigprop.__version__"}
    assert sigprop.__version__ == V and re.fullmatch(r"\d+\.\d+\.\d+", V), V
    src = sources.source()
    assert src["ref"] == f"v{V}" and src["pip"].endswith(f"@v{V}") and src["release"].endswith(f"/tag/v{V}")


def test_every_copy_of_the_version_agrees():
    """Footer, repository ref, CITATION.cff and the release links are generated copies, and present."""
    src = sources.source()
    config = (ROOT / "_config.yml").read_text()
    assert f"  extra_footer: '{sources.footer(src)}'" in config.splitlines(), "the footer names the version"
    assert f"  branch: {src['ref']}" in config.splitlines()
    assert f'version: "{V}"' in (ROOT / "CITATION.cff").read_text().splitlines()
    for page in ("book/intro.md", "book/instructors.md"):
        assert src["release"] in (ROOT / page).read_text(), f"{page} links to the release's downloads"
    stale = [str(p.relative_to(ROOT)) for p, text in sources.expected_files(src).items() if p.read_text() != text]
    assert not stale, f"run `python book/sources.py`: {stale}"


def test_citation_file_is_valid():
    yaml = pytest.importorskip("yaml")
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software"
    assert {"message", "title", "authors", "version", "license", "repository-code"} <= set(cff)
    assert all("name" in a or "family-names" in a for a in cff["authors"])
    for ref in cff.get("references", []):
        assert {"type", "title", "authors"} <= set(ref), ref
    assert cff["repository-code"] == sources.source()["repository"]


def _tags() -> list[str]:
    out = subprocess.run(["git", "tag", "--list", "v*"], cwd=ROOT, capture_output=True, text=True)
    return out.stdout.split() if out.returncode == 0 else []


def _section(version: str) -> str:
    text = (ROOT / "CHANGELOG.md").read_text()
    m = re.search(rf"(?ms)^## \[{re.escape(version)}\].*?(?=^## |\Z)", text)
    assert m, f"CHANGELOG.md has no section '## [{version}]'"
    return m.group(0)


def test_changelog_has_every_release_and_its_ledger_counts():
    """The current version and every tag have a section whose counts table is the record's (at the tag when
    the version is tagged, else the working tree's: the section describes what will be tagged)."""
    assert (ROOT / "CHANGELOG.md").read_text().count("## [Unreleased]") == 1
    tags = _tags()
    for version in sorted({V} | {t[1:] for t in tags}):
        ref = f"v{version}" if f"v{version}" in tags else None
        if ref:
            init = subprocess.run(["git", "show", f"{ref}:lib/sigprop/__init__.py"], cwd=ROOT, capture_output=True,
                                  text=True, check=True).stdout
            assert f'__version__ = "{version}"' in init, f"the tag {ref} holds another __version__"
        table = changes.counts_table(changes.records(ref))
        assert table in _section(version), f"CHANGELOG [{version}]: the ledger counts differ from {ref or 'now'}:\n{table}"


def test_built_site_names_this_version_and_packs_for_offline_reading(tmp_path):
    """The site of make book (CI builds it first): its footer names this version, its pages carry the download
    script, and its archive (the release's) links to no file it lacks. ~15 s for ~35 MB."""
    index = ROOT / "_build" / "html" / "index.html"
    if not index.is_file():
        pytest.skip("no built site (make book)")
    text = release.landing_page(index).read_text()
    found = re.findall(r"sigprop (\d+\.\d+\.\d+) · ", text)
    if not found:
        pytest.skip("the site was built before the footer named the version: make book")
    assert found == [V], f"_build/html is of version {found}, the library {V}: make book"
    assert "btn-download-notebook-button" in text and 'setAttribute("download"' in text
    assert (index.parent / "_notebooks" / "reader" / "book" / "intro.ipynb").is_file(), "the download button's file"
    archive = release.html_zip(index.parent, tmp_path, V)          # raises on a link to a missing file
    with zipfile.ZipFile(archive) as z:
        assert f"sigprop-book-{V}/index.html" in z.namelist()


# ----------------------------------------------------------------------------- ledger changes

def _row(cid, status, document="doc"):
    return {"id": cid, "document": document, "status": status}


def test_ledger_changes_lists_added_removed_and_changed():
    old = {r["id"]: r for r in [_row("a", "reproduced"), _row("b", "erratum"), _row("c", "deviates")]}
    new = {r["id"]: r for r in [_row("a", "reproduced"), _row("b", "reproduced"), _row("d", "approximation")]}
    assert changes.changes(old, new) == [("b", "erratum", "reproduced"), ("d", None, "approximation"),
                                         ("c", "deviates", None)]
    text = changes.markdown(old, new, "v1", "v2")
    assert "`b`: erratum -> **reproduced**" in text and "`d`: new claim" in text and "`c`: removed" in text
    assert changes.changes(new, new) == [] and "no status changed" in changes.markdown(new, new, "v2", "v2")
    assert "| doc | 2 | 1 | 3 |" in changes.counts_table(new).splitlines()   # reproduced, approximation, claims


def test_ledger_changes_between_a_tag_and_the_working_tree(tmp_path):
    repo = tmp_path / "repo"
    records = repo / changes.RECORDS
    records.mkdir(parents=True)
    git = lambda *a: subprocess.run(["git", *a], cwd=repo, check=True, capture_output=True)  # noqa: E731
    git("init", "-q")
    (records / "x.json").write_text(json.dumps([_row("x1", "reproduced", "x"), _row("x2", "deviates", "x")]))
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    git("tag", "v0.0.1")
    (records / "x.json").write_text(json.dumps([_row("x1", "erratum", "x"), _row("x2", "deviates", "x")]))
    assert changes.latest_tag(repo) == "v0.0.1"
    found = changes.changes(changes.records("v0.0.1", repo), changes.records(None, repo))
    assert found == [("x1", "reproduced", "erratum")]


# ----------------------------------------------------------------------------- the artefacts, reduced

TINY_CONFIG = """title: tiny
author: sigprop tests
only_build_toc_files: true
execute:
  execute_notebooks: "off"
parse:
  myst_enable_extensions: [amsmath, dollarmath]
sphinx:
  local_extensions:
    sigprop_release: {ext}
    sigprop_notebooks: {ext}
  extra_extensions: [sphinx-mathjax-offline]
  config:
    mathjax_path: mathjax/tex-chtml.js
html:
  extra_footer: '{footer}'
"""
TINY_INTRO = r"""# A tiny book

Inline $\rho^L = \frac{a}{b}$ and displayed:

$$ \mathbb E\, Y = 1 - \beta_c / \beta $$

A badge from the network (offline: its alt text): [![Open in Colab](https://badge.invalid/colab.svg)](https://badge.invalid)
"""


def _tiny_book(folder: pathlib.Path) -> pathlib.Path:
    """Two pages in ``book/`` as the book has them (Markdown with formulas and a remote badge; a notebook with
    a figure output), the book's footer and download button, built as HTML and as a single page (execution
    off: the figure is a stored output)."""
    import base64
    import io

    import matplotlib.pyplot as plt
    import nbformat

    (folder / "book").mkdir(parents=True)
    (folder / "_config.yml").write_text(TINY_CONFIG.format(ext=ROOT / "book" / "_ext",
                                                           footer=sources.footer(sources.source())))
    (folder / "_toc.yml").write_text("format: jb-book\nroot: book/intro\nchapters:\n  - file: book/page\n")
    (folder / "book" / "intro.md").write_text(TINY_INTRO)
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([0, 1], [0, 1])
    png = io.BytesIO()
    fig.savefig(png, format="png")
    plt.close(fig)
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                           "language": "python"}})
    nb.cells = [nbformat.v4.new_markdown_cell("# A page\n\nA formula $\\alpha_c \\propto \\sqrt{L}$."),
                nbformat.v4.new_code_cell("figure()", outputs=[nbformat.v4.new_output(
                    "display_data", data={"image/png": base64.b64encode(png.getvalue()).decode(),
                                          "text/plain": "<Figure>"})])]
    nbformat.write(nb, folder / "book" / "page.ipynb")
    jb = pathlib.Path(sys.executable).with_name("jupyter-book")
    for builder in ("html", "singlehtml"):
        run = subprocess.run([str(jb), "build", str(folder), "--builder", builder, "-W", "-q"], capture_output=True,
                             text=True, timeout=300)
        assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    return folder / "_build"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The artefacts of ``make release``, from a tiny book and one assignment, in a ``dist`` folder."""
    pytest.importorskip("jupyter_book", reason="the book extra builds the HTML")
    pytest.importorskip("otter", reason="the assignments extra builds the autograders")
    tmp = tmp_path_factory.mktemp("release")
    dist = tmp / "dist"
    release.clean(dist)
    book = _tiny_book(tmp / "book")
    release.release_notes(dist, V)
    wheel, sdist = release.python_packages(dist)[::-1]
    release.html_zip(book / "html", dist, V)
    assigned = release.assignments(tmp / "assignments", only=[ASSIGNMENT], run_tests=False)
    release.autograders(dist, V, assigned)
    release.solutions_zip(dist, V, assigned)
    release.notebooks_zip(dist, V, book / "html", {n: p["student_dir"] for n, p in assigned.items()}, wheel)
    check = None
    if release.release_pdf.chromium():
        single = book / "singlehtml"
        _, check = release.pdf(release.top_level_copy(release.landing_page(single / "index.html"), single), dist, V)
    release.sha256sums(dist)
    return {"dist": dist, "wheel": wheel, "sdist": sdist, "book": book, "assigned": assigned, "pdf": check,
            "tmp": tmp, "epoch": release.epoch()}


def test_artefacts_are_named_by_the_version_and_summed(built):
    dist, n = built["dist"], release.names(V)
    expected = {n["wheel"], n["sdist"], n["html"], n["notebooks"], n["notes"], n["sums"], n["solutions"],
                n["autograder"].format(name=ASSIGNMENT)} | ({n["pdf"]} if built["pdf"] else set())
    assert {p.name for p in dist.iterdir()} == expected
    sums = dict(reversed(line.split("  ", 1)) for line in (dist / "SHA256SUMS").read_text().splitlines())
    assert set(sums) == expected - {"SHA256SUMS"}
    for name, digest in sums.items():
        assert hashlib.sha256((dist / name).read_bytes()).hexdigest() == digest, name
    if shutil.which("sha256sum"):
        subprocess.run(["sha256sum", "--quiet", "-c", "SHA256SUMS"], cwd=dist, check=True)
    assert (dist / n["notes"]).read_text().startswith(f"## [{V}]")


def test_wheel_and_sdist_carry_the_library_and_its_records(built):
    with zipfile.ZipFile(built["wheel"]) as z:
        files = set(z.namelist())
        metadata = z.read(f"sigprop-{V}.dist-info/METADATA").decode()
    assert f"\nVersion: {V}\n" in metadata
    assert "sigprop/__init__.py" in files and "sigprop/py.typed" in files
    assert {f"sigprop/claims/records/{p.name}" for p in (ROOT / changes.RECORDS).glob("*.json")} <= files
    import tarfile

    with tarfile.open(built["sdist"]) as t:
        members = {m.name.split("/", 1)[1] for m in t.getmembers() if "/" in m.name}
    assert {"pyproject.toml", "lib/sigprop/__init__.py", "README.md", "LICENSE"} <= members


def test_html_archive_reads_offline_from_its_index(built, tmp_path):
    with zipfile.ZipFile(built["dist"] / release.names(V)["html"]) as z:
        files = {n: None for n in z.namelist()}
        assert all(n.startswith(f"sigprop-book-{V}/") for n in files)
        assert release.missing_targets(files, z.read) == []
        z.extractall(tmp_path)
    index = tmp_path / f"sigprop-book-{V}" / "index.html"
    assert "../_static/mathjax/tex-chtml.js" in (index.parent / "book" / "page.html").read_text()
    assert (index.parent / "_notebooks" / "reader" / "book" / "page.ipynb").is_file()     # the download button's
    assert f"sigprop {V} · " in release.landing_page(index).read_text()


def test_html_archive_refuses_a_stale_or_broken_site(built, tmp_path):
    site = tmp_path / "site"
    shutil.copytree(built["book"] / "html", site)
    with pytest.raises(RuntimeError, match="not built for version"):
        release.html_zip(site, tmp_path, "9.9.9")
    page = site / "book" / "page.html"
    page.write_text(page.read_text() + '<a href="gone.html">x</a>')
    with pytest.raises(RuntimeError, match="gone.html"):
        release.html_zip(site, tmp_path, V)


def test_download_button_saves_the_built_notebook(built):
    """The download menu's .ipynb link is the page's built notebook (reader's edition), and gets a download
    attribute (the file's name) in a browser; the MyST source is no longer offered."""
    html = (built["book"] / "html" / "book" / "page.html").read_text()
    assert 'href="../_notebooks/reader/book/page.ipynb"' in html and "btn-download-notebook-button" in html
    assert "_sources/book/page.ipynb" not in html and "btn-download-source-button" not in html
    if not release.release_pdf.chromium():
        pytest.skip(NO_CHROMIUM)
    with release.release_pdf.open_page(built["book"] / "html" / "book" / "page.html", timeout=120) as page:
        links = page.evaluate('[...document.querySelectorAll("a.btn-download-notebook-button")]'
                              '.map(a => [a.getAttribute("href"), a.getAttribute("download"), a.target])')
    assert links == [["../_notebooks/reader/book/page.ipynb", "page.ipynb", ""]]


def test_pdf_has_every_formula_typeset_and_every_figure(built):
    if built["pdf"] is None:
        pytest.skip(NO_CHROMIUM)
    check = built["pdf"]
    assert check["mathjax"] == "done" and check["formulas"] == 3, check
    assert check["images"] == 1 and check["remote_images"] == 1, check       # the figure; the badge's alt text
    pdf = built["dist"] / release.names(V)["pdf"]
    assert pdf.read_bytes().startswith(b"%PDF")
    if shutil.which("pdftotext"):
        text = subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
        assert "A tiny book" in text and "Open in Colab" in text and "\\frac" not in text


def test_pdf_refuses_a_formula_left_as_tex(tmp_path):
    if not release.release_pdf.chromium():
        pytest.skip(NO_CHROMIUM)
    page = tmp_path / "raw.html"
    page.write_text('<html><body><span class="math">\\(\\frac{a}{b}\\)</span><img src="missing.png"></body></html>')
    with pytest.raises(release.release_pdf.PrintError, match="formula left as TeX.*|broken image"):
        release.release_pdf.print_pdf(page, tmp_path / "raw.pdf", timeout=120)


def test_notebooks_archive(built, tmp_path):
    """Both editions of every page, the student assignment, the wheel, requirements and a README that installs
    what the assignments need (otter-grader) and warns about PyTorch's CUDA build; nothing solved."""
    with zipfile.ZipFile(built["dist"] / release.names(V)["notebooks"]) as z:
        z.extractall(tmp_path)
    top = tmp_path / f"sigprop-notebooks-{V}"
    for edition in ("reader", "student"):
        assert {p.relative_to(top / edition).as_posix() for p in (top / edition).rglob("*.ipynb")} == \
            {"book/intro.ipynb", "book/page.ipynb"}
    for path in top.rglob("*.ipynb"):
        cells = json.loads(path.read_text())["cells"]
        assert not any(c.get("outputs") or c.get("execution_count") for c in cells if c["cell_type"] == "code"), path
    student = top / "assignments" / ASSIGNMENT
    assert (student / f"{ASSIGNMENT}.ipynb").is_file() and list((student / "tests").glob("q*.py"))
    ma = load_script("sigprop_make_assignments_t", ROOT / "book" / "assignments" / "make_assignments.py")
    assert ma.find_leaks(ma.HERE / f"{ASSIGNMENT}.ipynb", top) == []
    assert (top / release.names(V)["wheel"]).is_file()
    requirements = (top / "requirements.txt").read_text()
    assert sources.source()["pip"] in requirements and ma.OTTER_REQUIREMENT in requirements.splitlines()
    assert f"--extra-index-url {sources.TORCH_CPU_INDEX}" in requirements.splitlines()
    readme = (top / "README.md").read_text()
    assert f'pip install "{release.names(V)["wheel"]}[notebooks]" {ma.OTTER_REQUIREMENT} jupyterlab' in readme
    assert f"pip install torch --index-url {sources.TORCH_CPU_INDEX}" in readme and "5 GB" in readme
    assert (top / "runtime.txt").read_text().startswith("python-3.")


def test_solutions_archive_holds_each_assignment_solved(built, tmp_path):
    with zipfile.ZipFile(built["dist"] / release.names(V)["solutions"]) as z:
        assert z.namelist() == [f"sigprop-solutions-{V}/{ASSIGNMENT}/{ASSIGNMENT}.ipynb"]
        nb = json.loads(z.read(z.namelist()[0]))
    assert nb["metadata"]["otter"]["assignment_name"], "otter grades a notebook that names its assignment"


def test_zips_are_reproducible(built, tmp_path, monkeypatch):
    """Built again (the wheel and the sdist, otter assign, the site zipped), every file has the same SHA256."""
    monkeypatch.setenv("SOURCE_DATE_EPOCH", str(built["epoch"]))   # a commit meanwhile moves the last commit's time
    again = tmp_path / "dist"
    again.mkdir()
    release.python_packages(again)
    assigned = release.assignments(tmp_path / "assignments", only=[ASSIGNMENT], run_tests=False)
    release.autograders(again, V, assigned)
    release.solutions_zip(again, V, assigned)
    release.notebooks_zip(again, V, built["book"] / "html", {n: p["student_dir"] for n, p in assigned.items()},
                          built["wheel"])
    release.html_zip(built["book"] / "html", again, V)
    digest = lambda p: hashlib.sha256(p.read_bytes()).hexdigest()  # noqa: E731
    names = sorted(p.name for p in again.iterdir())
    assert len(names) == 6
    assert {n: digest(again / n) for n in names} == {n: digest(built["dist"] / n) for n in names}
    otter_zip = assigned[ASSIGNMENT]["autograder"]
    with zipfile.ZipFile(otter_zip) as z, zipfile.ZipFile(again / release.names(V)["autograder"].format(
            name=ASSIGNMENT)) as ours:
        assert {i.filename: z.read(i) for i in z.infolist() if not i.is_dir()} == \
            {i.filename: ours.read(i) for i in ours.infolist()}                 # the same files, rewritten
        assert [i.filename for i in ours.infolist()] == sorted(i.filename for i in ours.infolist())
        assert len({i.date_time for i in ours.infolist()}) == 1


@pytest.mark.parametrize("args, message", [
    (["--html", "{tmp}/missing"], "no built site there"),
    (["--dist", "{tmp}/a-file"], "a file, not a folder"),
    (["--dist", "{tmp}/other", "--no-pdf"], "holds files that are not a release's"),
    (["--notebooks-tree", "{tmp}/a-file"], "not an empty folder")])
def test_release_refuses_bad_arguments_before_building_anything(args, message, tmp_path, capsys, built):
    (tmp_path / "a-file").write_text("x")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("x")
    html = ["--html", str(built["book"] / "html")] if "--html" not in args else []
    egg = ROOT / "lib" / "sigprop.egg-info"
    before = egg.stat().st_mtime_ns if egg.exists() else None
    assert release.main([a.format(tmp=tmp_path) for a in args] + html) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert (egg.stat().st_mtime_ns if egg.exists() else None) == before       # no wheel was built
    assert not (tmp_path / "missing").exists() and (tmp_path / "other" / "notes.txt").is_file()


# ----------------------------------------------------------------------------- a fresh install

def _fresh_env(tmp: pathlib.Path, name: str = "venv") -> pathlib.Path:
    """A new virtual environment seeing this environment's packages but not sigprop (tests/test_colab.py).
    Without its own pip and setuptools (``--without-pip``): an old setuptools seeded by ``venv`` would hide
    this environment's, which torch requires; ``python -m pip`` is this environment's pip."""
    env_dir = tmp / name
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True, timeout=300)
    py = env_dir / "bin" / "python"
    purelib = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    (pathlib.Path(purelib) / "preinstalled.pth").write_text(str(colab._preinstalled(tmp / f"{name}-packages")) + "\n")
    return py


TRY = "Install a release, open a student notebook, grade it blank and solved"
#: lines of the page's block the test does differently, and why (everything else runs as written, with pip offline)
STAND_INS = {
    "python3 -m venv ": "a fresh environment seeing this one's packages but not sigprop (no network: they stand in "
                        "for PyPI), activated as `. course/bin/activate` does",
    "pip install torch ": "this environment's PyTorch (CPU) stands in: no network",
    "jupyter lab ": "the notebook is run, top to bottom, in the environment's kernel (what a student does first)",
}


def page_steps() -> list[str]:
    """The lines of the instructors' page's "Trying a release" block (book/instructors.md)."""
    text = (ROOT / "book" / "instructors.md").read_text()
    m = re.search(r"```\{code-block\} bash\n:caption: " + re.escape(TRY) + r"\n\n(.*?)\n```", text, re.S)
    assert m, f"book/instructors.md has no code block captioned {TRY!r}"
    return [line for line in m.group(1).splitlines() if line.strip()]


def _shims(bin_dir: pathlib.Path) -> None:
    """``pip``, ``otter`` and ``jupyter`` of the environment: pip finds otter-grader and JupyterLab already there
    (this environment's), so it writes no scripts for them."""
    for name, module in (("pip", "pip"), ("otter", "otter"), ("jupyter", "jupyter")):
        (bin_dir / name).write_text(f'#!/bin/sh\nexec "$(dirname "$0")/python" -m {module} "$@"\n')
        (bin_dir / name).chmod(0o755)


@pytest.fixture(scope="module")
def course(built, tmp_path_factory):
    """book/instructors.md's "Trying a release", line by line, in a folder holding the release's files alone."""
    folder = tmp_path_factory.mktemp("downloads")
    for path in built["dist"].iterdir():
        shutil.copy2(path, folder)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "PIP_", "PYTEST_"))}
    env.update(SIGPROP_PROFILE="quick", MPLBACKEND="Agg", PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1")
    done = []
    for line in page_steps():
        line = line.split("  #")[0].strip()
        if line.startswith("python3 -m venv "):
            name = line.split()[3]
            py = _fresh_env(folder, name)
            _shims(py.parent)
            env.update(PATH=f"{py.parent}:{env['PATH']}", VIRTUAL_ENV=str(py.parent.parent))
        elif line.startswith("jupyter lab "):
            notebook = folder / line.split()[-1]
            run = subprocess.run([str(py), "-m", "nbconvert", "--to", "notebook", "--execute", "--output",
                                  str(folder / "opened.ipynb"), "--ExecutePreprocessor.timeout=600", str(notebook)],
                                 capture_output=True, text=True, env=env, cwd=folder, timeout=900)
            assert run.returncode == 0, f"{line}\n{run.stderr[-3000:]}"
        elif not line.startswith("pip install torch "):
            run = subprocess.run(["bash", "-c", line], capture_output=True, text=True, env=env, cwd=folder,
                                 timeout=900)
            assert run.returncode == 0, f"{line}\n{(run.stdout + run.stderr)[-3000:]}"
        done.append(line)
    return {"folder": folder, "py": py, "env": env, "done": done}


def _score(path: pathlib.Path) -> tuple[float, float]:
    tests = json.loads(path.read_text())["tests"]
    return sum(t.get("score", 0) for t in tests), sum(t.get("max_score", 0) for t in tests)


def test_the_instructors_page_step_by_step(course):
    """Every step of the page ran from the release's files: the student notebook opened and ran, its blank
    version scored zero and the solved one full marks, as the page says."""
    assert len(course["done"]) == len(page_steps()) >= 8
    assert {k for k in STAND_INS if any(line.startswith(k) for line in course["done"])} == set(STAND_INS)
    blank, solved = (_score(course["folder"] / "results" / kind / "results.json") for kind in ("blank", "solved"))
    assert solved[1] > 0 and solved[0] == solved[1] and blank == (0, solved[1]), (blank, solved)
    page = (ROOT / "book" / "instructors.md").read_text()
    assert f"(0 of {solved[1]:g} points)" in page and f"({solved[1]:g} of {solved[1]:g})" in page
    opened = json.loads((course["folder"] / "opened.ipynb").read_text())
    errors = [o for c in opened["cells"] for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, errors[:1]


def test_a_chapter_page_runs_from_the_wheel(course, tmp_path):
    """In the course's environment, a chapter page runs on the installed wheel (its packaged records), not the
    checkout."""
    nb = json.loads((ROOT / PAGE).read_text())
    nb["cells"].append(colab._cell(colab.WHERE))
    page = tmp_path / "page.ipynb"
    page.write_text(json.dumps(nb))
    run = subprocess.run([str(course["py"]), "-m", "nbconvert", "--to", "notebook", "--execute", "--output",
                          "executed.ipynb", "--ExecutePreprocessor.timeout=300", str(page)], capture_output=True,
                         text=True, env=course["env"], cwd=tmp_path, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    printed = "".join("".join(o.get("text", "")) for c in json.loads((tmp_path / "executed.ipynb").read_text())["cells"]
                      for o in c.get("outputs", []))
    assert f"SIGPROP_FILE {course['folder'] / 'course'}" in printed, printed[-500:]
