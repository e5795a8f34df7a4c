"""Every command line of the project with bad arguments, in an empty folder (issue 37, item 10): each must stop with a
one-line error (argparse's usage and ``error:`` line, or one ``SystemExit`` message), no traceback, a non-zero status,
and create no file -- before any long work starts.

The commands run in this process (``main(argv)``), so an uncaught exception is the traceback a user would see. Each
case is ``(command, argv)``; ``setup`` files (a plain file given where a folder is expected) are made first and are
the only files allowed afterwards.
"""
import contextlib
import importlib
import importlib.util
import io
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _script(path):
    """``main`` of a script under book/ (not a package), imported by path."""
    name = f"_cli_{pathlib.Path(path).stem}"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module   # dataclasses look their module up
        sys.path.insert(0, str((ROOT / path).parent))
        try:
            spec.loader.exec_module(module)
        finally:
            sys.path.remove(str((ROOT / path).parent))
    return sys.modules[name].main


#: command -> how to get its main(argv)
COMMANDS = {
    "python -m sigprop.claims": lambda: importlib.import_module("sigprop.claims.__main__").main,
    "python -m sigprop.experiments": lambda: importlib.import_module("sigprop.experiments.__main__").main,
    "python -m sigprop.bench": lambda: importlib.import_module("sigprop.bench.__main__").main,
    "python -m sigprop.bench.paper_scale": lambda: importlib.import_module("sigprop.bench.paper_scale").main,
    "python -m sigprop.fullcheck": lambda: importlib.import_module("sigprop.fullcheck").main,
    "python -m sigprop.stats._calibration": lambda: importlib.import_module("sigprop.stats._calibration").main,
    "book/ledger_changes.py": lambda: _script("book/ledger_changes.py"),
    "book/release.py": lambda: _script("book/release.py"),
    "book/reading_times.py": lambda: _script("book/reading_times.py"),
    "book/assignments/make_assignments.py": lambda: _script("book/assignments/make_assignments.py"),
    "book/sources.py": lambda: _script("book/sources.py"),
}

#: (command, argv, setup files); FILE is a plain file made by the setup, MISSING a folder that does not exist
CASES = [
    ("python -m sigprop.claims", ["--claim", "no-such-claim", "--json", "x.json"], ()),
    ("python -m sigprop.claims", ["--document", "noci2022", "--claim", "gg2025-result1-ipr-beta3"], ()),
    ("python -m sigprop.claims", ["--json", "MISSING/x.json"], ()),
    ("python -m sigprop.claims", ["--json", "."], ()),
    ("python -m sigprop.claims", ["--document", "no-such-document"], ()),
    ("python -m sigprop.experiments", ["regimes", "--threads", "1000000000"], ()),
    ("python -m sigprop.experiments", ["regimes", "--threads", "1e9"], ()),
    ("python -m sigprop.experiments", ["regimes", "--out", "MISSING/x.json"], ()),
    ("python -m sigprop.experiments", ["finite-size", "--out-dir", "MISSING"], ()),
    ("python -m sigprop.experiments", ["noci-fig10", "--out", "."], ()),
    ("python -m sigprop.experiments", ["locater", "--threads", "0"], ()),
    ("python -m sigprop.experiments", ["no-such-experiment"], ()),
    ("python -m sigprop.bench", ["--threads", "0"], ()),
    ("python -m sigprop.bench", ["--threads", "1000000000"], ()),
    ("python -m sigprop.bench", ["--json", "MISSING/x.json"], ()),
    ("python -m sigprop.bench", ["--load"], ()),
    ("python -m sigprop.bench.paper_scale", ["--out", "MISSING/x.json", "--device", "cpu"], ()),
    ("python -m sigprop.bench.paper_scale", ["--out", ".", "--device", "cpu"], ()),
    ("python -m sigprop.bench.paper_scale", ["--out", "x.json", "--device", "cpu", "--budget", "-1"], ()),
    ("python -m sigprop.fullcheck", ["--json", "MISSING/x.json"], ()),
    ("python -m sigprop.fullcheck", ["--only", "no-such-core"], ()),
    ("python -m sigprop.stats._calibration", ["--datasets", "0"], ()),
    ("python -m sigprop.stats._calibration", ["--out", "MISSING/x.json"], ()),
    ("python -m sigprop.stats._calibration", ["--out", "."], ()),
    ("book/ledger_changes.py", ["--since", "no-such-ref-37"], ()),
    ("book/ledger_changes.py", ["--until", "no-such-ref-37", "--counts"], ()),
    ("book/release.py", ["--html", "MISSING", "--dist", "out"], ()),
    ("book/release.py", ["--dist", "FILE"], ("FILE",)),
    ("book/reading_times.py", ["--no-such-option"], ()),
    ("book/assignments/make_assignments.py", ["no-such-assignment"], ()),
    ("book/sources.py", ["--no-such-option"], ()),   # it rewrote the generated files, ignoring the option
]
def _error_line(exc: SystemExit, stderr: str) -> str:
    """The error a user reads: the SystemExit message, or argparse's last stderr line."""
    if isinstance(exc.code, str):
        return exc.code
    lines = [line for line in stderr.splitlines() if line.strip()]
    return lines[-1] if lines else ""


@pytest.mark.parametrize("command, argv, setup", CASES, ids=[f"{c} {' '.join(a)}" for c, a, _ in CASES])
def test_bad_arguments_give_one_line_and_no_file(command, argv, setup, tmp_path, monkeypatch):
    main = COMMANDS[command]()
    monkeypatch.chdir(tmp_path)
    for name in setup:
        (tmp_path / name).write_text("not a folder\n")
    before = {p.relative_to(tmp_path) for p in tmp_path.rglob("*")}
    stderr, stdout = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(stdout):
        try:   # any exception but SystemExit is the traceback a user would see
            exit_ = SystemExit(main(list(argv)))   # `sys.exit(main())`: a returned status is the exit status
        except SystemExit as exc:
            exit_ = exc
    code = exit_.code
    assert code not in (0, None), f"{command} {argv}: exit status {code!r}"
    line = _error_line(exit_, stderr.getvalue())
    assert line and "\n" not in line.strip() and "Traceback" not in stderr.getvalue(), (line, stderr.getvalue())
    assert "error" in line.lower() or ":" in line, line
    after = {p.relative_to(tmp_path) for p in tmp_path.rglob("*")}
    assert after == before, f"{command} {argv} created {sorted(map(str, after - before))}"
