"""The book's small Sphinx extensions (book/_ext), without a build: the {test} role's resolver, the script
de-duplication and the folding of proofs and solutions. tests/test_book_browser.py checks their effect in a
browser on the built site."""
from __future__ import annotations

import pathlib
import sys

import pytest
from docutils import nodes

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "_ext"))

import sigprop_fold  # noqa: E402
import sigprop_scripts  # noqa: E402
import sigprop_tests  # noqa: E402


def test_test_role_resolves_files_functions_and_parametrised_ids():
    assert sigprop_tests.resolve("tests/test_agreement.py", ROOT) == ("tests/test_agreement.py", None)
    path, line = sigprop_tests.resolve("tests/test_book_extensions.py::test_test_role_resolves_files_functions_and_"
                                       "parametrised_ids[x]", ROOT)
    assert path == "tests/test_book_extensions.py" and line > 0


@pytest.mark.parametrize("target", ["tests/nope.py", "tests/test_agreement.py::nope", "lib/sigprop/__init__.py"])
def test_test_role_refuses_what_does_not_exist(target):
    with pytest.raises(ValueError):
        sigprop_tests.resolve(target, ROOT)


class _Script:
    def __init__(self, filename, priority=500, **attributes):
        self.filename, self.priority, self.attributes = filename, priority, attributes


def test_each_inline_script_once():
    body = {"body": "const THEBE_JS_URL = 1"}
    scripts = [_Script("_static/a.js"), _Script(None, **body), _Script("", **body), _Script("_static/a.js")]
    context = {"script_files": scripts}
    sigprop_scripts.dedupe(None, "page", "page.html", context, None)
    assert context["script_files"] == scripts[:2]


class _Builder:
    format = "html"


class _App:
    builder = _Builder()


class proof_node(nodes.Admonition, nodes.Element):  # the name sphinx-proof gives its wrapper
    pass


class solution_node(nodes.Admonition, nodes.Element):
    pass


def _proof(text):
    box = nodes.admonition(classes=["proof", "proof"], ids=["proof"])
    box += nodes.paragraph("", "", nodes.Text(text))
    wrapper = proof_node()
    wrapper += box
    return wrapper, box


def test_proofs_and_solutions_are_folded_under_a_title_with_their_own_ids():
    doc = nodes.section()
    (w1, p1), (w2, p2) = _proof("Proof. (Eqs. 6 and 7) By Isserlis."), _proof("Proof. Write u.")
    solution = solution_node(classes=["solution"])
    solution += nodes.title("", "Solution to Exercise 1")
    lemma = nodes.admonition(classes=["proof", "lemma"])
    lemma += nodes.title("", "Lemma 1")
    doc += [w1, w2, solution, lemma]
    sigprop_fold.fold(_App(), doc, "page")
    assert [p1["ids"], p2["ids"]] == [["proof-1"], ["proof-2"]]
    assert p1.children[0].astext() == "Proof (Eqs. 6 and 7)" and p1.children[1].astext() == "By Isserlis."
    assert p2.children[0].astext() == "Proof" and p2.children[1].astext() == "Write u."
    assert "dropdown" in solution["classes"] and "dropdown" not in lemma["classes"]
