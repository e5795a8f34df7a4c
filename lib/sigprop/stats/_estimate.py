"""Monte Carlo estimates with standard errors.

An :class:`Estimate` is a mean, its standard error and the number of i.i.d. samples
behind it. Comparisons with theory use the z-score ``(mean - theory) / stderr``;
tests assert ``|mean - theory| <= z * stderr`` with a fixed seed.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import torch

from ._config import float64_device

__all__ = ["Estimate", "estimate"]


@dataclasses.dataclass(frozen=True)
class Estimate:
    """Mean and standard error of ``n`` i.i.d. samples (tensors of any shape, or floats).

    ``samples`` (optional, ``(n, *shape)``) keeps the per-sample values where they are cheap to keep
    (:func:`estimate` sets it; streamed Monte Carlo does not): a curve-level test needs them, because
    the points of one curve measured on the same samples are correlated.
    """

    mean: torch.Tensor
    stderr: torch.Tensor
    n: int
    samples: torch.Tensor | None = dataclasses.field(default=None, repr=False, compare=False)

    def zscore(self, theory):
        """(mean - theory) / stderr, elementwise (inf where stderr is 0 and they differ)."""
        mean, se = _np(self.mean), _np(self.stderr)
        diff = mean - np.asarray(_np(theory), dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(se > 0, diff / np.where(se > 0, se, 1.0), np.where(diff == 0, 0.0, np.inf))
        return z

    def agrees(self, theory, *, z: float = 4.0, atol: float = 0.0) -> bool:
        """True when every entry satisfies |mean - theory| <= z * stderr + atol."""
        mean, se = _np(self.mean), _np(self.stderr)
        return bool(np.all(np.abs(mean - np.asarray(_np(theory), dtype=float)) <= z * se + atol))

    def __getitem__(self, index) -> "Estimate":
        index = index if isinstance(index, tuple) else (index,)
        samples = None if self.samples is None else self.samples[(slice(None),) + index]
        return Estimate(self.mean[index], self.stderr[index], self.n, samples)

    def numpy(self):
        """(mean, stderr) as float64 numpy arrays."""
        return _np(self.mean), _np(self.stderr)

    def __format__(self, spec):
        spec = spec or ".4g"
        mean, se = _np(self.mean), _np(self.stderr)
        if mean.ndim == 0:
            return f"{format(float(mean), spec)} ± {format(float(se), '.2g')} (n={self.n})"
        return f"Estimate(shape={mean.shape}, n={self.n})"

    def __str__(self):
        return format(self, "")


def _np(value):
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().double().numpy()
    return np.asarray(value, dtype=float)


def estimate(samples: torch.Tensor, dim: int = 0) -> Estimate:
    """Mean and standard error (sample std / sqrt(n)) of i.i.d. ``samples`` along ``dim``."""
    if not isinstance(samples, torch.Tensor):
        arr = np.asarray(samples, dtype=object if samples is None else None)
        if samples is None or arr.dtype.kind not in "iuf" or arr.ndim == 0:
            raise TypeError(f"samples must be a tensor or an array of numbers; got {type(samples).__name__}")
        samples = torch.as_tensor(arr.astype(float), device=torch.device("cpu"))
    if samples.is_complex() or samples.dtype == torch.bool:
        raise TypeError(f"samples must be real numbers; got {samples.dtype}")
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or not -samples.ndim <= dim < max(samples.ndim, 1):
        raise ValueError(f"dim must be an axis of samples (shape {tuple(samples.shape)}); got {dim!r}")
    n = samples.shape[dim]
    if n < 2:
        raise ValueError(f"need at least 2 samples along dim {dim} for a standard error; got {n}")
    x = samples.detach().to(float64_device(samples.device), torch.float64)   # the CPU's float64 for MPS
    mean = x.mean(dim)
    se = x.std(dim, unbiased=True) / n**0.5
    return Estimate(mean, se, int(n), x.movedim(dim, 0))
