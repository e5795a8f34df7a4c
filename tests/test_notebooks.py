"""The book's pages as Jupyter-native notebooks (book/notebooks.py, book/_ext/sigprop_notebooks.py).

* The converter alone, with a fake build: fences and directive options, roles beside inline code, MyST-only lines,
  definition lists, quoted boxes with each formula on one line, solutions folded or removed, and an error for
  anything it does not know; the residue scan finds each kind of MyST and nothing in code.
* A small book with every kind of MyST the pages use (tests/notebook_book.py), built with the book's extensions
  (~15 s): both editions written, nothing MyST left, each role as the HTML resolves it (glued numbers formatted as
  myst-nb formats them, figure and lemma numbers, author-year citations with their entries, links into the
  published HTML), code cells the page's, hidden cells collapsed, the header's buttons pointed at the published
  notebooks; executed (~10 s), the set-up cell shows each glued number under the cell that computes it.
* The book's own build (``make book``; skipped without it): every page in both editions, no MyST left anywhere,
  every solution folded in the reader's edition and absent from the student's, code cells the page's.
"""
from __future__ import annotations

import json
import pathlib
import re
import sys

import pytest

from conftest import load_script

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(pathlib.Path(__file__).parent))

import notebook_book  # noqa: E402


nbs = load_script("sigprop_book_notebooks_t", ROOT / "book" / "notebooks.py")
sources = load_script("sigprop_book_sources_t", ROOT / "book" / "sources.py")
BUILT = ROOT / "_build" / "html" / "_notebooks"


INSTALL = 'import sys\nif "google.colab" in sys.modules:\n    install()'
SETUP = 'import sys\nif "google.colab" in sys.modules:\n    setup()'


def _text(cell) -> str:
    return "".join(cell["source"])


class Fake:
    """A build that knows one page: roles become ``<name:content>``, boxes are numbered in order."""

    def __init__(self):
        self.cited = []

    def role(self, name, content):
        if name == "nope":
            raise nbs.Unresolved("no such role")
        if name == "cite":
            self.cited.append(f"entry {content}")
        return f"<{name}:{content}>"

    def heading(self, kind, ordinal):
        return {"solution": f"Solution to Exercise {ordinal}", "proof": "Proof"}.get(kind, f"{kind.title()} {ordinal}")

    def number(self, name):
        return "Figure 7"

    def substitutions(self):
        return {"book": "the {ref}`book`"}

    def image(self, path):
        return f"https://book/_images/{path}"

    def include(self, path):
        return f"Included {{ref}}`{path}`."

    def bibliography(self):
        return ["entry A", "entry B"]

    def references(self):
        return list(self.cited)

    def link(self, target):
        return f"https://book/{target}"


# ----------------------------------------------------------------------------- the converter alone

def test_blocks_split_fences_directives_and_options():
    text = ("a\n\n````{prf:lemma} Title $x$\n:label: l1\n:nonumber:\n\nbody\n```python\ncode\n```\n````\n\n"
            "```python\nx\n```")
    found = nbs.blocks(text)
    assert [b[0] for b in found] == ["text", "directive", "text", "fence"]
    _, name, argument, options, body = found[1]
    assert (name, argument, options) == ("prf:lemma", "Title $x$", {"label": "l1", "nonumber": ""})
    assert body == "body\n```python\ncode\n```"          # a fence of three backticks inside one of four
    with pytest.raises(nbs.Unresolved, match=":::"):
        nbs.blocks(":::\nx\n:::")


def test_roles_are_resolved_and_inline_code_is_not():
    out = nbs.inline("See {numref}`fig-a` and\n{cite}`noci2022`; code `{numref}` and ``{ref}`x` ``.", Fake())
    assert out == "See <numref:fig-a> and\n<cite:noci2022>; code `{numref}` and ``{ref}`x` ``."
    assert nbs.inline("{doc}`the primer\n</book/primer>`", Fake()) == "<doc:the primer </book/primer>>"
    with pytest.raises(nbs.Unresolved):
        nbs.inline("{nope}`x`", Fake())


def test_myst_only_lines_definition_lists_and_local_links():
    text = ("(my-label)=\n## Head\n% a comment\n+++\nterm one\n: its meaning\n  continued\n\n"
            "[p](01_x.ipynb) [w](https://w.org)")
    out = nbs.inline(text, Fake())
    assert out == ("## Head\n- **term one**: its meaning\n  continued\n\n[p](https://book/01_x.ipynb) "
                   "[w](https://w.org)")


def test_quoted_boxes_put_each_formula_on_one_line():
    body = ("For all $x\n+ y$,\n\n$$\na\n= b\n$$\n\n\\begin{align}\nc &= d\\\\\n"   # a newline, not \\ne
            "e &= f\n\\end{align}")
    assert nbs.quote(body) == "> For all $x + y$,\n>\n> $$ a = b $$\n>\n> \\begin{align} c &= d\\\\ e &= f \\end{align}"


PAGE = ("```{exercise} Square\n:label: ex-a\n\nCompute $3^2$.\n```\n\n```{solution} ex-a\n:class: dropdown\n\n"
        "It is $9$.\n```\n\n```{prf:lemma} A bound\n:label: lem\n\nFor all $x$.\n```\n\n```{prf:proof}\nObvious.\n```")


@pytest.mark.parametrize("edition", nbs.EDITIONS)
def test_boxes_are_quoted_and_solutions_folded_or_removed(edition):
    out = nbs._Page(Fake(), edition).markdown(PAGE)
    assert "> **Exercise 1** (Square)\n>\n> Compute $3^2$." in out
    assert "> **Lemma 1** (A bound)\n>\n> For all $x$." in out and "> **Proof**\n>\n> Obvious." in out
    folded = "<details>\n<summary><b>Solution to Exercise 1 (Square)</b></summary>\n\nIt is $9$.\n\n</details>"
    assert (folded in out) == (edition == "reader") and ("It is $9$" in out) == (edition == "reader")
    assert nbs.residue(out) == []


def test_include_bibliography_code_block_and_unknown_directives():
    page = nbs._Page(Fake(), "reader")
    assert page.markdown("```{include} notes/a.md\n```") == "Included <ref:notes/a.md>."
    assert page.markdown("```{bibliography}\n```") == "- entry A\n- entry B"
    assert page.markdown("```{code-block} python\n:caption: Run {ref}`x`\n\nprint(1)\n```") == \
        "*Run <ref:x>*\n\n```python\nprint(1)\n```"
    assert page.markdown("```{table} Two {ref}`x`\n:name: tbl-a\n\n| a |\n| --- |\n| {ref}`y` |\n```") == \
        "\n**Figure 7.** Two <ref:x>\n\n| a |\n| --- |\n| <ref:y> |\n"
    assert page.markdown("```{admonition} Live {ref}`k`\n:class: note\nRuns $x$.\n```") == \
        "\n> **Live <ref:k>**\n>\n> Runs $x$.\n"
    assert "<details>\n<summary><b>Warning</b></summary>" in page.markdown("```{warning}\n:class: dropdown\nx\n```")
    assert page.markdown("```{figure} img/a.png\n:name: fig-a\n:alt: a\n  picture\n\nA {ref}`c`.\n```") == \
        "\n![a picture](https://book/_images/img/a.png)\n\n**Figure 7.** A <ref:c>.\n"
    with pytest.raises(nbs.Unresolved, match="margin"):
        page.markdown("```{margin}\nx\n```")
    with pytest.raises(ValueError, match="edition"):
        nbs._Page(Fake(), "teacher")


def test_residue_finds_every_kind_of_myst_and_nothing_in_code():
    for text, kind in [("a {numref}`x` b", "role"), ("```{note}\nx\n```", "directive"),
                       (":::{note}\nx\n:::", "directive"), ("::: x", "colon fence"), ("(lab-el)=\n# H", "target"),
                       ("> (lab)=", "target"),
                       ("{{ name }}", "substitution"), ("> ```{prf:proof}", "directive")]:
        assert [f.split(":")[0] for f in nbs.residue(text)][:1] == [kind], text
    assert nbs.residue("`{numref}`x``\n```python\n{ref}`y`\n(a)=\n```\n$\\mathrm{tr}(A)$ {x}") == []


def test_a_notebook_page_keeps_its_code_and_gets_captions_and_references():
    ctx = Fake()
    page = {"metadata": {"kernelspec": {"name": "python3"}}, "cells": [
        {"cell_type": "code", "id": "i", "metadata": {"tags": ["remove-cell"]}, "source": INSTALL, "outputs": []},
        {"cell_type": "markdown", "id": "m", "metadata": {}, "source": "# T\n\n{cite}`k` says $x$."},
        {"cell_type": "code", "id": "c", "metadata": {"tags": ["remove-input"], "mystnb": {"figure": {
            "name": "fig-a", "caption": "A {ref}`b`."}}}, "source": ["plot()"], "outputs": []},
        {"cell_type": "code", "id": "h", "metadata": {"tags": ["remove-cell"]}, "source": "assert ok", "outputs": []}]}
    nb = nbs.convert(page, ctx, "student", SETUP, {"page": "https://book/p.html"})
    assert [c["cell_type"] for c in nb["cells"]] == ["code", "markdown", "code", "markdown", "code", "markdown"]
    assert _text(nb["cells"][0]) == SETUP and nbs.code_cells(nb) == nbs.code_cells(page) == ["plot()", "assert ok"]
    assert nb["cells"][0]["metadata"] == {"jupyter": {"source_hidden": True}, "cellView": "form"}
    bare = nbs.convert({"cells": page["cells"][1:], "metadata": {}}, Fake(), "reader", SETUP, {})
    assert _text(bare["cells"][0]) == SETUP and nbs.code_cells(bare) == ["plot()", "assert ok"]   # set-up added
    assert _text(nb["cells"][3]) == "**Figure 7.** A <ref:b>."
    assert _text(nb["cells"][5]) == "**References**\n\n- entry k"
    for cell in (nb["cells"][2], nb["cells"][4]):
        assert cell["metadata"]["jupyter"]["source_hidden"] and cell["metadata"]["cellView"] == "form"
    assert nb["metadata"]["sigprop"] == {"page": "https://book/p.html", "edition": "student"}
    assert page["cells"][2]["metadata"] == {"tags": ["remove-input"], "mystnb": {"figure": {
        "name": "fig-a", "caption": "A {ref}`b`."}}}                                # the page is not changed


def test_front_matter_is_dropped_and_its_substitutions_resolved():
    page = "---\nmyst:\n  substitutions:\n    hours: \"26 h\"\n---\n# A\n\n{{ hours }} of {{book}}."
    nb = nbs.convert(page, Fake(), "reader", SETUP, {})
    assert [_text(c) for c in nb["cells"]][1:] == ["# A\n\n26 h of the <ref:book>."]
    with pytest.raises(nbs.Unresolved, match="nope"):
        nbs.convert("{{ nope }}", Fake(), "reader", SETUP, {})


def test_a_markdown_page_is_cut_into_cells_at_its_headings():
    nb = nbs.convert("# A\n\ntext\n\n```bash\n# not a heading\n```\n\n## B\n\nmore", Fake(), "reader", SETUP, {})
    assert [_text(c) for c in nb["cells"]] == [SETUP, "# A\n\ntext\n\n```bash\n# not a heading\n```", "## B\n\nmore"]
    assert nbs.code_cells(nb) == []


# ----------------------------------------------------------------------------- a small book, built

@pytest.fixture(scope="module")
def small(tmp_path_factory):
    pytest.importorskip("jupyter_book", reason="the book extra builds the HTML")
    html = notebook_book.build(tmp_path_factory.mktemp("notebook-book"))
    return {ed: {p.stem: json.loads(p.read_text()) for p in (html / "_notebooks" / ed).glob("*.ipynb")}
            for ed in nbs.EDITIONS} | {"html": html}


def test_small_book_every_page_in_both_editions_without_myst(small):
    nbformat = pytest.importorskip("nbformat")
    for edition in nbs.EDITIONS:
        assert set(small[edition]) == {"page", "notes"}
        for name, nb in small[edition].items():
            nbformat.validate(nbformat.reads(json.dumps(nb), as_version=4))
            assert nbs.notebook_residue(nb) == [], (edition, name)
            src = sources.source()
            assert _text(nb["cells"][0]) == sources.setup_cell(src, edition, f"{src['pages']}{name}.html")


def test_small_book_roles_read_as_the_html_shows_them(small):
    page = "\n".join(_text(c) for c in small["reader"]["page"]["cells"] if c["cell_type"] == "markdown")
    base = sources.source()["pages"]
    assert "The gap is 0.12 ± 0.01 and, rounded, 0.12;" in page                  # glued, formatted as myst-nb does
    assert f"[Fig. 1]({base}page.html#fig-tb) shows it" in page
    assert re.search(r"\\\[\[Noci and Anagnostidis, 2022\]\(" + re.escape(base) + r"notes\.html#id\d+\)\\\]", page)
    assert f"[A section]({base}page.html#tb-section)" in page
    assert "> **Lemma 1** (A bound on $x$)\n>\n> For all $x$,\n>\n> $$ x^2 \\ge 0 . $$" in page
    assert f"[Lemma 1]({base}page.html#tb-lemma) holds" in page
    assert "the ledger says " + __import__("sigprop").claims.quote(notebook_book.LEDGER_ID) in page
    assert "[`test_tb`](https://github.com/sigprop/sigprop/blob/v0.0.0/tests/test_tb.py#L1)" in page
    assert f"the other page is [Notes]({base}notes.html), or [the notes]({base}notes.html)." in page
    assert "**Fig. 1.** The gap, $x$ (0.12 ± 0.01)." in page
    assert "**References**\n\n- Lorenzo Noci and Sotiris Anagnostidis\\. Signal propagation" in page
    assert "<summary><b>Solution to Exercise 1 (Square a number)</b></summary>" in page
    student = "\n".join(_text(c) for c in small["student"]["page"]["cells"])
    assert "> **Exercise 1** (Square a number)" in student and "It is $9$" not in student and "<details>" not in student
    notes = "\n".join(_text(c) for c in small["reader"]["notes"]["cells"])
    assert f"[the page]({base}page.html)" in notes and f"[its section]({base}notes.html#tb-notes-target)" in notes
    assert "- **Gibbs measure**: weights" in notes and "*Print a number*\n\n```python\nprint(1)\n```" in notes
    assert "An included line citing Noci and Anagnostidis" in notes
    assert "**Table 1.** Two numbers.\n\n| a | b |" in notes
    assert f"| $1$ | [Fig. 1]({base}page.html#fig-tb) |" in notes
    assert "> **Interactive: needs a live kernel**\n>\n> The sliders run in Jupyter." in notes
    assert re.search(r"!\[a white pixel\]\(" + re.escape(base) + r"_images/pic[\w-]*\.png\)\n\n\*\*Fig\. 2\.\*\* "
                     r"A picture, \[Table 1\]", notes), notes


def test_small_book_code_cells_are_the_pages_and_hidden_cells_collapsed(small):
    page = json.loads((small["html"].parents[1] / "page.ipynb").read_text())
    for edition in nbs.EDITIONS:
        nb = small[edition]["page"]
        assert nbs.code_cells(nb) == nbs.code_cells(page)
        check = next(c for c in nb["cells"] if _text(c).startswith("assert"))
        assert check["metadata"]["jupyter"] == {"source_hidden": True}


def test_small_book_buttons_open_the_published_notebooks(small):
    html = (small["html"] / "page.html").read_text()
    links = sources.published(sources.source(), "reader/page.ipynb")
    assert f'href="{links["colab"]}"' in html and f'href="{links["binder"]}"' in html.replace("&amp;", "&")
    assert 'href="_notebooks/reader/page.ipynb"' in html and 'href="_notebooks/student/page.ipynb"' in html
    assert "_sources/page.ipynb" not in html                     # the MyST source is no longer served
    notes = (small["html"] / "notes.html").read_text()
    assert sources.published(sources.source(), "reader/notes.ipynb")["colab"] in notes   # a Markdown page too
    assert 'href="_notebooks/reader/notes.ipynb"' in notes and "_notebooks/student/notes.ipynb" not in notes


def test_small_book_run_shows_each_glued_number_under_its_cell(small, tmp_path):
    nbclient = pytest.importorskip("nbclient")
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.reads(json.dumps(small["reader"]["page"]), as_version=4)
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
                            ).execute()
    glue_cell = next(c for c in nb.cells if "glue('tb-gap'" in c.source)
    shown = [o["data"]["text/plain"] for o in glue_cell.outputs if o.get("output_type") == "display_data"]
    assert shown == ["tb-gap: 0.12 ± 0.01", "tb-x: 0.123456"]


# ----------------------------------------------------------------------------- the book's build

def _built():
    if not BUILT.is_dir():
        pytest.skip("no built book (make book): its notebooks are not checked")
    return {ed: sorted((BUILT / ed).rglob("*.ipynb")) for ed in nbs.EDITIONS}


def test_every_page_is_built_in_both_editions():
    built = _built()
    pages = {p.relative_to(ROOT).with_suffix("").as_posix() for p in sources.notebooks()}
    for edition, paths in built.items():
        names = {p.relative_to(BUILT / edition).with_suffix("").as_posix() for p in paths}
        assert pages <= names, f"{edition}: pages without a notebook: {sorted(pages - names)[:5]}"
        assert "book/intro" in names and "book/instructors" in names        # Markdown pages too


def test_no_myst_left_in_any_built_notebook():
    nbformat = pytest.importorskip("nbformat")
    bad = {str(p.relative_to(BUILT)): found[:3] for paths in _built().values() for p in paths
           if (found := nbs.notebook_residue(json.loads(p.read_text())))}
    assert not bad, f"MyST left in {len(bad)} notebooks: {bad}"
    for paths in _built().values():
        for path in paths:
            nbformat.validate(nbformat.read(str(path), as_version=4))


def test_built_notebooks_fold_or_drop_every_solution_and_keep_the_code():
    for path in _built()["reader"]:
        reader = json.loads(path.read_text())
        student = json.loads((BUILT / "student" / path.relative_to(BUILT / "reader")).read_text())
        source = ROOT / reader["metadata"]["sigprop"]["source"]
        text = source.read_text()
        solutions = text.count("{solution}")
        assert "".join(map(_text, reader["cells"])).count("<details>") == solutions, path
        assert "<details>" not in "".join(map(_text, student["cells"])), path
        if source.suffix == ".ipynb":
            page = json.loads(text)
            assert nbs.code_cells(reader) == nbs.code_cells(student) == nbs.code_cells(page), path
        prose = "".join(_text(c) for c in reader["cells"] if c["cell_type"] == "markdown")
        local = [link for link in re.findall(r"\]\(([^)\s]+)\)", prose) if not re.match(r"(https?|mailto):", link)]
        assert not local and "[](" not in prose, (path, local[:3])             # absolute links, each with its text
