"""Sphinx extension: every script of a page is included once.

Sphinx 7.4 adds a script registered after ``Builder.init()`` (``app.add_js_file(None, body=...)`` in a
``builder-inited`` or ``env-before-read-docs`` handler, as sphinx-togglebutton and sphinx-thebe do) to the
builder with ``filename=None``, and ``prepare_writing`` adds it again from the registry with
``filename=''``; the two compare unequal, so every page carried the inline script twice, and the second
``const THEBE_JS_URL = ...`` threw "Identifier 'THEBE_JS_URL' has already been declared" on every page
(tests/test_book_browser.py collects such errors). This drops the repeats, keeping the first.
"""
from __future__ import annotations


def _key(script):
    attributes = getattr(script, "attributes", {}) or {}
    return (getattr(script, "filename", script) or "", getattr(script, "priority", 500),
            tuple(sorted((k, str(v)) for k, v in attributes.items())))


def dedupe(app, pagename, templatename, context, doctree):
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, kept = set(), []
    for script in scripts:
        key = _key(script)
        if key not in seen:
            seen.add(key)
            kept.append(script)
    context["script_files"] = kept


def setup(app):
    app.connect("html-page-context", dedupe, priority=900)  # after the other handlers add theirs
    return {"parallel_read_safe": True, "parallel_write_safe": True}
