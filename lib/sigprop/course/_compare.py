r"""Random transformers against their block map, block by block: the comparison the block-map pages repeat.

A page that checks Algorithms 1-3 of Giorlandino & Goldt 2025 (Figs. 1(d), 1(e), 2, 6; the explorer) does four
things for one architecture: Monte Carlo of the mean token cosine after each block
(:func:`sigprop.mc_cosine_vs_depth`), the two block maps (the paper's :math:`T\to\infty` map and the finite-:math:`T`
map with the exact REM :math:`Y^{(2)}` and :math:`Y_p`, :func:`sigprop.theory.iterate_block_map`), the curve-level
test of the whole depth curve against each map at the book's level (:func:`sigprop.course.depth_test`), and a row of
a table. :func:`compare_depth` does the four at once and returns a :class:`DepthComparison` with named fields.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import torch

from ..block import BlockConfig, iterate_block_map
from ..block._depth import mc_cosine_vs_depth   # not yet in block's interface (requested)
from ..stats._agreement import CurveAgreement
from ..stats._estimate import Estimate, estimate
from ._tables import depth_test, pm, verdict

__all__: list[str] = []
__theory__: list[str] = []
__course__ = ["DepthComparison", "compare_depth"]


@dataclasses.dataclass(frozen=True)
class DepthComparison:
    r"""One architecture's depth curve measured and predicted (:func:`compare_depth`).

    ``mc``: :class:`~sigprop.Estimate` of the mean cosine after each block, shape ``(depth + 1,)`` (row 0: the
    input), ``.samples`` the per-network curves ``(inits, depth + 1)``. ``limit``, ``finite``: the
    :math:`T\to\infty` and finite-:math:`T` maps' cosines, ``(depth + 1,)``. ``test``, ``test_limit``: the
    curve-level tests of blocks ``1..depth`` against ``finite`` and ``limit`` (level 0.001). ``gap``: the mean
    over blocks ``1..depth`` of Monte Carlo minus the finite-:math:`T` map, a scalar Estimate over networks.
    """

    config: BlockConfig
    T: int
    rho0: float
    mc: Estimate
    limit: np.ndarray
    finite: np.ndarray
    test: CurveAgreement
    test_limit: CurveAgreement
    gap: Estimate

    @property
    def depth(self) -> int:
        return len(self.finite) - 1

    @property
    def last(self) -> Estimate:
        """The Monte Carlo cosine after the last block (a scalar Estimate)."""
        return self.mc[self.depth]

    def row(self) -> dict:
        """A table row: last block measured and predicted, the layer-mean gap and both curve tests."""
        return {"last block (MC)": pm(self.last), "finite-T map": f"{self.finite[-1]:.4f}",
                "T -> inf map": f"{self.limit[-1]:.4f}", "mean gap, MC - finite-T map": pm(self.gap),
                "finite-T map: curve test": verdict(self.test, short=True),
                "T -> inf map: curve test": verdict(self.test_limit, short=True)}

    def plot(self, ax, *, color, label=None, every: int = 1, limit: bool = True, finite: bool = True,
             ms: float = 3):
        r"""Maps as lines (solid: :math:`T\to\infty`, dashed: finite :math:`T`) and every ``every``-th block's
        Monte Carlo as points with ±2 SE error bars (the book's convention)."""
        blocks = np.arange(self.depth + 1)
        if limit:
            ax.plot(blocks, self.limit, "-", color=color, label=label)
        if finite:
            ax.plot(blocks, self.finite, "--", color=color, lw=1, label=None if limit else label)
        m, s = self.mc.numpy()
        ax.errorbar(blocks[::every], m[::every], yerr=2 * s[::every], fmt="o", ms=ms, color=color,
                    label=None if (limit or finite) else label)

    def plot_gap(self, ax, *, color):
        """Monte Carlo minus the finite-:math:`T` map after each block, with a ±2 SE band over networks."""
        blocks = np.arange(self.depth + 1)
        gap = self.mc.samples.double().numpy() - self.finite          # (inits, depth + 1)
        m, s = gap.mean(0), gap.std(0, ddof=1) / np.sqrt(gap.shape[0])
        ax.plot(blocks, m, "-", color=color, lw=1.2)
        ax.fill_between(blocks, m - 2 * s, m + 2 * s, color=color, alpha=0.2, lw=0)


def compare_depth(config: BlockConfig, depth: int, *, T: int, inits: int, seqs: int = 1, rho0: float = 0.0,
                  generator=0, device=None) -> DepthComparison:
    """Monte Carlo of ``inits`` random transformers of ``depth`` blocks ``config`` (``seqs`` sequences of ``T``
    equicorrelated tokens of cosine ``rho0`` each) against both block maps of exactly that block, with the
    curve-level tests. ``inits >= 13`` (the test at level 0.001). ``device``: where the Monte Carlo runs
    (:func:`sigprop.mc_cosine_vs_depth`); the maps are float64 numpy.
    """
    mc = mc_cosine_vs_depth(config, depth, T=T, inits=inits, seqs=seqs, rho0=rho0, generator=generator,
                            device=device)
    q, p = iterate_block_map(1.0, rho0, depth, config, T=T, limit=True)
    limit = np.asarray(p / q, dtype=float)
    q, p = iterate_block_map(1.0, rho0, depth, config, T=T)
    finite = np.asarray(p / q, dtype=float)
    gap = estimate((mc.samples[:, 1:].double() - torch.as_tensor(finite[1:])).mean(1))
    return DepthComparison(config=config, T=T, rho0=float(rho0), mc=mc, limit=limit, finite=finite,
                           test=depth_test(mc, finite), test_limit=depth_test(mc, limit), gap=gap)
