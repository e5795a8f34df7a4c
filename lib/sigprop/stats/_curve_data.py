r"""The input of :func:`sigprop.curve_agreement`: samples and theory validated, deviations scaled, points with no spread
and lattice-valued samples recognised (``sigprop.stats._agreement``'s docstring, "Points with no spread").
"""
from __future__ import annotations

import numpy as np
import torch

from ._estimate import Estimate
from ._validate import _as_array, check_memory

__all__: list[str] = []

#: A point counts as having no spread when max - min <= this many ulps of its largest |value|
#: (rounding of a value that is the same for every initialisation) ...
_CONSTANT_ULPS = 8
#: ... ulps of the samples' dtype, but never more than of float32: in float16 and bfloat16 eight ulps are 0.8 % to
#: 6 % of the value, the size of a real spread (issue 37, item 3: bfloat16 curves with 3 % spread were all
#: "constant" and failed), so there a point has no spread only when its values are equal.
_CONSTANT_EPS_MAX = float(np.finfo(np.float32).eps)


def _as_samples(samples):
    """(n, ...) values -> float64 (n, k) array, the trailing shape, and the input's float eps."""
    if isinstance(samples, Estimate) or hasattr(samples, "samples"):
        inner = getattr(samples, "samples", None)
        if inner is None:
            raise ValueError(
                "samples must carry per-initialisation values; got an Estimate without .samples "
                "(build it with sp.estimate(samples) or pass the (n, k) samples themselves)"
            )
        samples = inner
    if isinstance(samples, torch.Tensor):
        eps = torch.finfo(samples.dtype).eps if samples.is_floating_point() else 0.0
    else:
        try:
            kind = np.asarray(samples).dtype
        except (TypeError, ValueError):
            kind = np.dtype(object)
        eps = float(np.finfo(kind).eps) if np.issubdtype(kind, np.floating) else 0.0
    arr = _as_array(samples, "samples")  # numbers only: strings, bools, complex and objects refused
    if arr.ndim < 2 or arr.shape[0] == 0 or arr[0].size == 0:
        raise ValueError(
            f"samples must have shape (n, k): n initialisations by k points (trailing dims are flattened); "
            f"got shape {arr.shape}"
        )
    bad = ~np.isfinite(arr)
    if bad.any():
        first = np.argwhere(bad)[0]
        raise ValueError(
            f"samples must be finite; got {int(bad.sum())} NaN/inf entries (first at initialisation {first[0]}, "
            f"point {tuple(int(i) for i in first[1:])})"
        )
    check_memory(arr.size * 8 * 6, f"curve_agreement on samples of shape {arr.shape}")
    shape = tuple(arr.shape[1:])
    return arr.reshape(arr.shape[0], -1), shape, eps


def _as_theory(theory, shape, k):
    th = _as_array(theory, "theory")  # numbers only: theory="0" is refused, not read as 0
    if th.ndim == 0:
        th = np.full(k, float(th))
    elif th.shape == shape or th.shape == (k,):
        th = th.reshape(k)
    else:
        raise ValueError(
            f"theory must have the trailing shape of samples, {shape}, or ({k},); got shape {th.shape}"
        )
    if not np.all(np.isfinite(th)):
        raise ValueError(f"theory must be finite; got NaN/inf at points {np.flatnonzero(~np.isfinite(th))[:5].tolist()}")
    return th


def _lattice(x, constant, eps) -> bool:
    """Whether the values are lattice-valued (integers given, ``eps == 0``, or ties within a point that varies:
    counts, indicators, rounded or low-precision values), where a point can have no spread by chance."""
    if eps == 0.0 or not (~constant).any():
        return eps == 0.0
    ordered = np.sort(x[:, ~constant], axis=0)
    return bool((np.diff(ordered, axis=0) == 0).any())


def _deviations(x, theta, eps, atol):
    """Deviations from theory, each point scaled by its largest |deviation| (z does not depend on it, and
    squares of 1e200 or 1e-200 stay finite), with points of no spread set exactly constant: returns
    (scaled d (n, k), scale (k,), constant (k,))."""
    spread = x.max(0) - x.min(0)  # (k,)
    constant = spread <= _CONSTANT_ULPS * min(eps, _CONSTANT_EPS_MAX) * np.abs(x).max(0)
    x = np.where(constant[None], x[:1], x)  # exactly constant columns
    with np.errstate(over="ignore", invalid="ignore"):
        d = x - theta  # (n, k)
    if not np.all(np.isfinite(d)):
        j = int(np.flatnonzero(~np.isfinite(d).all(0))[0])
        raise ValueError(f"samples - theory overflows float64 at point {j} (values near 1.8e308 of opposite signs); "
                         "rescale samples and theory")
    d[:, constant & (np.abs(d[0]) <= atol)] = 0.0
    scale = np.abs(d).max(0)
    scale = np.where(scale > 0, scale, 1.0)
    return d / scale, scale, constant
