""".ci/publish: what the release workflow pushes, pushed to a local bare repository (no network, about 2 s).

``notebooks`` commits a notebooks tree to the branch ``notebooks`` and tags it ``notebooks-v<version>`` (what the
launch buttons and Colab badges name: book/sources.py); two releases leave two commits and two tags, each tag
holding its release's files; publishing a release again is refused (a published tag never moves). ``pages``
puts a built site under ``v<version>/`` of ``gh-pages`` and points the root at it. The script runs in a throwaway
clone, never in the checkout: it makes branches.
"""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / ".ci" / "publish"


def _git(cwd, *args, check=True) -> str:
    run = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60,
                         env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                              "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"})
    if check and run.returncode:
        raise AssertionError(run.stdout + run.stderr)
    return run.stdout


@pytest.fixture
def repo(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("no git")
    remote = tmp_path / "remote.git"
    _git(tmp_path, "init", "-q", "--bare", str(remote))
    work = tmp_path / "work"
    (work / ".ci").mkdir(parents=True)
    shutil.copy2(SCRIPT, work / ".ci" / "publish")
    (work / "README.md").write_text("the project\n")
    _git(work, "init", "-q", "-b", "main")
    _git(work, "add", ".")
    _git(work, "commit", "-qm", "project")
    _git(work, "remote", "add", "origin", str(remote))
    return work, remote


def _publish(work, what, **env) -> subprocess.CompletedProcess:
    return subprocess.run([str(work / ".ci" / "publish"), what], cwd=work, capture_output=True, text=True,
                          timeout=120, env={**os.environ, **env})


def _tree(folder: pathlib.Path, text: str) -> pathlib.Path:
    (folder / "reader" / "book").mkdir(parents=True)
    (folder / "reader" / "book" / "primer.ipynb").write_text(text)
    (folder / "requirements.txt").write_text("sigprop\n")
    return folder


def test_notebooks_are_committed_and_tagged_per_release_and_never_moved(repo, tmp_path):
    work, remote = repo
    for version in ("0.0.1", "0.0.2"):
        run = _publish(work, "notebooks", VERSION=version, TREE=str(_tree(tmp_path / version, f"nb {version}")))
        assert run.returncode == 0, run.stdout + run.stderr
    for version in ("0.0.1", "0.0.2"):
        assert _git(remote, "show", f"notebooks-v{version}:reader/book/primer.ipynb") == f"nb {version}"
        assert _git(remote, "show", f"notebooks-v{version}:requirements.txt") == "sigprop\n"
    assert len(_git(remote, "log", "--format=%s", "notebooks").splitlines()) == 2
    assert "README.md" not in _git(remote, "ls-tree", "--name-only", "notebooks")     # the project is not there
    again = _publish(work, "notebooks", VERSION="0.0.1", TREE=str(tmp_path / "0.0.1"))
    assert again.returncode == 1 and "never moves" in again.stderr
    assert _git(work, "branch", "--list").split() == ["*", "main"]          # nothing left in the clone
    assert not _git(work, "worktree", "list").strip().count("\n")


def test_pages_hold_each_release_under_its_tag(repo, tmp_path):
    work, remote = repo
    for version in ("0.0.1", "0.0.2"):
        site = tmp_path / f"site-{version}"
        site.mkdir()
        (site / "index.html").write_text(f"site {version}")
        run = _publish(work, "pages", VERSION=version, HTML=str(site))
        assert run.returncode == 0, run.stdout + run.stderr
    assert _git(remote, "show", "gh-pages:v0.0.1/index.html") == "site 0.0.1"
    assert _git(remote, "show", "gh-pages:v0.0.2/index.html") == "site 0.0.2"
    assert 'url=v0.0.2/' in _git(remote, "show", "gh-pages:index.html")
    assert _git(remote, "show", "gh-pages:.nojekyll") == ""
    missing = _publish(work, "pages", VERSION="0.0.3", HTML=str(tmp_path / "nothing"))
    assert missing.returncode == 1 and "no built site" in missing.stderr
