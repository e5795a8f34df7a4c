"""Sphinx role ``{ledger}`id[:field]```: a number of the claims ledger's committed record, in the text.

``{ledger}`noci2022-eq18-independence``` renders ``17.07 ± 0.29`` (measured ± SE); ``:stated``,
``:corrected``, ``:tolerance``, ``:stderr``, ``:status`` and ``:measured-only`` render one field
(``sigprop.claims.quote``). Errata pages and chapter prose quote the ledger this way, so the text cannot
drift from the measurements; ``tests/test_ledger_quotes.py`` checks that every reference resolves and that
the errata pages hold no hand-typed "value ± SE" pairs.
"""
from __future__ import annotations

from docutils import nodes


def text(role_text: str) -> str:
    """What ``{ledger}`role_text``` renders (the book's notebooks write it in: book/_ext/sigprop_notebooks.py);
    KeyError or ValueError for an unknown claim or field."""
    from sigprop.claims import load_record, quote

    record = text.record = getattr(text, "record", None) or load_record()
    id, _, field = role_text.partition(":")
    return quote(id.strip(), field.strip() or "measured", record=record)


def _role(name, rawtext, text_, lineno, inliner, options=None, content=None):
    try:
        value = text(text_)
    except (KeyError, ValueError) as exc:
        msg = inliner.reporter.error(f"ledger role: {exc}", line=lineno)
        return [inliner.problematic(rawtext, rawtext, msg)], [msg]
    return [nodes.inline(rawtext, value, classes=["ledger"])], []


def setup(app):
    app.add_role("ledger", _role)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
