"""The otter-grader assignments in book/assignments/ build offline, grade themselves, and leak nothing.

For every master notebook: ``otter assign`` works into a temporary folder; the master's solutions
score full marks when graded locally (otter's non-containerised grader, no Docker); the student
notebook executes without error (graded in otter's debug mode, which re-raises any cell error)
and scores zero on every problem it leaves blank; no solution line and no hidden test reaches the
student folder. Each master is graded twice (solutions, blank student version): a few seconds each.
"""
import json
import pathlib
import re
import zipfile

import nbformat
import pytest

otter = pytest.importorskip("otter", reason="otter-grader is installed by the test extra")
from otter.api import grade_submission  # noqa: E402

# otter's grader uses a pandas idiom that pandas deprecates; not ours to fix
pytestmark = pytest.mark.filterwarnings("ignore:The inplace keyword in DataFrame.drop")

from conftest import load_script

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "book" / "assignments" / "make_assignments.py"
ma = load_script("make_assignments", SCRIPT)

MASTERS = ma.masters()
NAMES = [p.stem for p in MASTERS]
DOCUMENTS = ["noci2022", "bao2024", "giorlandino-goldt2025", "aghajanyan2025"]


def _questions(master):
    """{question name: points} from the master's ``# BEGIN QUESTION`` cells."""
    out = {}
    for cell in json.loads(master.read_text())["cells"]:
        src = "".join(cell["source"])
        if cell["cell_type"] == "raw" and src.startswith("# BEGIN QUESTION"):
            name = re.search(r"^name:\s*(\S+)", src, flags=re.MULTILINE).group(1)
            out[name] = float(re.search(r"^points:\s*(\S+)", src, flags=re.MULTILINE).group(1))
    return out


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("assignments")
    return {p.stem: ma.build(p, out, run_tests=False) for p in MASTERS}


def test_one_assignment_per_document():
    assert set(DOCUMENTS) <= set(NAMES), f"missing masters: {sorted(set(DOCUMENTS) - set(NAMES))}"


@pytest.mark.parametrize("name", NAMES)
def test_otter_assign_writes_student_and_autograder(built, name):
    paths = built[name]
    questions = _questions(ma.HERE / f"{name}.ipynb")
    assert len(questions) >= 3, f"{name}: {questions}"
    assert paths["student"].is_file() and paths["solutions"].is_file()
    with zipfile.ZipFile(paths["autograder"]) as z:
        files = set(z.namelist())
        tests = {n: z.read(n).decode() for n in files if n.startswith("tests/")}
        environment = z.read("environment.yml").decode()
    assert {f"tests/{q}.py" for q in questions} == set(tests), sorted(files)
    assert "sigprop @ git+" in environment, "Gradescope must install sigprop (requirements.txt)"
    for q in questions:  # every question has public and hidden tests; only public ones reach students
        graded = tests[f"tests/{q}.py"]
        assert "hidden=False" in graded and "hidden=True" in graded, f"{name} {q}: needs public and hidden tests"
        student = (paths["student_dir"] / "tests" / f"{q}.py").read_text()
        assert "hidden=True" not in student and "hidden=False" in student


@pytest.mark.parametrize("name", NAMES)
def test_solutions_score_full_marks(built, name):
    paths = built[name]
    results = grade_submission(str(paths["solutions"]), str(paths["autograder"]), quiet=True, debug=True)
    questions = _questions(ma.HERE / f"{name}.ipynb")
    assert results.possible == pytest.approx(sum(questions.values()))
    assert results.total == pytest.approx(results.possible), results.summary()


@pytest.mark.parametrize("name", NAMES)
def test_blank_student_notebook_runs_and_scores_zero(built, name, tmp_path):
    paths = built[name]
    # a submission may be renamed (Gradescope); debug=True: a cell that raises in the student notebook
    # fails this test instead of being swallowed
    submission = tmp_path / "submission.ipynb"
    submission.write_text(paths["student"].read_text())
    results = grade_submission(str(submission), str(paths["autograder"]), quiet=True, debug=True)
    questions = _questions(ma.HERE / f"{name}.ipynb")
    assert set(results.results) == set(questions)
    scores = {q: results.get_score(q) for q in questions}
    assert all(s == 0 for s in scores.values()), f"blank answers must score zero: {scores}"


@pytest.mark.parametrize("name", NAMES)
def test_no_solution_leaks_into_student_version(built, name):
    master = ma.HERE / f"{name}.ipynb"
    lines = ma.solution_lines(master)
    assert len(lines) >= 4, f"{name}: the leak scan found too few solution lines to be meaningful: {lines}"
    assert ma.hidden_test_names(master), f"{name}: no hidden tests found"
    assert ma.find_leaks(master, built[name]["student_dir"]) == []
    nbformat.validate(nbformat.read(str(built[name]["student"]), as_version=4))
    nb = json.loads(built[name]["student"].read_text())
    answers = [c for c in nb["cells"] if "otter_answer_cell" in c["metadata"].get("tags", [])]
    assert answers and all("..." in "".join(c["source"]) for c in answers)
    assert not any(c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code")


def test_leak_scan_can_fail(built, tmp_path):
    """The solutions notebook placed in a student folder is reported as a leak."""
    name = NAMES[0]
    (tmp_path / f"{name}.ipynb").write_text(built[name]["solutions"].read_text())
    assert ma.find_leaks(ma.HERE / f"{name}.ipynb", tmp_path)


@pytest.mark.parametrize("name", NAMES)
def test_student_notebook_keeps_the_colab_cell_and_ships_public_tests(built, name, tmp_path, monkeypatch):
    student = built[name]["student"]
    nb = json.loads(student.read_text())
    first = [c for c in nb["cells"] if c["cell_type"] == "code"][0]
    assert "google.colab" in "".join(first["source"]) and "remove-cell" in first["metadata"]["tags"]
    # the public-test writer of the Colab cell reproduces student/tests exactly
    monkeypatch.chdir(tmp_path)  # like Colab: no notebook file, no tests folder
    exec(compile(ma.injected_block(student), "colab-cell", "exec"), {})
    written = {p.name: p.read_text() for p in (tmp_path / "tests").glob("*.py")}
    shipped = {p.name: p.read_text() for p in (built[name]["student_dir"] / "tests").glob("*.py")}
    assert written == shipped and written
    # the notebook's own init cell then works without the notebook file, and grader.check reads those tests
    env = {}
    exec(compile("".join([c for c in nb["cells"] if c["cell_type"] == "code"][1]["source"]), "init-cell", "exec"), env)
    result = env["grader"].check("q1", global_env=env)
    assert result.possible > 0 and result.score == 0, "a blank q1 fails its public tests"


def test_command_line_builds_index_and_publishes_student_folders_only(tmp_path):
    out, public = tmp_path / "build", tmp_path / "public"
    assert ma.main([NAMES[0], "--out", str(out), "--no-run-tests", "--publish", str(public)]) == 0
    assert ma.colab_url(NAMES[0]) in (out / "README.md").read_text()
    assert (out / NAMES[0] / "autograder" / f"{NAMES[0]}-autograder.zip").is_file()
    published = sorted(p.relative_to(public).as_posix() for p in public.rglob("*") if p.is_file())
    student = sorted(f"{NAMES[0]}/{p.relative_to(out / NAMES[0] / 'student').as_posix()}"
                     for p in (out / NAMES[0] / "student").rglob("*") if p.is_file())
    assert published == sorted(student + ["README.md"]), published      # the published layout: <name>/<name>.ipynb
    assert ma.find_leaks(ma.HERE / f"{NAMES[0]}.ipynb", public) == []
    assert ma.colab_url(NAMES[0]).endswith(f"/blob/notebooks-v{__import__('sigprop').__version__}/"
                                           f"{ma.published_path(NAMES[0])}")


def test_instructor_page_links_every_student_notebook():
    page = (ROOT / "book" / "instructors.md").read_text()
    for name in NAMES:
        assert ma.colab_url(name) in page, f"book/instructors.md lacks the Colab link of {name}"
    assert "make assignments" in page and "otter run" in page
