r"""Plain-text formulas as the book typesets them: ``alpha_SA`` becomes :math:`\alpha_{SA}`, ``T -> inf``
becomes :math:`T\to\infty`, ``+-`` becomes ``±``.

Code, records and claim notes write formulas in ASCII (``sigma_v^2 = 1``, ``a d^-gamma + b``, ``16 inits x 2
sequences``, ``p = 4e-05``), because they are also read in a terminal. A page shows them typeset: table headers and
cells (:func:`sigprop.course.table`) and the claims ledger's notes (:func:`sigprop.course.ledger_table`) pass through
:func:`typeset`, which rewrites only what is unambiguous and leaves the rest alone:

* a Greek letter's name as a word, with an optional subscript and superscript (``beta``, ``alpha_SA``,
  ``sigma_v^2``, ``sigma_w2``, ``chi2``), and a single letter with a subscript or a superscript (``W_QK``, ``d_k``,
  ``u^T``, ``d^-gamma``) become inline TeX (``$\alpha_{SA}$``);
* ``X -> inf`` / ``X -> infinity`` becomes ``$X\to\infty$``; other arrows ``→``; ``+-`` ``±``; ``<=``, ``>=``,
  ``!=`` ``≤``, ``≥``, ``≠``; `` ~ `` ``∼``; ``sqrt`` ``√``; `` x `` between two numbers or words ``×``;
* a number in e-notation (``4e-05``, ``1e4``) becomes a power of ten (``4 × 10⁻⁵``, ``10⁴``).

Left alone: what is already between ``$...$`` or backticks, dotted names (``sp.theory.ipr``), identifiers with a
word before the underscore (``map_1/T``, ``ipr_finite``), file names and claim ids. The result is Markdown with
``$...$`` math (MyST, as the pages are); :func:`to_html_math` turns the ``$`` into MathJax's ``\(...\)`` for HTML.
"""
from __future__ import annotations

import re

__all__: list[str] = []
__theory__: list[str] = []
__course__ = ["typeset"]

_GREEK = ("alpha", "beta", "gamma", "delta", "epsilon", "eta", "theta", "iota", "kappa", "lambda", "mu", "nu", "xi",
          "pi", "rho", "sigma", "tau", "phi", "chi", "psi", "omega", "Gamma", "Delta", "Theta", "Lambda", "Xi", "Pi",
          "Sigma", "Phi", "Psi", "Omega")
_G = "|".join(sorted(_GREEK, key=len, reverse=True))
_PIECE = r"(?:\{[^{}$]+\}|\(-?[A-Za-z0-9/]+\)|-?[A-Za-z0-9]+)"
#: a Greek name, or one letter, with an optional _subscript and ^superscript; not inside a longer name or a path
_ATOM = re.compile(rf"(?<![\w.\-/\\])(?P<base>{_G}|[A-Za-z])(?:_(?P<sub>{_PIECE}))?(?:\^(?P<sup>{_PIECE}))?"
                   r"(?!\w)")
_TO_INF = re.compile(r"(?<![\w.\\])([A-Za-z](?:_[A-Za-z0-9]+)?) ?-> ?inf(?:inity)?\b")
_ENOTATION = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)e([+-]?)0*(\d+)\b")
_TIMES = re.compile(r"(?<=[\w)]) x (?=[\w(])")
_CHI2 = re.compile(r"\bchi2\b")
_SQRT = re.compile(r"\bsqrt\b ?")
_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
_PROTECTED = re.compile(r"(\$[^$]+\$|`[^`]+`|<[^<>]+>|\S*[A-Za-z]\.[A-Za-z_]\S*|\S+\.(?:json|py|ipynb|md)\b|"
                        r"\b(?:gg|noci|bao|aghajanyan)\d{4}-\S+|--\w[\w-]*)")


def _tex(piece: str | None) -> str:
    """A subscript or superscript in TeX: braces stripped, Greek names as macros, ``T`` on its own as ``\\top``."""
    if piece is None:
        return ""
    piece = piece[1:-1] if piece[0] in "{(" and piece[-1] in "})" else piece
    piece = re.sub(rf"\b({_G})\b", r"\\\1", piece)
    return piece


def _atom(m: re.Match) -> str:
    base, sub, sup = m.group("base"), m.group("sub"), m.group("sup")
    greek = base in _GREEK
    if not greek and sub is None and sup is None:
        return m.group(0)                      # a lone letter (d, T) stays text
    if sub is not None and sup is None and re.fullmatch(r"[a-z]+2", sub) and greek:
        sub, sup = sub[:-1], "2"               # sigma_w2 (a code name) is sigma_w^2
    tex = ("\\" + base) if greek else base
    if sub is not None:
        tex += "_{" + _tex(sub) + "}"
    if sup is not None:
        tex += "^{" + ("\\top" if sup == "T" else _tex(sup)) + "}"
    return f"${tex}$"


def _power(m: re.Match) -> str:
    mantissa, sign, exponent = m.group(1), m.group(2), m.group(3)
    power = "10" + (("-" if sign == "-" else "") + exponent).translate(_SUPERSCRIPT)
    return power if mantissa in ("1", "1.0") else f"{mantissa} × {power}"


def _plain(text: str) -> str:
    text = _TO_INF.sub(lambda m: f"${_atom_tex(m.group(1))}\\to\\infty$", text)
    text = text.replace("+-", "±").replace("->", "→").replace("<=", "≤").replace(">=", "≥").replace("!=", "≠")
    text = text.replace(" ~ ", " ∼ ")
    text = _ENOTATION.sub(_power, text)
    text = _CHI2.sub(r"$\\chi^2$", text)
    text = _SQRT.sub("√", text)
    text = _TIMES.sub(" × ", text)
    return _ATOM.sub(_atom, text)


def _atom_tex(name: str) -> str:
    m = _ATOM.fullmatch(name)
    return _atom(m).strip("$") if m else name


def typeset(text: str) -> str:
    """``text`` with its plain-text formulas in inline TeX and symbols (module docstring); what is already TeX, code
    or an identifier is kept as it is."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a string; got {type(text).__name__}")
    parts = _PROTECTED.split(text)
    return "".join(part if k % 2 else _plain(part) for k, part in enumerate(parts))


def to_html_math(text: str) -> str:
    """``$...$`` as MathJax's inline ``\\(...\\)`` (for HTML outside the Markdown parser)."""
    return re.sub(r"\$([^$]+)\$", lambda m: "\\(" + m.group(1) + "\\)", text)
