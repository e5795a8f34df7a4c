"""Tests for sigprop.course._style.use_book_style (the book's matplotlib style)."""
from __future__ import annotations

import ast
import pathlib
import subprocess
import sys
import textwrap

import pytest

matplotlib = pytest.importorskip("matplotlib")
import matplotlib.figure  # noqa: E402
import matplotlib.font_manager  # noqa: E402

from sigprop.course import _style  # noqa: E402
from sigprop.course._style import MAX_FIGURE_WIDTH, use_book_style  # noqa: E402

LIB = pathlib.Path(_style.__file__).resolve().parents[1]


@pytest.fixture
def restore_rc():
    """Leave matplotlib's rcParams as the test found them."""
    saved = matplotlib.rcParams.copy()
    yield
    matplotlib.rcParams.update(saved)


def _run(code: str) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter (clean sys.modules, no IPython shell)."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True, text=True, timeout=300,
        env={"MPLBACKEND": "Agg", "PYTHONPATH": str(LIB), "PATH": "/usr/bin:/bin",
             "OMP_NUM_THREADS": "1"},
    )


def test_sets_figure_size_fonts_and_layout(restore_rc):
    matplotlib.rcdefaults()
    use_book_style()
    rc = matplotlib.rcParams
    width, height = rc["figure.figsize"]
    assert 4.0 <= width <= MAX_FIGURE_WIDTH <= 8.0, rc["figure.figsize"]
    assert height < width
    assert rc["figure.dpi"] == 100  # 1 in = 100 CSS px in the page
    assert rc["figure.constrained_layout.use"] is True
    # every text a reader reads is >= 10 pt (relative sizes such as "small" resolve against
    # font.size), body text >= 11 pt (matplotlib's default is 10 pt)
    points = matplotlib.font_manager.FontProperties
    for key in ("font.size", "axes.titlesize", "axes.labelsize", "xtick.labelsize",
                "ytick.labelsize", "legend.fontsize", "legend.title_fontsize",
                "figure.titlesize"):
        size = points(size=rc[key]).get_size_in_points()
        assert size >= 10, (key, rc[key], size)
    assert points(size=rc["font.size"]).get_size_in_points() >= 11


def test_changes_only_what_it_declares(restore_rc):
    matplotlib.rcdefaults()
    before = dict(matplotlib.rcParams)
    use_book_style()
    changed = {k for k, v in matplotlib.rcParams.items() if before[k] != v}
    assert changed <= set(_style.BOOK_RC), changed - set(_style.BOOK_RC)
    assert changed  # it did something


def test_idempotent(restore_rc):
    use_book_style()
    first = dict(matplotlib.rcParams)
    use_book_style()
    assert dict(matplotlib.rcParams) == first


def test_a_default_figure_fits_the_column(restore_rc):
    use_book_style()
    fig = matplotlib.figure.Figure()
    width_px = fig.get_figwidth() * fig.dpi
    assert width_px <= 100 * MAX_FIGURE_WIDTH
    assert fig.get_layout_engine() is not None  # constrained layout is on


def test_outside_ipython_does_not_import_ipython():
    result = _run("""
        import sys
        import sigprop.course._style as style
        assert "IPython" not in sys.modules, "importing sigprop imported IPython"
        style.use_book_style()
        style.use_book_style()
        assert "IPython" not in sys.modules, "use_book_style imported IPython"
        assert style._use_inline_format("retina") is False
        import matplotlib
        assert matplotlib.rcParams["legend.fontsize"] == 10
        print("ok")
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("ok")


def test_module_imports_matplotlib_and_ipython_lazily():
    """No top-level import of matplotlib or IPython (importing sigprop stays light)."""
    tree = ast.parse(pathlib.Path(_style.__file__).read_text())
    top = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            top += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            top.append(node.module or "")
    heavy = [m for m in top if m.split(".")[0] in {"matplotlib", "IPython", "matplotlib_inline"}]
    assert not heavy, heavy


def test_under_ipython_figures_are_retina():
    """In an IPython shell, figures display as 2x PNGs with 1x width/height metadata."""
    pytest.importorskip("IPython")
    pytest.importorskip("matplotlib_inline")
    result = _run("""
        import base64, struct
        from IPython.core.interactiveshell import InteractiveShell
        shell = InteractiveShell.instance()
        import sigprop.course._style as style
        style.use_book_style()
        style.use_book_style()
        from matplotlib_inline.config import InlineBackend
        assert InlineBackend.instance().figure_formats == {"retina"}
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots()
        ax.plot([0, 1], [0, 1], label="line")
        ax.legend()
        data, meta = shell.display_formatter.format(fig)
        png = data["image/png"]
        png = base64.b64decode(png) if isinstance(png, str) else png
        pixel_width = struct.unpack(">I", png[16:20])[0]
        shown = meta["image/png"]["width"]
        assert abs(pixel_width - 2 * shown) <= 2, (pixel_width, shown)
        assert shown <= 100 * style.MAX_FIGURE_WIDTH, shown
        print("ok", pixel_width, shown)
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().startswith("ok")


def test_pandas_columns_are_not_cut_and_pandas_is_never_imported():
    result = _run("""
        import sys
        import sigprop.course._style as style
        style.use_book_style()
        assert "pandas" not in sys.modules, "use_book_style imported pandas"
        import pandas as pd
        style.use_book_style()
        assert pd.get_option("display.max_colwidth") is None
        text = "post-LN, beta = 3, alpha_SA = 1, 24 blocks, T = 64, and a long tail of words"
        assert text in pd.DataFrame({"stack": [text]}).to_html()
        print("ok")
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("ok")
