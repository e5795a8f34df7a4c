"""Run profiles and device choice.

Two profiles size every experiment in the book:

* ``quick`` -- the default without a GPU (CI, the book build, a laptop): sizes that
  keep each page under about two minutes on two CPU cores;
* ``full`` -- the default with CUDA: the documents' own sizes.

Set ``SIGPROP_PROFILE=quick|full`` to override, and ``SIGPROP_DEVICE`` to force a
device (``cpu``, ``cuda``, ``mps``).
"""
from __future__ import annotations

import enum
import os

import torch

__all__ = ["Profile", "profile", "pick", "default_device"]


class Profile(str, enum.Enum):
    QUICK = "quick"
    FULL = "full"


def _parse_profile(value: str) -> Profile:
    try:
        return Profile(value.strip().lower())
    except ValueError:
        allowed = ", ".join(p.value for p in Profile)
        raise ValueError(f"SIGPROP_PROFILE must be one of {allowed}; got {value!r}") from None


def profile() -> str:
    """The active profile: ``SIGPROP_PROFILE`` if set, else ``full`` with CUDA, else ``quick``."""
    env = os.environ.get("SIGPROP_PROFILE")
    if env:
        return _parse_profile(env).value
    return Profile.FULL.value if torch.cuda.is_available() else Profile.QUICK.value


def pick(*, quick, full):
    """Return ``quick`` or ``full`` according to :func:`profile`.

    >>> n = pick(quick=64, full=4096)  # doctest: +SKIP
    """
    return full if profile() == Profile.FULL.value else quick


def default_device() -> torch.device:
    """``SIGPROP_DEVICE`` if set, else CUDA, else Apple MPS, else CPU."""
    env = os.environ.get("SIGPROP_DEVICE")
    if env:
        return torch.device(env)
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")
