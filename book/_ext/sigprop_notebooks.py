"""Sphinx extension: every page as a Jupyter-native notebook, and the header's buttons pointed at them.

**The notebooks.** When the HTML build finishes, every page is converted by ``book/notebooks.py`` into a reader's
edition (solutions folded) and a student's edition (solutions removed), written into the site under
``_notebooks/<edition>/<page>.ipynb``; the publishing workflow copies that folder to the ``notebooks`` branch at
each release (``book/release.py --notebooks-tree``), and the release's notebooks zip holds it too. What only the
build knows is supplied here (:class:`PageContext`): each role is resolved by the Sphinx domain that resolves it
in the HTML (the same numbers, titles and targets), glued values are read from the execution's
``<page>.glue.json`` (myst-nb) and formatted as myst-nb formats them, ``{ledger}`` and ``{test}`` by the book's
own roles. A role, directive or reference that cannot be resolved is a build warning (an error under ``-W``), and
so is any MyST left in a notebook.

**The buttons.** sphinx-book-theme's launch buttons opened the MyST source from the repository (raw roles and
open solutions in Colab) and existed only on notebook pages; its download menu saved that source (``.md`` for a
Markdown page). On every page now: Colab and Binder open the reader's edition published at the release's
notebooks tag (``book/sources.py``: ``published``), and the download menu saves the reader's edition, or the
student's where the page has solutions (``sigprop_release.py`` makes those links save a file).
"""
from __future__ import annotations

import importlib.util
import json
import pathlib
import posixpath
import shutil
import time
from urllib.parse import urljoin

from docutils import nodes
from sphinx import addnodes
from sphinx.util import logging
from sphinx.util.nodes import split_explicit_title

BOOK = pathlib.Path(__file__).resolve().parents[1]
FOLDER = "_notebooks"
logger = logging.getLogger(__name__)


def _module(name: str, path: pathlib.Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


notebooks = _module("sigprop_book_notebooks", BOOK / "notebooks.py")
sources = _module("sigprop_book_sources_ext", BOOK / "sources.py")

#: roles resolved as cross-references: role -> (domain, type); cite's variants are added below
XREFS = {"ref": ("std", "ref"), "numref": ("std", "numref"), "doc": ("std", "doc"), "term": ("std", "term"),
         "eq": ("math", "eq"), "prf:ref": ("prf", "ref"), "cite": ("cite", "p")}
GLUE = ("glue", "glue:", "glue:any", "glue:text")


def _markdown(node: nodes.Node, url) -> str:
    """Inline Markdown of a resolved reference's nodes (``url`` makes a build-relative link absolute)."""
    if isinstance(node, nodes.Text):
        return str(node).replace("[", "\\[").replace("]", "\\]")
    if isinstance(node, nodes.math):
        return f"${node.astext()}$"
    if isinstance(node, nodes.literal):
        return f"`{node.astext()}`"
    inner = "".join(_markdown(child, url) for child in node.children)
    if isinstance(node, nodes.reference):
        return f"[{inner}]({url(node.get('refuri') or '#' + node.get('refid', ''))})"
    if isinstance(node, nodes.emphasis):
        return f"*{inner}*"
    if isinstance(node, nodes.strong):
        return f"**{inner}**"
    return inner


class PageContext:
    """:class:`notebooks.Context` of one page, from the finished build (``app``)."""

    def __init__(self, app, docname: str, headings: dict[str, list[str]] | None = None):
        self.app, self.env, self.docname = app, app.env, docname
        self.base = sources.source()["pages"]
        self.url = urljoin(self.base, app.builder.get_target_uri(docname))
        self.cited: dict[str, str] = {}
        self.headings = _headings(app, docname) if headings is None else headings
        self._glue = None

    # -- links
    def absolute(self, uri: str) -> str:
        return urljoin(self.url, uri)

    def link(self, target: str) -> str:
        path, _, anchor = target.partition("#")
        if not path:
            labels = self.env.get_domain("std").labels
            if anchor.lower() in labels:
                doc, labelid, _ = labels[anchor.lower()]
                return urljoin(self.base, self.app.builder.get_target_uri(doc)) + f"#{labelid}"
            return f"{self.url}#{anchor}"
        doc = posixpath.normpath(posixpath.join(posixpath.dirname(self.docname), path.rsplit(".", 1)[0]))
        if doc not in self.env.found_docs:
            raise notebooks.Unresolved(f"a link to {target!r}: no such page")
        return urljoin(self.base, self.app.builder.get_target_uri(doc)) + (f"#{anchor}" if anchor else "")

    # -- roles
    def role(self, name: str, content: str) -> str:
        """A role's Markdown; one that does not resolve is a warning (an error under ``-W``, as in the HTML) and
        shows what the HTML shows then: its text (a glued value: nothing)."""
        try:
            return self._role(name, content)
        except notebooks.Unresolved as exc:
            if name not in XREFS and name not in ("ledger", "test") and not name.startswith(("cite:", "glue")):
                raise                                   # a role the notebooks do not know: the page fails
            logger.warning(f"notebook of {self.docname}: {exc}", location=self.docname, type="sigprop",
                           subtype="notebook")
            return "" if name in GLUE else split_explicit_title(content)[1]

    def _role(self, name: str, content: str) -> str:
        if name in GLUE:
            return self.glue(content)
        if name == "ledger":
            import sigprop_ledger
            try:
                return sigprop_ledger.text(content)
            except (KeyError, ValueError) as exc:
                raise notebooks.Unresolved(f"{{ledger}}`{content}`: {exc}") from None
        if name == "test":
            import sigprop_tests
            theme = self.env.config.html_theme_options or {}
            try:
                shown, href, literal = sigprop_tests.link(content, pathlib.Path(self.env.srcdir),
                                                           theme.get("repository_url", ""),
                                                           theme.get("repository_branch") or "main")
            except ValueError as exc:
                raise notebooks.Unresolved(f"{{test}}`{content}`: {exc}") from None
            return f"[`{shown}`]({href})" if literal else f"[{shown}]({href})"
        if name == "math":
            return f"${content}$"
        domain, typ = XREFS.get(name) or (("cite", name.split(":", 1)[1]) if name.startswith("cite:") else (None, None))
        if domain is None:
            raise notebooks.Unresolved(f"no notebook form for the role {{{name}}}")
        return self.xref(domain, typ, content)

    def xref(self, domain_name: str, typ: str, content: str) -> str:
        explicit, title, target = split_explicit_title(content)
        domain = self.env.get_domain(domain_name)
        role = domain.roles.get(typ) or domain.roles.get(f"{domain_name}:{typ}")
        if getattr(role, "lowercase", False):
            target = target.lower()
        node = addnodes.pending_xref(content, refdomain=domain_name, reftype=typ, reftarget=target,
                                     refexplicit=explicit, refwarn=True, refdoc=self.docname)
        contnode = nodes.inline(title, title)
        node += contnode.deepcopy()                 # as a role makes it: {doc} reads an explicit title there
        resolved = domain.resolve_xref(self.env, self.docname, self.app.builder, typ, target, node, contnode)
        if resolved is None or not any(True for _ in resolved.findall(nodes.reference)):
            raise notebooks.Unresolved(f"{{{domain_name}:{typ}}}`{content}` does not resolve")
        if domain_name == "cite":
            self._note_citations(domain, target)
        return _markdown(resolved, self.absolute)

    def _note_citations(self, domain, target: str) -> None:
        from pybtex.plugin import find_plugin

        backend = find_plugin("pybtex.backends", "markdown")()
        keys = [k.strip() for k in target.split(",")]
        for citation in domain.citations:
            if citation.key in keys and citation.key not in self.cited:
                self.cited[citation.key] = _entry(citation, backend)

    def glue(self, content: str) -> str:
        from myst_nb.core.variables import format_plain_text

        if self._glue is None:
            path = pathlib.Path(self.env.mystnb_config.output_folder, *self.docname.split("/"))
            glue_file = path.parent / f"{path.name}.glue.json"
            self._glue = json.loads(glue_file.read_text(encoding="utf-8")) if glue_file.is_file() else {}
        key, _, fmt = content.rpartition(":") if ":" in content else (content, "", "")
        entry = self._glue.get(key)
        if entry is None or "text/plain" not in entry.get("data", {}):
            raise notebooks.Unresolved(f"no glued value {key!r} in {self.docname}'s execution")
        return format_plain_text(entry["data"]["text/plain"], fmt or "s")

    # -- what else a page needs
    def heading(self, kind: str, ordinal: int) -> str:
        found = self.headings.get(kind, [])
        if ordinal > len(found):
            raise notebooks.Unresolved(f"{kind} number {ordinal} of {self.docname} is not in the build")
        return found[ordinal - 1]

    def number(self, name: str) -> str:
        std = self.env.get_domain("std")
        doc, labelid, _ = std.labels.get(name.lower(), ("", "", ""))
        node = self.env.get_doctree(doc).ids.get(labelid) if doc else None
        kind = std.get_enumerable_node_type(node) if node is not None else None
        number = self.env.toc_fignumbers.get(doc, {}).get(kind, {}).get(labelid) if kind else None
        return self.env.config.numfig_format[kind] % ".".join(map(str, number)) if number else ""

    def substitutions(self) -> dict:
        return dict(self.env.config.myst_substitutions or {})

    def image(self, path: str) -> str:
        rel = posixpath.normpath(posixpath.join(posixpath.dirname(self.docname), path))
        if rel not in self.env.images:
            raise notebooks.Unresolved(f"the image {path!r} is not in the build")
        return urljoin(self.base, f"{self.app.builder.imagedir}/{self.env.images[rel][1]}")

    def include(self, path: str) -> str:
        return (pathlib.Path(self.env.doc2path(self.docname)).parent / path).read_text(encoding="utf-8")

    def bibliography(self) -> list[str]:
        from pybtex.plugin import find_plugin

        backend = find_plugin("pybtex.backends", "markdown")()
        domain = self.env.get_domain("cite")
        return [_entry(c, backend) for c in domain.citations if c.bibliography_key.docname == self.docname]

    def references(self) -> list[str]:
        return list(self.cited.values())


def _entry(citation, backend) -> str:
    """A bibliography entry as one line of Markdown (pybtex's Markdown backend breaks it into lines)."""
    return " ".join(citation.formatted_entry.text.render(backend).split())


def _headings(app, docname: str) -> dict[str, list[str]]:
    """The title prefix of every numbered box of a page, by kind, in the page's order, as the HTML numbers
    them: sphinx-proof's (``Lemma 3``, ``Proof``), sphinx-exercise's (``Exercise 7``, ``Solution to Exercise 7``)."""
    env, out, exercises = app.env, {}, {}
    numbers = env.toc_fignumbers.get(docname, {})

    def number(kind, node):
        value = numbers.get(kind, {}).get((node.get("ids") or [""])[0])
        return ".".join(map(str, value)) if value else ""

    doctree = env.get_doctree(docname)
    for node in doctree.findall(nodes.Element):
        cls = type(node).__name__
        if node.get("realtype") and cls != "proof_node":       # sphinx-proof's <type>_node, unenumerable_node
            kind = node["realtype"]
            shown = "" if cls == "unenumerable_node" else number(node.get("countertype", kind), node)
            out.setdefault(kind, []).append(f"{kind.title()} {shown}".strip())
        elif cls == "proof_node":
            out.setdefault("proof", []).append("Proof")
        elif cls in ("exercise_enumerable_node", "exercise_node"):
            title = f"Exercise {number('exercise', node)}".strip()
            out.setdefault("exercise", []).append(title)
            exercises[node.get("label", "")] = title
        elif cls == "solution_node":
            target = node.get("target_label", "")
            out.setdefault("solution", []).append(f"Solution to {exercises.get(target) or _exercise(app, target)}")
    return out


def _exercise(app, label: str) -> str:
    """The title prefix of an exercise on another page (a solution may follow an exercise elsewhere)."""
    std = app.env.get_domain("std")
    doc, labelid, _ = std.labels.get(label.lower(), ("", "", ""))
    value = app.env.toc_fignumbers.get(doc, {}).get("exercise", {}).get(labelid)
    return "Exercise " + ".".join(map(str, value)) if value else "Exercise"


def _keep_source(app, docname: str, source: list) -> None:
    """``source-read``: the page's text as the build reads it (converted at the end, consistent with its execution
    even when the file changes meanwhile)."""
    if not hasattr(app.env, "sigprop_pages"):
        app.env.sigprop_pages = {}
    app.env.sigprop_pages[docname] = source[0]


def _purge(app, env, docname: str) -> None:
    getattr(env, "sigprop_pages", {}).pop(docname, None)


def _merge(app, env, docnames, other) -> None:
    env.sigprop_pages = {**getattr(env, "sigprop_pages", {}),
                         **{d: t for d, t in getattr(other, "sigprop_pages", {}).items() if d in docnames}}


def _page_source(app, docname: str):
    path = pathlib.Path(app.env.doc2path(docname))
    text = getattr(app.env, "sigprop_pages", {}).get(docname)
    if text is None:
        text = path.read_text(encoding="utf-8")
    return json.loads(text) if path.suffix == ".ipynb" else text


def build(app, exception=None) -> None:
    """``build-finished``: every page's notebooks into ``<outdir>/_notebooks/<edition>/``."""
    if exception is not None or app.builder.name != "html":
        return
    out, start = pathlib.Path(app.outdir) / FOLDER, time.monotonic()
    if out.exists():
        shutil.rmtree(out)
    src = sources.source()
    for docname in sorted(app.env.found_docs):
        page, headings = _page_source(app, docname), _headings(app, docname)
        for edition in notebooks.EDITIONS:
            ctx = PageContext(app, docname, headings)
            meta = {"version": src["version"], "page": ctx.url, "source": app.env.doc2path(docname, False)}
            try:
                nb = notebooks.convert(page, ctx, edition, sources.setup_cell(src, edition, ctx.url), meta)
            except notebooks.Unresolved as exc:
                logger.warning(f"notebook of {docname}: {exc}", location=docname, type="sigprop", subtype="notebook")
                continue
            for problem in notebooks.notebook_residue(nb):
                logger.warning(f"notebook of {docname} ({edition}): MyST left: {problem}", location=docname,
                               type="sigprop", subtype="notebook")
            path = out / edition / f"{docname}.ipynb"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    logger.info(f"notebooks: {len(app.env.found_docs)} pages x {len(notebooks.EDITIONS)} editions in {out} "
                f"({time.monotonic() - start:.1f} s)")


# ----------------------------------------------------------------------------- the header's buttons

def _has_solutions(doctree) -> bool:
    return doctree is not None and any(type(n).__name__ == "solution_node" for n in doctree.findall(nodes.Element))


def buttons(app, pagename, templatename, context, doctree) -> None:
    """After the theme's handlers: launch and download entries for the published notebooks, on every page."""
    header = context.get("header_buttons")
    if header is None or pagename not in app.env.found_docs or app.builder.name != "html":
        return                                  # not the single-page build (the PDF has no buttons to press)
    src = sources.source()
    links = sources.published(src, f"reader/{pagename}.ipynb")
    launch = {"type": "group", "tooltip": "Open this page as a notebook (the reader's edition)",
              "icon": "fas fa-rocket", "label": "launch-buttons", "buttons": [
                  {"type": "link", "text": "Colab", "tooltip": "Open the reader's edition in Colab",
                   "icon": "_static/images/logo_colab.png", "url": links["colab"], "label": "launch-colab-button"},
                  {"type": "link", "text": "Binder", "tooltip": "Open the reader's edition in JupyterLab on Binder",
                   "icon": "_static/images/logo_binder.svg", "url": links["binder"],
                   "label": "launch-binder-button"}]}
    pathto = context["pathto"]
    saves = [{"type": "link", "text": ".ipynb", "icon": "fas fa-code", "label": "download-notebook-button",
              "tooltip": "Download this page as a notebook (solutions folded)",
              "url": pathto(f"{FOLDER}/reader/{pagename}.ipynb", 1)}]
    if _has_solutions(doctree):
        saves.append({"type": "link", "text": ".ipynb, no solutions", "icon": "fas fa-code",
                      "label": "download-student-notebook-button",
                      "tooltip": "Download this page as a notebook without the solutions (for homework)",
                      "url": pathto(f"{FOLDER}/student/{pagename}.ipynb", 1)})
    for group in header:
        if group.get("label") == "download-buttons":
            group["buttons"] = saves + [b for b in group["buttons"] if b.get("label") == "download-pdf-button"]
    header[:] = [g for g in header if g.get("label") != "launch-buttons"]
    where = next((i for i, g in enumerate(header) if g.get("label") == "download-buttons"), len(header))
    header.insert(where + 1, launch)


def setup(app):
    app.connect("source-read", _keep_source)
    app.connect("env-purge-doc", _purge)
    app.connect("env-merge-info", _merge)
    app.connect("html-page-context", buttons, priority=502)
    app.connect("build-finished", build)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
