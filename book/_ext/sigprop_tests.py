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


def link(text: str, root: pathlib.Path, url: str, branch: str) -> tuple[str, str, bool]:
    """``(shown, href, literal)`` of ``{test}`text```: the text a reader sees, the link to the test's line in the
    repository ``url`` at ``branch``, and whether the text is the test's name (shown as code); ValueError for a
    missing file or function. The book's notebooks write the same link (book/_ext/sigprop_notebooks.py)."""
    m = _EXPLICIT.match(text)
    label, target = (m["text"], m["target"]) if m else (None, text)
    path, line = resolve(target, root)
    href = f"{url.rstrip('/')}/blob/{branch}/{path}" + (f"#L{line}" if line else "")
    return label or target.split("::")[-1], href, label is None


def _role(name, rawtext, text, lineno, inliner, options=None, content=None):
    env = inliner.document.settings.env
    theme = env.config.html_theme_options or {}
    try:
        shown, href, literal = link(text, pathlib.Path(env.srcdir), theme.get("repository_url", ""),
                                    theme.get("repository_branch") or "main")
    except ValueError as exc:
        msg = inliner.reporter.error(f"test role: {exc}", line=lineno)
        return [inliner.problematic(rawtext, rawtext, msg)], [msg]
    ref = nodes.reference(rawtext, "", refuri=href, classes=["sigprop-test"])
    ref += nodes.literal(shown, shown) if literal else nodes.Text(shown)
    return [ref], []


def setup(app):
    app.add_role("test", _role)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
