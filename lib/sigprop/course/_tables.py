r"""Numbers as the book prints them, and the verdict of each check at the book's one level.

*How to read the checks* (``book/checks.md``) states the book's rules once; this module is their code, so that
every page prints and decides the same way:

* **one level**, :data:`LEVEL` = 0.001: a correct theory fails a check at most once in a thousand runs;
* **one number** (independent of the others) agrees with a theory value when :math:`|z| \le` :data:`Z_POINT` = 4
  (:func:`point_verdict`);
* **one curve** (points measured on the same initialisations) is tested as a whole by
  :func:`sigprop.curve_agreement` at :data:`LEVEL` with :data:`N_RESAMPLES` sign-flip resamples
  (:func:`curve_test`); it agrees when :math:`p \ge` :data:`LEVEL`;
* a Monte Carlo number is printed as *mean ± SE*, the standard error to two significant digits and the mean to
  the same decimal place (:func:`pm`); error bars in figures are ±2 SE.

:func:`pm`, :func:`sci` and :func:`pvalue` return plain strings (for tables, ``print`` and myst-nb ``glue``);
:func:`verdict` turns a :class:`~sigprop.CurveAgreement` or a z-score into the words a table shows, and says when a
p-value is the smallest its test can report (:func:`smallest_p`) rather than printing that floor as a measurement.
:func:`glue` hands a computed number to the page's prose (myst-nb's ``{glue:text}`` role), so that no number in
the text is typed by hand.
"""
from __future__ import annotations

import math

import numpy as np

from ..stats._agreement import CurveAgreement, curve_agreement
from ..stats._estimate import Estimate

__all__: list[str] = []
__theory__: list[str] = []
__course__ = ["LEVEL", "Z_POINT", "N_RESAMPLES", "pm", "sci", "pvalue", "curve_test", "depth_test", "verdict",
              "point_verdict", "smallest_p", "zscore", "glue"]

#: The book's one test level (book/checks.md, "One level for the book").
LEVEL = 1e-3
#: A single independent number agrees when |z| <= Z_POINT (two-sided tail 6e-5, below the level).
Z_POINT = 4.0
#: Sign-flip resamples of a curve-level test (at LEVEL = 0.001 the test needs more than 2999).
N_RESAMPLES = 9999

_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def _scalar(value, name):
    if isinstance(value, Estimate):
        raise TypeError(f"{name} must be a number; got an Estimate (pass it as the first argument of pm)")
    if value is None or isinstance(value, (str, bytes, bool)):       # np.asarray(None, dtype=float) is nan
        raise TypeError(f"{name} must be a number; got {value!r}")
    arr = np.asarray(value.detach().cpu() if hasattr(value, "detach") else value, dtype=float)
    if arr.size != 1:
        raise ValueError(f"{name} must be a single number; got shape {arr.shape}")
    return float(arr.reshape(()))


def pm(mean, se=None, *, digits: int = 2) -> str:
    """``"mean ± SE"``: the SE to ``digits`` significant digits, the mean to the same decimal place.

    ``mean`` is a number (then ``se`` is required) or a scalar :class:`~sigprop.Estimate`. Very small or large
    values switch to a common power of ten: ``pm(3.1e-6, 4.2e-8)`` is ``"(3.100 ± 0.042) × 10⁻⁶"``.
    """
    if isinstance(mean, Estimate):
        if se is not None:
            raise TypeError("pm(estimate) takes no se: the Estimate carries its standard error")
        mean, se = mean.mean, mean.stderr
    elif se is None:
        raise TypeError("pm(mean, se) needs the standard error (or pass one Estimate)")
    m, s = _scalar(mean, "mean"), _scalar(se, "se")
    if not (math.isfinite(m) and math.isfinite(s)) or s < 0:
        raise ValueError(f"mean and se must be finite, se >= 0; got {m!r}, {s!r}")
    if digits < 1:
        raise ValueError(f"digits must be >= 1; got {digits}")
    if s == 0:
        return f"{m:.4g} ± 0"
    top = max(abs(m), s)
    power = math.floor(math.log10(top)) if top > 0 else 0
    if -4 <= power < 5:
        decimals = _decimals(s, digits)
        return f"{m:.{decimals}f} ± {s:.{decimals}f}"
    scale = 10.0 ** power
    decimals = _decimals(s / scale, digits)
    return f"({m / scale:.{decimals}f} ± {s / scale:.{decimals}f}) × 10{str(power).translate(_SUPERSCRIPT)}"


def _decimals(s: float, digits: int) -> int:
    """Decimal places that show ``s`` to ``digits`` significant digits *after* rounding: 0.0995 to two digits is
    0.10 (two places), not 0.100, which a count of places taken before rounding (three) would print."""
    decimals = digits - 1 - math.floor(math.log10(s))
    if float(f"{s:.{max(0, decimals)}f}") >= 10.0 ** (digits - decimals):    # rounding carried into a new digit
        decimals -= 1
    return max(0, decimals)


def sci(x, digits: int = 2) -> str:
    """A number for prose and tables: plain between 0.001 and 10^5, else ``"3.2 × 10⁻⁹"`` (never ``10^-8.5``)."""
    v = _scalar(x, "x")
    if not math.isfinite(v):
        return str(v)
    if v == 0 or 1e-3 <= abs(v) < 1e5:
        text = f"{v:.{digits}g}"
        return f"{v:.0f}" if "e" in text else text          # 100 with 2 digits: "100", not "1e+02"
    power = math.floor(math.log10(abs(v)))
    mantissa = v / 10.0 ** power
    if round(abs(mantissa), digits - 1) >= 10:      # 9.99 -> 10.0: carry into the power
        mantissa, power = mantissa / 10, power + 1
    return f"{mantissa:.{digits - 1}f} × 10{str(power).translate(_SUPERSCRIPT)}"


def pvalue(p) -> str:
    """A p-value: two significant digits, powers of ten below 0.001 (the smallest a test of
    :data:`N_RESAMPLES` resamples reports is ``1/(N_RESAMPLES + 1)`` = 10⁻⁴)."""
    v = _scalar(p, "p")
    if not 0.0 <= v <= 1.0:
        raise ValueError(f"p must be in [0, 1]; got {v!r}")
    return f"{v:.2g}" if v >= 1e-3 else sci(v)


def curve_test(samples, theory, *, method: str = "signflip", generator=0) -> CurveAgreement:
    """:func:`sigprop.curve_agreement` at the book's level (:data:`LEVEL`, :data:`N_RESAMPLES` resamples).

    ``samples``: per-initialisation rows ``(n, k)`` or an :class:`~sigprop.Estimate` with ``.samples``; needs
    ``n >= 13`` at this level. Returns the :class:`~sigprop.CurveAgreement` (``.passed``, ``.p``, ...)."""
    return curve_agreement(samples, theory, level=LEVEL, n_resamples=N_RESAMPLES, method=method,
                           generator=generator)


def depth_test(samples, theory, *, method: str = "signflip", generator=0) -> CurveAgreement:
    """:func:`curve_test` of a curve over depth from block 1 on: column 0, the measured input that every map starts
    from, is no prediction and is left out.

    ``samples``: per-initialisation rows ``(n, depth + 1)`` or an :class:`~sigprop.Estimate` with ``.samples``;
    ``theory``: ``(depth + 1,)``, the map's curve from the same input."""
    rows = samples.samples if isinstance(samples, Estimate) else samples
    rows = rows if hasattr(rows, "ndim") else np.asarray(rows, dtype=float)
    theory = np.asarray(theory, dtype=float)
    if theory.ndim != 1 or rows.ndim != 2 or rows.shape[1] != theory.shape[0] or theory.shape[0] < 2:
        raise ValueError(f"need rows (n, depth + 1) and a curve (depth + 1,) with depth >= 1; got "
                         f"{tuple(rows.shape)} and {theory.shape}")
    return curve_test(rows[:, 1:], theory[1:], method=method, generator=generator)


def zscore(mean, se, theory) -> float:
    """``(mean - theory) / se`` for one number (``mean`` may be a scalar Estimate, then ``se`` is None)."""
    if isinstance(mean, Estimate):
        mean, se = mean.mean, mean.stderr
    m, s, t = _scalar(mean, "mean"), _scalar(se, "se"), _scalar(theory, "theory")
    if s <= 0:
        raise ValueError(f"se must be > 0 for a z-score; got {s!r}")
    return (m - t) / s


def point_verdict(z) -> str:
    """``"agrees (z = -2.6)"`` when ``|z| <= Z_POINT``, else ``"disagrees (z = 5.1)"`` (one independent number)."""
    v = _scalar(z, "z")
    if math.isnan(v):
        raise ValueError("z is nan: no verdict (a standard error of 0, or a missing number?)")
    return f"{'agrees' if abs(v) <= Z_POINT else 'disagrees'} (z = {v:+.1f})"


def smallest_p(result: CurveAgreement) -> float:
    """The smallest p-value the curve test behind ``result`` can report: ``1/(n_resamples + 1)``, with the
    observed sign pattern counted among the resampled ones (``1/2^(n-1)`` when every pattern was used)."""
    if not isinstance(result, CurveAgreement):
        raise TypeError(f"result must be a CurveAgreement; got {type(result).__name__}")
    return 1.0 / (result.n_resamples + 1)


def _power_of_ten(x: float) -> str:
    text = sci(x)
    return text[len("1.0 × "):] if text.startswith("1.0 × 10") else text     # "10⁻⁴", not "1.0 × 10⁻⁴"


def verdict(result, *, short: bool = False) -> str:
    """The words a table shows for a check.

    ``result``: a :class:`~sigprop.CurveAgreement` (``"agrees (p = 0.42)"``) or a z-score of one independent
    number (:func:`point_verdict`). A curve whose p is the smallest its test can report says so instead of printing
    that floor as if it were measured: ``"disagrees (p ≤ 10⁻⁴, the smallest p 9,999 resamples can give)"``.
    ``short=True``: ``"✓ p = 0.42"`` / ``"✗ p ≤ 10⁻⁴"`` for dense tables. A curve tested at another level than
    :data:`LEVEL` is refused: the book has one level.
    """
    if result is None or isinstance(result, (str, bytes, bool)):
        raise TypeError(f"verdict needs a CurveAgreement or a z-score; got {result!r}")
    if not isinstance(result, CurveAgreement):
        text = point_verdict(result)
        return ("✓ " if text.startswith("agrees") else "✗ ") + text.split("(")[1].rstrip(")") if short else text
    if not math.isclose(result.level, LEVEL):
        raise ValueError(f"the book tests at level {LEVEL:g} (book/checks.md); this curve was tested at "
                         f"{result.level:g}: use sigprop.course.curve_test")
    mark, word = ("✓", "agrees") if result.passed else ("✗", "disagrees")
    floor = smallest_p(result)
    if result.p <= floor * (1 + 1e-9):
        p = _power_of_ten(floor)
        by = (f"all {result.n_resamples + 1:,} sign patterns give" if result.exact
              else f"{result.n_resamples:,} resamples can give")
        return f"{mark} p ≤ {p}" if short else f"{word} (p ≤ {p}, the smallest p {by})"
    p = pvalue(result.p)
    return f"{mark} p = {p}" if short else f"{word} (p = {p})"


def glue(name: str, value) -> None:
    """Make ``value`` available to the page's prose as ``{glue:text}`name``` (myst-nb), without displaying it.

    Strings are pasted as they are (format numbers with :func:`pm`, :func:`sci` or an f-string first); numbers
    may be formatted in the role (``{glue:text}`name:.3f```). Where myst-nb is not installed (a Colab runtime:
    the prose is not rendered there) this does nothing. Glue keys are per page; the book prefixes them with the
    page (``gg01-...``).
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string; got {name!r}")
    if isinstance(value, (np.generic, np.ndarray)) or hasattr(value, "detach"):
        value = _scalar(value, "value")
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        raise TypeError(f"value must be a string or a number; got {type(value).__name__}")
    try:
        from myst_nb import glue as _myst_glue
    except ImportError:      # Colab and plain Jupyter: nothing renders the role, nothing to record
        return
    _myst_glue(name, value, display=False)
