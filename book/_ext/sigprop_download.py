"""The download button of every page saves the page's source (``.ipynb`` or ``.md``) as a file.

sphinx-book-theme (1.x) puts a download menu in every page's header (``use_download_button``, on by
default): its ``.ipynb`` / ``.md`` entries link to ``_sources/<page>.ipynb`` -- the notebook as committed,
without outputs -- but render as ``<a href=... target="_blank">`` without a ``download`` attribute, so a
browser shows the notebook's JSON in a new tab instead of saving it. The theme's button macro takes no
extra attributes; this extension adds a few lines of script to every page that give those two links a
``download`` attribute (the file's own name) and drop ``target``. Saved this way a notebook keeps its name
and opens in Jupyter or Colab; its first, hidden cell installs ``sigprop`` on Colab.

``download`` applies to links of the page's own origin (the published site); on a page opened from disk
(the offline HTML archive) the notebook is a file already, next to the page under ``_sources/``.
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


def setup(app):
    app.add_js_file(None, body=SCRIPT)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
