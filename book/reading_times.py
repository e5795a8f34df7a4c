"""The instructors' reading times, computed from the pages by one recipe (``book/instructors.md`` shows the table).

The recipe, for every page a student reads (the introduction, the Getting-started pages but this one, every chapter's
index and pages, in the order of ``_toc.yml``; not the appendix):

* **words**: the words of the page's text as a reader meets them -- its Markdown (a notebook's Markdown cells) and its
  figure captions, split on white space, so that each formula token counts as a word -- without the exercises and
  their solutions (their own column) and without MyST's labels, comments and directive options;
* **code cells**: the notebook's code cells a reader sees, those not tagged ``remove-cell``;
* **reading time**: words / 40 (a careful first reading of mathematical text) plus one minute per visible code cell
  (read the code, look at its output), rounded up to 5 minutes;
* **exercises**: the page's ``{exercise}`` blocks, 15 minutes each, counted apart from the reading time as the
  syllabus counts them (its "practice" column).

``python book/reading_times.py`` prints the table; ``--write`` puts it into ``book/instructors.md`` between its
markers (``% reading-times: begin`` / ``end``) and the chapters' times into ``book/intro.md``'s front matter (MyST
substitutions the introduction's reading order quotes). ``tests/test_reading_times.py`` recomputes it and checks the page's
table: every code-cell and exercise count exactly, every word count and time within 5 % (so that rewording a
sentence does not call for a new table, and a new section does).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGE = ROOT / "book" / "instructors.md"
WORDS_PER_MINUTE = 40
MINUTES_PER_CODE_CELL = 1
MINUTES_PER_EXERCISE = 15
ROUND_TO = 5
BEGIN, END = "% reading-times: begin", "% reading-times: end"
#: pages a student does not read for the course: this page, and the appendix part
SKIP_PAGES = {"book/instructors"}
SKIP_PARTS = {"Appendix"}
#: the chapters' short names in the table
SHORT = {"noci2022": "Noci", "giorlandino-goldt2025": "G&G", "bao2024": "Bao", "aghajanyan2025": "Aghajanyan",
         "synthesis": "Synthesis", "real-transformers": "Off-the-shelf"}

_FENCED = re.compile(r"^(?P<fence>`{3,}|~{3,}|:{3,})\{(?:exercise|solution)\}.*?^(?P=fence)[ \t]*$", re.M | re.S)
_EXERCISE = re.compile(r"^(`{3,}|~{3,}|:{3,})\{exercise\}", re.M)
_MARKUP = re.compile(r"^(?:\([\w.-]+\)=|%.*|:[\w-]+:.*)$", re.M)     # (label)=, % comment, :option: value


@dataclasses.dataclass(frozen=True)
class Page:
    path: str            # as in _toc.yml, without the suffix
    label: str           # what the table shows
    chapter: str         # the chapter (or "Getting started")
    words: int
    code: int
    exercises: int

    @property
    def minutes(self) -> int:
        raw = self.words / WORDS_PER_MINUTE + MINUTES_PER_CODE_CELL * self.code
        return ROUND_TO * math.ceil(raw / ROUND_TO)

    @property
    def exercise_minutes(self) -> int:
        return MINUTES_PER_EXERCISE * self.exercises


def _read(path: pathlib.Path) -> tuple[str, list[str], int]:
    """(Markdown text, figure captions, visible code cells) of a notebook or a Markdown page."""
    if path.suffix == ".md":
        text = path.read_text(encoding="utf-8")
        if text.startswith("---\n"):                        # YAML front matter is no text of the page
            text = text.split("---\n", 2)[2]
        return text, [], 0
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    text = "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    captions = [c["metadata"].get("mystnb", {}).get("figure", {}).get("caption", "") for c in cells
                if c["cell_type"] == "code"]
    code = sum(c["cell_type"] == "code" and "remove-cell" not in c["metadata"].get("tags", []) for c in cells)
    return text, captions, code


def count(path: pathlib.Path) -> tuple[int, int, int]:
    """(words, visible code cells, exercises) of one page, by the recipe of the module docstring."""
    text, captions, code = _read(path)
    exercises = len(_EXERCISE.findall(text))
    prose = _MARKUP.sub("", _FENCED.sub("", text))
    return len(prose.split()) + sum(len(c.split()) for c in captions), code, exercises


def _title(path: pathlib.Path) -> str:
    text = _read(path)[0]
    m = re.search(r"^# (.+)$", text, re.M)
    return m.group(1).strip() if m else path.stem


def _files(entry: dict) -> list[str]:
    files = [entry["file"]] if "file" in entry else []
    for section in entry.get("sections", []):
        if "glob" in section:
            files += sorted(str(p.relative_to(ROOT).with_suffix("")) for p in ROOT.glob(section["glob"])
                            if p.suffix in (".ipynb", ".md"))
        else:
            files += _files(section)
    return files


def _source(name: str) -> pathlib.Path:
    for suffix in (".ipynb", ".md"):
        if (ROOT / (name + suffix)).exists():
            return ROOT / (name + suffix)
    raise FileNotFoundError(f"{name}: no .ipynb or .md page")


def pages() -> list[Page]:
    """Every page a student reads, in the order of ``_toc.yml``, with its counts."""
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    order = [("Getting started", toc["root"])]
    for part in toc["parts"]:
        if part["caption"] in SKIP_PARTS:
            continue
        for chapter in part["chapters"]:
            order += [(part["caption"], f) for f in _files(chapter)]
    out = []
    for part, name in order:
        if name in SKIP_PAGES:
            continue
        path = _source(name)
        folder = path.parent.name
        if folder in SHORT:
            chapter = SHORT[folder]
            number = re.match(r"(\d+)_", path.stem)
            label = f"{chapter} {int(number.group(1))}: {_title(path)}" if number else f"{chapter}: index"
        else:
            chapter, label = "Getting started", _title(path)
        out.append(Page(name, label, chapter, *count(path)))
    return out


def _hours(minutes: int) -> str:
    h, m = divmod(minutes, 60)
    return f"{h} h {m:02d}" if h else f"{m} min"


def totals(rows: list[Page]) -> dict:
    """Per chapter (in order) and for the book: (reading minutes, exercises, exercise minutes)."""
    out: dict[str, list[int]] = {}
    for p in rows:
        t = out.setdefault(p.chapter, [0, 0, 0])
        t[0] += p.minutes
        t[1] += p.exercises
        t[2] += p.exercise_minutes
    out["book"] = [sum(t[k] for t in list(out.values())) for k in range(3)]
    return {k: tuple(v) for k, v in out.items()}


def table(rows: list[Page] | None = None) -> str:
    """The Markdown block that ``book/instructors.md`` holds between its markers."""
    rows = pages() if rows is None else rows
    lines = [BEGIN + " (generated by `python book/reading_times.py --write`; tests/test_reading_times.py checks it)",
             "```{table} Reading time per page, and the exercises of each page counted apart "
             f"({MINUTES_PER_EXERCISE} min each): the recipe above, computed from the pages.",
             ":name: tbl-reading-times", "",
             "| page | words | code cells | reading time | exercises |", "| --- | ---: | ---: | ---: | ---: |"]
    for p in rows:
        label = p.label.replace("|", "\\|")
        ex = f"{p.exercises} ({_hours(p.exercise_minutes)})" if p.exercises else "—"
        lines.append(f"| {{doc}}`{label} </{p.path}>` | {p.words:,} | {p.code} | {_hours(p.minutes)} | {ex} |")
    lines += ["```", ""]
    t = totals(rows)
    chapters = "; ".join(f"{name} {_hours(r)} (exercises {_hours(e)})" for name, (r, _, e) in t.items() if name != "book")
    book = t["book"]
    lines.append(f"By chapter, index pages included, reading (and exercises): {chapters}. The book: "
                 f"{_hours(book[0])} of reading and {book[1]} exercises, {_hours(book[2])}: about "
                 f"{round((book[0] + book[2]) / 60)} hours in all.")
    lines.append(END)
    return "\n".join(lines)


#: the introduction quotes the chapters' reading times through MyST substitutions in its front matter
INTRO = ROOT / "book" / "intro.md"
_KEYS = {"Getting started": "getting_started", "Noci": "noci", "G&G": "gg", "Bao": "bao", "Aghajanyan": "agh",
         "Synthesis": "synthesis", "Off-the-shelf": "real"}


def substitutions(rows: list[Page] | None = None) -> dict[str, str]:
    """``{key: time}`` for the introduction: the primer, each chapter (index included) and the book."""
    rows = pages() if rows is None else rows
    t = totals(rows)
    out = {"reading_primer": _hours(next(p.minutes for p in rows if p.path == "book/primer"))}
    out.update({f"reading_{_KEYS[name]}": _hours(r) for name, (r, _, _) in t.items() if name in _KEYS})
    book = t["book"]
    out.update(reading_book=_hours(book[0]), exercises_book=f"{book[1]} exercises, {_hours(book[2])}",
               hours_book=str(round((book[0] + book[2]) / 60)))
    return out


def _front_matter(subs: dict[str, str]) -> str:
    lines = ["---", "# reading times: generated by `python book/reading_times.py --write` (tests/test_reading_times.py)",
             "myst:", "  substitutions:"] + [f'    {k}: "{v}"' for k, v in subs.items()] + ["---", ""]
    return "\n".join(lines)


def write(path: pathlib.Path = PAGE, intro: pathlib.Path = INTRO) -> bool:
    """Put the table into ``path`` between its markers and the chapters' times into ``intro``'s front matter;
    True when a page changed."""
    rows = pages()
    text = path.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        raise ValueError(f"{path}: no '{BEGIN}' ... '{END}' markers")
    start = text.index(BEGIN)
    end = text.index(END) + len(END)
    new = text[:start] + table(rows) + text[end:]
    changed = new != text
    if changed:
        path.write_text(new, encoding="utf-8")
    old = intro.read_text(encoding="utf-8")
    body = old.split("---\n", 2)[2] if old.startswith("---\n") else old
    fresh = _front_matter(substitutions(rows)) + body
    if fresh != old:
        intro.write_text(fresh, encoding="utf-8")
    return changed or fresh != old


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help=f"rewrite the table in {PAGE.relative_to(ROOT)}")
    args = parser.parse_args(argv)
    if args.write:
        print(f"{PAGE.relative_to(ROOT)}, {INTRO.relative_to(ROOT)}: {'updated' if write() else 'already up to date'}")
    else:
        print(table())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
