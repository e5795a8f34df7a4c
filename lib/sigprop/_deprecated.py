"""Old public names, kept working as deprecated aliases (issue 24: one naming rule).

The rule: a Monte Carlo function is ``mc_X`` beside its theory ``sp.theory.X`` in the same folder; a squared
norm is called ``*_sq_norm``. Every rename is listed here, once, old -> new: ``RENAMED`` for the flat ``sp.*``
namespace and ``RENAMED_THEORY`` for ``sp.theory.*``. An old name still returns the new object, and warns
(``DeprecationWarning``, shown where the caller's code uses it) so that chapters and claims switch; the aliases
go with the next minor release. ``tests/test_deprecated.py`` checks every alias.
"""
from __future__ import annotations

import warnings

from .attention._covariance_mc import mc_value_correlation
from .attention._cross import mc_cross_overlap
from .attention._ipr import mc_ipr_finite_width
from .attention._layer import mc_attention_layer
from .attention._query_gradient import mc_rem_query_grad_sq_norm, query_jacobian_sq_norm, rem_query_grad_sq_norm

#: Flat namespace: old name -> (new name, object).
RENAMED = {
    "cross_overlap_rem": ("mc_cross_overlap", mc_cross_overlap),
    "attention_layer_mc": ("mc_attention_layer", mc_attention_layer),
    "query_grad_norm_mc": ("mc_rem_query_grad_sq_norm", mc_rem_query_grad_sq_norm),
    "query_jacobian_norm": ("query_jacobian_sq_norm", query_jacobian_sq_norm),
    "value_correlation_mc": ("mc_value_correlation", mc_value_correlation),
    "ipr_finite_width": ("mc_ipr_finite_width", mc_ipr_finite_width),
}

#: ``sp.theory``: old name -> (new name, object).
RENAMED_THEORY = {
    "query_grad_norm": ("rem_query_grad_sq_norm", rem_query_grad_sq_norm),
}


def lookup(table: dict, namespace: str, name: str):
    """The new object for an old ``name`` (with a DeprecationWarning), or AttributeError as a module would."""
    if name in table:
        new, obj = table[name]
        warnings.warn(f"{namespace}.{name} is deprecated: use {namespace}.{new} (same function, new name; "
                      "issue 24's naming rule)", DeprecationWarning, stacklevel=3)
        return obj
    raise AttributeError(f"module {namespace!r} has no attribute {name!r}")
