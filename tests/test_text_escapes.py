r"""No TeX macro is eaten by a Python escape, and no control character reaches a page.

MathJax shows "Math input error" where a formula holds a control character: ``"$\alpha$"`` in a
non-raw Python string is ``"$" + BEL + "lpha$"`` (``\a``), ``"$\beta$"`` is a backspace and
``"eta"``. Such strings are typed into notebooks' code cells (captions, labels, glue), into the
library (ledger notes, formatters) and, through scripted edits, into the prose itself. Two checks:

* every text source of the book (notebook cells, Markdown, Python, YAML, BibTeX, JSON records)
  is free of C0 control characters other than tab, newline and carriage return;
* every non-raw Python string literal (notebooks' code cells, ``lib/sigprop``, ``book``, ``tests``)
  is free of an escape that starts a TeX macro: ``\a``, ``\b``, ``\f``, ``\v`` followed by a letter
  (``\alpha``, ``\beta``, ``\frac``, ``\varepsilon``), or ``\t``, ``\n``, ``\r`` followed by the rest
  of a macro name (``\theta``, ``\nu``, ``\rho``, ...). Write ``r"$\alpha$"`` or ``"$\\alpha$"``.
"""
from __future__ import annotations

import io
import json
import os
import pathlib
import re
import tokenize

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SKIP_PARTS = {".venv", "_build", ".git", ".ipynb_checkpoints", "__pycache__", ".hypothesis", ".pytest_cache"}
TEXT_SUFFIXES = {".ipynb", ".md", ".py", ".yml", ".yaml", ".bib", ".json", ".toml", ".cfg", ".txt", ".css", ".js"}
#: C0 controls except tab (09), newline (0a) and carriage return (0d); DEL (7f) too
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
#: TeX macros that start with t, n or r (the escapes \t, \n, \r would eat their first letter)
TNR_MACROS = {
    "tau", "theta", "times", "tanh", "text", "textrm", "textbf", "textit", "texttt", "tfrac", "tilde", "top",
    "to", "triangle", "triangleq", "tr", "nu", "nabla", "neq", "ne", "not", "nolimits", "nonumber", "newcommand",
    "notin", "nmid", "nleq", "ngeq", "rho", "right", "rangle", "rceil", "rfloor", "rm", "rVert", "rvert",
    "rightarrow", "Rightarrow", "ref",
}
# an unescaped backslash (preceded by an even number of backslashes) and the letters after it
ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\([abfvtnr])([A-Za-z]*)")


def _sources(suffixes):
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_PARTS)
        for name in sorted(files):
            if os.path.splitext(name)[1] in suffixes:
                yield pathlib.Path(folder, name)


def _tex_escapes(code: str) -> list[str]:
    """The TeX-eating escapes in the non-raw string literals of Python source ``code``."""
    # IPython magics and shell escapes are not Python: blank them (keeping line numbers)
    code = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in code.splitlines())
    found, prefix = [], ""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError) as exc:  # pragma: no cover - reported
        return [f"not tokenizable: {exc}"]
    fstring_start = getattr(tokenize, "FSTRING_START", None)
    fstring_middle = getattr(tokenize, "FSTRING_MIDDLE", None)
    for tok in tokens:
        if tok.type == fstring_start:
            prefix = tok.string
            continue
        if tok.type == tokenize.STRING:
            prefix = re.match(r"[A-Za-z]*", tok.string).group(0)
            body = tok.string[len(prefix):]
        elif tok.type == fstring_middle:
            body = tok.string
        else:
            continue
        if "r" in prefix.lower():
            continue
        for m in ESCAPE.finditer(body):
            letter, rest = m.groups()
            if (letter in "abfv" and rest) or (letter + rest) in TNR_MACROS:
                found.append(f"line {tok.start[0]}: {m.group(0)!r} in {tok.string[:60]!r}")
    return found


def _python_sources():
    """(name, code) for every .py file and every notebook code cell."""
    for path in _sources({".py"}):
        yield str(path.relative_to(ROOT)), path.read_text(encoding="utf-8")
    for path in _sources({".ipynb"}):
        for i, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
            if cell["cell_type"] == "code":
                yield f"{path.relative_to(ROOT)} cell {i}", "".join(cell["source"])


def test_the_scan_sees_the_book():
    names = [name for name, _ in _python_sources()]
    assert any(name.startswith("lib/sigprop/claims/") for name in names)
    assert sum(" cell " in name for name in names) > 100, "notebook code cells are scanned"


@pytest.mark.parametrize("code, bad", [
    ('label = "$\\alpha$"', True),
    ('label = "$\\beta = 1$"', True),
    ('label = f"{x} $\\frac{{1}}{{2}}$"', True),
    ('label = "$\\theta$"', True),
    ('label = "$\\nu$ and \\rho"', True),
    ('label = r"$\\alpha$"', False),
    ('label = "$\\\\alpha$"', False),
    ('label = "first line\\nsecond\\tcolumn"', False),
    ('label = "\\n\\nThe end"', False),
    ('label = Rf"{x} $\\beta$"', False),
])
def test_the_scan_catches_eaten_macros(code, bad):
    assert bool(_tex_escapes(code)) is bad, _tex_escapes(code)


def test_no_python_string_eats_a_tex_macro():
    bad = [f"{name}: {hit}" for name, code in _python_sources() for hit in _tex_escapes(code)]
    assert not bad, "escapes that eat a TeX macro (use a raw string, r\"$\\alpha$\"):\n" + "\n".join(bad)


def test_no_control_characters_in_the_sources():
    bad = []
    for path in _sources(TEXT_SUFFIXES):
        text = path.read_text(encoding="utf-8", errors="replace")
        if path.suffix in (".ipynb", ".json"):
            # JSON writes a control character as \u00XX: scan the decoded strings
            text = _decoded_strings(json.loads(text))
        for m in CONTROL.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            context = text[max(0, m.start() - 20):m.end() + 20]
            bad.append(f"{path.relative_to(ROOT)}:{line}: {context!r}")
    assert not bad, "control characters (a Python escape such as \\a or \\b written into the text?):\n" + (
        "\n".join(bad))


def _decoded_strings(obj) -> str:
    """All strings in a JSON document, joined by newlines."""
    if isinstance(obj, str):
        return obj
    if isinstance(obj, dict):
        return "\n".join(_decoded_strings(k) + "\n" + _decoded_strings(v) for k, v in obj.items())
    if isinstance(obj, list):
        return "\n".join(_decoded_strings(v) for v in obj)
    return ""
