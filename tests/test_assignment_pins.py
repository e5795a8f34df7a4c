"""Students and the autograder install the same otter-grader.

The version is written once, as ``OTTER_GRADER_VERSION`` in ``book/assignments/make_assignments.py``.
Its copies -- the masters' Colab cells, the instructors page's install commands, the installed
otter that writes the autograder, the built student notebook and autograder zip -- must all equal
it; ``requirements.txt`` must leave otter-grader to otter. The pin helpers are checked on
deliberately wrong inputs too, so that these tests can fail.
"""
import json
import pathlib
import re
import shutil

import pytest

from conftest import load_script

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "book" / "assignments" / "make_assignments.py"
ma = load_script("make_assignments", SCRIPT)

MASTERS = ma.masters()
PIN = ma.OTTER_REQUIREMENT


def test_the_pin_is_an_exact_version():
    assert re.fullmatch(r"\d+\.\d+\.\d+(\.post\d+)?", ma.OTTER_GRADER_VERSION), ma.OTTER_GRADER_VERSION
    assert PIN == f"otter-grader=={ma.OTTER_GRADER_VERSION}"


@pytest.mark.parametrize("master", MASTERS, ids=lambda p: p.stem)
def test_master_colab_cell_installs_the_pinned_otter(master):
    nb = json.loads(master.read_text(encoding="utf-8"))
    assert ma.install_pins(nb) == [PIN], (
        f"{master.name}: the Colab cell installs {ma.install_pins(nb)}, expected [{PIN!r}]; "
        "run make_assignments.py --sync-pins")


def test_requirements_leave_otter_to_otter():
    lines = [ln.split("#")[0].strip() for ln in (ma.HERE / "requirements.txt").read_text().splitlines()]
    assert not [ln for ln in lines if ln.startswith("otter-grader")], \
        "otter adds its own otter-grader pin to environment.yml; a second one here could differ"
    assert any(ln.startswith("sigprop @ git+") for ln in lines)


def test_instructors_page_installs_the_pinned_otter():
    page = (ROOT / "book" / "instructors.md").read_text(encoding="utf-8")
    found = ma.otter_requirements(page)
    assert found and set(found) == {PIN}, f"book/instructors.md installs {found}, expected {PIN}"
    assert ma.OTTER_GRADER_VERSION in page


def test_installed_otter_is_the_pinned_one():
    otter = pytest.importorskip("otter", reason="otter-grader is installed by the test extra")
    assert otter.__version__ == ma.OTTER_GRADER_VERSION, (
        f"otter-grader {otter.__version__} is installed; the autograder would pin it instead of "
        f"{ma.OTTER_GRADER_VERSION}: pip install {PIN}")


def test_pyproject_does_not_pin_another_otter():
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    for spec in re.findall(r'"(otter-grader[^"]*)"', text):
        version = re.search(r"==\s*([\w.]+)", spec)
        assert version is None or version.group(1) == ma.OTTER_GRADER_VERSION, spec


def test_built_student_notebook_and_autograder_agree(tmp_path):
    """Built from a master whose Colab cell has lost its pin, the student notebook is pinned anyway."""
    pytest.importorskip("otter", reason="otter-grader is installed by the test extra")
    stale = tmp_path / "masters"
    stale.mkdir()
    shutil.copy(ma.HERE / "requirements.txt", stale)
    master = stale / MASTERS[0].name
    master.write_text(MASTERS[0].read_text(encoding="utf-8").replace(PIN, "otter-grader"), encoding="utf-8")
    assert ma.install_pins(json.loads(master.read_text(encoding="utf-8"))) == ["otter-grader"]
    paths = ma.build(master, tmp_path / "out", run_tests=False)
    student = json.loads(paths["student"].read_text(encoding="utf-8"))
    assert ma.install_pins(student) == [PIN]
    assert ma.autograder_otter_pin(paths["autograder"]) == \
        f"otter-grader[grading,plugins]=={ma.OTTER_GRADER_VERSION}"


@pytest.mark.parametrize("line, found", [
    ('    %pip install -q "sigprop @ git+https://x/y" otter-grader', ["otter-grader"]),
    ("    %pip install -q otter-grader==6.1.0 sigprop", ["otter-grader==6.1.0"]),
    ('    !pip install "otter-grader[plugins]>=6, <8"', ["otter-grader[plugins]>=6, <8"]),
    ("# install sigprop and otter-grader.", []),  # a comment is not an install line
])
def test_the_pin_scan_sees_every_spelling(line, found):
    assert ma.otter_requirements(line) == found


def test_pin_install_cell_rewrites_a_stale_pin():
    nb = json.loads(MASTERS[0].read_text(encoding="utf-8"))
    i = ma.colab_cell_index(nb)
    stale = ma._source(nb["cells"][i]).replace(PIN, "otter-grader")
    nb["cells"][i]["source"] = stale
    assert ma.install_pins(nb) == ["otter-grader"]  # the master check above would fail on this
    assert ma.pin_install_cell(nb) is True
    assert ma.install_pins(nb) == [PIN]
    assert "install sigprop and otter-grader." in ma._source(nb["cells"][i])  # the comment is untouched
    assert ma.pin_install_cell(nb) is False


def test_build_refuses_another_installed_otter(monkeypatch):
    monkeypatch.setattr(ma, "OTTER_GRADER_VERSION", "0.0.1")
    with pytest.raises(RuntimeError, match="0.0.1"):
        ma.check_otter_version()
