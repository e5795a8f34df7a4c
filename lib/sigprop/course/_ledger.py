r"""The claims ledger as the book shows it: one table, one summary and one provenance line for every page.

The claims appendix (``book/claims.ipynb``) and each chapter's ledger section show a document's committed record
(:func:`sigprop.claims.load_record`) through these functions, so that a status, a number and its standard error look
the same on every page: the status first (what a reader looks for; it stays in view when a wide table scrolls), the
claim with its source, id and note, the stated value, the measurement ± SE with its tolerance, the corrected value
and the sizes (measured, and the document's). Numbers are printed by :func:`sigprop.claims.quote` (the value to its
standard error's precision); ``$...$`` in a claim or note is typeset by MathJax. All three return HTML strings, for
``IPython.display.HTML``.
"""
from __future__ import annotations

import html
import re

from ..claims import provenance_text, quote as _quote

__all__: list[str] = []
__theory__: list[str] = []
__course__ = ["ledger_table", "ledger_summary", "ledger_provenance"]

#: One colour per status (the appendix's legend and every ledger table).
STATUS_COLOURS = {"reproduced": "#1b7f3b", "erratum": "#a15c00", "approximation": "#3a5fa0",
                  "missing-hypothesis": "#7a4fa0", "deviates": "#b00020", "not-reproduced": "#6b6b6b"}
_LEADS = {"erratum": "Errata", "approximation": "Approximations quantified", "missing-hypothesis": "Conditions added",
          "deviates": "Deviations", "not-reproduced": "Not reproduced at this scale"}
_MATH = re.compile(r"\$([^$]+)\$")


def _rows(record) -> list:
    return list(record.values()) if isinstance(record, dict) else list(record)


def _text(s: str) -> str:
    # HTML-escaped; $...$ becomes \(...\), which MathJax typesets inside a .mathjax_process box
    return _MATH.sub(lambda m: "\\(" + m.group(1) + "\\)", html.escape(s))


def _sizes(scale: dict | None) -> str:
    if not scale:
        return "—"
    def part(d):
        return ", ".join(f"{k} = {v:,}" if isinstance(v, int) else f"{k} = {v}" for k, v in d.items()) or "—"
    return f"{part(scale.get('measured', {}))}<br><small>document: {part(scale.get('paper', {}))}</small>"


def _cells(r, record: dict, quote) -> str:
    value = lambda field: "—" if getattr(r, field) is None else quote(r.id, field, record=record)
    return (f"<tr><td style='color:{STATUS_COLOURS[r.status]}'><b>{r.status.replace('-', '&nbsp;')}</b></td>"
            f"<td><b>{html.escape(r.source)}</b>: {_text(r.claim)}<br>"
            f"<small><code>{html.escape(r.id)}</code> — {_text(r.note)}</small></td>"
            f"<td>{value('stated')}</td><td>{value('measured')}<br><small>tol. {r.tolerance:.2g}</small></td>"
            f"<td>{value('corrected')}</td><td><small>{_sizes(r.scale)}</small></td></tr>")


def ledger_table(record, quote=None) -> str:
    """The rows of a committed ledger record as one HTML table.

    ``record``: ``{id: ClaimResult}`` as :func:`sigprop.claims.load_record` returns, or a list of its rows;
    ``quote``: how a number is printed (default :func:`sigprop.claims.quote`)."""
    quote = _quote if quote is None else quote
    rows = _rows(record)
    by_id = {r.id: r for r in rows}
    head = ("<tr><th>status</th><th style='min-width:22em'>claim</th><th>stated</th><th>measured ± SE</th>"
            "<th>corrected</th><th>sizes</th></tr>")
    return ("<div class='mathjax_process' style='overflow-x:auto'><table class='sp-claims' style='font-size:0.85em'>"
            + head + "".join(_cells(r, by_id, quote) for r in rows) + "</table></div>")


def ledger_summary(record) -> str:
    """One paragraph: how many rows, how many of each status, and the claims of every status but *reproduced*."""
    rows = _rows(record)
    counts = {s: sum(r.status == s for r in rows) for s in STATUS_COLOURS}
    tally = ", ".join(f"{n} {s.replace('-', ' ')}" for s, n in counts.items() if n)
    text = f"{len(rows)} claims checked: {tally}."
    for status, lead in _LEADS.items():
        items = [f"{_text(r.claim)} (<code>{html.escape(r.id)}</code>)" for r in rows if r.status == status]
        if items:
            text += f" <b>{lead}:</b> " + "; ".join(items) + "."
    return "<p class='mathjax_process'>" + text + "</p>"


_CODE = re.compile(r"`([^`]+)`")


def _plain(text: str) -> str:
    # provenance lines are Markdown: `command` becomes <code>command</code>
    return _CODE.sub(r"<code>\1</code>", html.escape(text))


def _where(lines: dict) -> str:
    # one line for a document recorded in one run; rows re-recorded later (`--claim`) are named, most rows first
    ordered = sorted(lines.items(), key=lambda item: -len(item[1]))
    if len(ordered) == 1:
        return _plain(ordered[0][0])
    return "; ".join(_plain(text) if k == 0 else f"rows {', '.join(ids)}: {_plain(text)}"
                     for k, (text, ids) in enumerate(ordered))


def ledger_provenance(record) -> str:
    """Where and how each document's rows were recorded (commit, date, machine, torch, CPU kernels, threads),
    documents recorded alike on one line; a line that names uncommitted changes is explained once."""
    lines: dict[str, dict[str, list]] = {}                    # document -> {provenance line: [claim ids]}
    for r in _rows(record):
        lines.setdefault(r.document, {}).setdefault(provenance_text(r.provenance), []).append(r.id)
    groups: dict[str, list] = {}
    for doc, by_line in lines.items():
        groups.setdefault(_where(by_line), []).append(doc)
    where = " ".join(f"{', '.join(docs)}: {text}." for text, docs in groups.items())
    if "with uncommitted changes" in where:
        where += (" A record made <i>with uncommitted changes</i> was written from the working tree before the commit"
                  " that holds it; <code>make test</code> reruns the ledger at every commit and requires agreement with"
                  " this record in distribution (<code>tests/test_claims.py</code>).")
    return f"<p><b>The record shown.</b> {where}</p>"
