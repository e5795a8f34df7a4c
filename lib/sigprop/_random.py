"""Explicit randomness.

Every sampler in sigprop takes a keyword-only ``generator``: an ``int`` seed, a
``torch.Generator`` or ``None`` (fresh entropy). :func:`as_generator` normalises it;
the library never touches torch's global RNG state.

:func:`block_seeds` derives independent child seeds for fixed-size blocks of a
Monte Carlo run, so that the numbers do not depend on how the blocks are grouped
into memory chunks.
"""
from __future__ import annotations

import torch

__all__ = ["as_generator"]

_SEED_SPACE = 2**62


def as_generator(generator=None, device=None) -> torch.Generator:
    """Normalise ``generator`` (int seed | torch.Generator | None) to a ``torch.Generator``.

    An existing generator is returned as is (its device must match ``device`` when
    both are given); an int seeds a new generator on ``device`` (default CPU).
    """
    device = torch.device("cpu") if device is None else torch.device(device)
    if isinstance(generator, torch.Generator):
        if device is not None and generator.device.type != device.type:
            raise ValueError(
                f"generator lives on {generator.device.type!r} but the computation on {device.type!r}; "
                "pass an int seed to create a generator on the right device"
            )
        return generator
    if generator is None:
        g = torch.Generator(device=device)
        g.seed()
        return g
    if isinstance(generator, bool) or not isinstance(generator, int):
        raise TypeError(f"generator must be an int seed, a torch.Generator or None; got {type(generator).__name__}")
    if generator < 0:
        raise ValueError(f"generator seed must be >= 0; got {generator}")
    g = torch.Generator(device=device)
    g.manual_seed(int(generator))
    return g


def draw_seed(generator: torch.Generator) -> int:
    """One integer seed drawn from ``generator`` (advances it)."""
    return int(torch.randint(_SEED_SPACE, (1,), generator=generator, device=generator.device).item())


def block_generator(base_seed: int, block: int, device) -> torch.Generator:
    """Generator for block number ``block`` of a run started from ``base_seed``."""
    g = torch.Generator(device=torch.device(device))
    g.manual_seed((base_seed * 1_000_003 + 7919 * block + 1) % _SEED_SPACE)
    return g
