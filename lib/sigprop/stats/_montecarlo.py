"""The Monte Carlo engine: batched, chunked, seeded, with standard errors.

:func:`monte_carlo` calls a user ``sample_fn(n_chunk, generator)`` that returns one
row of statistics per independent sample, ``(n_chunk, ...)``, and streams the sums
needed for the mean and standard error, so memory is bounded by one chunk.

Seeding: chunk ``k`` draws from a child generator derived from the run's seed and
``k``; the numbers are a deterministic function of ``(seed, chunk)`` on a device.
(Where a computation must be independent of the memory chunk, as in
:func:`sigprop.mc_attention_ipr`, the randomness unit is a fixed block and chunks
group blocks.)
"""
from __future__ import annotations

import time
from typing import Callable

import torch

from ._config import SMALL_WORK, as_device, float64_device, threads_for
from ._estimate import Estimate
from ._random import as_generator, block_generator, draw_seed
from ._validate import check_int

__all__ = ["monte_carlo", "progress_bar"]

_PROGRESS_AFTER_S = 3.0


def progress_bar(total: int, *, desc: str | None = None, enabled: bool | None = True):
    """A tqdm bar that picks the notebook or terminal flavour (``tqdm.auto``)."""
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, disable=not enabled, leave=False)


def monte_carlo(
    sample_fn: Callable[[int, torch.Generator], torch.Tensor],
    n: int,
    *,
    generator=None,
    chunk: int | None = None,
    device=None,
    progress: bool | None = None,
    desc: str | None = None,
    work: float | None = None,
) -> Estimate:
    """Mean and standard error of ``n`` i.i.d. samples of ``sample_fn``.

    Parameters
    ----------
    sample_fn
        ``sample_fn(n_chunk, generator) -> Tensor (n_chunk, ...)``: draws ``n_chunk``
        independent samples using only ``generator`` and returns their statistics.
    n
        Total number of samples (>= 2).
    generator
        int seed, ``torch.Generator`` or None.
    chunk
        Samples per call (default ``min(n, 256)``); bounds memory.
    device
        Device of the child generators (default :func:`sigprop.default_device`).
    progress
        True/False to force the tqdm bar; None shows it when the run is expected to
        take more than a few seconds.
    work
        Multiply-adds of the largest matrix product of one ``sample_fn`` call: below
        :data:`sigprop.stats._config.SMALL_WORK` the calls run on one torch thread
        (:func:`sigprop.threads_for`, the one decision for small workloads; on a busy machine a
        second thread waits for its core at every small operation). None: torch's setting.
    """
    n = check_int(n, "n", minimum=2)
    chunk = min(n, 256) if chunk is None else check_int(chunk, "chunk", minimum=1)
    device = as_device(device)
    base = draw_seed(as_generator(generator))
    n_chunks = -(-n // chunk)
    total = total_sq = shift = scale = None
    bar = None
    start = time.perf_counter()
    done = 0
    for k in range(n_chunks):
        m = min(chunk, n - done)
        g = block_generator(base, k, device)
        with threads_for(work if work is not None else SMALL_WORK):
            x = sample_fn(m, g)
        if not isinstance(x, torch.Tensor) or x.shape[:1] != (m,):
            got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"sample_fn({m}, generator) must return a tensor with leading dimension {m}; got {got}")
        x = x.detach().to(float64_device(x.device), torch.float64)   # sums in float64 (the CPU's for MPS)
        _check_chunk(x, done)
        if shift is None:  # shift and scale from the first chunk: the sums of squares cannot overflow
            shift = x.mean(0)
            scale = (x - shift).abs().amax(0)
            scale = torch.where(scale > 0, scale, torch.ones_like(scale))
            total = torch.zeros_like(shift)
            total_sq = torch.zeros_like(shift)
        y = (x - shift) / scale
        total += y.sum(0)
        total_sq += (y * y).sum(0)
        done += m
        if bar is None and progress is not False and k + 1 < n_chunks:
            elapsed = time.perf_counter() - start
            if progress or elapsed * (n_chunks - k - 1) / (k + 1) > _PROGRESS_AFTER_S:
                bar = progress_bar(n, desc=desc)
                bar.update(done)
        elif bar is not None:
            bar.update(m)
    if bar is not None:
        bar.close()
    mean_y = total / n
    var = (total_sq - n * mean_y**2).clamp_min(0.0) / (n - 1)
    return Estimate(shift + mean_y * scale, (var / n).sqrt() * scale, n)


def _check_chunk(x: torch.Tensor, done: int) -> None:
    """NaN or inf statistics are refused where they appear (the sample's index), not averaged into the mean."""
    if not bool(torch.isfinite(x).all()):
        row = int((~torch.isfinite(x)).reshape(len(x), -1).any(1).nonzero()[0])
        raise ValueError(f"sample_fn returned NaN or inf for sample {done + row} (of this run's samples, counted from 0); "
                         "a Monte Carlo mean needs finite statistics: check sample_fn at these sizes")
