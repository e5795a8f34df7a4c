"""Sphinx extension: every solution and every proof is folded, under a title that opens it.

sphinx-togglebutton folds ``.admonition.dropdown`` boxes by putting its button into the box's
``.admonition-title``. ``{prf:proof}`` (sphinx-proof 0.4) renders an admonition *without* a title (it
writes "Proof." into the first paragraph instead), so ``togglebutton.js`` threw ``Cannot read properties
of null (reading 'insertAdjacentHTML')`` on the first folded proof of a page and stopped folding
everything after it: the primer showed all its solutions. This extension, on the HTML doctrees:

* gives every solution (sphinx-exercise) and every proof (sphinx-proof) the class ``dropdown``: answers
  and proofs are one click away, the statements stay visible;
* gives every admonition with ``dropdown`` and no title a title ("Proof", or "Show" for other boxes), and
  moves a proof's leading "Proof." (and a parenthesised note after it, "(Eqs. 6 and 7)") into that title;
* gives every proof its own id (``proof-1``, ``proof-2``, ...): sphinx-proof writes ``id="proof"`` on all
  of them, and togglebutton.js, which finds a box by its id, folded the first proof of a page once per
  proof -- two proofs left both open.

``tests/test_book_browser.py`` opens every page in Chromium and checks that each of them is folded.
"""
from __future__ import annotations

import re

from docutils import nodes


def _kind(node: nodes.Element) -> str | None:
    """``"solution"``, ``"proof"`` or None. A theorem or lemma box carries the class "proof" too (sphinx-proof
    gives every one of its boxes that class): a proof is the admonition inside sphinx-proof's proof_node."""
    if "solution" in node["classes"] and type(node).__name__ == "solution_node":
        return "solution"
    if type(node.parent).__name__ == "proof_node":
        return "proof"
    return None


_PROOF_PREFIX = re.compile(r"^\s*Proof\.\s*")
_NOTE = re.compile(r"^\s*(\([^()]{1,60}\))\s*")


def _title_text(node: nodes.Element) -> str:
    """'Proof' for a proof, taking its leading "Proof. (note)" out of the first paragraph."""
    if _kind(node) != "proof":
        return "Show"
    para = next(iter(node.findall(nodes.paragraph)), None)
    text = para.children[0] if para is not None and para.children else None
    if not isinstance(text, nodes.Text) or not _PROOF_PREFIX.match(text):
        return "Proof"
    rest = _PROOF_PREFIX.sub("", str(text), count=1)
    note = _NOTE.match(rest)
    title = "Proof"
    if note:
        title, rest = f"Proof {note.group(1)}", rest[note.end():]
    if rest:
        para.replace(text, nodes.Text(rest))
    else:
        para.remove(text)
        if not para.children:
            para.parent.remove(para)
    return title


def fold(app, doctree, docname):
    if app.builder.format != "html":
        return
    proofs = 0
    for node in list(doctree.findall(nodes.Admonition)):
        classes = node["classes"]
        kind = _kind(node)
        if kind and "dropdown" not in classes:
            classes.append("dropdown")
        if kind == "proof":
            # sphinx-proof gives every proof the id "proof"; togglebutton.js finds a box by its id, so
            # the second proof of a page unfolded the first again: one id each
            proofs += 1
            node["ids"] = [f"proof-{proofs}"]
            classes.append("sp-proof")
        if "dropdown" in classes and not any(isinstance(c, nodes.title) for c in node.children):
            node.insert(0, nodes.title("", _title_text(node)))


def setup(app):
    app.connect("doctree-resolved", fold)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
