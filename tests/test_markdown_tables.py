"""Every Markdown table row has as many cells as its header.

A ``|`` inside a table cell ends the cell, also inside backticks or ``$...$`` (GitHub-flavoured tables,
which MyST follows, split the row before reading code or math); the extra cells are dropped, so the rest
of the row vanishes from the page. The Notation page showed ``sp.theory.cosine_map(rho, beta,
form="result1"`` and a stray backtick that way. Write ``\\|`` for a literal bar, ``\\lvert``/``\\rvert`` or
``\\lVert``/``\\rVert`` in math, or reword.
"""
from __future__ import annotations

import json
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
DIRS = ("book", "chapters")
SKIP = {"_build", ".ipynb_checkpoints", "assignments"}
DELIMITER = re.compile(r"^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")


def _cells(row: str) -> int:
    row = row.strip()
    bars = len(re.findall(r"(?<!\\)\|", row))
    return bars - row.startswith("|") - (row.endswith("|") and not row.endswith("\\|")) + 1


def _markdown():
    for folder in DIRS:
        for path in sorted((ROOT / folder).rglob("*")):
            if SKIP & set(path.relative_to(ROOT).parts):
                continue
            if path.suffix == ".md":
                yield str(path.relative_to(ROOT)), path.read_text(encoding="utf-8")
            elif path.suffix == ".ipynb":
                for i, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
                    if cell["cell_type"] == "markdown":
                        yield f"{path.relative_to(ROOT)} cell {i}", "".join(cell["source"])


def _bad_rows(text: str) -> list[str]:
    lines, bad = text.splitlines(), []
    for i in range(1, len(lines)):
        if not DELIMITER.match(lines[i].strip()) or "|" not in lines[i - 1]:
            continue
        width = _cells(lines[i - 1])
        for row in lines[i + 1:]:
            if not row.strip().startswith("|"):
                break
            if _cells(row) != width:
                bad.append(f"{_cells(row)} cells, header {width}: {row.strip()[:100]}")
            elif re.search(r"\$[^$]*\\\|[^$]*\$", row):
                # the table takes the backslash of \| away: $\|x\|$ prints |x|, not a norm
                bad.append(f"\\| in math inside a table (write \\lVert, \\rVert): {row.strip()[:100]}")
    return bad


def test_the_check_sees_a_bar_in_code():
    table = "| a | b |\n| --- | --- |\n| `f(x=1|2)` | c |\n| ok | $\\lvert x\\rvert$ |\n| $\\|x\\|$ | d |"
    assert len(_bad_rows(table)) == 2


def test_table_rows_have_the_headers_cells():
    bad = [f"{name}: {row}" for name, text in _markdown() for row in _bad_rows(text)]
    assert not bad, "table rows cut by a | inside a cell (escape it as \\| or reword):\n" + "\n".join(bad)
