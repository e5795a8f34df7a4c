"""A small book with every kind of MyST the pages use, built with the book's extensions (for tests/test_notebooks.py
and tests/test_book_browser.py's JupyterLab check): a notebook page with glued numbers, a numbered figure, a lemma
and its proof, an exercise and its solution, citations, cross-references, a {test} link and a {ledger} quote; a
Markdown page with an include, a definition list, a code block with a caption and the bibliography. About 20 s
(one small page executed)."""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
LEDGER_ID = "noci2022-lemma31-eq8-bound"          # a committed ledger row (lib/sigprop/claims/records)

CONFIG = """title: notebook test book
author: sigprop tests
only_build_toc_files: true
execute:
  execute_notebooks: force
parse:
  myst_enable_extensions: [amsmath, dollarmath, colon_fence, deflist, substitution]
bibtex_bibfiles: [refs.bib]
repository:
  url: https://github.com/sigprop/sigprop
  branch: v0.0.0
launch_buttons:
  notebook_interface: jupyterlab
  colab_url: "https://colab.research.google.com"
  binderhub_url: "https://mybinder.org"
sphinx:
  local_extensions:
    sigprop_ledger: {ext}
    sigprop_release: {ext}
    sigprop_fold: {ext}
    sigprop_tests: {ext}
    sigprop_notebooks: {ext}
  extra_extensions: [sphinx_proof, sphinx_exercise, sphinx-mathjax-offline]
  config:
    mathjax_path: mathjax/tex-chtml.js
    bibtex_reference_style: author_year
    numfig: true
    nb_render_markdown_format: myst
"""

BIB = """@article{noci2022,
  title = {Signal Propagation in Transformers},
  author = {Noci, Lorenzo and Anagnostidis, Sotiris},
  journal = {NeurIPS},
  year = {2022}
}
"""

PAGE_MARKDOWN = [
    "(page-start)=\n# A page\n\nThe gap is {glue:text}`tb-gap` and, rounded, {glue:text}`tb-x:.2f`; "
    "{numref}`fig-tb` shows it (see {cite}`noci2022` and {ref}`tb-section`).",
    "(tb-section)=\n## A section\n\n```{prf:lemma} A bound on $x$\n:label: tb-lemma\n\nFor all $x$,\n\n$$\n"
    "x^2 \\ge 0 .\n$$\n```\n\n```{prf:proof}\nSquare it: $x\\cdot x$ is\nnot negative.\n```\n\n"
    "{prf:ref}`tb-lemma` holds; the ledger says {ledger}`" + LEDGER_ID + "`; {test}`tests/test_tb.py::test_tb` "
    "checks it; the other page is {doc}`notes`, or {doc}`the notes <notes>`. Inline code stays: `{numref}` and ``{ref}`x` ``.",
    "```{exercise} Square a number\n:label: tb-ex\n\nCompute $3^2$.\n```\n\n"
    "```{solution} tb-ex\n:class: dropdown\n\nIt is $9$:\n\n    3 ** 2\n```\n\n{numref}`tb-ex` asks for $3^2$.",
]
PAGE_CODE = [
    "# install cell (replaced by the set-up cell)\nimport sys\nif \"google.colab\" in sys.modules:\n    pass",
    "from myst_nb import glue\nimport matplotlib.pyplot as plt\n"
    "x = 0.123456\nglue('tb-gap', '0.12 ± 0.01', display=False)\nglue('tb-x', x, display=False)",
    "assert abs(x - 0.123456) < 1e-12   # a hidden check",
    "fig, ax = plt.subplots(figsize=(2, 1.5))\nax.plot([0, 1], [0, x]);",
]

NOTES = """# Notes

See [the page](page.ipynb) and [its section](#tb-notes-target).

(tb-notes-target)=
## Terms

Gibbs measure
: weights $A_s\\propto e^{\\gamma E_s}$.

```{include} included.md
```

```{code-block} python
:caption: Print a number

print(1)
```

```{table} Two numbers.
:name: tbl-tb

| a | b |
| --- | --- |
| $1$ | {numref}`fig-tb` |
```

```{admonition} Interactive: needs a live kernel
:class: note
The sliders run in Jupyter.
```

```{figure} pic.png
:name: fig-tb-pic
:alt: a white pixel

A picture, {numref}`tbl-tb`.
```

```{bibliography}
```
"""
#: a 1 x 1 white PNG
PIXEL = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010802000000907753de"
                      "0000000c4944415408d763f8ffff3f0005fe02fedccc59e70000000049454e44ae426082")
INCLUDED = "An included line citing {cite:t}`noci2022`.\n"
TESTS = "def test_tb():\n    pass\n"


def _cell(kind: str, text: str, **metadata) -> dict:
    cell = {"cell_type": kind, "metadata": metadata, "source": text}
    if kind == "code":
        cell.update(execution_count=None, outputs=[])
    return cell


def write(folder: pathlib.Path) -> pathlib.Path:
    """The book's sources in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "_config.yml").write_text(CONFIG.format(ext=ROOT / "book" / "_ext"))
    (folder / "_toc.yml").write_text("format: jb-book\nroot: page\nchapters:\n  - file: notes\n")
    (folder / "refs.bib").write_text(BIB)
    cells = [_cell("code", PAGE_CODE[0], tags=["remove-cell"]), _cell("markdown", PAGE_MARKDOWN[0]),
             _cell("code", PAGE_CODE[1]), _cell("code", PAGE_CODE[2], tags=["remove-cell"]),
             _cell("code", PAGE_CODE[3], mystnb={"figure": {"name": "fig-tb", "caption": "The gap, $x$ "
                                                            "({glue:text}`tb-gap`)."}}),
             _cell("markdown", PAGE_MARKDOWN[1]), _cell("markdown", PAGE_MARKDOWN[2])]
    for i, cell in enumerate(cells):
        cell["id"] = f"c{i}"
    nb = {"cells": cells, "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                      "language": "python"}}, "nbformat": 4, "nbformat_minor": 5}
    (folder / "page.ipynb").write_text(json.dumps(nb, indent=1))
    (folder / "notes.md").write_text(NOTES)
    (folder / "included.md").write_text(INCLUDED)
    (folder / "pic.png").write_bytes(PIXEL)
    (folder / "tests").mkdir(exist_ok=True)
    (folder / "tests" / "test_tb.py").write_text(TESTS)
    return folder


def build(folder: pathlib.Path) -> pathlib.Path:
    """Write and build the book (HTML, warnings as errors); returns its ``_build/html``."""
    write(folder)
    jb = pathlib.Path(sys.executable).with_name("jupyter-book")
    run = subprocess.run([str(jb), "build", str(folder), "-W", "-n", "--keep-going", "-q"], capture_output=True,
                         text=True, timeout=600)
    if run.returncode:
        raise RuntimeError((run.stdout + run.stderr)[-4000:])
    return folder / "_build" / "html"
