r"""The claims ledger as the book shows it: one table, one summary and one provenance line for every page.

The claims appendix (``book/claims.ipynb``) and each chapter's ledger section show a document's committed record
(:func:`sigprop.claims.load_record`) through these functions, so that a status, a number and its standard error look
the same on every page: the status first (what a reader looks for), the claim with its source, id, note and sizes
(measured, and the document's: inside the claim's cell, so that five columns fit a 1280 px window and the printed
page), the stated value, the measurement ± SE with its tolerance, and the corrected value. Numbers are printed by
:func:`sigprop.claims.quote` (the value to its standard error's precision); the notes, written in plain text by the
claims modules, are typeset (:func:`sigprop.course.typeset`: ``sigma_v^2``, ``+-``, ``T -> inf``); ``$...$`` in a
claim or note is typeset by MathJax. :func:`ledger_table` returns a numbered :class:`sigprop.course.Table` (display
it as a cell's last value); :func:`ledger_summary` and :func:`ledger_provenance` return HTML strings, for
``IPython.display.HTML``.
"""
from __future__ import annotations

import html
import re

from ..claims import provenance_text, quote as _quote
from ._numbered import Table
from ._typeset import typeset

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
        return ""
    def part(d):
        return ", ".join(f"{k} = {v:,}" if isinstance(v, int) else f"{k} = {v}" for k, v in d.items()) or "—"
    return typeset(f"sizes: {part(scale.get('measured', {}))}; document: {part(scale.get('paper', {}))}")


def _markdown(text: str) -> str:
    # a claim or note as Markdown: '*' and '<' outside formulas and code are literal (an id such as gg2025-fig1e-*)
    parts = re.split(r"(\$[^$]+\$|`[^`]+`)", text)
    return "".join(p if k % 2 else p.replace("*", "\\*").replace("<", "&lt;") for k, p in enumerate(parts))


def _row(r, record: dict, quote) -> tuple:
    value = lambda field: "—" if getattr(r, field) is None else quote(r.id, field, record=record)
    sizes = _sizes(r.scale)
    claim = (f"**{_markdown(r.source)}**: {_markdown(r.claim)}<br><small>`{r.id}` — {_markdown(typeset(r.note))}"
             + (f"<br>{_markdown(sizes)}" if sizes else "") + "</small>")
    status = f"<span style='color:{STATUS_COLOURS[r.status]}'><b>{r.status.replace('-', '&nbsp;')}</b></span>"
    return (status, claim, value("stated"), f"{value('measured')}<br><small>tol. {r.tolerance:.2g}</small>",
            value("corrected"))


def ledger_table(record, quote=None, *, caption: str | None = None, name: str | None = None) -> Table:
    """The rows of a committed ledger record as one numbered table (:class:`sigprop.course.Table`).

    ``record``: ``{id: ClaimResult}`` as :func:`sigprop.claims.load_record` returns, or a list of its rows;
    ``quote``: how a number is printed (default :func:`sigprop.claims.quote`); ``caption``: one line (default:
    what the columns are); ``name``: the label ``{numref}`` refers to."""
    quote = _quote if quote is None else quote
    rows = _rows(record)
    by_id = {r.id: r for r in rows}
    caption = caption or (f"The claims ledger's committed record, {len(rows)} rows: status, claim (source, id, note, "
                          "sizes measured and the document's), stated value, measurement ± SE with its tolerance, "
                          "corrected value.")
    return Table(header=("status", "claim", "stated", "measured ± SE", "corrected"),
                 rows=tuple(_row(r, by_id, quote) for r in rows), caption=caption, name=name,
                 widths=(12, 52, 12, 13, 11), classes="sp-claims")


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
