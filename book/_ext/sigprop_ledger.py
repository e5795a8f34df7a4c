"""Sphinx role ``{ledger}`id[:field]```: a number of the claims ledger's committed record, in the text.

``{ledger}`noci2022-eq18-independence``` renders ``17.07 ± 0.29`` (measured ± SE); ``:stated``,
``:corrected``, ``:tolerance``, ``:stderr``, ``:status`` and ``:measured-only`` render one field
(``sigprop.claims.quote``). Errata pages and chapter prose quote the ledger this way, so the text cannot
drift from the measurements; ``tests/test_ledger_quotes.py`` checks that every reference resolves and that
the errata pages hold no hand-typed "value ± SE" pairs.
"""
from __future__ import annotations

from docutils import nodes


def _role(name, rawtext, text, lineno, inliner, options=None, content=None):
    from sigprop.claims import load_record, quote

    record = _role.record = getattr(_role, "record", None) or load_record()
    id, _, field = text.partition(":")
    try:
        value = quote(id.strip(), field.strip() or "measured", record=record)
    except (KeyError, ValueError) as exc:
        msg = inliner.reporter.error(f"ledger role: {exc}", line=lineno)
        return [inliner.problematic(rawtext, rawtext, msg)], [msg]
    return [nodes.inline(rawtext, value, classes=["ledger"])], []


def setup(app):
    app.add_role("ledger", _role)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
