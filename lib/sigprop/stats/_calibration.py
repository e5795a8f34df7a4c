r"""The size and power study of :func:`sigprop.curve_agreement` (issue 26): how often a correct curve fails.

Synthetic curves with known truth: ``n`` initialisations, ``k = 60`` points, rows
``x_i = theta + sigma_j F^{-1}(Phi(g_ij))`` with ``g_i`` an AR(1) Gaussian vector (correlation ``phi^{|j-l|}``
between points) and ``F`` a margin of mean 0 and variance 1 (a Gaussian copula), ``sigma_j`` from 0.1 to 1
(unequal scales: studentisation matters). Margins: Gaussian (skewness 0), log-normal ``e^{s g}`` with
``s = 0.25`` (skewness 0.78) and ``s = 0.5`` (1.75), exponential (2). The grid: the four margins x
``phi`` in {0.5, 0.9} x ``n`` in {16, 64}, at level 0.01 with the default 1999 sign-flip resamples.

Beyond the grid (:data:`EXTRA`), the cases issue 37 found rejected too often: a skewness that changes sign along
the curve (``mixed``: exponential rows, mirrored on the second half of the points; also with independent points,
``phi = 0``), :math:`\chi^2_1` rows (skewness 2.8, bounded below: by chance a point's values lie close together
and Student's t reaches -30) at ``n = 12``, lattice-valued rows -- Bernoulli(0.1) indicators at ``n = 20``
(a point is all zeros with probability 0.12), a Gaussian rounded to half its SD (ties) at ``n = 10`` -- and
low-precision samples (``bfloat16``: ``1 + 0.03 sigma_j g`` rounded to bfloat16, 0.3 % to 3 % spread on a
lattice of 0.4 % to 0.8 %, tested against the exact mean of the rounded values).

``python -m sigprop.stats._calibration [--datasets 2000] [--out FILE]`` runs the whole study (about 40
minutes on two busy cores) and writes :data:`RECORD`; ``tests/test_agreement.py`` reruns a share of every
cell and checks it against the record (in distribution: binomial standard errors), and checks the record
itself: every cell's size at most 0.015. Power against the alternatives of the test suite (a 1-SE offset,
a drift to -3 SE, one point 6 SE off; Gaussian rows) is measured on 300 datasets each.
"""
from __future__ import annotations

import argparse
import json
import math
import pathlib
import platform
import subprocess
import sys
import time

import numpy as np
import torch
from scipy.special import ndtr, ndtri

from ._agreement import curve_agreement
from ._validate import check_output_path

__all__: list[str] = []

#: Points per curve, and their standard deviations.
K = 60
SIGMA = np.linspace(0.1, 1.0, K)
#: Margins: name -> (description, skewness).
MARGINS = {"gauss": ("Gaussian", 0.0), "lognormal-0.25": ("log-normal, s = 0.25", 0.78),
           "lognormal-0.5": ("log-normal, s = 0.5", 1.75), "exponential": ("exponential", 2.0),
           "lognormal-1.0": ("log-normal, s = 1", 6.2), "mixed": ("exponential, mirrored on half the points", None),
           "chi2": ("chi^2_1", 2.83), "bernoulli-0.1": ("Bernoulli(0.1) indicators", 2.67),
           "rounded-0.5": ("Gaussian rounded to 0.5 SD", 0.0), "bfloat16": ("1 + 0.03 sigma g in bfloat16", 0.0)}
#: The grid of the issue: margin x AR(1) phi x initialisations n.
GRID = [(m, phi, n) for m in ("gauss", "lognormal-0.25", "lognormal-0.5", "exponential") for phi in (0.5, 0.9)
        for n in (16, 64)]
#: Beyond the grid: a skewness that changes sign along the curve (where the per-point calibration decides),
#: a strongly skewed log-normal (s = 1, skewness 6.2) and the smallest n of level 0.01.
EXTRA = [("mixed", 0.5, 16), ("mixed", 0.5, 64), ("lognormal-1.0", 0.5, 16), ("exponential", 0.5, 10),
         # issue 37: sign-changing skewness over independent points, chi^2_1 rows, lattice values, bfloat16
         ("mixed", 0.0, 16), ("mixed", 0.9, 16), ("chi2", 0.5, 12), ("chi2", 0.0, 12), ("bernoulli-0.1", 0.5, 20),
         ("rounded-0.5", 0.5, 10), ("bfloat16", 0.5, 16)]
#: The committed run of the whole study.
RECORD = pathlib.Path(__file__).parent / "records" / "size_study.json"
#: The alternatives of tests/test_agreement.py (Gaussian rows): name -> (phi, deviation in units of the SE).
ALTERNATIVES = {"offset 1 SE": (0.5, lambda: np.ones(K)),
                "drift 0 -> -3 SE": (0.9, lambda: -3.0 * np.arange(K) / (K - 1)),
                "one point 6 SE": (0.9, lambda: np.where(np.arange(K) == 37, 6.0, 0.0))}


def _factor(phi: float) -> np.ndarray:
    j = np.arange(K)
    return np.linalg.cholesky(phi ** np.abs(j[:, None] - j[None]))


def _margin(g: np.ndarray, margin: str) -> np.ndarray:
    """Standard Gaussian ``g`` -> values of the margin, mean 0, variance 1 (same ranks)."""
    if margin == "gauss":
        return g
    if margin.startswith("lognormal"):
        s = float(margin.split("-")[1])
        return (np.exp(s * g) - math.exp(s * s / 2)) / math.sqrt((math.exp(s * s) - 1) * math.exp(s * s))
    if margin == "exponential":
        return -np.log1p(-ndtr(g)) - 1.0
    if margin == "mixed":  # exponential, mirrored on the second half of the points: the skewness changes sign
        e = -np.log1p(-ndtr(g)) - 1.0
        e[..., K // 2:] *= -1.0
        return e
    if margin == "chi2":
        return (g * g - 1.0) / math.sqrt(2.0)
    if margin == "bernoulli-0.1":
        return ((g > ndtri(0.9)).astype(float) - 0.1) / 0.3
    if margin == "rounded-0.5":  # symmetric about 0: the rounded values keep mean 0
        return np.round(2.0 * g) / 2.0
    raise ValueError(f"margin must be one of {', '.join(MARGINS)}; got {margin!r}")


def _bfloat16_mean(mu: float, sd: np.ndarray) -> np.ndarray:
    """Exact mean of ``N(mu, sd^2)`` rounded to bfloat16 (to nearest), per ``sd``: sum over the lattice values
    ``v`` of ``v P(v)``, ``P`` the normal mass of ``v``'s rounding cell (midpoints to its neighbours)."""
    lo, hi = torch.tensor([mu - 12 * sd.max(), mu + 12 * sd.max()], dtype=torch.bfloat16).view(torch.int16).tolist()
    v = torch.arange(lo - 1, hi + 2, dtype=torch.int16).view(torch.bfloat16).double().numpy()  # positive values
    edges = (v[1:] + v[:-1]) / 2
    cdf = ndtr((edges[None] - mu) / sd[:, None])
    mass = np.diff(np.concatenate([np.zeros((len(sd), 1)), cdf, np.ones((len(sd), 1))], axis=1), axis=1)
    return mass @ v


def _bfloat16_rows(g: np.ndarray) -> np.ndarray:
    """Deviations of ``1 + 0.03 sigma_j g`` in bfloat16 from their exact mean (float64, the lattice kept)."""
    sd = 0.03 * SIGMA
    x = torch.from_numpy(1.0 + g * sd).to(torch.bfloat16).double().numpy()
    return x - _bfloat16_mean(1.0, sd)


def datasets(margin: str, phi: float, n: int, m: int, *, seed: int, start: int = 0) -> np.ndarray:
    """Datasets ``start .. start + m - 1`` of a cell, ``(m, n, K)``: dataset ``i`` from seed ``(seed, i)``,
    deviations from the true curve."""
    out = np.empty((m, n, K))
    factor = _factor(phi)
    for i in range(m):
        g = np.random.default_rng([seed, start + i]).standard_normal((n, K)) @ factor.T
        out[i] = _bfloat16_rows(g) if margin == "bfloat16" else _margin(g, margin) * SIGMA
    return out


def rejections(margin: str, phi: float, n: int, m: int, *, seed: int = 2026, start: int = 0,
               level: float = 0.01, shift=None) -> int:
    """How many of ``m`` datasets of a cell fail against their true curve (``shift``: deviations in SE)."""
    data = datasets(margin, phi, n, m, seed=seed, start=start)
    if shift is not None:
        data = data + shift * SIGMA / math.sqrt(n)
    return sum(not curve_agreement(x, 0.0, level=level, generator=start + i).passed for i, x in enumerate(data))


def study(m: int, power_m: int = 300) -> dict:
    """The whole study: size per cell (``m`` datasets) and power per alternative (``power_m`` datasets)."""
    cells = []
    for margin, phi, n in GRID + EXTRA:
        t0 = time.perf_counter()
        r = rejections(margin, phi, n, m)
        cells.append({"margin": margin, "in_grid": (margin, phi, n) in GRID, "phi": phi, "n": n, "datasets": m,
                      "rejected": r, "size": r / m, "stderr": math.sqrt(max(r, 1) / m * (1 - r / m) / m),
                      "seconds": round(time.perf_counter() - t0, 1)})
        print(json.dumps(cells[-1]), flush=True)
    power = []
    for name, (phi, shift) in ALTERNATIVES.items():
        for n in (16, 64):
            for level in (0.01, 0.05):
                r = rejections("gauss", phi, n, power_m, seed=7, level=level, shift=shift())
                power.append({"alternative": name, "phi": phi, "n": n, "level": level, "datasets": power_m,
                              "power": r / power_m})
                print(json.dumps(power[-1]), flush=True)
    return {"meta": {"level": 0.01, "k": K, "n_resamples": 1999, "method": "signflip", "seed": 2026,
                     "date": time.strftime("%Y-%m-%d"), "machine": platform.machine(), "torch": torch.__version__,
                     **_commit()},
            "cells": cells, "power": power}


def _commit() -> dict:
    """The git commit of this folder and whether its code (the curve test) had uncommitted changes."""
    here = pathlib.Path(__file__).parent
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=here,
                                timeout=10).stdout.strip() or None
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--", "."], capture_output=True, text=True,
                                    cwd=here, timeout=10).stdout.strip()) if commit else None
    except (OSError, subprocess.SubprocessError):
        commit = dirty = None
    return {"git_commit": commit, "stats_code_uncommitted": dirty}


def load_record(path=RECORD) -> dict:
    """The committed study (:data:`RECORD`)."""
    return json.loads(pathlib.Path(path).read_text())


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m sigprop.stats._calibration", description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", type=int, default=2000, help="datasets per cell (default 2000)")
    parser.add_argument("--power-datasets", type=int, default=300, help="datasets per alternative (default 300)")
    parser.add_argument("--out", default=str(RECORD), help=f"output JSON (default {RECORD})")
    args = parser.parse_args(argv)
    if args.datasets < 1 or args.power_datasets < 1:
        parser.error("--datasets and --power-datasets must be >= 1")
    try:   # before the hour-long run, creating nothing (a folder as --out failed at the end)
        out = pathlib.Path(check_output_path(args.out, "--out"))
    except ValueError as exc:
        parser.error(str(exc))
    result = study(args.datasets, args.power_datasets)
    args_given = sys.argv[1:] if argv is None else argv
    result["meta"]["command"] = "python -m sigprop.stats._calibration " + " ".join(args_given)
    out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
