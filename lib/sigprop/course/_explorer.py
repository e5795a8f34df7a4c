r"""The trainability explorer of the synthesis chapter (``chapters/synthesis/03_explorer``).

One setting (architecture, :math:`\beta`, :math:`\alpha_{SA}`, depth) is examined four ways on the same random
transformers: the token cosine through depth against both block maps with the curve-level test
(:func:`sigprop.course.compare_depth`), the first layer's attention IPR and entropy against Result 1 and the exact
finite-:math:`T` REM, Noci et al.'s ratio of query to value gradients (their Eqs. 17-18, shown only where the first
layer's attention is close to uniform, the equations' assumption), and the verdict of the trainability diagram with
the criterion and the document that gave it. :func:`explore` computes, :meth:`Exploration.figure` draws,
:meth:`Exploration.summary` tabulates.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch

from ..attention._gradients import query_value_log_ratio   # theory; not yet in attention's interface
from ..attention._layer import self_attention
from ..attention._rem import ipr, ipr_finite
from ..block import BlockConfig, sample_transformer
from ..block._trainability import ENTROPY_COLLAPSE, RANK_COLLAPSE, TRAINABLE, trainability_diagram
from ..inputs._tokens import gaussian_tokens
from ..presets import GG_APP_C1
from ..stats._estimate import Estimate, estimate
from ..stats._measures import attention_entropy, attention_ipr
from ._compare import DepthComparison, compare_depth
from ._tables import pm, sci, verdict

__all__: list[str] = []
__theory__: list[str] = []
__course__ = ["Exploration", "explore"]

_VERDICTS = {
    ENTROPY_COLLAPSE: ("entropy collapse", "a layer has beta > beta_c(rho): localised attention (G&G, Result 1)"),
    RANK_COLLAPSE: ("rank collapse", "cosine after the last block >= the threshold (G&G, Algorithms 1-3)"),
    TRAINABLE: ("trainable", "spread attention, cosine below the threshold (G&G)"),
}
#: Noci et al.'s Eqs. (17)-(18) are shown when the first layer's IPR is within this fraction of 1/T.
UNIFORM_TOLERANCE = 0.1


@dataclasses.dataclass(frozen=True)
class Exploration:
    """One setting of the explorer (:func:`explore`). ``curve``: the depth comparison (Monte Carlo, both maps,
    curve tests); ``ipr``, ``entropy``: the first layer's mean attention IPR and entropy over networks;
    ``uniform``: whether that IPR is within 10 % of ``1/T``; ``log_ratio``: Noci's log query/value gradient
    ratio after each block at the finite-:math:`T` map's cosine (None where attention is not uniform)."""

    setting: dict
    T: int
    d: int
    rank_threshold: float
    phase: int
    verdict: str
    criterion: str
    curve: DepthComparison
    ipr: Estimate
    entropy: Estimate
    uniform: bool
    log_ratio: np.ndarray | None

    def summary(self) -> dict:
        """The table row of this setting (verdict, attention phase, both curve tests, gradient ratio)."""
        ratio = "n/a (not uniform)" if self.log_ratio is None else sci(math.exp(self.log_ratio[-1]))
        return {"verdict": self.verdict, "IPR x T, layer 1": f"{float(self.ipr.mean) * self.T:.2f}",
                "entropy / log T, layer 1": f"{float(self.entropy.mean) / math.log(self.T):.2f}",
                "T -> inf map vs MC": verdict(self.curve.test_limit), f"T = {self.T} map vs MC": verdict(self.curve.test),
                "mean offset, MC - T map": pm(self.curve.gap),
                "query/value gradient (Noci), last block": ratio}

    def figure(self):
        """Cosine through depth (top), first-layer IPR against Result 1 (bottom left), Noci's gradient ratio or
        why it does not apply (bottom right). Error bars ±2 SE over networks. Returns the figure."""
        import matplotlib.pyplot as plt

        s, c = self.setting, self.curve
        fig, ax = plt.subplot_mosaic([["cos", "cos"], ["ipr", "grad"]], figsize=(7.4, 6.4))
        m, se = c.mc.numpy()
        ax["cos"].errorbar(range(c.depth + 1), m, 2 * se, fmt="o", ms=3, color="C1",
                           label=f"MC, T = {self.T}, d = {self.d} (±2 SE)")
        ax["cos"].plot(c.limit, "k-", label=r"block map, $T\to\infty$")
        ax["cos"].plot(c.finite, "b--", label=f"block map, T = {self.T}")
        ax["cos"].axhline(self.rank_threshold, color="grey", ls=":")
        ax["cos"].set(xlabel="depth", ylabel="mean cosine", ylim=(-0.02, 1.02),
                      title=f"{s['norm']}-LN{' + gain control' if s['gain_control'] else ''}, beta = {s['beta']}, "
                            f"alpha_SA = {s['alpha_sa']}: {self.verdict}")
        ax["cos"].legend(fontsize=9, loc="center right")
        grid = np.linspace(0.02, 4, 60)
        ax["ipr"].plot(grid, ipr(grid), "k-", label=r"$T\to\infty$")
        ax["ipr"].plot(grid, ipr_finite(grid, self.T), "b--", label=f"REM, T = {self.T}")
        ax["ipr"].errorbar([s["beta"]], [float(self.ipr.mean)], [2 * float(self.ipr.stderr)], fmt="o", color="C1",
                           label="MC, layer 1")
        ax["ipr"].set(xlabel=r"$\beta$", ylabel=r"IPR $Y^{(2)}$, layer 1")
        ax["ipr"].legend(fontsize=9)
        if self.log_ratio is not None:
            ax["grad"].plot(self.log_ratio / math.log(10), "C3-")
            ax["grad"].set(xlabel="depth", ylabel=r"$\log_{10}$ query / value grad", title="Noci et al. Eqs. (17)-(18)")
        else:
            ax["grad"].axis("off")
            ax["grad"].text(0.5, 0.5, "Noci et al. Eqs. (17)-(18)\nassume uniform attention;\nhere the layer-1 IPR is\n"
                            f"{float(self.ipr.mean) * self.T:.1f} x 1/T: not applicable", ha="center", va="center",
                            transform=ax["grad"].transAxes)
        return fig


def _first_layer(config: BlockConfig, *, T: int, inits: int, generator) -> tuple[Estimate, Estimate]:
    """Mean IPR and entropy of the first attention layer of ``inits`` random networks on 2 Gaussian sequences."""
    g = torch.Generator().manual_seed(int(generator))
    params = sample_transformer(config, 1, inits=inits, generator=g)
    x = gaussian_tokens(inits, 2, T=T, d=config.d, generator=g)
    _, A = self_attention(x, params.w_q[:, 0, 0, None], params.w_k[:, 0, 0, None], logit_scale=config.scale)
    return (estimate(attention_ipr(A).mean((-1, -2)).double()),
            estimate(attention_entropy(A).mean((-1, -2)).double()))


def explore(*, norm: str = "post", gain_control: bool = False, beta: float = 0.1, alpha_sa: float = 1.0,
            depth: int = 24, rank_threshold: float = 0.99, T: int = 32, d: int = 64, inits: int = 32, seed: int = 0,
            variances: dict = GG_APP_C1) -> Exploration:
    """Examine one setting: ``inits`` random post-/pre-LN transformers (``variances``: the paper's App. C.1 by
    default) of width ``d`` on 2 Gaussian sequences of length ``T`` each, their maps and the diagram's verdict
    (orthogonal input, ``rank_threshold`` on the final cosine). ``inits >= 13`` (curve tests at level 0.001)."""
    kw = dict(norm=norm, gain_control=gain_control, **variances)
    config = BlockConfig.from_beta(beta, T=T, d=d, alpha_sa=alpha_sa, **kw)
    curve = compare_depth(config, depth, T=T, inits=inits, seqs=2, rho0=0.0, generator=seed)
    first_ipr, first_entropy = _first_layer(config, T=T, inits=inits, generator=seed + 1)
    diagram = trainability_diagram(np.array([beta]), np.array([alpha_sa]), depth=depth,
                                   rank_threshold=rank_threshold, **kw)
    phase = int(diagram.phase[0, 0])
    uniform = abs(float(first_ipr.mean) * T - 1) <= UNIFORM_TOLERANCE
    log_ratio = query_value_log_ratio(T, d, np.clip(curve.finite, 0, 1 - 1e-12)) if uniform else None
    name, criterion = _VERDICTS[phase]
    if phase == RANK_COLLAPSE:
        criterion = criterion.replace("the threshold", f"{rank_threshold}")
    return Exploration(setting=dict(norm=norm, gain_control=gain_control, beta=beta, alpha_sa=alpha_sa, depth=depth),
                       T=T, d=d, rank_threshold=rank_threshold, phase=phase, verdict=name, criterion=criterion,
                       curve=curve, ipr=first_ipr, entropy=first_entropy, uniform=uniform, log_ratio=log_ratio)
