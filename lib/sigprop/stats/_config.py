"""Run profiles, the device and dtype policy, and threads for small workloads: decided in one place.

Two profiles size every experiment in the book:

* ``quick`` -- the default everywhere (CI, the book build, laptops, Colab, GPU machines): sizes that
  keep each page under about two minutes on two CPU cores;
* ``full`` -- only when asked (``SIGPROP_PROFILE=full`` or :func:`set_profile`): the documents' own
  sizes, meant for a GPU.

Devices: :func:`default_device` is ``SIGPROP_DEVICE`` if set (``cpu``, ``cuda``, ``cuda:1``, ``mps``;
validated; ``meta`` refused), else CUDA, else Apple MPS, else the CPU. Names follow one rule, for the two
variables and for ``device=`` arguments alike: case and surrounding whitespace are ignored. MPS has no float64: :func:`float64_device` says
where float64 work (theory, streamed sums) runs -- the device itself, or the CPU for MPS.

Threads, decided once, here: small matrix products (below :data:`SMALL_WORK` multiply-adds) run on one
thread. On a busy machine a second thread of a parallel region waits for its core at every small operation
(issue 29, item 11: a G&G 03 page core ran 2.1x slower in wall time on two torch threads than on one beside
other processes, and numpy's BLAS threads spun against torch's); on an idle machine one thread costs at most
the parallel speed-up of these small products. :func:`threads_for` applies the rule around a block; the
Monte Carlo engine applies it to every ``sample_fn`` call given its ``work`` (``monte_carlo(..., work=)``), and
the quadratures of ``sp.theory`` compute their products through torch under it rather than numpy's own BLAS
threads. Larger work keeps torch's setting (``OMP_NUM_THREADS`` or the user's). Notebooks never set thread
counts themselves.
"""
from __future__ import annotations

import contextlib
import enum
import os
import re

import torch

__all__ = ["Profile", "profile", "set_profile", "pick", "default_device", "as_device", "float64_device", "widest_float",
           "threads_for"]


class Profile(str, enum.Enum):
    QUICK = "quick"
    FULL = "full"


#: Device types sigprop computes on (``meta`` holds shapes without values; tests/test_localisation.py's
#: ``DeviceAudit`` adds it while meta stands in for an accelerator).
COMPUTE_DEVICES = ("cpu", "cuda", "mps")


def _normal_name(value: str) -> str:
    """The one rule for names a user types (``SIGPROP_PROFILE``, ``SIGPROP_DEVICE``, ``device=``): surrounding
    whitespace and case are ignored (``" FULL"`` is ``full``, ``"CUDA:1"`` is ``cuda:1``)."""
    return value.strip().lower()


def _parse_profile(value: str) -> Profile:
    if not isinstance(value, str):
        raise TypeError(f"a profile must be a name, one of {', '.join(p.value for p in Profile)}; got {value!r}")
    try:
        return Profile(_normal_name(value))
    except ValueError:
        allowed = ", ".join(p.value for p in Profile)
        raise ValueError(f"SIGPROP_PROFILE must be one of {allowed} (case and surrounding spaces ignored); "
                         f"got {value!r}") from None


def profile() -> str:
    """The active profile: ``SIGPROP_PROFILE`` if set, else ``quick`` (on every machine)."""
    env = os.environ.get("SIGPROP_PROFILE")
    return _parse_profile(env).value if env else Profile.QUICK.value


def set_profile(name: str) -> None:
    """Set the profile for this process (e.g. ``sp.set_profile("full")`` at the top of a notebook on a GPU)."""
    os.environ["SIGPROP_PROFILE"] = _parse_profile(name).value


def pick(*, quick, full):
    """Return ``quick`` or ``full`` according to :func:`profile`.

    >>> n = pick(quick=64, full=4096)  # doctest: +SKIP
    """
    return full if profile() == Profile.FULL.value else quick


def _mps_available() -> bool:
    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available())


def _parse_device(value, name: str = "SIGPROP_DEVICE") -> torch.device:
    """A device a user named (a string or ``torch.device``), checked: spelling, and that the machine has it."""
    if isinstance(value, torch.device):
        device = value
    elif isinstance(value, str):
        if _normal_name(value) == "meta" or re.fullmatch(r"meta(:\d+)?", _normal_name(value)):
            device = torch.device("meta")
        elif not re.fullmatch(r"cpu|mps|cuda(:\d+)?", _normal_name(value)):
            raise ValueError(f"{name} must be 'cpu', 'cuda', 'cuda:N' or 'mps' (case and surrounding spaces "
                             f"ignored); got {value!r}")
        else:
            device = torch.device(_normal_name(value))
    else:
        raise TypeError(f"{name} must be a device name such as 'cpu' or a torch.device; got {value!r}")
    if device.type not in COMPUTE_DEVICES:
        raise ValueError(f"{name}={value!r} is not a device sigprop computes on ('meta' holds shapes without "
                         "values); use 'cpu', 'cuda', 'cuda:N' or 'mps'")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"{name}={value!r} but CUDA is not available on this machine; use 'cpu'")
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise ValueError(f"{name}={value!r} but this machine has {torch.cuda.device_count()} CUDA device(s)")
    if device.type == "mps" and not _mps_available():
        raise ValueError(f"{name}={value!r} but Apple MPS is not available on this machine; use 'cpu'")
    return device


def as_device(device=None) -> torch.device:
    """``device`` as a ``torch.device`` (validated; see :func:`_parse_device`), or :func:`default_device` for None."""
    return default_device() if device is None else _parse_device(device, "device")


def default_device() -> torch.device:
    """``SIGPROP_DEVICE`` if set (validated), else CUDA, else Apple MPS, else CPU."""
    env = os.environ.get("SIGPROP_DEVICE")
    if env:
        return _parse_device(env)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if _mps_available():
        return torch.device("mps")
    return torch.device("cpu")


def _work_dtype(dtype: torch.dtype) -> torch.dtype:
    """At least float32 (float64 stays float64)."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def widest_float(device) -> torch.dtype:
    """The widest float a device has: float64, or float32 on Apple MPS (which has no float64). Streamed sums and
    buffers use it; the float32 rounding it adds on MPS (~1e-7 relative) is far below any Monte Carlo error."""
    try:
        kind = (device if isinstance(device, torch.device) else torch.device(device)).type
    except (RuntimeError, TypeError):
        raise ValueError(f"device must name a torch device ('cpu', 'cuda', 'mps'); got {device!r}") from None
    return torch.float32 if kind == "mps" else torch.float64


def float64_device(device=None) -> torch.device:
    """Where float64 work for ``device`` runs: the device itself, or the CPU for MPS (no float64 there)."""
    device = as_device(device)
    return torch.device("cpu") if device.type == "mps" else device


#: Work per call (multiply-adds of the largest matrix product) below which the loop runs on one thread. Between
#: such products a training step runs dozens of small elementwise operations, each an OpenMP parallel region;
#: on a busy machine every region waits for a descheduled thread (measured: the G&G training page, ~2e7
#: multiply-adds per product, ran in 35 s alone, > 300 s beside one CPU-bound process with two threads, 46 s
#: with one), while on an idle machine one thread costs at most the parallel speed-up of these small products.
SMALL_WORK = 2**26


@contextlib.contextmanager
def threads_for(work: float):
    """Run the block on one torch thread when ``work`` (multiply-adds per matrix product) is small.

    Restores the previous thread count afterwards. Larger work keeps torch's own setting (which
    ``OMP_NUM_THREADS`` or the user controls).
    """
    before = torch.get_num_threads()
    small = work < SMALL_WORK and before > 1
    if small:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if small:
            torch.set_num_threads(before)
