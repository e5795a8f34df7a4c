"""Figure helpers that several pages share: trainability diagrams and recorded training curves.

Both follow the book's conventions (*How to read the checks*): a band or error bar is ±2 SE over independent
samples (here: training seeds). matplotlib is imported only inside the functions that draw.
"""
from __future__ import annotations

import numpy as np

__all__: list[str] = []
__theory__: list[str] = []
__course__ = ["PHASE_COLORS", "PHASE_COLORS_PALE", "plot_diagram", "plot_training"]

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
