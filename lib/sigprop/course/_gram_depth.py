r"""Token correlations through a random stack: the Monte Carlo of Noci et al. 2022, Sec. 3.2 (``chapters/noci2022/03``).

The depth analysis of Noci et al. follows two scalars of the tokens :math:`X^\ell\in\mathbb R^{n\times d}` after
each block: the Gram sum :math:`C(X) = \sum_{k,k'}\langle X_k, X_{k'}\rangle` (:func:`sigprop.gram_sum`) and
:math:`\|X\|_F^2`. Lemmas 3.2-3.3 give their expectations over the weights at a fixed input (Eqs. 10, 12), and the
mean correlation is a ratio of the two expectations (Eq. A.4, :func:`sigprop.ratio_correlation`).

* :func:`equal_norm_tokens`: the fixed inputs of the chapter (equal token norms, as Eq. A.4 needs; optionally a
  centred regular simplex, the counterexample to Eq. 16);
* :func:`mc_gram_depth` -> :class:`GramDepth`: both scalars after every block of ``inits`` random networks, with
  the curve-level tests the page states: the correlation curve against Eq. (A.4) (:meth:`GramDepth.correlation_test`,
  per-network values whose mean is zero exactly when the ratio of means equals the theory) and both growth curves
  against Eqs. (10) and (12) (:meth:`GramDepth.growth_test`), bootstrap resampling (per-network Gram sums and norms
  are skewed) at the book's level;
* :func:`correlation_panel`: the page's widget and figure, Monte Carlo points over the no-LN theory line;
* :func:`fig10_ladder` -> :class:`Fig10Ladder`: the committed record of ``python -m sigprop.experiments noci-fig10``
  (the gap between softmax and uniform attention in :math:`\mathbb E\|X^\ell\|_F^2`, Fig. 10, at five widths, and
  at the token counts and MLPs the figure leaves unstated) with named fields instead of the record's JSON.

The block is ``sp.presets.NOCI_SEC32`` (uniform attention, linear MLP, no layer norm).
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch

from ..attention._uniform import gram_sum, ratio_correlation, uniform_mean_correlation   # requested in the interface
from ..block import BlockConfig, sample_transformer, transformer_forward
from ..presets import NOCI_SEC32
from ..stats._agreement import CurveAgreement
from ..stats._estimate import Estimate
from ..stats._random import as_generator
from ..stats._validate import check_int
from ._tables import curve_test

__all__: list[str] = []
__theory__: list[str] = []
__course__ = ["equal_norm_tokens", "GramDepth", "mc_gram_depth", "correlation_panel", "Fig10Ladder", "fig10_ladder"]


def equal_norm_tokens(n: int, d: int, *, generator=None, centred: bool = False) -> torch.Tensor:
    """``n`` tokens of unit norm in ``R^d`` (float64, ``(n, d)``): normalised Gaussian vectors, or with
    ``centred=True`` a regular simplex (equal norms and mean token exactly zero; needs ``n <= d``)."""
    n, d = check_int(n, "n", minimum=2), check_int(d, "d", minimum=1)
    g = as_generator(generator)
    if centred:
        if n > d:
            raise ValueError(f"a centred simplex of n tokens needs n <= d; got n = {n}, d = {d}")
        u = torch.linalg.qr(torch.randn(d, n, generator=g, dtype=torch.float64))[0].T
        return u - u.mean(0)
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    return x / x.norm(dim=-1, keepdim=True)


@dataclasses.dataclass(frozen=True)
class GramDepth:
    r""":math:`C(X^\ell)` (``gram_sum``) and :math:`\|X^\ell\|_F^2` (``sq_norm``) of ``inits`` random networks at
    one input of ``n`` tokens, each ``(depth + 1, inits)`` (row 0: the input)."""

    gram_sum: torch.Tensor
    sq_norm: torch.Tensor
    n: int

    @property
    def depth(self) -> int:
        return self.gram_sum.shape[0] - 1

    def correlation(self) -> Estimate:
        r"""The mean correlation :math:`\rho^\ell` (Eq. 14 via A.4) after each block, ratio of means with a
        delta-method SE, shape ``(depth + 1,)``."""
        return ratio_correlation(self.gram_sum, self.sq_norm, self.n, dim=1)

    def correlation_test(self, theory) -> CurveAgreement:
        r"""Curve-level test of :math:`\rho^\ell`, blocks ``1..depth``, against ``theory`` ``(depth + 1,)``: per
        network :math:`C - (1 + (n-1)\rho)\|X\|_F^2` in units of the mean norm, whose mean is zero exactly when
        the ratio of means equals ``theory``; bootstrap, level 0.001."""
        r = 1 + (self.n - 1) * torch.as_tensor(np.asarray(theory, dtype=float))[:, None]
        rows = ((self.gram_sum - r * self.sq_norm) / self.sq_norm.mean(1, keepdim=True)).T
        return curve_test(rows[:, 1:], 0.0, method="bootstrap")

    def growth_test(self, gram_theory, norm_theory) -> CurveAgreement:
        """Both growth curves, blocks ``1..depth``, as one curve-level test: per network ``C / gram_theory`` and
        ``||X||^2 / norm_theory`` against 1 (Eqs. 10 and 12); bootstrap, level 0.001."""
        tc = torch.as_tensor(np.asarray(gram_theory, dtype=float))[1:, None]
        tf = torch.as_tensor(np.asarray(norm_theory, dtype=float))[1:, None]
        rows = torch.cat([self.gram_sum[1:] / tc, self.sq_norm[1:] / tf]).T
        return curve_test(rows, 1.0, method="bootstrap")


def mc_gram_depth(x: torch.Tensor, config: BlockConfig, depth: int, *, inits: int, generator=None,
                  device=None) -> GramDepth:
    """Sample ``inits`` networks of ``depth`` blocks ``config`` (float64, on ``device``) and propagate the fixed
    input ``x`` ``(n, d)`` through each; keep :func:`sigprop.gram_sum` and the squared norm after every block."""
    depth, inits = check_int(depth, "depth", minimum=1), check_int(inits, "inits", minimum=2)
    if x.ndim != 2:
        raise ValueError(f"x must be one input (n, d); got shape {tuple(x.shape)}")
    p = sample_transformer(config, depth, inits=inits, generator=generator, dtype=torch.float64, device=device)

    def measure(y):                                 # (inits, 1, n, d) -> (2, inits)
        return torch.stack([gram_sum(y[:, 0]), y[:, 0].pow(2).sum((-2, -1))])

    out = transformer_forward(x[None].to(device=p.w_q.device, dtype=torch.float64), p, config, measure=measure)
    return GramDepth(gram_sum=out[:, 0].cpu(), sq_norm=out[:, 1].cpu(), n=x.shape[0])


def correlation_panel(alpha1=1.0, alpha2=1.0, depth=12, norm="none", scaled=False, attention="uniform", *,
                      ax=None, label=None, color=None, nets=100, n=8, d=16, seed=1):
    r""":math:`\rho^\ell` of ``nets`` random networks (Monte Carlo points, ±2 SE) over the uniform-attention,
    no-LN theory line (Eq. A.4), from ``n`` equal-norm tokens in ``R^d``. ``scaled``: branches
    :math:`\alpha_i/\sqrt{\mathrm{depth}}`; ``norm`` and ``attention`` (``"uniform"`` or ``"softmax"``) change the
    network, not the line. The page's widget and its figure. Returns the axes."""
    import matplotlib.pyplot as plt

    x = equal_norm_tokens(n, d, generator=4)
    a1, a2 = (alpha1 / math.sqrt(depth), alpha2 / math.sqrt(depth)) if scaled else (alpha1, alpha2)
    config = BlockConfig(d=d, branch_sa=a1, branch_mlp=a2, **{**NOCI_SEC32, "norm": norm,
                                                               "logit_scale": 0.0 if attention == "uniform" else None})
    est = mc_gram_depth(x, config, depth, inits=nets, generator=seed).correlation()
    ax = ax or plt.subplots(figsize=(5.5, 3.6))[1]
    blocks = np.arange(depth + 1)
    th = uniform_mean_correlation(float(x.pow(2).sum()), float(gram_sum(x)), n, blocks, branch_sa=a1, branch_mlp=a2)
    line, = ax.plot(blocks, th, "-", color=color, label=label or "theory (uniform, no LN)")
    ax.errorbar(blocks, est.mean, yerr=2 * est.stderr, fmt="o", ms=3, color=line.get_color())
    ax.set(xlabel="layer", ylabel=r"$\rho^\ell$", ylim=(-0.2, 1.05))
    return ax


@dataclasses.dataclass(frozen=True)
class Fig10Ladder:
    r"""The Fig. 10 record (:func:`fig10_ladder`). Per width (rung): ``d`` ``(rungs,)``, ``networks``, the relative
    gap of the mean norm (softmax over uniform, minus 1) after each block ``gap``/``gap_se`` ``(rungs, depth + 1)``,
    the mean attention IPR of each block ``ipr`` ``(rungs, depth)`` and the mean token cosine ``cosine``
    ``(rungs, depth + 1)``; ``n`` tokens. The weighted fit of the depth-10 gap, ``a/d + b``: ``a``, ``a_se``, ``b``,
    ``b_se``, ``fit_p`` (goodness of fit). ``choices``: one dict per (tokens, MLP) setting at ``d = 30`` with
    ``n``, ``activation``, ``networks``, ``gap``, ``gap_se`` (the depth-10 gap)."""

    d: np.ndarray
    networks: np.ndarray
    gap: np.ndarray
    gap_se: np.ndarray
    ipr: np.ndarray
    cosine: np.ndarray
    n: int
    a: float
    a_se: float
    b: float
    b_se: float
    fit_p: float
    choices: tuple


def fig10_ladder(record: dict) -> Fig10Ladder:
    """Read the record of ``sigprop.experiments.noci_fig10.load()`` into a :class:`Fig10Ladder`."""
    rungs, fit = record["ladder"]["rungs"], record["ladder"]["fit"]

    def col(key):
        return np.array([r[key] for r in rungs], dtype=float)

    choices = tuple(dict(n=c["n"], activation=c["activation"], networks=c["networks"], gap=c["gap"][-1],
                         gap_se=c["gap_se"][-1]) for c in record["choices"])
    return Fig10Ladder(d=col("d").astype(int), networks=col("networks").astype(int), gap=col("gap"),
                       gap_se=col("gap_se"), ipr=col("ipr"), cosine=col("cosine"), n=int(rungs[0]["n"]),
                       a=float(fit["a"]), a_se=float(fit["a_se"]), b=float(fit["b"]), b_se=float(fit["b_se"]),
                       fit_p=float(fit["p"]), choices=choices)
