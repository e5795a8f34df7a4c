"""Monte Carlo estimates with standard errors.

An :class:`Estimate` is a mean, its standard error and the number of i.i.d. samples
behind it. Comparisons with theory use the z-score ``(mean - theory) / stderr``;
tests assert ``|mean - theory| <= z * stderr`` with a fixed seed.
"""
from __future__ import annotations

import dataclasses
import math

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
        """``"mean ± SE"``. Empty spec: the SE to two significant digits and the mean to the same decimal place
        (``0.4343 ± 0.0120``; powers of ten outside 1e-4 .. 1e5: ``(3.100 ± 0.042) × 10⁻⁶``; ``0.25 (exact)`` for
        a zero SE), the rule of the book's tables. A spec formats the mean (``format(est, ".4f")``), and the SE
        the same way for ``f`` and ``%`` specs, to two significant digits otherwise. Small vectors format entrywise."""
        mean, se = _np(self.mean), _np(self.stderr)
        if mean.ndim == 0:
            return _mean_se_text(float(mean), float(se), spec)
        if mean.size <= 8:
            return "[" + ", ".join(_mean_se_text(m, s, spec) for m, s in zip(mean.ravel(), se.ravel())) + "]"
        return f"Estimate(shape={mean.shape}, n={self.n})"

    def __str__(self):
        return format(self, "")


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def _mean_se_text(mean: float, se: float, spec: str = "", digits: int = 2) -> str:
    """One ``"mean ± SE"`` text (see :meth:`Estimate.__format__`); non-finite values print as they are."""
    if not (math.isfinite(mean) and math.isfinite(se)):
        return f"{mean} ± {se}"
    if spec:
        return f"{format(mean, spec)} ± {format(se, spec if spec[-1] in 'f%' else '.2g')}"
    if se == 0:
        return f"{mean:.6g} (exact)"
    power = math.floor(math.log10(max(abs(mean), se)))
    scale = 1.0 if -4 <= power < 5 else 10.0 ** power
    decimals = max(0, digits - 1 - math.floor(math.log10(se / scale)))
    text = f"{mean / scale:.{decimals}f} ± {se / scale:.{decimals}f}"
    return text if scale == 1.0 else f"({text}) × 10{str(power).translate(_SUPERSCRIPT)}"


def _np(value):
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().double().numpy()
    return np.asarray(value, dtype=float)


def estimate(samples: torch.Tensor, dim: int = 0) -> Estimate:
    """Mean and standard error (sample std / sqrt(n)) of i.i.d. ``samples`` along ``dim``.

    Computed in float64 on values scaled by their largest magnitude per entry, so samples of any finite size
    (1e-300 ... 1e300) give a finite standard error; NaN or inf samples are refused with their position.
    """
    if not isinstance(samples, torch.Tensor):
        arr = np.asarray(samples, dtype=object if samples is None else None)
        if samples is None or arr.dtype.kind not in "iuf":
            raise TypeError(f"samples must be a tensor or an array of numbers; got {type(samples).__name__}")
        samples = torch.as_tensor(arr.astype(float), device=torch.device("cpu"))
    if samples.is_complex() or samples.dtype == torch.bool:
        raise TypeError(f"samples must be real numbers; got {samples.dtype}")
    if samples.device.type == "meta":
        raise ValueError("samples are on the meta device (a shape without values); pass real samples")
    if samples.ndim == 0:
        raise ValueError("samples must have a dimension to average over (n samples along dim); got a 0-d value")
    if samples.numel() == 0:
        raise ValueError(f"samples must not be empty; got shape {tuple(samples.shape)}")
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or not -samples.ndim <= dim < samples.ndim:
        raise ValueError(f"dim must be an axis of samples (shape {tuple(samples.shape)}); got {dim!r}")
    n = samples.shape[dim]
    if n < 2:
        raise ValueError(f"need at least 2 samples along dim {dim} for a standard error; got {n}")
    x = samples.detach().to(float64_device(samples.device), torch.float64)   # the CPU's float64 for MPS
    bad = ~torch.isfinite(x)
    if bool(bad.any()):
        first = tuple(int(i) for i in bad.nonzero()[0])
        raise ValueError(f"samples must be finite; got {int(bad.sum())} NaN/inf values (the first at index {first})")
    scale = x.abs().amax(dim, keepdim=True)
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))  # per entry: sums of squares cannot overflow
    u = x / scale
    mean = u.mean(dim) * scale.squeeze(dim)
    se = u.std(dim, unbiased=True) * scale.squeeze(dim) / n**0.5
    return Estimate(mean, se, int(n), x.movedim(dim, 0))
