"""The book's pages as Jupyter-native notebooks: what Colab, Binder, JupyterLab and VS Code open.

The pages are MyST (``{numref}`fig-x```, ``{glue:text}`key```, ```` ```{prf:lemma} ````, ``(label)=``), which only
the book's build renders; opened in Jupyter they showed every role raw and every solution in the open. This module
turns one page into a notebook that reads right there, in two editions:

* **reader's edition** (``reader/``): what the HTML page shows, solutions folded in ``<details>``;
* **student's edition** (``student/``): the same without the solutions (for exercises set as homework).

What changes, cell by cell:

* Markdown cells: every role resolved to what the HTML shows -- glued numbers as the build computed them,
  ``{ledger}`` quotes as their text, ``{numref}``/``{ref}``/``{doc}``/``{prf:ref}``/``{eq}``/``{term}``/``{test}``
  as links into the published HTML (or the repository at the release, for a test), ``{cite}`` as author-year linked
  to the entry, with the cited entries listed at the end; theorem-like boxes (sphinx-proof) and exercises as quoted
  Markdown headed by the HTML's number and title, admonitions quoted (folded when ``dropdown``); tables and figures
  under their number and caption (a figure's image from the published HTML); ``{include}`` inlined,
  ``{bibliography}`` as a list, ``{code-block}`` as a plain fence under its caption; ``(label)=`` targets, ``%``
  comments and ``+++`` breaks dropped; definition lists as bulleted terms; links to other pages pointed at the HTML.
  Formulas stay ``$...$`` (Jupyter's MathJax typesets them); inside quoted boxes each formula is put on one line,
  since Jupyter lifts math out of the text before it parses the ``>`` of a quote.
* Code cells: unchanged, so the build's execution stands for theirs (``.ci/nbval_built.py``), except the page's
  hidden install cell (the first; a page without one gets one first), which becomes the set-up cell of
  ``book/sources.py`` (:func:`sources.setup_cell`: installs the pinned release on Colab, shows glued numbers under
  the cell that computes them), collapsed under its first line. Cells the book hides (``remove-cell``: the record
  checks; ``remove-input``, ``hide-input``) are collapsed too (``jupyter.source_hidden``; Colab's ``cellView:
  form``). Under each figure, a Markdown cell with its number and caption, as the HTML shows them.

Anything MyST that this module does not know is an error (:class:`Unresolved`), and :func:`residue` finds any
MyST left in a notebook (tests/test_notebooks.py runs it on every built notebook). What only a build knows --
numbers, titles, glued values, the bibliography -- comes from a :class:`Context`: the book's Sphinx extension
(``book/_ext/sigprop_notebooks.py``) supplies one from the build; the tests a fake one.
"""
from __future__ import annotations

import copy
import re
from typing import Protocol

EDITIONS = ("reader", "student")
#: the line every page's install cell and every built notebook's set-up cell has (book/sources.py writes both)
INSTALLS = 'if "google.colab" in sys.modules:'

#: cell tags under which the HTML hides a cell's code (and, for remove-cell, its output)
HIDDEN = ("remove-cell", "remove-input", "hide-input", "hide-cell")
#: docutils' admonitions (quoted under their name; ``{admonition} Title`` under its title; ``dropdown``: folded)
ADMONITIONS = ("attention", "caution", "danger", "error", "hint", "important", "note", "seealso", "tip", "warning")
#: sphinx-proof's boxes: quoted, headed by the HTML's number and title
PROOF_KINDS = ("algorithm", "axiom", "conjecture", "corollary", "criterion", "definition", "example", "lemma",
               "observation", "proof", "property", "proposition", "remark", "theorem")


class Unresolved(ValueError):
    """A role or directive that has no notebook form, or a reference the build cannot resolve."""


class Context(Protocol):
    """What the build knows about one page."""

    def role(self, name: str, content: str) -> str:
        """Markdown for ``{name}`content```: a link or text (raise :class:`Unresolved` if unknown)."""

    def heading(self, kind: str, ordinal: int) -> str:
        """The HTML's title prefix of the ``ordinal``-th directive ``kind`` of the page: ``"Lemma 3"``,
        ``"Exercise 7"``, ``"Solution to Exercise 7"``, ``"Proof"``."""

    def number(self, name: str) -> str:
        """A figure's or a table's number as the HTML shows it, from its label: ``"Figure 2.4"``; ``""`` where the
        page is not numbered."""

    def substitutions(self) -> dict:
        """The book's ``{{ name }}`` substitutions (``myst_substitutions``); a page's front matter adds its own."""

    def image(self, path: str) -> str:
        """The published URL of an image (path as written, relative to the page)."""

    def include(self, path: str) -> str:
        """The MyST text of an ``{include}``d file (path as written, relative to the page)."""

    def bibliography(self) -> list[str]:
        """Every entry of the bibliography, as Markdown (the ``{bibliography}`` directive)."""

    def references(self) -> list[str]:
        """The entries cited on the page so far (by ``{cite}``), as Markdown."""

    def link(self, target: str) -> str:
        """The published URL of a local Markdown link target (``01_theorem.ipynb``, ``#label``)."""


# ----------------------------------------------------------------------------- MyST left in a text

_RESIDUE = {
    "role": re.compile(r"\{[a-z][\w:.-]*\}`"),
    "directive": re.compile(r"(?m)^[ \t>]*(`{3,}|~{3,}|:{3,})[ \t]*\{[a-z][\w:.-]*\}"),
    "colon fence": re.compile(r"(?m)^[ \t>]*:::"),
    "target": re.compile(r"(?m)^[ \t>]*\([\w:.-]+\)=[ \t]*$"),
    "substitution": re.compile(r"\{\{[^{}\n]*\}\}"),
}


def _in_fences(lines: list[str]) -> list[bool]:
    """Whether each line belongs to a code fence (its own fence lines included; a directive's fence, whose info
    string starts with ``{``, is not code), also inside a quote (``>``)."""
    inside, fence = [], None
    for line in lines:
        if fence is None and re.match(r"^[ \t>]*(`{3,}|~{3,})[ \t]*(?![`~{])", line):
            fence = re.match(r"^[ \t>]*(`{3,}|~{3,})", line).group(1)
            inside.append(True)
        elif fence and re.match(rf"^[ \t>]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", line):
            fence = None
            inside.append(True)
        else:
            inside.append(fence is not None)
    return inside


def _without_fences(text: str) -> str:
    """``text`` without its code fences, which Jupyter shows as written: a page may show MyST as code on purpose."""
    lines = text.split("\n")
    return "\n".join(line for line, fenced in zip(lines, _in_fences(lines)) if not fenced)


def residue(text: str) -> list[str]:
    """Every piece of MyST syntax in ``text`` (roles, directive fences, ``:::``, ``(label)=``, ``{{ }}``) outside
    code (fences and inline code spans), each as ``"kind: excerpt"``; ``[]`` for Jupyter-native Markdown."""
    found, blocks_only = [], _without_fences(text)
    inline_too = _INLINE.sub(lambda m: m.group(0) if m["role"] else "", blocks_only)
    for kind, pattern in _RESIDUE.items():
        where = inline_too if kind in ("role", "substitution") else blocks_only
        for m in pattern.finditer(where):
            found.append(f"{kind}: {where[max(0, m.start() - 30):m.end() + 30]!r}")
    return found


# ----------------------------------------------------------------------------- blocks of a MyST text

_FENCE = re.compile(r"^(?P<indent>[ \t]{0,3})(?P<fence>`{3,}|~{3,}|:{3,})[ \t]*(?P<info>.*?)[ \t]*$")
_DIRECTIVE = re.compile(r"^\{(?P<name>[a-z][\w:.-]*)\}[ \t]*(?P<argument>.*)$")
_OPTION = re.compile(r"^[ \t]*:(?P<key>[\w-]+):(?:[ \t]+(?P<value>.*?))?[ \t]*$")


def blocks(text: str) -> list[tuple]:
    """``text`` cut into ``("text", str)``, ``("fence", str)`` (a code fence, verbatim) and
    ``("directive", name, argument, options, body)``; a fence closes at the first line of at least its own
    run of its character and nothing else (CommonMark), a directive's options are its leading ``:key: value``
    lines."""
    out, lines, i, plain = [], text.split("\n"), 0, []
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            plain.append(lines[i])
            i += 1
            continue
        fence = m["fence"]
        close = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        j = i + 1
        while j < len(lines) and not close.match(lines[j]):
            j += 1
        body = lines[i + 1:j]
        if plain:
            out.append(("text", "\n".join(plain)))
            plain = []
        d = _DIRECTIVE.match(m["info"])
        if d:
            options, key = {}, None
            while body and (_OPTION.match(body[0]) or key and re.match(r"^[ \t]+\S", body[0])):
                o = _OPTION.match(body[0])
                if o:
                    key, options[o["key"]] = o["key"], o["value"] or ""
                else:                                       # an option's value continued on an indented line
                    options[key] = f"{options[key]} {body[0].strip()}".strip()
                body = body[1:]
            out.append(("directive", d["name"], d["argument"], options, "\n".join(body).strip("\n")))
        elif fence[0] == ":":
            raise Unresolved(f"a ':::' fence without a directive name: {lines[i]!r}")
        else:
            out.append(("fence", "\n".join(lines[i:j + 1])))
        i = j + 1
    if plain:
        out.append(("text", "\n".join(plain)))
    return out


# ----------------------------------------------------------------------------- inline MyST

_INLINE = re.compile(r"\{(?P<role>[a-z][\w:.-]*)\}(?P<ticks>`+)(?P<content>.+?)(?P=ticks)(?!`)"
                     r"|(?P<code>`+).+?(?P=code)(?!`)", re.S)
_LINK = re.compile(r"(?<!!)\[(?P<text>[^\]\n]*(?:\n[^\]\n]*)?)\]\((?P<target>[^)\s]+)\)")
_TARGET = re.compile(r"(?m)^[ \t]*\([\w:.-]+\)=[ \t]*\n?")
_COMMENT = re.compile(r"(?m)^%.*\n?|^\+\+\+.*\n?")
_SUBSTITUTION = re.compile(r"\{\{\s*([A-Za-z_][\w.]*)\s*\}\}")
_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?)\n---[ \t]*\n", re.S)
_DEFINITION = re.compile(r"(?m)^(?P<term>[^\s>*#|-][^\n]*)\n: (?P<first>[^\n]*)")


def inline(text: str, ctx: Context, substitutions: dict | None = None) -> str:
    """Roles and ``{{ name }}`` substitutions resolved (inline code left as written), local links pointed at the
    HTML, MyST-only lines dropped, definition lists as bulleted terms."""
    text = _COMMENT.sub("", _TARGET.sub("", text))

    def substitute(m: re.Match) -> str:
        if substitutions is None or m[1] not in substitutions:
            raise Unresolved(f"no substitution {m[1]!r} (front matter myst.substitutions, or myst_substitutions)")
        return inline(str(substitutions[m[1]]), ctx)

    text = _SUBSTITUTION.sub(substitute, text)
    text = _DEFINITION.sub(lambda m: f"- **{m['term'].strip()}**: {m['first']}", text)

    def one(m: re.Match) -> str:
        if m["code"]:
            return m.group(0)
        return ctx.role(m["role"], " ".join(m["content"].split()))

    text = _INLINE.sub(one, text)

    def link(m: re.Match) -> str:
        target = m["target"]
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):       # https:, mailto:, ...
            return m.group(0)
        return f"[{m['text']}]({ctx.link(target)})"

    return _LINK.sub(link, text)


# ----------------------------------------------------------------------------- quoting

_MATH = re.compile(r"\$\$.+?\$\$|\\begin\{(?P<env>[a-zA-Z*]+)\}.+?\\end\{(?P=env)\}|(?<![\\$])\$[^$\n]"
                   r"(?:[^$]|\\\$)*?(?<!\\)\$", re.S)


def one_line_math(text: str) -> str:
    """Every formula on one line (its line breaks are spaces to TeX), so that it survives a quote's ``>``."""
    return _MATH.sub(lambda m: " ".join(m.group(0).split()), text)


def quote(text: str) -> str:
    """``text`` as a Markdown blockquote (formulas first joined onto one line)."""
    return "\n".join(f"> {line}" if line.strip() else ">" for line in one_line_math(text).split("\n"))


# ----------------------------------------------------------------------------- directives

def _numbered(ctx: Context, label: str | None) -> str:
    """``"**Table 2.4.** "`` for a numbered label; ``""`` without a label or a number (a page the book does not
    number shows its tables and figures without one)."""
    number = ctx.number(label) if label else ""
    return f"**{number}.** " if number else ""


class _Page:
    """One page's conversion state: directive ordinals (matched to the build's numbering in order)."""

    def __init__(self, ctx: Context, edition: str, substitutions: dict | None = None):
        if edition not in EDITIONS:
            raise ValueError(f"edition must be one of {EDITIONS}; got {edition!r}")
        self.ctx, self.edition, self.seen, self.exercises = ctx, edition, {}, {}
        self.substitutions = dict(substitutions or {})

    def inline(self, text: str) -> str:
        return inline(text, self.ctx, self.substitutions)

    def ordinal(self, kind: str) -> int:
        self.seen[kind] = self.seen.get(kind, 0) + 1
        return self.seen[kind]

    def markdown(self, text: str) -> str:
        out = []
        for block in blocks(text):
            if block[0] == "text":
                out.append(self.inline(block[1]))
            elif block[0] == "fence":
                out.append(block[1])
            else:
                out.append(self.directive(*block[1:]))
        return "\n".join(out)

    def directive(self, name: str, argument: str, options: dict, body: str) -> str:
        kind = name.split(":", 1)[1] if name.startswith("prf:") else name
        if name.startswith("prf:") and kind in PROOF_KINDS or name == "exercise":
            head = self.ctx.heading(kind, self.ordinal(kind))
            title = f" ({self.inline(argument)})" if argument else ""
            if name == "exercise" and options.get("label"):
                self.exercises[options["label"]] = title
            return "\n" + quote(f"**{head}**{title}\n\n{self.markdown(body)}") + "\n"
        if name == "solution":
            head = self.ctx.heading("solution", self.ordinal("solution")) + self.exercises.get(argument.strip(), "")
            if self.edition == "student":
                return ""
            return (f"\n<details>\n<summary><b>{head}</b></summary>\n\n{self.markdown(body)}\n\n</details>\n")
        if name == "admonition" or name in ADMONITIONS:
            title = self.inline(argument) if name == "admonition" else name.title()
            if "dropdown" in options.get("class", "").split():
                return f"\n<details>\n<summary><b>{title}</b></summary>\n\n{self.markdown(body)}\n\n</details>\n"
            return "\n" + quote(f"**{title}**\n\n{self.markdown(body)}") + "\n"
        if name == "table":
            return f"\n{_numbered(self.ctx, options.get('name'))}{self.inline(argument)}\n\n{self.markdown(body)}\n"
        if name == "figure":
            alt = " ".join(options.get("alt", "").split()) or "figure"
            head = _numbered(self.ctx, options.get("name"))
            return f"\n![{alt}]({self.ctx.image(argument.strip())})\n\n{head}{self.markdown(body)}\n"
        if name == "include":
            return self.markdown(self.ctx.include(argument.strip()))
        if name == "bibliography":
            return "\n".join(f"- {entry}" for entry in self.ctx.bibliography())
        if name in ("code-block", "code"):
            caption = f"*{self.inline(options['caption'])}*\n\n" if options.get("caption") else ""
            return f"{caption}```{argument.strip()}\n{body}\n```"
        raise Unresolved(f"no notebook form for the directive {{{name}}}")


# ----------------------------------------------------------------------------- notebooks

def _text(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _lines(text: str) -> list[str]:
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _markdown_cell(cell_id: str, text: str) -> dict:
    text = re.sub(r"\n[ \t]*\n(?:[ \t]*\n)+", "\n\n", text.strip("\n"))      # what a removed block left
    return {"cell_type": "markdown", "id": cell_id[:64], "metadata": {}, "source": _lines(text)}


def _code_cell(cell_id: str, text: str, metadata: dict | None = None) -> dict:
    return {"cell_type": "code", "execution_count": None, "id": cell_id[:64], "metadata": metadata or {},
            "outputs": [], "source": _lines(text)}


def _hidden(metadata: dict) -> dict:
    """A cell the book hides, collapsed: JupyterLab and VS Code (``jupyter.source_hidden``), Colab (``form``)."""
    meta = copy.deepcopy(metadata)
    meta.setdefault("jupyter", {})["source_hidden"] = True
    meta["cellView"] = "form"
    return meta


_HEADING = re.compile(r"(?m)^(?=#{1,3} )")


def _sections(text: str) -> list[str]:
    """A Markdown page cut before each heading of level 1-3 outside code fences: one cell each."""
    cells, current, lines = [], [], text.split("\n")
    for line, fenced in zip(lines, _in_fences(lines)):
        if not fenced and _HEADING.match(line) and any(x.strip() for x in current):
            cells.append("\n".join(current))
            current = []
        current.append(line)
    cells.append("\n".join(current))
    return [c for c in cells if c.strip()]


def front_matter(text: str) -> tuple[dict, str]:
    """A Markdown page's YAML front matter (``---`` ... ``---``, dropped from the text) and the rest."""
    m = _FRONT_MATTER.match(text)
    if not m:
        return {}, text
    import yaml

    return yaml.safe_load(m[1]) or {}, text[m.end():]


def convert(page: dict | str, ctx: Context, edition: str, setup: str, metadata: dict) -> dict:
    """The notebook of one page in one edition.

    ``page``: the page's notebook (a dict, as read from JSON) or its Markdown text; ``setup``: the first code
    cell's text (the set-up cell of ``book/sources.py``); ``metadata``: added under the notebook's ``sigprop`` key.
    """
    meta, page = front_matter(page) if isinstance(page, str) else (page.get("metadata", {}), page)
    subs = {**ctx.substitutions(), **meta.get("myst", {}).get("substitutions", {}), **meta.get("substitutions", {})}
    state = _Page(ctx, edition, subs)
    cells = []
    if isinstance(page, str):
        nb_meta = {}
        cells.append(_code_cell("sigprop-setup", setup, _hidden({})))
        for i, text in enumerate(_sections(state.markdown(page))):
            cells.append(_markdown_cell(f"md-{i}", text))
    else:
        nb_meta = copy.deepcopy(page.get("metadata", {}))
        if not any(_installs(c) for c in page["cells"]):
            cells.append(_code_cell("sigprop-setup", setup, _hidden({})))
        for i, cell in enumerate(page["cells"]):
            cid = cell.get("id") or f"cell-{i}"
            if cell["cell_type"] == "markdown":
                text = state.markdown(_text(cell))
                if text.strip():
                    cells.append(_markdown_cell(cid, text))
            elif _installs(cell):
                cells.append(_code_cell(cid, setup, _hidden({})))
            elif cell["cell_type"] == "code":
                meta = copy.deepcopy(cell.get("metadata", {}))
                tags = meta.get("tags", [])
                cells.append(_code_cell(cid, _text(cell), _hidden(meta) if set(tags) & set(HIDDEN) else meta))
                figure = meta.get("mystnb", {}).get("figure")
                if figure and figure.get("name"):
                    caption = state.markdown(figure.get("caption", ""))
                    cells.append(_markdown_cell(f"{cid}-caption", _numbered(ctx, figure["name"]) + caption.strip()))
            else:
                cells.append(copy.deepcopy(cell))
    cited = ctx.references()
    if cited:
        cells.append(_markdown_cell("sigprop-references", "**References**\n\n" + "\n".join(f"- {e}" for e in cited)))
    nb_meta.setdefault("kernelspec", {"name": "python3", "display_name": "Python 3", "language": "python"})
    nb_meta.setdefault("language_info", {"name": "python"})
    nb_meta["sigprop"] = dict(metadata, edition=edition)
    return {"cells": cells, "metadata": nb_meta, "nbformat": 4, "nbformat_minor": 5}


def notebook_residue(nb: dict) -> list[str]:
    """:func:`residue` of every Markdown cell of a notebook, each finding prefixed with its cell's index."""
    return [f"cell {i}: {found}" for i, cell in enumerate(nb["cells"]) if cell["cell_type"] == "markdown"
            for found in residue(_text(cell))]


def _installs(cell: dict) -> bool:
    """Whether a cell is a page's install cell or a built notebook's set-up cell (book/sources.py writes both)."""
    return cell["cell_type"] == "code" and INSTALLS in _text(cell)


def code_cells(nb: dict) -> list[str]:
    """The sources of a notebook's code cells but its install or set-up cell: equal for a page and its built
    notebooks (tests/test_notebooks.py), which is what lets the page's execution stand for theirs."""
    return [_text(c) for c in nb["cells"] if c["cell_type"] == "code" and not _installs(c)]
