"""What a release needs from the book's build: downloads that save files, and a single-page build for the PDF.

**The download button saves a notebook.** sphinx-book-theme (1.x) renders its download menu's entries as
``<a href=... target="_blank">`` without a ``download`` attribute, so a browser shows a notebook's JSON in a new
tab instead of saving it. The entries are the page's built notebooks (``sigprop_notebooks.py``: the reader's
edition, and the student's where the page has solutions, under ``_notebooks/``), no longer its MyST source. The
theme's button macro takes no extra attributes; a few lines of script on every page give those links a
``download`` attribute (the file's own name) and drop ``target``. ``download`` applies to links of the page's own
origin (the published site); in the offline HTML archive the notebooks are files already, under ``_notebooks/``.

**The single-page build renders every node.** ``jupyter-book build --builder singlehtml`` (the PDF of a
release, ``book/release.py``) looks up node visitors under the builder's name, ``singlehtml``, and falls back
to ``html`` only when no extension registered any ``singlehtml`` visitor. sphinx-exercise registers some,
sphinx-proof registers its theorem and proof nodes for ``html`` alone, so the single-page build stopped at
the first lemma (``NotImplementedError: ... unknown node type: lemma_node``). When that builder starts, every
``html`` visitor missing under ``singlehtml`` is copied there.
"""
from __future__ import annotations

#: the download menu's notebook links (``btn-<label>`` classes; labels set in sigprop_notebooks.py)
SELECTORS = ("a.btn-download-notebook-button", "a.btn-download-student-notebook-button")

SCRIPT = """
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll("%s").forEach(function (a) {
    var name = decodeURIComponent(a.getAttribute("href").split("#")[0].split("?")[0].split("/").pop());
    a.setAttribute("download", name);
    a.removeAttribute("target");
  });
});
""" % ", ".join(SELECTORS)


def html_visitors_for_singlehtml(app) -> None:
    if app.builder.name != "singlehtml":
        return
    handlers = app.registry.translation_handlers
    single = handlers.setdefault("singlehtml", {})
    for node, visitors in handlers.get("html", {}).items():
        single.setdefault(node, visitors)


def setup(app):
    app.add_js_file(None, body=SCRIPT)
    app.connect("builder-inited", html_visitors_for_singlehtml)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
