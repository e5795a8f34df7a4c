"""Checkers for coding exercises: compare a reader's function with sigprop's reference.

:func:`check_function` calls both on each case and says *what* differs -- the type, the
shape, the overall scale (a missing factor), or the first mismatching entry -- instead of
a bare pass/fail.
"""
from __future__ import annotations

import numpy as np
import torch

__all__ = ["check_function", "CheckFailed"]


class CheckFailed(AssertionError):
    """Raised by :func:`check_function` with a message that explains the mismatch."""


def _to_numpy(value):
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().double().numpy()
    if isinstance(value, (tuple, list)):
        return [_to_numpy(v) for v in value]
    return np.asarray(value, dtype=float)


def _fmt_case(case):
    def short(v):
        if isinstance(v, (torch.Tensor, np.ndarray)):
            return f"<{type(v).__name__} shape {tuple(v.shape)}>"
        return repr(v)
    return ", ".join(f"{k}={short(v)}" for k, v in case.items())


def _compare(got, want, rtol, atol, where):
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            n = len(got) if isinstance(got, list) else 1
            raise CheckFailed(f"{where}: expected {len(want)} outputs, got {n}")
        for i, (g, w) in enumerate(zip(got, want)):
            _compare(g, w, rtol, atol, f"{where}, output {i}")
        return
    if isinstance(got, list):
        raise CheckFailed(f"{where}: expected one array, got {len(got)} outputs")
    if got.shape != want.shape:
        raise CheckFailed(f"{where}: expected shape {want.shape}, got {got.shape}")
    if not np.all(np.isfinite(got)):
        raise CheckFailed(f"{where}: your output contains NaN or inf")
    close = np.isclose(got, want, rtol=rtol, atol=atol)
    if close.all():
        return
    msg = f"{where}: values differ"
    denom = np.abs(want).sum()
    if denom > 0 and np.abs(got).sum() > 0:
        ratio = np.abs(got).sum() / denom
        if not np.isclose(ratio, 1.0, rtol=1e-3) and np.allclose(got, ratio * want, rtol=1e-4, atol=atol):
            msg += f" by a constant factor: yours = {ratio:.6g} x reference (a missing scale?)"
    idx = tuple(int(i) for i in np.argwhere(~close)[0]) if got.ndim else ()
    g, w = (got[idx], want[idx]) if got.ndim else (float(got), float(want))
    raise CheckFailed(f"{msg}; first mismatch at index {idx}: yours {float(g):.6g}, reference {float(w):.6g}")


def check_function(user_fn, reference_fn, cases, *, rtol: float = 1e-6, atol: float = 1e-9, name: str | None = None,
                   quiet: bool = False) -> bool:
    """Check ``user_fn`` against ``reference_fn`` on every case (a dict of keyword arguments).

    Raises :class:`CheckFailed` naming the case and what differs; prints one line and
    returns True when all cases agree within ``rtol``/``atol``.
    """
    if not callable(user_fn):
        raise TypeError(f"user_fn must be callable; got {type(user_fn).__name__}")
    cases = list(cases)
    if not cases:
        raise ValueError("cases must hold at least one dict of keyword arguments")
    label = name or getattr(reference_fn, "__name__", "function")
    for i, case in enumerate(cases):
        if not isinstance(case, dict):
            raise TypeError(f"each case must be a dict of keyword arguments; case {i} is {type(case).__name__}")
        want = _to_numpy(reference_fn(**case))
        where = f"{label}, case {i} ({_fmt_case(case)})"
        try:
            got = user_fn(**case)
        except Exception as exc:  # the reader's code raised: report it as a failed check
            raise CheckFailed(f"{where}: your function raised {type(exc).__name__}: {exc}") from exc
        if got is None:
            raise CheckFailed(f"{where}: your function returned None (did you forget `return`?)")
        _compare(_to_numpy(got), want, rtol, atol, where)
    if not quiet:
        print(f"✓ {label}: all {len(cases)} cases agree with the reference")
    return True
