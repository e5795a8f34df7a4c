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
MODULES = sorted(p.stem for p in LIB.glob("_*.py") if p.stem != "__init__" and p.stem != "__main__")
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
