"""Sphinx role ``{test}`tests/test_x.py::test_name```: a link to the test that checks a statement.

Prose that says "checked in the test suite" names the test, and the reader can open it:
``{test}`tests/test_block_map.py::test_block_map_matches_mc``` renders ``test_block_map_matches_mc`` as
a link to that function's line in the repository at the book's release (``repository.url`` and
``repository.branch`` of ``_config.yml``). ``{test}`the block-map test <tests/test_block_map.py::name>```
sets the link text. The build fails (``-W``) when the file or the function does not exist, so a link
cannot outlive its test. A bare file, ``{test}`tests/test_claims.py```, links the whole file.
"""
from __future__ import annotations

import ast
import functools
import pathlib
import re

from docutils import nodes

_EXPLICIT = re.compile(r"^(?P<text>.+?)\s*<(?P<target>[^<>]+)>$", re.S)


@functools.lru_cache(maxsize=None)
def _definitions(path: pathlib.Path) -> dict[str, int]:
    """Line of every function and class in ``path`` (``Class.method`` for methods)."""
    lines = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            lines.setdefault(node.name, node.lineno)
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        lines[f"{node.name}.{item.name}"] = item.lineno
    return lines


def resolve(target: str, root: pathlib.Path) -> tuple[str, int | None]:
    """``(path, line)`` of ``path[::name]`` under ``root``; ValueError with what is missing."""
    path, _, name = target.strip().partition("::")
    file = root / path
    if not path.startswith("tests/") or not file.is_file():
        raise ValueError(f"no test file {path!r} (expected tests/<file>.py[::name])")
    if not name:
        return path, None
    name = name.replace("::", ".").split("[")[0]  # a parametrised id links its function
    line = _definitions(file).get(name)
    if line is None:
        raise ValueError(f"{path} defines no {name!r}")
    return path, line


def _role(name, rawtext, text, lineno, inliner, options=None, content=None):
    env = inliner.document.settings.env
    m = _EXPLICIT.match(text)
    label, target = (m["text"], m["target"]) if m else (None, text)
    try:
        path, line = resolve(target, pathlib.Path(env.srcdir))
    except ValueError as exc:
        msg = inliner.reporter.error(f"test role: {exc}", line=lineno)
        return [inliner.problematic(rawtext, rawtext, msg)], [msg]
    theme = env.config.html_theme_options or {}
    url = theme.get("repository_url", "").rstrip("/")
    branch = theme.get("repository_branch") or "main"
    href = f"{url}/blob/{branch}/{path}" + (f"#L{line}" if line else "")
    shown = label or target.split("::")[-1]
    ref = nodes.reference(rawtext, "", refuri=href, classes=["sigprop-test"])
    ref += nodes.literal(shown, shown) if label is None else nodes.Text(shown)
    return [ref], []


def setup(app):
    app.add_role("test", _role)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
