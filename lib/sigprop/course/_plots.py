"""Figure helpers that several pages share: trainability diagrams, recorded training curves, and the introduction's
overview of the two failure modes.

Both follow the book's conventions (*How to read the checks*): a band or error bar is ±2 SE over independent
samples (here: training seeds). matplotlib is imported only inside the functions that draw.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from ..attention._layer import self_attention
from ..block._trainability import trainability_diagram
from ..inputs._tokens import gaussian_tokens
from ..presets import GG_APP_C1

__all__: list[str] = []
__theory__: list[str] = []
__course__ = ["PHASE_COLORS", "PHASE_COLORS_PALE", "plot_diagram", "plot_training", "overview_figure"]

#: Where the book's introduction keeps the figure :func:`overview_figure` draws (regenerate it with
#: ``python -c "import sigprop as sp; sp.course.overview_figure(save=True)"``; tests/test_course.py checks it is there)
OVERVIEW = "book/_static/overview.png"

#: Colours of the three phases (trainable, rank collapse, entropy collapse), in the order of their codes 0, 1, 2.
PHASE_COLORS = ("#4c72b0", "#e5c34b", "#c44e52")
#: The same, pale, for a diagram with markers on top.
PHASE_COLORS_PALE = ("#c9d6ec", "#f4e6ad", "#ecbcbd")


def plot_diagram(ax, diagram, *, title=None, colors=PHASE_COLORS, log_beta: bool = False):
    """Draw a :class:`~sigprop.TrainabilityDiagram` (phase over ``beta`` x ``alpha_sa``) on ``ax``.

    Phase codes 0, 1, 2 (trainable, rank collapse, entropy collapse) in ``colors``; ``log_beta`` puts beta on a
    log axis. Returns the mesh."""
    from matplotlib.colors import ListedColormap

    mesh = ax.pcolormesh(diagram.beta, diagram.alpha_sa, diagram.phase, cmap=ListedColormap(list(colors)),
                         vmin=-0.5, vmax=2.5, shading="nearest")
    ax.set(xlabel=r"$\beta$", ylabel=r"$\alpha_{SA}$", title=title, xscale="log" if log_beta else "linear")
    return mesh


def _band(ax, x, y, color, label):
    """Mean over seeds (columns of ``y``) with a ±2 SE band, and each seed as a thin line."""
    m = y.mean(1)
    se = y.std(1, ddof=1) / np.sqrt(y.shape[1]) if y.shape[1] > 1 else np.zeros_like(m)
    ax.plot(x, y, color=color, lw=0.6, alpha=0.5)
    ax.plot(x, m, color=color, lw=2, label=label)
    ax.fill_between(x, m - 2 * se, m + 2 * se, color=color, alpha=0.2, lw=0)


def plot_training(runs: dict, colors: dict):
    """Masked-token loss, attention entropy and top-layer cosine of recorded training runs against the step.

    ``runs``: label -> training run (``steps``, ``eval_loss``, ``attention_entropy``, ``top_cosine`` of shape
    ``(evaluations, seeds)``, ``unigram_loss``, ``bayes_loss``, ``settings``), as
    :func:`sigprop.experiments.load_record` returns; ``colors``: label -> colour. Thick lines: the mean over seeds
    with a ±2 SE band; thin lines: each seed. Dashed: the context-free floor and ``log T`` (uniform attention);
    dotted: the Bayes floor. Returns the figure (2 x 2 panels, the fourth the legend)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(7.5, 6.4))
    (a0, a1), (a2, a3) = axes
    first = next(iter(runs.values()))
    for label, r in runs.items():
        _band(a0, r.steps, r.eval_loss, colors[label], label)
        _band(a1, r.steps, r.attention_entropy, colors[label], label)
        _band(a2, r.steps, r.top_cosine, colors[label], label)
    a0.axhline(first.unigram_loss, color="0.3", ls="--", lw=1)
    a0.axhline(first.bayes_loss, color="0.3", ls=":", lw=1)
    a1.axhline(np.log(first.settings["T"]), color="0.3", ls="--", lw=1)
    a0.set(xlabel="training step", ylabel="masked-token loss (nats)", ylim=(0, None))
    a1.set(xlabel="training step", ylabel="attention entropy (nats)", ylim=(0, None))
    a2.set(xlabel="training step", ylabel="top-layer cosine", ylim=(0, 1.02))
    handles, labels = a0.get_legend_handles_labels()
    a3.axis("off")
    a3.legend(handles + [plt.Line2D([], [], color="0.3", ls="--"), plt.Line2D([], [], color="0.3", ls=":")],
              labels + [r"dashed: context-free floor / $\log T$", "dotted: Bayes floor"], loc="center", fontsize=9)
    return fig


def _attention(beta: float, *, T: int = 12, d: int = 256, seed: int = 0):
    """One random attention matrix (T x T) at Result 1's scale ``beta`` (q = 1, p = 0), for a picture."""
    g = torch.Generator().manual_seed(seed)
    x = gaussian_tokens(T=T, d=d, generator=g, dtype=torch.float64)
    s = math.sqrt(beta * math.sqrt(math.log(T)) / d)
    w_q, w_k = (s * torch.randn(d, d, generator=g, dtype=torch.float64) for _ in range(2))
    return self_attention(x, w_q, w_k, torch.eye(d, dtype=torch.float64))[1].numpy()


def overview_figure(*, depth: int = 60, save: bool = False):
    """The introduction's overview: both failure modes on one diagram.

    Theory only. Centre: the post-LN trainability diagram of Giorlandino & Goldt (Fig. 1(c); the block map of
    Algorithm 1 iterated ``depth`` blocks from orthogonal tokens, App. C.1 variances, :math:`T\\to\\infty`). Left
    and right: one random attention matrix from each side of :math:`\\beta_c=\\sqrt2` (:math:`T = 12`, fixed seed):
    spread rows average the tokens together (rank collapse, unless the skip connections are strong), condensed rows
    copy a few keys the random weights chose (entropy collapse). ``save=True`` also writes :data:`OVERVIEW` (from
    the repository root). Returns the figure."""
    import matplotlib.pyplot as plt

    diagram = trainability_diagram(np.linspace(0.02, 3.0, 150), np.linspace(0.5, 3.0, 120), depth=depth, **GG_APP_C1)
    fig = plt.figure(figsize=(7.5, 3.6))
    grid = fig.add_gridspec(2, 3, width_ratios=(1, 2.4, 1))
    ax = fig.add_subplot(grid[:, 1])
    plot_diagram(ax, diagram, title=f"post-LN, {depth} blocks (theory)")
    ax.axvline(math.sqrt(2), color="k", lw=0.8, ls=":")
    ax.text(0.55, 0.7, "rank collapse:\ntokens align", ha="center", fontsize=10)
    ax.text(0.75, 2.35, "trainable", ha="center", color="w", fontsize=11)
    ax.text(2.25, 1.75, "entropy collapse:\nattention freezes", ha="center", color="w", fontsize=10)
    ax.text(math.sqrt(2) + 0.04, 0.55, r"$\beta_c$", fontsize=11)
    for col, beta, name in ((0, 0.3, "spread attention"), (2, 3.0, "condensed attention")):
        inset = fig.add_subplot(grid[0, col])
        inset.imshow(_attention(beta), cmap="viridis", vmin=0, vmax=1)
        inset.set_xticks([]); inset.set_yticks([])
        inset.set_title(rf"$\beta = {beta:g}$: {name}", fontsize=10)
        note = fig.add_subplot(grid[1, col]); note.axis("off")
        note.text(0.5, 0.9, ("every row ≈ 1/T:\nthe output is the\nmean token" if col == 0 else
                             "each row on a few\nkeys the weights\nchose, not the data"), ha="center", va="top",
                  fontsize=10, transform=note.transAxes)
    if save:
        fig.savefig(OVERVIEW, dpi=150)
    return fig
