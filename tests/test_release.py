"""A release (``make release``, book/release.py): the version in one place, the artefacts, and a fresh install.

* The version is written once (``sigprop.__version__``): pyproject reads it, and every copy -- the tag, the
  install cells, ``_config.yml``'s footer and repository ref, ``CITATION.cff`` -- is generated from it
  (book/sources.py) and agrees; ``CHANGELOG.md`` has a section for it, and for every tag ``v*`` the tag's
  library says that version and the CHANGELOG's ledger counts are the tag's record.
* The artefacts are built as ``make release`` builds them, on a reduced input to stay fast: a two-page book
  (HTML and single-page builds, ~10 s) instead of the whole site, one assignment, the real notebooks. The
  wheel is then installed into a fresh virtual environment with ``pip --no-index`` (this environment's
  packages stand in for an instructor's, as in tests/test_colab.py, without sigprop), where a chapter page
  from the notebooks zip runs and the otter autograder grades the zip's student notebook blank (zero) and
  filled in with the solutions (full marks). About a minute and a half on two busy cores.
* The PDF needs Chromium (``apt-get install chromium``): without it those tests skip, saying so.
"""
from __future__ import annotations

import hashlib
import importlib.util
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

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


release = _module("sigprop_book_release", ROOT / "book" / "release.py")
changes = _module("sigprop_ledger_changes", ROOT / "book" / "ledger_changes.py")
colab = _module("sigprop_test_colab", ROOT / "tests" / "test_colab.py")   # its fresh-environment helpers
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
    assert "btn-download-source-button" in text and 'setAttribute("download"' in text
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
    release.notebooks_zip(dist, V, {n: p["student_dir"] for n, p in assigned.items()})
    check = None
    if release.release_pdf.chromium():
        single = book / "singlehtml"
        _, check = release.pdf(release.top_level_copy(release.landing_page(single / "index.html"), single), dist, V)
    release.sha256sums(dist)
    return {"dist": dist, "wheel": wheel, "sdist": sdist, "book": book, "assigned": assigned, "pdf": check,
            "tmp": tmp}


def test_artefacts_are_named_by_the_version_and_summed(built):
    dist, n = built["dist"], release.names(V)
    expected = {n["wheel"], n["sdist"], n["html"], n["notebooks"], n["notes"], n["sums"],
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
    assert (index.parent / "_sources" / "book" / "page.ipynb").is_file()
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


def test_download_button_saves_the_notebook(built):
    """The theme's .ipynb link gets a download attribute (the file's name) in a browser."""
    html = (built["book"] / "html" / "book" / "page.html").read_text()
    assert 'href="../_sources/book/page.ipynb"' in html and "btn-download-source-button" in html
    if not release.release_pdf.chromium():
        pytest.skip(NO_CHROMIUM)
    with release.release_pdf.open_page(built["book"] / "html" / "book" / "page.html", timeout=120) as page:
        links = page.evaluate('[...document.querySelectorAll("a.btn-download-source-button")]'
                              '.map(a => [a.getAttribute("href"), a.getAttribute("download"), a.target])')
    assert links == [["../_sources/book/page.ipynb", "page.ipynb", ""]]


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
    with zipfile.ZipFile(built["dist"] / release.names(V)["notebooks"]) as z:
        z.extractall(tmp_path)
    top = tmp_path / f"sigprop-notebooks-{V}"
    pages = {p.relative_to(top).as_posix() for p in top.rglob("*.ipynb") if "assignments" not in p.parts}
    assert pages == {p.relative_to(ROOT).as_posix() for p in sources.notebooks()}
    for path in top.rglob("*.ipynb"):
        cells = json.loads(path.read_text())["cells"]
        assert not any(c.get("outputs") or c.get("execution_count") for c in cells if c["cell_type"] == "code"), path
    student = top / "assignments" / ASSIGNMENT
    assert (student / f"{ASSIGNMENT}.ipynb").is_file() and list((student / "tests").glob("q*.py"))
    ma = _module("sigprop_make_assignments_t", ROOT / "book" / "assignments" / "make_assignments.py")
    assert ma.find_leaks(ma.HERE / f"{ASSIGNMENT}.ipynb", top) == []
    assert (top / "requirements.txt").read_text().strip() == sources.source()["pip"]


# ----------------------------------------------------------------------------- a fresh install

def _fresh_env(tmp: pathlib.Path) -> pathlib.Path:
    """A new virtual environment seeing this environment's packages but not sigprop (tests/test_colab.py).
    Without its own pip and setuptools (``--without-pip``): an old setuptools seeded by ``venv`` would hide
    this environment's, which torch requires; ``python -m pip`` is this environment's pip."""
    env_dir = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True, timeout=300)
    py = env_dir / "bin" / "python"
    purelib = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    (pathlib.Path(purelib) / "preinstalled.pth").write_text(str(colab._preinstalled(tmp / "preinstalled")) + "\n")
    return py


def _fill_answers(student: dict, solutions: dict) -> dict:
    """The student notebook with each answer cell replaced by the solution cell in the same place."""
    answers = [c for c in solutions["cells"] if "otter_assign_solution_cell" in c["metadata"].get("tags", [])]
    cells = [c for c in student["cells"] if "otter_answer_cell" in c["metadata"].get("tags", [])]
    assert len(answers) == len(cells) > 0
    for cell, answer in zip(cells, answers):
        cell["source"] = answer["source"]
    return student


GRADE = """import json, sys
from otter.api import grade_submission
r = grade_submission(sys.argv[1], sys.argv[2], quiet=True, debug=True)
print("GRADED", json.dumps({"total": r.total, "possible": r.possible}))
"""


def test_the_wheel_installs_offline_and_runs_a_page_and_the_autograder(built, tmp_path):
    py = _fresh_env(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "PIP_"))}
    env.update(SIGPROP_PROFILE="quick", MPLBACKEND="Agg", PATH=f"{py.parent}:{env['PATH']}",
               PIP_CONFIG_FILE=os.devnull)
    install = subprocess.run([str(py), "-m", "pip", "install", "--no-index", "-q", str(built["wheel"])],
                             capture_output=True, text=True, env=env, timeout=300)
    assert install.returncode == 0, install.stdout + install.stderr
    with zipfile.ZipFile(built["dist"] / release.names(V)["notebooks"]) as z:
        z.extractall(tmp_path / "nb")
    top = tmp_path / "nb" / f"sigprop-notebooks-{V}"

    nb = json.loads((top / PAGE).read_text())
    nb["cells"].append(colab._cell(colab.WHERE))
    page = tmp_path / "page.ipynb"
    page.write_text(json.dumps(nb))
    run = subprocess.run([str(py), "-m", "nbconvert", "--to", "notebook", "--execute", "--output", "executed.ipynb",
                          "--ExecutePreprocessor.timeout=300", str(page)], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    printed = "".join("".join(o.get("text", "")) for c in json.loads((tmp_path / "executed.ipynb").read_text())["cells"]
                      for o in c.get("outputs", []))
    assert f"SIGPROP_FILE {tmp_path / 'venv'}" in printed, printed[-500:]      # the wheel's, not the checkout's

    student = top / "assignments" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    solved = tmp_path / "solved.ipynb"
    solved.write_text(json.dumps(_fill_answers(json.loads(student.read_text()),
                                               json.loads(built["assigned"][ASSIGNMENT]["solutions"].read_text()))))
    blank = tmp_path / "blank.ipynb"
    shutil.copyfile(student, blank)
    autograder = built["dist"] / release.names(V)["autograder"].format(name=ASSIGNMENT)
    scores = {}
    for name, submission in (("solved", solved), ("blank", blank)):
        graded = subprocess.run([str(py), "-c", GRADE, str(submission), str(autograder)], capture_output=True,
                                text=True, env=env, cwd=tmp_path, timeout=600)
        assert graded.returncode == 0, graded.stderr[-3000:]
        scores[name] = json.loads(graded.stdout.split("GRADED ")[-1])
    assert scores["solved"]["possible"] > 0 and scores["solved"]["total"] == scores["solved"]["possible"], scores
    assert scores["blank"]["total"] == 0 and scores["blank"]["possible"] == scores["solved"]["possible"], scores
