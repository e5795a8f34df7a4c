r"""Results over training seeds: the mean with its standard error, and where one fresh seed may land.

A training run is one draw: rerun on another CPU kernel or thread count, the same seed ends elsewhere, because
training amplifies the last bit. A record of a training experiment therefore keeps every seed
(``record["seeds"]``: one dict per seed), and is read as a distribution:

* :func:`seed_summary` -- the mean over seeds, its standard error ``sd / sqrt(n)`` (what the claims ledger quotes),
  the seed-to-seed SD and the count;
* :func:`seed_prediction` -- how far one fresh seed may land from that mean: ``z sd sqrt(1 + 1/n)``, the
  prediction interval of one new draw. With ``z = 4`` and ``n = 8`` recorded seeds a correct rerun falls outside
  with probability 0.5 % (Student t with 7 degrees of freedom, the SD being estimated from 8 draws).
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["seed_summary", "seed_prediction"]


def seed_summary(record: dict, key: str) -> dict:
    """``{"mean", "se", "sd", "n", "values"}`` of ``key`` over ``record["seeds"]``."""
    x = np.array([s[key] for s in record["seeds"]], dtype=float)
    if len(x) < 2:
        raise ValueError(f"a standard error needs at least 2 seeds; the record has {len(x)}")
    sd = float(x.std(ddof=1))
    return dict(mean=float(x.mean()), se=sd / math.sqrt(len(x)), sd=sd, n=len(x), values=x.tolist())


def seed_prediction(record: dict, key: str, z: float = 4.0) -> tuple[float, float]:
    """``(mean, half_width)``: one fresh seed's ``key`` lies in ``mean +- half_width`` (``z sd sqrt(1 + 1/n)``)."""
    s = seed_summary(record, key)
    return s["mean"], z * s["sd"] * math.sqrt(1 + 1 / s["n"])
