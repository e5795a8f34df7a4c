"""One source for where the book lives (pyproject.toml), and every copy generated from it.

``book/sources.py`` writes the repository address and the release ref (``v<version>``, a tag, never a
moving branch) into every notebook's install cell, ``_config.yml`` and the assignments' requirements and
install cells; this test fails when any copy differs (run ``python book/sources.py`` to regenerate).
"""
import json
import pathlib
import re

from conftest import load_script

ROOT = pathlib.Path(__file__).resolve().parents[1]
sources = load_script("book_sources", ROOT / "book" / "sources.py")


def test_every_copy_is_generated_from_the_one_source():
    src = sources.source()
    assert src["ref"] == "v" + __import__("sigprop").__version__        # the release tag of this version
    stale = [str(p.relative_to(ROOT)) for p, text in sources.expected_files(src).items() if p.read_text() != text]
    assert not stale, f"run `python book/sources.py`: {stale}"


def test_no_other_address_or_moving_ref_anywhere():
    src = sources.source()
    pattern = re.compile(r"git\+https://[^\s\"'@]+(@[\w.\-]+)?")
    for path in list(ROOT.glob("*.md")) + list((ROOT / "book").rglob("*.md")) + list((ROOT / "book").rglob("*.txt")) \
            + list((ROOT / "book").rglob("*.ipynb")) + list((ROOT / "chapters").rglob("*.ipynb")):
        for m in pattern.finditer(path.read_text()):
            assert m.group(0) == f"git+{src['repository']}@{src['ref']}", (path, m.group(0))


def test_install_cell_honours_the_override():
    cell = sources.install_cell(sources.source())
    assert 'os.environ.get("SIGPROP_INSTALL"' in cell and '"google.colab" in sys.modules' in cell
    nb = json.loads((ROOT / "chapters" / "noci2022" / "01_uniform_attention.ipynb").read_text())
    assert "".join(nb["cells"][0]["source"]) == cell
