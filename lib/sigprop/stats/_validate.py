"""Validation at the public boundary: plain messages naming the argument, expected vs got.

Theory functions accept Python scalars, numpy arrays or torch tensors; these helpers
check them without changing their type.
"""
from __future__ import annotations

import dataclasses
import enum
import functools
import math
import os

import numpy as np
import torch

from . import _config

__all__ = ["TOL"]

#: Tolerances for exact identities by dtype (relative, absolute).
TOL = {
    torch.float16: (1e-2, 1e-3),
    torch.bfloat16: (2e-2, 1e-2),
    torch.float32: (1e-5, 1e-6),
    torch.float64: (1e-10, 1e-12),
}


def _as_array(value, name):
    """Numbers (Python, numpy, torch; scalars or arrays) as a float64 array; bools and strings refused."""
    if isinstance(value, torch.Tensor):
        if value.dtype == torch.bool or value.is_complex():
            raise TypeError(f"{name} must be a real number or array; got a {value.dtype} tensor")
        return value.detach().cpu().double().numpy()
    if isinstance(value, (bool, np.bool_, str, bytes)):
        raise TypeError(f"{name} must be a number or an array of numbers; got {value!r}")
    try:
        raw = np.asarray(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number or an array of numbers; got {type(value).__name__}") from None
    if raw.dtype == bool or raw.dtype.kind not in "iuf":
        raise TypeError(f"{name} must be a number or an array of numbers; got {type(value).__name__} of {raw.dtype}")
    return raw.astype(float)


def _describe(arr):
    arr = np.asarray(arr)
    return repr(float(arr)) if arr.ndim == 0 else f"an array with min {np.nanmin(arr):.4g}, max {np.nanmax(arr):.4g}"


def check_finite(value, name):
    arr = _as_array(value, name)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite; got {'NaN' if np.any(np.isnan(arr)) else 'inf'}")
    return arr


def check_positive(value, name, *, allow_zero=False):
    arr = check_finite(value, name)
    bad = arr < 0 if allow_zero else arr <= 0
    if np.any(bad):
        rel = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be {rel}; got {_describe(arr[bad] if arr.ndim else arr)}")
    return arr


def check_range(value, name, lo, hi):
    arr = check_finite(value, name)
    if np.any((arr < lo) | (arr > hi)):
        raise ValueError(f"{name} must lie in [{lo}, {hi}]; got {_describe(arr)}")
    return arr


def broadcast(**arrays):
    """``np.broadcast_arrays`` with an error naming the arguments (expected vs got shapes)."""
    try:
        return np.broadcast_arrays(*arrays.values())
    except ValueError:
        got = ", ".join(f"{k} {np.shape(v)}" for k, v in arrays.items())
        raise ValueError(f"arguments must broadcast against each other; got shapes {got}") from None


def check_overlaps(q, p, *, strict=True):
    """q > 0 and |p| <= q (p < q when ``strict``: the REM needs q - p > 0)."""
    qa = check_positive(q, "q")
    pa = check_finite(p, "p")
    qb, pb = broadcast(q=qa, p=pa)
    if np.any(np.abs(pb) > qb * (1 + 1e-12)):
        raise ValueError("overlaps must satisfy |p| <= q (Cauchy-Schwarz); got p/q with max |p|/q = "
                         f"{float(np.max(np.abs(pb) / qb)):.4g}")
    if strict and np.any(pb >= qb):
        raise ValueError("this map needs p < q (distinct tokens); got p = q, i.e. fully collapsed tokens")
    return qa, pa


def check_gram_bound(q, p, T):
    """The domain of every map on equicorrelated tokens: ``T`` tokens of norm ``q`` and overlap ``p`` have the Gram
    matrix ``(q - p) I + p 1 1^T``, positive semi-definite exactly when ``p >= -q/(T-1)``; as ``T -> infinity``
    (``T`` None) that is ``p >= 0``. Arrays broadcast; anything outside is refused (no tokens have it)."""
    q, p = np.asarray(q, dtype=float), np.asarray(p, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        low = np.zeros(np.shape(q)) if T is None else -q / (np.asarray(T, dtype=float) - 1.0)
        bad = p < low - 1e-12 * q
    if np.any(bad):
        rho = float(np.min(np.where(bad, p / q, np.inf)))
        if T is None:
            raise ValueError("the T -> infinity map needs p >= 0: T equicorrelated tokens exist only for cosines "
                             f">= -1/(T-1), which tends to 0; got p/q = {rho:.4g}. Pass T for a finite sequence")
        T_at = float(np.min(np.broadcast_to(np.asarray(T, dtype=float), np.shape(bad))[bad]))
        raise ValueError(f"T tokens of norm q and overlap p exist only for p/q >= -1/(T-1) (a positive semi-definite "
                         f"Gram matrix): p/q >= {-1.0 / (T_at - 1.0):.4g} at T = {T_at:g}; got p/q = {rho:.4g}")


#: Largest size (tokens, widths, samples, steps) any function accepts: beyond it nothing could run.
SIZE_MAX = 2**40


def check_int(value, name, *, minimum, maximum=SIZE_MAX):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int; got {value!r} ({type(value).__name__})")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}; got {value}")
    if value > maximum:
        raise ValueError(f"{name} must be <= {maximum}; got {value}")
    return int(value)


def check_seq_len(T, name="T", *, maximum=None, why=""):
    """Sequence lengths ``2 <= T`` (``<= maximum`` where a formula's domain ends; ``why`` says why)."""
    arr = check_finite(T, name)
    if arr.size == 0:
        raise ValueError(f"{name} (sequence length) must not be empty")
    if np.any(arr < 2):
        raise ValueError(f"{name} (sequence length) must be >= 2; got {_describe(arr)}")
    if maximum is not None and np.any(arr > maximum):
        raise ValueError(f"{name} (sequence length) must be <= {maximum:.0e}{why}; got {_describe(arr)}")
    return arr


def check_option(value, enum_cls: type[enum.Enum], name):
    try:
        return enum_cls(value)
    except ValueError:
        allowed = ", ".join(repr(m.value) for m in enum_cls)
        raise ValueError(f"{name} must be one of {allowed}; got {value!r}") from None


def check_tensor(x, name, *, ndim_min=None, last=None, dtype_float=True, allow_empty=False):
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor; got {type(x).__name__}")
    if x.device.type not in _config.COMPUTE_DEVICES:
        raise ValueError(f"{name} is on the meta device (a shape without values): sigprop computes numbers; "
                         "build it on 'cpu', 'cuda' or 'mps'")
    if not allow_empty and x.numel() == 0:
        raise ValueError(f"{name} must not be empty; got shape {tuple(x.shape)}")
    if ndim_min is not None and x.ndim < ndim_min:
        raise ValueError(f"{name} must have at least {ndim_min} dimensions; got shape {tuple(x.shape)}")
    if last is not None and x.shape[-1] != last:
        raise ValueError(f"{name} must have last dimension {last}; got shape {tuple(x.shape)}")
    if dtype_float and not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor; got {x.dtype}")
    if dtype_float and not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name} must be finite; it contains NaN or inf")
    return x


def check_same_device(**tensors):
    devices = {k: v.device for k, v in tensors.items() if isinstance(v, torch.Tensor)}
    if len({d.type + str(d.index) for d in devices.values()}) > 1:
        got = ", ".join(f"{k} on {v}" for k, v in devices.items())
        raise ValueError(f"tensors must be on one device; got {got}")
    dtypes = {k: v.dtype for k, v in tensors.items() if isinstance(v, torch.Tensor)}
    if len(set(dtypes.values())) > 1:
        got = ", ".join(f"{k} {v}" for k, v in dtypes.items())
        raise TypeError(f"tensors must share one dtype; got {got}")


def is_torch(*values) -> bool:
    return any(isinstance(v, torch.Tensor) for v in values)


def to_output(result: np.ndarray, *like, allow_inf: bool = False):
    """Scalars in -> float out; numpy in -> numpy out; torch in -> float64 torch out.

    Every theory function returns through here, so this is where a formula that leaves the float64 range at
    valid arguments (an overflow, an underflow to 0/0) is refused with an error instead of returning inf/NaN.
    ``allow_inf`` for the few quantities whose exact value can be infinite (a log of zero at rank collapse).
    """
    res = np.asarray(result)
    if res.dtype.kind == "f" and not (np.all(np.isfinite(res)) or (allow_inf and not np.any(np.isnan(res)))):
        bad = "NaN" if np.any(np.isnan(res)) else "inf"
        raise ValueError(f"the result is {bad} at these arguments: the formula leaves the float64 range there "
                         f"(overflow or underflow); arguments of this size are outside its range")
    for v in like:
        if isinstance(v, torch.Tensor):
            return torch.as_tensor(result, dtype=torch.float64, device=v.device)
    if np.ndim(result) == 0 and not any(isinstance(v, np.ndarray) for v in like):
        return float(result)
    return np.asarray(result, dtype=float)


def finite_tensor(result: torch.Tensor, name: str = "the result") -> torch.Tensor:
    """Refuse a tensor result that left its dtype's range (the tensor analogue of :func:`to_output`)."""
    if not bool(torch.isfinite(result).all()):
        raise ValueError(f"{name} is not finite at these arguments: the formula leaves the {result.dtype} range "
                         "there (overflow or underflow); arguments of this size are outside its range")
    return result


def check_attention_weights(x, w_q, w_k, w_v):
    """x (..., T, d); w_q, w_k (..., d_k, d) with the same d_k; w_v (..., d_v, d)."""
    check_tensor(x, "x", ndim_min=2)
    d = x.shape[-1]
    for name, w in (("w_q", w_q), ("w_k", w_k), ("w_v", w_v)):
        check_tensor(w, name, ndim_min=2, last=d)
    if w_q.shape[-2] != w_k.shape[-2]:
        raise ValueError(f"w_q and w_k must have the same d_k; got {tuple(w_q.shape)} and {tuple(w_k.shape)}")
    check_same_device(x=x, w_q=w_q, w_k=w_k, w_v=w_v)
    try:
        torch.broadcast_shapes(x.shape[:-2], w_q.shape[:-2], w_k.shape[:-2], w_v.shape[:-2])
    except RuntimeError:
        got = ", ".join(f"{k} {tuple(v.shape)}" for k, v in (("x", x), ("w_q", w_q), ("w_k", w_k), ("w_v", w_v)))
        raise ValueError(f"the batch dimensions of x and the weights must broadcast; got {got}") from None


def check_flag(value, name) -> bool:
    """A flag must be a bool (Python or numpy): ``"no"`` or ``1`` are refused, not read as truthy."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(f"{name} must be True or False; got {value!r} ({type(value).__name__})")


def check_real(value, name, *, minimum=None, maximum=None, strict=False) -> float:
    """A real number (Python/numpy scalar or 0-d tensor), finite, within bounds; returned as ``float``.

    ``strict`` makes the minimum exclusive. Strings, arrays and bools are refused.
    """
    if isinstance(value, torch.Tensor) and value.ndim == 0 and not value.is_complex():
        value = value.item()
    elif isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number; got {value!r} ({type(value).__name__})")
    out = float(value)
    if not math.isfinite(out):
        raise ValueError(f"{name} must be finite; got {out}")
    low = minimum is not None and (out < minimum or (strict and out == minimum))
    high = maximum is not None and out > maximum
    if (low or high) and minimum is not None and maximum is not None and not strict:
        raise ValueError(f"{name} must lie in [{minimum}, {maximum}]; got {out:.6g}")
    if low:
        raise ValueError(f"{name} must be {'>' if strict else '>='} {minimum}; got {out:.6g}")
    if high:
        raise ValueError(f"{name} must be <= {maximum}; got {out:.6g}")
    return out


# ----------------------------------------------------------------------------- dtypes, sizes, memory
_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def check_float_dtype(dtype, name="dtype") -> torch.dtype:
    """A floating-point torch dtype (float16, bfloat16, float32, float64); integers, bools and complex refused."""
    if not isinstance(dtype, torch.dtype) or dtype not in _FLOATS:
        raise TypeError(f"{name} must be a floating-point torch dtype (torch.float16, torch.bfloat16, torch.float32 "
                        f"or torch.float64); got {dtype!r}")
    return dtype


def check_scale_fits(scale: float, dtype: torch.dtype, name: str) -> None:
    """Gaussian entries of standard deviation ``scale`` (up to ~10 SD) must be finite, and not all zero, in ``dtype``."""
    info = torch.finfo(dtype)
    if scale * 10.0 > info.max:
        raise ValueError(f"{name} gives entries of size ~{scale:.3g}, beyond the range of {dtype} (largest "
                         f"{info.max:.3g}); use dtype=torch.float64 or a smaller {name}")
    if 0.0 < scale < info.tiny:
        raise ValueError(f"{name} gives entries of size ~{scale:.3g}, below the smallest normal {dtype} "
                         f"({info.tiny:.3g}): they would lose their digits or round to zero; use dtype=torch.float64 or a "
                         f"larger {name}")


def memory_budget() -> int:
    """Bytes one allocation may take: half of this machine's memory (8 GiB where it cannot be read)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        total = 16 * 2**30
    return int(total // 2)


def _bytes(n: float) -> str:
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} bytes"


def check_memory(nbytes: float, what: str) -> None:
    """Refuse, before allocating, a request of ``nbytes`` beyond :func:`memory_budget` (expected vs got)."""
    budget = memory_budget()
    if nbytes > budget:
        raise ValueError(f"{what} would need {_bytes(nbytes)} of memory, more than the budget {_bytes(budget)} "
                         "(half of this machine's memory); ask for less")


def check_allocation(shape, dtype, what: str) -> None:
    """:func:`check_memory` for one tensor of ``shape`` and ``dtype``."""
    check_memory(math.prod(int(s) for s in shape) * torch.empty((), dtype=dtype).element_size(), what)


# ----------------------------------------------------------------------------- the theory contract
def _tensors(value, name):
    """(name, tensor) for every tensor in ``value`` (one level into lists, tuples and dicts)."""
    if isinstance(value, torch.Tensor):
        return [(name, value)]
    if isinstance(value, (list, tuple)):
        return [(f"{name}[{i}]", v) for i, v in enumerate(value) if isinstance(v, torch.Tensor)]
    if isinstance(value, dict):
        return [(f"{name}[{k!r}]", v) for k, v in value.items() if isinstance(v, torch.Tensor)]
    return []


def _as_result_tensor(value, device):
    """A theory result with every number and array as a tensor on ``device``: floats (Python, numpy, tensors) as
    float64, integer and bool arrays keeping their dtype; through tuples (named too), lists, dicts and the fields of
    result dataclasses, whose Python scalars (depth, flags, thresholds: settings, not results) are kept."""
    if isinstance(value, torch.Tensor):
        return value.to(device=device, dtype=torch.float64 if value.is_floating_point() else value.dtype)
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "fiub":
            out = torch.from_numpy(np.ascontiguousarray(value))
            return out.to(device=device, dtype=torch.float64 if value.dtype.kind == "f" else out.dtype)
        return value
    if isinstance(value, (float, np.floating)):
        return torch.tensor(float(value), dtype=torch.float64, device=device)
    if isinstance(value, tuple):
        items = [_as_result_tensor(v, device) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    if isinstance(value, list):
        return [_as_result_tensor(v, device) for v in value]
    if isinstance(value, dict):
        return {k: _as_result_tensor(v, device) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        arrays = {f.name: _as_result_tensor(getattr(value, f.name), device) for f in dataclasses.fields(value)
                  if isinstance(getattr(value, f.name), (np.ndarray, torch.Tensor))}
        return dataclasses.replace(value, **arrays)
    return value


def theory_function(fn):
    """The one contract of ``sp.theory`` (``sigprop/theory.py``'s docstring), enforced on every call; every function
    that ``sp.theory`` exports passes through it (``sigprop.theory`` refuses to import otherwise).

    * inputs: a tensor on the meta device (a shape without values) is refused, and so is a tensor that requires
      grad -- theory functions are float64 closed forms and quadratures, not differentiable, and never detach an
      input silently (issue 37, item 4: eleven functions did); one level into lists, tuples and dicts;
    * results: with any tensor among the inputs, every number and array of the result comes back as a float64
      tensor (integer arrays keep their dtype) on the first input tensor's device (the CPU for Apple MPS, which has
      no float64), inside tuples, named tuples, dicts and result dataclasses alike; otherwise the function's own
      floats and float64 arrays (``to_output``).

    ``tests/test_theory_contract.py`` checks all of it for every function of ``sp.theory``. Idempotent.
    """
    if getattr(fn, "__sigprop_theory__", False):
        return fn

    @functools.wraps(fn)
    def checked(*args, **kwargs):
        found = [hit for i, a in enumerate(args) for hit in _tensors(a, f"argument {i}")]
        found += [hit for k, v in kwargs.items() for hit in _tensors(v, k)]
        for name, t in found:
            if t.device.type not in _config.COMPUTE_DEVICES:
                raise ValueError(f"{fn.__name__}: {name} is on the {t.device.type} device (a shape without values): "
                                 "sp.theory computes numbers; pass a tensor on 'cpu', 'cuda' or 'mps', an array or a "
                                 "number")
            if t.requires_grad:
                raise ValueError(f"{fn.__name__}: {name} requires grad, but sp.theory functions are not "
                                 "differentiable (float64 closed forms and quadratures); pass a number, an array or "
                                 "a detached tensor (x.detach())")
        result = fn(*args, **kwargs)
        if not found:
            return result
        device = found[0][1].device
        return _as_result_tensor(result, torch.device("cpu") if device.type == "mps" else device)

    checked.__sigprop_theory__ = True
    return checked


def threads_argument(text: str) -> int:
    """A command line's ``--threads``: an integer from 1 to this machine's CPU count (more aborted in OpenMP; issue 26
    item 9, issue 37 item 10). An ``argparse`` type: a bad value is a one-line usage error."""
    import argparse   # noqa: PLC0415 (command lines only)
    cpus = os.cpu_count() or 1
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer from 1 to {cpus} (this machine's CPUs); got {text!r}") \
            from None
    if not 1 <= value <= cpus:
        raise argparse.ArgumentTypeError(f"must be from 1 to {cpus} (this machine's CPUs); got {value}")
    return value


def check_output_path(path, name: str) -> str:
    """A file a command will write at its end: its folder exists and is writable (checked before a long run,
    without creating anything)."""
    if not isinstance(path, str) or not path.strip():
        raise ValueError(f"{name} must name a file; got {path!r}")
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise ValueError(f"{name} {path!r} is a folder; give a file name")
    if not os.path.isdir(folder):
        raise ValueError(f"{name} {path!r}: no folder {folder!r}")
    if not os.access(path if os.path.exists(path) else folder, os.W_OK):
        raise ValueError(f"{name} {path!r} is not writable")
    return path
