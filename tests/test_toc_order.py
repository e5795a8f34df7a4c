"""The sidebar and the Next links (``_toc.yml``) follow the reading order that the book prescribes.

Three places state the order of the chapters: the numbered "Reading order" of the introduction
(``book/intro.md``), the primer's table "Suggested reading order" (``book/primer.ipynb``) and the
instructors' syllabus. A reader who clicks Next at the end of a chapter should land where the
introduction says to go next.
"""
from __future__ import annotations

import json
import pathlib
import re

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
CHAPTER = re.compile(r"/?(chapters/[\w-]+)/index")


def _toc_chapters() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [c["file"] for part in toc["parts"] for c in part["chapters"]]
    return [m.group(1) for f in files if (m := CHAPTER.match(f))]


def _ordered_links(text: str) -> list[str]:
    found = []
    for m in CHAPTER.finditer(text):
        if m.group(1) not in found:
            found.append(m.group(1))
    return found


def test_toc_follows_the_introductions_reading_order():
    intro = (ROOT / "book" / "intro.md").read_text()
    section = intro.split("**Reading order**", 1)[1]
    steps = "\n".join(line for line in section.splitlines() if re.match(r"\s*\d+\.\s", line))
    order = _ordered_links(steps)
    assert len(order) >= 6, order
    assert _toc_chapters() == order, f"_toc.yml {_toc_chapters()} vs the introduction's reading order {order}"


def test_toc_follows_the_primers_reading_order():
    nb = json.loads((ROOT / "book" / "primer.ipynb").read_text())
    text = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    table = text.split("**Suggested reading order.**", 1)[1].split("\n\n", 2)[1]
    assert _toc_chapters() == _ordered_links(table)


def test_every_chapter_is_in_the_toc_once():
    chapters = _toc_chapters()
    on_disk = sorted(str(p.parent.relative_to(ROOT)) for p in (ROOT / "chapters").glob("*/index.md"))
    assert sorted(chapters) == on_disk and len(set(chapters)) == len(chapters)
