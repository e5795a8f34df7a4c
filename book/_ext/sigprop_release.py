"""What a release needs from the book's build: downloads that save files, and a single-page build for the PDF.

**The download button saves the page's source.** sphinx-book-theme (1.x) puts a download menu in every
page's header (``use_download_button``, on by default): its ``.ipynb`` / ``.md`` entries link to
``_sources/<page>.ipynb`` -- the notebook as committed, without outputs -- but render as
``<a href=... target="_blank">`` without a ``download`` attribute, so a browser shows the notebook's JSON in
a new tab instead of saving it. The theme's button macro takes no extra attributes; a few lines of script on
every page give those two links a ``download`` attribute (the file's own name) and drop ``target``. Saved
this way a notebook keeps its name and opens in Jupyter or Colab (its first, hidden cell installs
``sigprop`` there). ``download`` applies to links of the page's own origin (the published site); in the
offline HTML archive the notebook is a file already, under ``_sources/``.

**The single-page build renders every node.** ``jupyter-book build --builder singlehtml`` (the PDF of a
release, ``book/release.py``) looks up node visitors under the builder's name, ``singlehtml``, and falls back
to ``html`` only when no extension registered any ``singlehtml`` visitor. sphinx-exercise registers some,
sphinx-proof registers its theorem and proof nodes for ``html`` alone, so the single-page build stopped at
the first lemma (``NotImplementedError: ... unknown node type: lemma_node``). When that builder starts, every
``html`` visitor missing under ``singlehtml`` is copied there.
"""
from __future__ import annotations

#: the theme's labels of the two source links in the download menu (``btn-<label>`` classes)
SELECTORS = ("a.btn-download-source-button", "a.btn-download-notebook-button")

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
