"""Build the student notebooks and autograders of the sigprop assignments (otter-grader).

Every ``book/assignments/<name>.ipynb`` is an otter-grader *master notebook* (Otter Assign
format v1: solutions between ``# BEGIN SOLUTION`` / ``# END SOLUTION``, public and hidden tests
between ``# BEGIN TESTS`` / ``# END TESTS``). For each master this script runs ``otter assign``
into ``_build/assignments/<name>/`` and leaves

* ``student/<name>.ipynb`` and ``student/tests/`` -- what students get (no solutions, public
  tests only). On Colab the notebook's first, hidden cell installs sigprop and otter-grader and
  writes the public tests next to it, so the notebook works on its own there;
* ``autograder/<name>-autograder.zip`` -- the autograder for Gradescope (upload it as a
  "Programming assignment" autograder) or for local grading with
  ``otter run -a <zip> -o <existing folder> <submission.ipynb>`` (no Docker);
* ``autograder/<name>.ipynb`` -- the master with its solutions, without the tests: unlike the
  master, it carries the assignment's name, so its autograder grades it (full marks); the release
  ships it (``sigprop-solutions-V.zip``, book/release.py).

The release publishes the student folders with the book's notebooks (``assignments/<name>/`` at
the notebooks tag, book/release.py); :func:`colab_url` is the pinned Colab link of each.

Nothing here needs the network: the autograder zip carries a conda ``environment.yml`` (otter's
own pin, ``otter-grader[grading,plugins]==<version>``, plus the lines of ``requirements.txt``)
from which Gradescope's ``setup.sh`` builds the grading environment; local grading uses the
current environment. ``otter assign`` also runs every test against the solutions (skip with
``--no-run-tests``); this script then checks that no solution line and no hidden test reached
the student version, and writes ``_build/assignments/README.md`` with the Colab links.

**One otter-grader version.** :data:`OTTER_GRADER_VERSION` below is the only place the version is
written. ``otter assign`` puts the *installed* otter's version into the autograder's
``environment.yml``, so :func:`build` refuses to run under any other version; it rewrites the
student notebook's Colab install line to that version (:func:`pin_install_cell`) and checks the
zip's pin; ``--sync-pins`` rewrites the masters' Colab cells. ``tests/test_assignment_pins.py``
fails if any copy (masters, instructors page, requirements, the built zip) differs.

Usage (from the repository root)::

    .venv/bin/python book/assignments/make_assignments.py                 # all masters
    .venv/bin/python book/assignments/make_assignments.py noci2022 --out /tmp/a --no-run-tests
    .venv/bin/python book/assignments/make_assignments.py --publish _build/assignments-public
    .venv/bin/python book/assignments/make_assignments.py --sync-pins --no-run-tests   # after changing OTTER_GRADER_VERSION

The helpers (:func:`build`, :func:`find_leaks`, :func:`solution_lines`, ...) are also used by
``tests/test_assignments.py``.
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.util
import io
import json
import pathlib
import re
import shutil
import sys
import textwrap
import zipfile

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
DEFAULT_OUT = ROOT / "_build" / "assignments"


def _sources():
    """book/sources.py: where the release's notebooks are published (one place for the repository and the tag)."""
    spec = importlib.util.spec_from_file_location("sigprop_book_sources_assign", HERE.parent / "sources.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

#: The otter-grader version of the whole tool chain -- the only place it is written. It must equal
#: the installed otter (``otter assign`` writes its own version into the autograder's
#: ``environment.yml``); students' Colab cells install exactly this version.
OTTER_GRADER_VERSION = "7.0.0"
OTTER_REQUIREMENT = f"otter-grader=={OTTER_GRADER_VERSION}"

#: An otter-grader requirement on a ``pip install`` line: the name, optional extras, optional
#: version specifiers (``otter-grader``, ``otter-grader==7.0.0``, ``"otter-grader[plugins]>=6,<8"``).
_OTTER_SPEC = re.compile(r"otter-grader(?:\[[^\]]*\])?(?:\s*(?:===|==|~=|!=|<=|>=|<|>)\s*[\w.*+!-]+"
                         r"(?:\s*,\s*(?:===|==|~=|!=|<=|>=|<|>)\s*[\w.*+!-]+)*)?")

#: Lines of solution code shorter than this (``return x``, ``import torch``) are too generic to
#: count as a leak when they appear in a student notebook.
MIN_LEAK_CHARS = 12

BEGIN_TESTS_MARK = "# BEGIN PUBLIC TESTS (written by make_assignments.py)"
END_TESTS_MARK = "# END PUBLIC TESTS"


def masters() -> list[pathlib.Path]:
    """The master notebooks, sorted by name."""
    return sorted(HERE.glob("*.ipynb"))


def published_path(name: str) -> str:
    """Where an assignment's student notebook is in the published notebooks (book/release.py, notebooks_tree)."""
    return f"assignments/{name}/{name}.ipynb"


def colab_url(name: str) -> str:
    """Colab link of a published student notebook, pinned to the release's notebooks tag (book/sources.py)."""
    sources = _sources()
    return sources.published(sources.source(), published_path(name))["colab"]


def _source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _load(path) -> dict:
    return json.loads(pathlib.Path(path).read_text(encoding="utf-8"))


# ----------------------------------------------------------------------------- what must not leak

def _blocks(nb: dict, begin: str, end: str):
    """Code cells between raw delimiter cells ``begin`` and ``end``."""
    inside = False
    for cell in nb["cells"]:
        text = _source(cell).strip()
        if cell["cell_type"] == "raw" and text.upper().startswith(begin):
            inside = True
        elif cell["cell_type"] == "raw" and text.upper().startswith(end):
            inside = False
        elif inside and cell["cell_type"] == "code":
            yield _source(cell)


def solution_lines(master) -> list[str]:
    """Distinctive lines of solution code in a master: inside ``# BEGIN/END SOLUTION`` comment
    blocks or ending in ``# SOLUTION`` (marker stripped), at least :data:`MIN_LEAK_CHARS` long
    and absent from the master's non-solution cells."""
    nb = _load(master) if not isinstance(master, dict) else master
    found = []
    for src in _blocks(nb, "# BEGIN SOLUTION", "# END SOLUTION"):
        inside = False
        for line in src.splitlines():
            s = line.strip()
            if s.startswith("# BEGIN SOLUTION"):
                inside = True
            elif s.startswith("# END SOLUTION"):
                inside = False
            elif inside or re.search(r"#\s*SOLUTION\s*$", s):
                found.append(re.sub(r"#\s*SOLUTION\s*$", "", s).strip())
    public = "\n".join(_source(c) for c in nb["cells"] if c["cell_type"] != "raw"
                       and not any(m in _source(c) for m in ("SOLUTION",)))
    return sorted({s for s in found if len(s) >= MIN_LEAK_CHARS and not s.startswith("#") and s not in public})


def hidden_test_names(master) -> list[str]:
    """Names of the hidden test functions of a master."""
    nb = _load(master) if not isinstance(master, dict) else master
    names = []
    for src in _blocks(nb, "# BEGIN TESTS", "# END TESTS"):
        head = src.split('""" # END TEST CONFIG')[0] if "END TEST CONFIG" in src else ""
        if re.search(r"^\s*hidden:\s*true", head, flags=re.MULTILINE | re.IGNORECASE):
            names += re.findall(r"^def (test_\w+)\(", src, flags=re.MULTILINE)
    return names


def find_leaks(master, student_dir) -> list[str]:
    """Solution lines or hidden test names found anywhere in a student folder (notebook + tests)."""
    student_dir = pathlib.Path(student_dir)
    texts = {}
    for path in sorted(student_dir.rglob("*")):
        if path.is_file() and path.suffix in (".ipynb", ".py"):
            texts[path.relative_to(student_dir)] = path.read_text(encoding="utf-8")
    leaks = []
    for needle in solution_lines(master) + [f"def {n}(" for n in hidden_test_names(master)]:
        for rel, text in texts.items():
            # compare against the decoded JSON too, so escaped quotes do not hide a leak
            if needle in text or needle in _decoded(text, rel):
                leaks.append(f"{rel}: {needle}")
    return leaks


def _decoded(text: str, rel) -> str:
    if pathlib.Path(rel).suffix != ".ipynb":
        return text
    return "\n".join(_source(c) for c in json.loads(text)["cells"])


# ----------------------------------------------------------------------------- Colab support

def colab_cell_index(nb: dict) -> int:
    """Index of the first code cell; it must be the hidden Colab set-up cell."""
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code":
            if "google.colab" not in _source(cell) or "remove-cell" not in cell.get("metadata", {}).get("tags", []):
                raise ValueError("the first code cell must be the Colab set-up cell (contains 'google.colab', "
                                 "tagged 'remove-cell')")
            return i
    raise ValueError("the notebook has no code cell")


def otter_requirements(text: str) -> list[str]:
    """The otter-grader requirements on the ``pip install`` lines of ``text`` (a cell, a page)."""
    return [m.group(0) for line in text.splitlines() if re.search(r"\bpip\s+install\b", line)
            for m in _OTTER_SPEC.finditer(line)]


def install_pins(nb: dict) -> list[str]:
    """The otter-grader requirements that a notebook's Colab cell installs (``[]`` if none)."""
    return otter_requirements(_source(nb["cells"][colab_cell_index(nb)]))


def pin_install_cell(nb: dict) -> bool:
    """Rewrite, in place, every otter-grader requirement on a ``pip install`` line of the Colab cell
    to :data:`OTTER_REQUIREMENT`. Returns whether the cell changed."""
    cell = nb["cells"][colab_cell_index(nb)]
    old = _source(cell)
    lines = [(_OTTER_SPEC.sub(OTTER_REQUIREMENT, line) if re.search(r"\bpip\s+install\b", line) else line)
             for line in old.splitlines(keepends=True)]
    new = "".join(lines)
    if new != old:
        cell["source"] = new.splitlines(keepends=True)
    return new != old


def sync_master_pins(paths=None) -> list[pathlib.Path]:
    """Rewrite the masters' Colab install lines to :data:`OTTER_REQUIREMENT`; returns those changed."""
    changed = []
    for path in paths or masters():
        nb = _load(path)
        if pin_install_cell(nb):
            pathlib.Path(path).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
            changed.append(pathlib.Path(path))
    return changed


def check_otter_version() -> None:
    """Raise unless the installed otter-grader is :data:`OTTER_GRADER_VERSION`: ``otter assign`` writes
    the installed version into the autograder, which must match what students install."""
    from otter import __version__ as installed

    if installed != OTTER_GRADER_VERSION:
        raise RuntimeError(
            f"otter-grader {installed} is installed but the assignments pin {OTTER_GRADER_VERSION} "
            f"(OTTER_GRADER_VERSION in {pathlib.Path(__file__).name}): install it with "
            f"`pip install {OTTER_REQUIREMENT}`, or change OTTER_GRADER_VERSION and run "
            "`make_assignments.py --sync-pins`")


def autograder_otter_pin(zip_path) -> str:
    """The otter-grader requirement in an autograder zip's ``environment.yml``."""
    with zipfile.ZipFile(zip_path) as z:
        env = z.read("environment.yml").decode("utf-8")
    pins = re.findall(r"otter-grader\[[^\]]*\]==[\w.*+!-]+", env)
    if len(pins) != 1:
        raise RuntimeError(f"{zip_path}: expected one otter-grader pin in environment.yml; got {pins}")
    return pins[0]


def inject_public_tests(student_nb: pathlib.Path) -> None:
    """Pin otter-grader in the student notebook's Colab cell and append a block that writes
    ``tests/*.py`` on Colab.

    otter's ``grader.check`` reads test files from ``./tests``; a notebook opened from GitHub in
    Colab has none, so the public tests (and only those: they are the student folder's) travel
    inside the hidden set-up cell and are written when ``google.colab`` is present.
    """
    nb = _load(student_nb)
    tests = {p.name: p.read_text(encoding="utf-8") for p in sorted((student_nb.parent / "tests").glob("*.py"))}
    i = colab_cell_index(nb)
    pinned = pin_install_cell(nb)  # students install the pinned otter-grader, whatever the master says
    src = _source(nb["cells"][i]).rstrip("\n")
    if BEGIN_TESTS_MARK in src:
        if pinned:
            student_nb.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        return
    block = textwrap.indent("\n".join([
        BEGIN_TESTS_MARK,
        "import os as _os",
        '_os.makedirs("tests", exist_ok=True)',
        f"for _name, _text in {tests!r}.items():",
        '    with open(_os.path.join("tests", _name), "w", encoding="utf-8") as _f:',
        "        _f.write(_text)",
        END_TESTS_MARK,
    ]), "    ")
    nb["cells"][i]["source"] = src + "\n" + block
    student_nb.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def injected_block(student_nb) -> str:
    """The public-test writer inside a student notebook's Colab cell (dedented, runnable)."""
    nb = _load(student_nb)
    src = _source(nb["cells"][colab_cell_index(nb)])
    start, stop = src.index(BEGIN_TESTS_MARK), src.index(END_TESTS_MARK)
    return textwrap.dedent("    " + src[start:stop])


# ----------------------------------------------------------------------------- build

def build(master, out=DEFAULT_OUT, *, run_tests: bool = True, quiet: bool = True) -> dict:
    """Run ``otter assign`` on one master into ``<out>/<name>``; returns the paths it made.

    Keys: ``student`` (notebook), ``student_dir``, ``autograder`` (zip), ``solutions``
    (autograder notebook). Raises if a solution or hidden test leaks into the student folder.
    """
    from otter.assign import main as otter_assign

    check_otter_version()
    master = pathlib.Path(master).resolve()
    name = master.stem
    colab_cell_index(_load(master))
    dest = pathlib.Path(out).resolve() / name
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink) if quiet else contextlib.nullcontext():
        otter_assign(str(master), str(dest), no_run_tests=not run_tests, no_pdfs=True)
    zips = sorted((dest / "autograder").glob(f"{name}-autograder_*.zip"))
    if len(zips) != 1:
        raise RuntimeError(f"expected one autograder zip in {dest / 'autograder'}; got {zips}")
    zip_path = zips[0].rename(dest / "autograder" / f"{name}-autograder.zip")
    pin = autograder_otter_pin(zip_path)
    if not pin.endswith(f"=={OTTER_GRADER_VERSION}"):
        raise RuntimeError(f"{name}: the autograder pins {pin}, the students {OTTER_REQUIREMENT}")
    student = dest / "student" / f"{name}.ipynb"
    solutions = dest / "autograder" / f"{name}.ipynb"
    for notebook in (student, solutions):
        stable_ids(notebook, _load(master))
    inject_public_tests(student)
    leaks = find_leaks(master, student.parent)
    if leaks:
        raise RuntimeError(f"{name}: solution text reached the student version:\n  " + "\n  ".join(leaks))
    return {"student": student, "student_dir": student.parent, "autograder": zip_path, "solutions": solutions}


def stable_ids(path: pathlib.Path, master: dict) -> None:
    """Give the cells ``otter assign`` adds (its ``grader.check`` cells, ...) ids that do not change from one build
    to the next: otter draws them at random, so the release's zips changed on every build. A cell keeps the
    master's id; another gets the hash of its place and text."""
    nb = _load(path)
    known = {c.get("id") for c in master["cells"]}
    for i, cell in enumerate(nb["cells"]):
        if cell.get("id") not in known:
            cell["id"] = hashlib.sha256(f"{i}\n{_source(cell)}".encode()).hexdigest()[:8]
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def write_index(out: pathlib.Path, names: list[str], *, public: bool = False) -> pathlib.Path:
    """``README.md`` of a build (or publish) folder: student notebooks, autograders, Colab links."""
    lines = ["# sigprop assignments (generated by book/assignments/make_assignments.py)", ""]
    if public:
        lines += ["| assignment | student notebook | Colab |", "| --- | --- | --- |"]
    else:
        lines += ["| assignment | student notebook | autograder | Colab |", "| --- | --- | --- | --- |"]
    for n in names:
        student = f"{n}/{n}.ipynb" if public else f"{n}/student/{n}.ipynb"
        row = f"| {n} | [{student}]({student}) | "
        if not public:
            row += f"[{n}/autograder/{n}-autograder.zip]({n}/autograder/{n}-autograder.zip) | "
        lines.append(row + f"[open in Colab]({colab_url(n)}) |")
    if public:
        lines += ["", "Student versions only: solutions and hidden tests stay with the instructors.", ""]
    else:
        lines += ["", "The `autograder/` folders hold the solutions and the hidden tests: keep them private. "
                  "`--publish DIR` copies the student folders alone (a course repository's `assignments/`). "
                  "The Colab links open the release's published copies (`make release`, the notebooks tag).", ""]
    path = out / "README.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def publish(out: pathlib.Path, names: list[str], dest: pathlib.Path) -> pathlib.Path:
    """Copy only the student folders of a build into ``dest/<name>/`` (the layout of the published notebooks'
    ``assignments/``: the notebook and its ``tests/`` side by side)."""
    dest = pathlib.Path(dest).resolve()
    if dest == out or out in dest.parents:
        raise ValueError(f"--publish must be outside the build folder {out}; got {dest}")
    if dest.exists():
        shutil.rmtree(dest)
    for n in names:
        shutil.copytree(out / n / "student", dest / n)
    write_index(dest, names, public=True)
    return dest


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="masters to build (default: all), e.g. noci2022")
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="build folder (default: _build/assignments)")
    parser.add_argument("--no-run-tests", action="store_true", help="do not run the tests against the solutions")
    parser.add_argument("--publish", metavar="DIR", default=None,
                        help="also copy the student folders alone (no solutions, no hidden tests) into DIR")
    parser.add_argument("--sync-pins", action="store_true",
                        help=f"first rewrite the masters' Colab cells to install {OTTER_REQUIREMENT}")
    args = parser.parse_args(argv)
    available = {p.stem: p for p in masters()}
    unknown = sorted(set(args.names) - set(available))
    if unknown:
        parser.error(f"unknown assignment(s) {unknown}; available: {sorted(available)}")
    names = args.names or sorted(available)
    if args.sync_pins:
        for path in sync_master_pins([available[n] for n in names]):
            print(f"pinned {OTTER_REQUIREMENT} in {path.relative_to(ROOT)}")
    out = pathlib.Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    for n in names:
        paths = build(available[n], out, run_tests=not args.no_run_tests)
        print(f"{n}: {paths['student'].relative_to(out)}  {paths['autograder'].relative_to(out)}")
    print(f"index: {write_index(out, names)}")
    if args.publish:
        print(f"student folders for publishing: {publish(out, names, pathlib.Path(args.publish))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
