"""The instructors' reading-time table is what its recipe gives on the pages (book/reading_times.py).

The table in book/instructors.md is generated (``python book/reading_times.py --write``). A page edited since must
not leave it wrong: every page of the reading order has its row, in order; code cells and exercises are counted
exactly; words, times and the totals may drift by 5 % (rewording a sentence does not call for a new table, a new
section does). The recipe itself is tested on a small notebook.
"""
from __future__ import annotations

import json
import pathlib
import re

from conftest import load_script

ROOT = pathlib.Path(__file__).resolve().parents[1]
reading_times = load_script("reading_times", ROOT / "book" / "reading_times.py")
#: the drift a word count, a time or a total may show before the table must be regenerated
DRIFT = 0.05
_ROW = re.compile(r"^\| \{doc\}`(?P<label>.+) </(?P<path>[^>]+)>` \| (?P<words>[\d,]+) \| (?P<code>\d+) \| "
                  r"(?P<time>[^|]+) \| (?P<ex>[^|]+) \|$")


def _minutes(text: str) -> int:
    h = re.search(r"(\d+) h", text)
    m = re.search(r"(\d+)(?: min)?$", text.strip())
    return (int(h.group(1)) * 60 if h else 0) + (int(m.group(1)) if m and not text.strip().endswith(" h") else 0)


def _page_table():
    text = (ROOT / "book" / "instructors.md").read_text(encoding="utf-8")
    block = text[text.index(reading_times.BEGIN):text.index(reading_times.END)]
    rows = [m.groupdict() for m in map(_ROW.match, block.splitlines()) if m]
    return rows, block


def _close(shown: float, fresh: float) -> bool:
    return abs(shown - fresh) <= DRIFT * max(abs(fresh), 1.0) + 1e-9


def test_the_table_is_what_the_recipe_gives_on_the_pages():
    rows, block = _page_table()
    fresh = reading_times.pages()
    hint = "regenerate it: python book/reading_times.py --write"
    assert [r["path"] for r in rows] == [p.path for p in fresh], f"the pages differ from the reading order; {hint}"
    bad = []
    for r, p in zip(rows, fresh):
        ex = 0 if r["ex"].strip() == "—" else int(r["ex"].split()[0])
        if int(r["code"]) != p.code or ex != p.exercises:
            bad.append(f"{p.path}: code cells {r['code']} -> {p.code}, exercises {ex} -> {p.exercises}")
        if not _close(int(r["words"].replace(",", "")), p.words) or abs(_minutes(r["time"]) - p.minutes) > max(
                5, DRIFT * p.minutes):
            bad.append(f"{p.path}: words {r['words']} -> {p.words:,}, time {r['time'].strip()} -> {p.minutes} min")
    assert not bad, f"book/instructors.md's reading times are stale ({hint}):\n" + "\n".join(bad)
    total = reading_times.totals(fresh)["book"]
    m = re.search(r"The book: (.+?) of reading and (\d+) exercises, (.+?): about", block)
    assert m and _close(_minutes(m.group(1)), total[0]) and int(m.group(2)) == total[1], (m and m.groups(), total, hint)


def test_the_recipe_counts_prose_and_captions_not_exercises_or_hidden_cells(tmp_path):
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": ["(label)=\n# Title\n\nFour words $x + y$ here.\n\n",
                                                           "```{exercise}\n:label: ex-a\nnot counted at all\n```\n\n",
                                                           "````{solution} ex-a\n:class: dropdown\n```python\nx = 1\n```\n````\n"]},
        {"cell_type": "code", "metadata": {"mystnb": {"figure": {"caption": "Two words."}}}, "source": ["1"],
         "outputs": [], "execution_count": None},
        {"cell_type": "code", "metadata": {"tags": ["remove-cell"]}, "source": ["2"], "outputs": [],
         "execution_count": None},
        {"cell_type": "code", "metadata": {"tags": ["hide-input"]}, "source": ["3"], "outputs": [],
         "execution_count": None},
    ]
    path = tmp_path / "page.ipynb"
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    words, code, exercises = reading_times.count(path)
    # "# Title" (2) + "Four words $x + y$ here." (6) + the caption (2); the exercise and its solution apart
    assert (words, code, exercises) == (10, 2, 1)
    page = reading_times.Page("p", "p", "c", words=400, code=3, exercises=2)
    assert page.minutes == 15 and page.exercise_minutes == 30          # 400 / 40 + 3 = 13 -> 15 min


def test_the_introduction_quotes_the_same_times():
    import yaml

    text = (ROOT / "book" / "intro.md").read_text(encoding="utf-8")
    assert text.startswith("---\n"), "book/intro.md has no front matter with the reading times"
    shown = yaml.safe_load(text.split("---\n", 2)[1])["myst"]["substitutions"]
    fresh = reading_times.substitutions()
    assert set(shown) == set(fresh), (sorted(shown), sorted(fresh))
    for key, value in fresh.items():
        if key.startswith("reading_"):
            assert abs(_minutes(shown[key]) - _minutes(value)) <= max(5, DRIFT * _minutes(value)), (key, shown[key], value)
    body = text.split("---\n", 2)[2]
    for key in fresh:
        if key != "hours_book" and key != "reading_getting_started":
            assert "{{ " + key + " }}" in body, key
