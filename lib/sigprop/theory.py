"""Analytic maps (float64): ``sp.theory.<name>``.

Collects every name a sigprop module lists in ``__theory__``: the REM quantities of
Giorlandino & Goldt 2025 (``beta_c``, ``ipr``, ``ipr_finite``), their block maps
(``block_map``, ``iterate_block_map``), and the chapters' maps (uniform attention, Bao's
localisation, Aghajanyan's covariances, ...). Scalars in, floats out; arrays in, arrays out.
"""
from __future__ import annotations

import importlib

from . import _MODULES

__all__: list[str] = []
for _name in _MODULES:
    _module = importlib.import_module(f"sigprop.{_name}")
    for _public in getattr(_module, "__theory__", ()):
        globals()[_public] = getattr(_module, _public)
        __all__.append(_public)
for _leftover in ("_name", "_module", "_public"):
    globals().pop(_leftover, None)
del _leftover
