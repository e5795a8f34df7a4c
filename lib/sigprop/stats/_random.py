"""Explicit randomness.

Every sampler in sigprop takes a keyword-only ``generator``: an ``int`` seed, a
``torch.Generator`` or ``None`` (fresh entropy). :func:`as_generator` normalises it;
the library never touches torch's global RNG state.

:func:`block_seeds` derives independent child seeds for fixed-size blocks of a
Monte Carlo run, so that the numbers do not depend on how the blocks are grouped
into memory chunks.
"""
from __future__ import annotations

import numpy as np
import torch

from ._config import _parse_device

__all__ = ["as_generator"]

_SEED_SPACE = 2**62


def as_generator(generator=None, device=None) -> torch.Generator:
    """Normalise ``generator`` (int seed | torch.Generator | None) to a ``torch.Generator``.

    An existing generator is returned as is; an explicit ``device`` must then be its device (a
    conflict is an error, not a silent choice). An int (Python or numpy, ``0 <= seed < 2**64``) seeds
    a new generator on ``device`` (default CPU); None seeds one from fresh entropy.
    """
    device = None if device is None else _parse_device(device, "device")
    if isinstance(generator, torch.Generator):
        if device is not None and not _same_device(generator.device, device):
            raise ValueError(
                f"generator lives on {str(generator.device)!r} but device={str(device)!r} was asked for; "
                "pass an int seed to create a generator on the right device"
            )
        return generator
    device = torch.device("cpu") if device is None else device
    if generator is None:
        g = torch.Generator(device=device)
        g.seed()
        return g
    if isinstance(generator, (bool, np.bool_)) or not isinstance(generator, (int, np.integer)):
        raise TypeError(f"generator must be an int seed, a torch.Generator or None; got {type(generator).__name__}")
    seed = int(generator)
    if not 0 <= seed < 2**64:
        raise ValueError(f"generator seed must satisfy 0 <= seed < 2**64; got {seed}")
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    return g


def _same_device(a: torch.device, b: torch.device) -> bool:
    """Same device type, and same index where both name one (``cuda`` means the current CUDA device)."""
    return a.type == b.type and (a.index is None or b.index is None or a.index == b.index)


def draw_seed(generator: torch.Generator) -> int:
    """One integer seed drawn from ``generator`` (advances it)."""
    return int(torch.randint(_SEED_SPACE, (1,), generator=generator, device=generator.device).item())


def block_generator(base_seed: int, block: int, device) -> torch.Generator:
    """Generator for block number ``block`` of a run started from ``base_seed``."""
    g = torch.Generator(device=torch.device(device))
    g.manual_seed((base_seed * 1_000_003 + 7919 * block + 1) % _SEED_SPACE)
    return g
