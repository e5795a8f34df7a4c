"""The book's matplotlib style: figures sized for the HTML content column.

The book's pages (sphinx-book-theme) have a content column about 690 px wide in a 1280 px
window and at most about 800 px on a wide screen. The inline backend shows a figure at
``figure.dpi`` = 100 px per inch, so a figure of width ``w`` inches takes ``100 w`` px and
a font of ``s`` points is ``100 s / 72`` px tall -- *before* the browser scales an oversize
figure down to the column. A 15-inch figure is shown at about half size, its 10 pt labels
at about 7 px. Hence the two rules of this style:

* figures are at most :data:`MAX_FIGURE_WIDTH` = 7.5 in wide (the default is 6.4 in), so
  the fonts below reach the reader at (nearly) their nominal size; a wide multi-panel figure
  becomes two rows rather than one long strip;
* fonts are at least 10 pt (legends and tick labels included), 11 pt for body text.

Under IPython (a notebook, the book build) figures are also sent as ``retina`` PNGs --
rendered at twice the resolution and displayed at the same size -- so lines and text stay
sharp on high-density screens and when zoomed. Layout uses matplotlib's constrained layout,
which also makes room for colorbars and suptitles (an explicit ``fig.tight_layout()`` then
switches that figure to tight layout, with a warning from matplotlib: drop the call).

Tables: where the page has imported pandas, :data:`BOOK_PANDAS` is set too, so that a column of text
(a stack's title, a verdict) is shown whole instead of being cut at 50 characters with "...".

matplotlib, and IPython where present, are imported only inside :func:`use_book_style`;
importing :mod:`sigprop` imports neither, and pandas is never imported by it.
"""
from __future__ import annotations

import sys

__all__ = ["use_book_style"]
__theory__: list[str] = []

#: The widest figure (inches) that is shown at its nominal size in the content column.
MAX_FIGURE_WIDTH = 7.5

#: Inline figure format under IPython: 2x PNG, displayed at 1x size.
INLINE_FORMAT = "retina"

#: rcParams set by :func:`use_book_style` (everything else keeps matplotlib's defaults).
BOOK_RC = {
    # size: 6.4 x 4.0 in at 100 px/in -> 640 x 400 px, inside the 690-800 px column
    "figure.figsize": (6.4, 4.0),
    "figure.dpi": 100,
    "figure.constrained_layout.use": True,
    # type: nominal sizes in points; >= 10 pt everywhere a reader has to read
    "font.size": 11,
    "axes.titlesize": 12,
    "axes.labelsize": 11,
    "xtick.labelsize": 10,
    "ytick.labelsize": 10,
    "legend.fontsize": 10,
    "legend.title_fontsize": 10,
    "figure.titlesize": 12,
    # lines a little heavier than the 1.5 default, so they survive the 2x downsampling
    "lines.linewidth": 1.8,
    # files written with savefig (not the inline display) are high-resolution and cropped
    "savefig.dpi": 200,
    "savefig.bbox": "tight",
}


#: pandas display options set by :func:`use_book_style` when the page has imported pandas.
BOOK_PANDAS = {"display.max_colwidth": None}


def use_book_style() -> None:
    """Set the book's matplotlib style; call once in each notebook's import cell.

    Sets :data:`BOOK_RC` in ``matplotlib.rcParams`` (figures 6.4 x 4.0 in by default, at
    most :data:`MAX_FIGURE_WIDTH` in wide when a notebook sets ``figsize`` itself; fonts
    10-12 pt; constrained layout) and, when running under IPython, switches the inline
    backend to ``retina`` PNGs. Idempotent: a second call changes nothing. Outside IPython
    (scripts, tests) only the rcParams change; IPython is never imported. If pandas is already imported
    (pages import it first), :data:`BOOK_PANDAS` is set as well.

    Used by every chapter notebook (``sp.use_book_style()`` after ``import sigprop as sp``).
    """
    import matplotlib

    matplotlib.rcParams.update(BOOK_RC)
    _use_inline_format(INLINE_FORMAT)
    pandas = sys.modules.get("pandas")      # imported by the page, never by sigprop
    if pandas is not None:
        for key, value in BOOK_PANDAS.items():
            pandas.set_option(key, value)


def _use_inline_format(fmt: str) -> bool:
    """Send matplotlib figures to IPython's display as ``fmt``; False outside IPython.

    Two routes, both needed because the order of ``use_book_style()`` and the first
    ``import matplotlib.pyplot`` / first figure is not fixed: the ``InlineBackend`` config
    (read when the inline backend is set up, which happens lazily at the first figure) and
    the shell's display formatters (in effect now).
    """
    ipython = sys.modules.get("IPython")  # imported already iff we run under IPython
    if ipython is None:
        return False
    shell = ipython.get_ipython()
    if shell is None:
        return False
    try:
        from matplotlib_inline.backend_inline import set_matplotlib_formats
        from matplotlib_inline.config import InlineBackend
    except ImportError:  # an IPython without matplotlib-inline: keep its defaults
        return False
    config = InlineBackend.instance(parent=shell)
    if set(config.figure_formats) != {fmt}:
        config.figure_formats = {fmt}
    set_matplotlib_formats(fmt)
    return True
