"""The public namespace is assembled by explicit re-exports (no import loops), and it is complete.

Every module lists its public names in ``__all__`` (flat namespace) and its analytic maps in
``__theory__`` (``sp.theory``); these tests keep those lists and the explicit re-exports equal, and the
layout rules of CONTRIBUTING.md checkable: no module over the size limit, no hidden ``import_module``.
"""
import ast
import importlib
import pathlib

import pytest

import sigprop as sp

LIB = pathlib.Path(sp.__file__).parent
#: the concept folders (CONTRIBUTING.md: "where does my formula go"); each holds private one-concept modules
FOLDERS = ("stats", "inputs", "attention", "block", "models", "course")
MODULES = sorted(f"{p.parent.name}.{p.stem}" for folder in FOLDERS for p in (LIB / folder).glob("_*.py")
                 if p.stem != "__init__")
#: CONTRIBUTING.md: "a few hundred lines at most"; module docstrings with the maths count too.
MAX_LINES = 450


def _declared(attr):
    names = {}
    for m in MODULES:
        mod = importlib.import_module(f"sigprop.{m}")
        for n in getattr(mod, attr, ()):
            assert n not in names, f"{n} is public in both {names[n]} and {m}"
            names[n] = m
    return names


def test_flat_namespace_is_every_modules_all():
    declared = _declared("__all__")
    exported = set(sp.__all__) - {"presets", "theory"}
    assert exported == set(declared), (sorted(exported - set(declared)), sorted(set(declared) - exported))
    for name, module in declared.items():
        assert getattr(sp, name) is getattr(importlib.import_module(f"sigprop.{module}"), name)


def test_theory_namespace_is_every_modules_theory():
    declared = _declared("__theory__")
    assert set(sp.theory.__all__) == set(declared)
    for name, module in declared.items():
        assert getattr(sp.theory, name) is getattr(importlib.import_module(f"sigprop.{module}"), name)


@pytest.mark.parametrize("path", sorted(LIB.rglob("*.py")), ids=lambda p: str(p.relative_to(LIB)))
def test_layout_rules(path):
    text = path.read_text()
    assert len(text.splitlines()) <= MAX_LINES, f"{path.name}: {len(text.splitlines())} lines"
    calls = [n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Call)
             and getattr(n.func, "attr", getattr(n.func, "id", None)) in ("import_module", "__import__")]
    assert not calls, f"{path.name} imports modules dynamically"


def _imports(path):
    """(module path relative to sigprop, imported names) of every ``from ..x import a, b`` in ``path``."""
    tree = ast.parse(path.read_text())
    here = path.relative_to(LIB).parent.parts
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = here[: len(here) - (node.level - 1)] if node.level > 1 else here
            target = (*base, *(node.module or "").split(".")) if node.module else base
            yield tuple(p for p in target if p), [a.name for a in node.names]


@pytest.mark.parametrize("path", sorted(LIB.rglob("*.py")), ids=lambda p: str(p.relative_to(LIB)))
def test_no_private_name_crosses_a_folder(path):
    """A folder's private names stay in it; only the engine (``stats``) lends its private helpers out
    (CONTRIBUTING.md). Other folders talk through the names their ``__init__`` exports."""
    folder = path.relative_to(LIB).parts[0] if len(path.relative_to(LIB).parts) > 1 else ""
    for target, names in _imports(path):
        if not target or target[0] in (folder, "stats"):
            continue
        private = [n for n in names if n.startswith("_")]
        assert not private, f"{path.relative_to(LIB)} imports private {private} from {'.'.join(target)}"


@pytest.mark.parametrize("path", sorted(LIB.rglob("*.py")), ids=lambda p: str(p.relative_to(LIB)))
def test_no_function_level_imports_of_sigprop(path):
    """Imports at the top of a module (none is needed inside a function: the folders form no cycle).
    The one exception is the claims registry: each document's claims file imports the registry it fills."""
    if path == LIB / "claims" / "__init__.py":
        return
    tree = ast.parse(path.read_text())
    for fn in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
        for node in ast.walk(fn):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("sigprop")):
                pytest.fail(f"{path.relative_to(LIB)}:{node.lineno} imports inside {fn.name}()")
