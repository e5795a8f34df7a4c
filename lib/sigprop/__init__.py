"""sigprop: signal propagation in transformers at initialisation.

A small library behind the sigprop book: random transformers and their analytic maps
side by side, a batched Monte Carlo engine with standard errors, and a ledger of the
quantitative claims of four documents (Noci et al. 2022; Bao, Hataya & Karakida 2024;
Giorlandino & Goldt 2025; Aghajanyan 2025).

Flat namespace: ``import sigprop as sp``; analytic maps live in ``sp.theory``; the ledger in
``sigprop.claims`` (``python -m sigprop.claims``).
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

# One concept per private module; each lists its public names in ``__all__`` (flat namespace)
# and its analytic maps in ``__theory__`` (``sp.theory``).
_MODULES = (
    "_config",
    "_random",
    "_validate",
    "_estimate",
    "_montecarlo",
    "_data",
    "_corpus",
    "_attention",
    "_blocks",
    "_measures",
    "_rem",
    "_blockmaps",
    "_checkers",
    "_uniform",
    "_gradients",
    "_localisation",
    "_locater",
    "_covariance",
    "_dictionary",
    "_trainability",
    "_rem_gradients",
    "_rem_corrections",
    "_training",
)

__all__ = ["theory"]
for _name in _MODULES:
    _module = importlib.import_module(f".{_name}", __name__)
    for _public in getattr(_module, "__all__", ()):
        globals()[_public] = getattr(_module, _public)
        __all__.append(_public)
for _leftover in ("_name", "_module", "_public"):
    globals().pop(_leftover, None)
del _leftover

from . import theory  # noqa: E402  (after the modules it collects)
