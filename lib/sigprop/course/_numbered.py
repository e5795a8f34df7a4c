r"""A table as the book shows it: numbered by chapter, captioned, with typeset headers and no index column.

A page's table is computed (a comparison's verdicts, a ladder's fits), so it cannot be written in the page's
Markdown, where Sphinx numbers tables. :func:`table` returns a :class:`Table` that displays itself two ways:

* as Markdown (``text/markdown``): a MyST ``list-table`` directive with the caption and ``:name:``, fenced with
  ``~~~`` (a caption's ``{numref}`` roles hold backticks, which a backtick fence's first line may not), which the
  book's build parses like the page's own text (``nb_render_markdown_format: myst``, and ``_config.yml`` ranks
  ``text/markdown`` above ``text/html`` for it), so the table is numbered by chapter ("Table 2.4"), can be referred
  to with ``{numref}`` and prints in the PDF; ``$...$`` in a header or a cell is typeset by MathJax;
* as HTML (``text/html``) in Jupyter and Colab, which show HTML before Markdown: the same table with its caption.

What a ``pandas.DataFrame`` display got wrong is decided once here: the default index (0, 1, 2, ...) is not a
column; a meaningful index (``set_index("case")``, a transposed table) is the first column, headed by its name;
numbers are printed to ``digits`` significant digits (powers of ten outside 0.001-10^5, :func:`~sigprop.course.sci`);
a missing value is "—"; headers and text cells go through :func:`~sigprop.course.typeset` (``alpha_SA`` ->
:math:`\alpha_{SA}`, ``T -> inf`` -> :math:`T\to\infty`). pandas is never imported here: a DataFrame is read through
its own attributes.
"""
from __future__ import annotations

import dataclasses
import html
import math
import numbers
import re

from ._tables import sci
from ._typeset import to_html_math, typeset

__all__: list[str] = []
__theory__: list[str] = []
__course__ = ["Table", "table"]

_LABEL = re.compile(r"[A-Za-z][\w.-]*")
#: a cell that Markdown would read as a list item or a block (``- 5``, ``1. x``, ``# x``, ``> x``) is escaped
_BLOCK_START = re.compile(r"^(\s*)([-+*]\s|\d+[.)]\s|#|>|\|)")


@dataclasses.dataclass(frozen=True)
class Table:
    """A captioned table: ``header`` (column titles), ``rows`` (tuples of cell texts, Markdown with ``$...$`` math
    and inline HTML allowed), ``caption``, ``name`` (the label ``{numref}`` refers to), ``widths`` (relative column
    widths, or None: automatic) and ``classes`` (CSS classes of the HTML table)."""

    header: tuple
    rows: tuple
    caption: str
    name: str | None = None
    widths: tuple | None = None
    classes: str = ""

    def __post_init__(self):
        if not isinstance(self.caption, str) or not self.caption.strip() or "\n" in self.caption:
            raise ValueError(f"a table needs a one-line caption; got {self.caption!r}")
        if self.name is not None and not _LABEL.fullmatch(self.name):
            raise ValueError(f"name must be a label (a letter, then letters, digits, '-', '_' or '.'); got {self.name!r}")
        widths = len(self.header)
        bad = [k for k, row in enumerate(self.rows) if len(row) != widths]
        if widths == 0 or bad:
            raise ValueError(f"every row needs one cell per column ({widths}); rows {bad[:5]} do not")
        if self.widths is not None and len(self.widths) != widths:
            raise ValueError(f"widths needs one number per column ({widths}); got {self.widths!r}")

    def _repr_markdown_(self) -> str:
        lines = [f"~~~{{list-table}} {self.caption}", ":header-rows: 1"]
        if self.name:
            lines.append(f":name: {self.name}")
        lines.append(":class: sp-table" + (f" {self.classes}" if self.classes else ""))
        if self.widths is not None:
            lines.append(":widths: " + " ".join(str(w) for w in self.widths))
        lines.append("")
        for row in (self.header,) + tuple(self.rows):
            for k, cell in enumerate(row):
                lines.append(("* - " if k == 0 else "  - ") + _markdown_cell(cell))
        return "\n".join(lines + ["~~~", ""])

    def _repr_html_(self) -> str:
        def cells(row, tag):
            return "".join(f"<{tag}>{_inline_html(c)}</{tag}>" for c in row)
        body = "".join(f"<tr>{cells(r, 'td')}</tr>" for r in self.rows)
        return (f"<table class='sp-table {self.classes}'><caption>{to_html_math(html.escape(self.caption))}</caption>"
                f"<thead><tr>{cells(self.header, 'th')}</tr></thead><tbody>{body}</tbody></table>")

    def __repr__(self) -> str:
        rows = [self.header] + list(self.rows)
        width = [max(len(r[k]) for r in rows) for k in range(len(self.header))]
        text = ["  ".join(c.ljust(w) for c, w in zip(r, width)).rstrip() for r in rows]
        return "\n".join([self.caption] + text[:1] + ["  ".join("-" * w for w in width)] + text[1:])


def _inline_html(text: str) -> str:
    # Jupyter's HTML view of a Markdown cell: **bold** and `code`, $...$ for MathJax
    text = re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", to_html_math(text))
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", text)


def _markdown_cell(text: str) -> str:
    text = " ".join(text.split()) or "\u00a0"           # one line; an empty cell keeps its list item
    marker = lambda m: m.group(1) + (m.group(2)[:-2] + "\\" + m.group(2)[-2:] if m.group(2)[0].isdigit()   # 1\. x
                                     else "\\" + m.group(2))
    return _BLOCK_START.sub(marker, text)


def _cell(value, digits: int, tex: bool) -> str:
    if value is None:
        return "—"
    if isinstance(value, str):
        return typeset(value) if tex else value
    if isinstance(value, (bool,)) or type(value).__name__ == "bool_":
        return "yes" if value else "no"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        v = float(value)
        if math.isnan(v):
            return "—"
        if v == 0 or 1e-3 <= abs(v) < 1e5:
            return f"{v:.{digits}g}"
        return sci(v, digits)
    return typeset(str(value)) if tex else str(value)


def _columns(data, columns):
    """Headers and rows of a DataFrame, a list of dicts or a list of sequences (``columns`` naming them)."""
    if hasattr(data, "columns") and hasattr(data, "index") and hasattr(data, "itertuples"):    # a DataFrame
        index = data.index
        names = [n for n in getattr(index, "names", [index.name])]
        default = type(index).__name__ == "RangeIndex" and all(n is None for n in names)
        cols = [" / ".join(str(x) for x in c) if isinstance(c, tuple) else c if isinstance(c, str) else _cell(c, 4, False)
                for c in data.columns]
        if default:
            return cols, [list(r) for r in data.itertuples(index=False, name=None)]
        corner = data.columns.name
        heads = [str(n) if n is not None else (str(corner) if corner is not None and len(names) == 1 else "")
                 for n in names]
        rows = [list(i if isinstance(i, tuple) else (i,)) + list(r)
                for i, r in zip(index, data.itertuples(index=False, name=None))]
        return heads + cols, rows
    rows = list(data)
    if rows and isinstance(rows[0], dict):
        cols = list(columns) if columns is not None else list(dict.fromkeys(k for r in rows for k in r))
        return [str(c) for c in cols], [[r.get(c) for c in cols] for r in rows]
    if columns is None:
        raise ValueError("rows given as sequences need columns=[...] (their headers)")
    return [str(c) for c in columns], [list(r) for r in rows]


def table(data, *, caption: str, name: str | None = None, columns=None, digits: int = 4, widths=None,
          typeset_text: bool = True, classes: str = "") -> Table:
    """A numbered, captioned :class:`Table` from a ``pandas.DataFrame``, a list of dicts (keys are the headers) or a
    list of sequences with ``columns``.

    ``caption``: one line, what the table shows and at which sizes (as a figure's caption); ``name``: its label
    (``tbl-...``, for ``{numref}``); ``digits``: significant digits of plain numbers (strings are shown as given:
    format a Monte Carlo number with :func:`~sigprop.course.pm`); ``widths``: relative column widths;
    ``typeset_text``: headers and text cells through :func:`~sigprop.course.typeset` (default)."""
    if not isinstance(digits, int) or isinstance(digits, bool) or digits < 1:
        raise ValueError(f"digits must be a positive integer; got {digits!r}")
    heads, rows = _columns(data, columns)
    header = tuple(typeset(h) if typeset_text else h for h in heads)
    body = tuple(tuple(_cell(v, digits, typeset_text) for v in r) for r in rows)
    return Table(header=header, rows=body, caption=caption, name=name,
                 widths=None if widths is None else tuple(widths), classes=classes)
