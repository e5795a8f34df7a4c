"""Claims of Giorlandino & Goldt 2025 that read committed records instead of running (registered from the end of
``giorlandino_goldt2025.py``, in the ledger's order), each record replayed by a test.

* **Finite-size ladders** (rows ``*-finite-size``; ``python -m sigprop.experiments finite-size --size record``,
  ``tests/test_finite_size.py``): a gap between random networks and a map extrapolated to ``d -> infinity`` by a
  weighted fit over four or five widths spanning 8-16x (stated 0: the map is exact as ``d -> infinity`` at the
  measured ``T``; tolerance 4 SE of the limit). The fit is ``a/d + b``, the leading finite-width order, over the
  widths where it fits (Fig. 4's gradient norm: from ``d = 64`` on, the smallest width carrying the next order).
* **Training runs** (three to eight seeds per initialisation; ``python -m sigprop.experiments regimes --size
  record``, ``tests/test_training.py``), scored by the fraction of the gap from the context-free floor (0) to the
  Bayes floor (1) closed, a mean over seeds with its SE over seeds. "Trains" is scored at 2,000 steps against 1,
  tolerance 0.5 (a run counts as what it is nearer to); "fails to train" by what a failing network does -- it stays
  on its plateau -- so by the gap closed in the second half of training, stated 0, tolerance 4 SE over seeds.
"""
from __future__ import annotations

import math

import numpy as np

from sigprop.claims import Measured, claim
from sigprop.experiments import REGIMES, extrapolate, finite_size_ladder, load_finite_size, load_record
from sigprop.experiments._finite_size import ledger_row as finite_size_row
from sigprop.experiments._regimes import ledger_row as regime_row

from .giorlandino_goldt2025 import DOC, FIG1, Z     # defined before this module is imported

# ---------------------------------------------------------------- finite-size ladders


_FS_BLOCKS = "the layer-mean cosine gap to the finite-$T$ block map with $Y_p=1/T$ (App. B.2.2's sub-leading $Y_p$)"
_FS = ": " + _FS_BLOCKS + r" closes as $d\to\infty$."
_D = {"d": "64-512, extrapolated"}
_D2 = {"d": "64-1024, extrapolated"}
#: (id, case, source, claim, expected status, scale); every block row is an approximation (App. B.2.2's Y_p).
_FS_ROWS = [
    ("gg2025-fig1d-post-ln-finite-size", "fig1d-post", "Fig. 1(d); Algorithm 1; App. B.2.2",
     r"Post-LN stacks at $\beta=0.1$ ($\alpha_{SA}=1.5$, 60 blocks, $T=32$)" + _FS,
     "reproduced", {"measured": dict(_D, T=32, depth=60), "paper": dict(FIG1, depth=60)}),
    ("gg2025-fig1d-pre-ln-finite-size", "fig1d-pre", "Fig. 1(d), Fig. 2; Algorithm 2; App. B.2.2",
     r"Pre-LN stacks at $\beta=0.1$ ($\alpha_{SA}=1$, 60 blocks, $T=32$)" + _FS,
     "reproduced", {"measured": dict(_D, T=32, depth=60), "paper": {}}),
    ("gg2025-fig1e-post-ln-finite-size", "fig1e-post", "Fig. 1(e); Algorithm 1; App. B.2.2",
     r"Post-LN stacks at $\beta=1.8>\beta_c$ ($\alpha_{SA}=1$, 12 blocks, $T=64$)" + _FS,
     "approximation", {"measured": dict(_D2, T=64, depth=12), "paper": dict(FIG1, depth=12)}),
    ("gg2025-fig1e-pre-ln-finite-size", "fig1e-pre", "Algorithm 2 at the Fig. 1(e) setting; App. B.2.2",
     r"Pre-LN stacks at $\beta=1.8>\beta_c$ ($\alpha_{SA}=1$, 12 blocks, $T=64$)" + _FS,
     "approximation", {"measured": dict(_D2, T=64, depth=12), "paper": {}}),
    ("gg2025-stack-beta3-finite-size", "stack-beta3", "Algorithm 1 above beta_c; App. B.2.2",
     r"Post-LN stacks at $\beta=3$ ($\alpha_{SA}=1$, 24 blocks, $T=64$, App. C.1 variances)" + _FS,
     "approximation", {"measured": dict(_D2, T=64, depth=24), "paper": {}}),
]


def _finite_size_claim(case):
    def measure():
        return Measured(**finite_size_row(case, Z))

    measure.__qualname__ = f"_finite_size_{case.replace('-', '_')}"
    return measure


for _id, _case, _source, _text, _expected, _scale in _FS_ROWS:
    claim(id=_id, document=DOC, source=_source, claim=_text, nature="approximation", expected=_expected,
          scale=_scale)(_finite_size_claim(_case))

claim(id="gg2025-fig3-ipr-finite-size", document=DOC, source="Fig. 3; Result 1; App. B.1-B.2",
      claim=r"The mean IPR of random attention rows minus the exact finite-$T$ REM value vanishes as $d\to\infty$ "
            r"($\beta=3$, $T=16384$).",
      scale={"measured": {"T": 16384, "d": "32-512, extrapolated"}, "paper": {"T": 100_000}})(
    _finite_size_claim("fig3-ipr"))
@claim(id="gg2025-fig4-result2-finite-size", document=DOC, source="Fig. 4; Result 2 (corrected, see the erratum)",
       claim=r"The relative gap between the query-gradient norm of random attention layers and the corrected Result 2 "
             r"at finite $T$ vanishes as $d\to\infty$ ($\beta=1.4$, $T=128$).",
       scale={"measured": {"T": 128, "d": "64-512, extrapolated"}, "paper": {"T": "2048-8192", "d": "256-1024"}})
def _fig4_width():
    lad = finite_size_ladder(load_finite_size("fig4-qgrad")[0], "beta=1.4")
    keep = lad.x >= 64                                   # d = 32 carries the next order (d x gap below)
    fit = extrapolate(lad.x[keep], lad.gap[keep], lad.se[keep]).fits["gamma=1"]
    every, free = lad.fit.fits["gamma=1"], lad.fit.fits["free"]
    rungs = ", ".join(f"{int(x)}: {g:+.4f} +- {s:.4f}" for x, g, s in zip(lad.x, lad.gap, lad.se))
    return Measured(stated=0.0, measured=fit.b, stderr=fit.b_se, tolerance=Z * fit.b_se,
                    note=f"query-gradient norm at beta = 1.4, T = 128: relative gap per width d, mean +- SE over "
                         f"{int(lad.n.min())}-{int(lad.n.max())} layers: {rungs}. The leading finite-width order, a/d + b, "
                         f"fits from d = 64 on (p = {fit.p:.2g}; b = the measured value, tolerance 4 SE); over all five "
                         f"widths it does not (p = {every.p:.1g}, b = {every.b:+.4f} +- {every.b_se:.4f}): d x gap is "
                         f"{lad.x[0] * lad.gap[0]:+.1f} at d = 32 and {lad.x[1] * lad.gap[1]:+.1f} to "
                         f"{min(lad.x[keep] * lad.gap[keep]):+.1f} from d = 64 on, the next order at the smallest width. A "
                         f"free exponent over all five gives b = {free.b:+.4f} +- {free.b_se:.4f} (gamma = {free.gamma:.2f}). "
                         "Committed record of python -m sigprop.experiments finite-size --case fig4-qgrad")


# ---------------------------------------------------------------- training runs

_TRAIN = {"measured": {"depth": 12, "d": 32, "T": 16, "heads": 1, "steps": 2000, "data": "Markov, 16 symbols"},
          "paper": {"depth": 60, "d": 600, "heads": 6, "data": "TinyStories"}}


def _scored(keys, stated, extra=""):
    return Measured(**regime_row(keys, stated, extra))


def _runs():
    """The recorded runs by (beta, alpha_SA, gain control)."""
    runs, _ = load_record()
    return {(r.beta, r.alpha_sa, r.gain_control): runs[r.label] for r in REGIMES}


@claim(id="gg2025-fig1f-rank-collapse-fails", document=DOC, source="Fig. 1(f); App. C.1",
       claim=r"Small $\beta$ with $\alpha_{SA}=1$ (rank collapse at initialisation) fails to train.",
       expected="not-reproduced", scale=_TRAIN)
def _rank():
    run = _runs()[(0.02, 1.0, False)]
    closed = (run.unigram_loss - run.eval_loss) / (run.unigram_loss - run.bayes_loss)   # (evaluations, seeds)
    half = int(np.argmin(np.abs(np.asarray(run.steps) - run.steps[-1] / 2)))
    late = closed[-1] - closed[half]                 # gap closed in the second half; a stuck network closes none
    plateau = closed[(np.asarray(run.steps) >= 400) & (np.asarray(run.steps) <= 800)]
    return Measured(stated=0.0, measured=float(late.mean()), stderr=float(late.std(ddof=1) / math.sqrt(len(late))),
                    tolerance=Z * float(late.std(ddof=1) / math.sqrt(len(late))), uncertainty="seeds",
                    note=f"recorded miniature (12 blocks, d = 32, T = 16, sigma_v^2 = 2, {int(run.steps[-1]):,} steps, "
                         f"{len(late)} seeds): a network that fails to train stays on the rank-collapse plateau, where "
                         f"these sit from step 400 to 800 (gap closed {plateau.min():.2f}-{plateau.max():.2f}, of the way "
                         "from the context-free floor to the Bayes floor). Measured: the gap closed in the second half of "
                         f"training (steps {int(run.steps[half]):,}-{int(run.steps[-1]):,}), per seed "
                         f"{np.round(late, 3).tolist()}; stated 0 (stuck); tolerance 4 SE over seeds. By the last step they "
                         f"have closed {np.round(closed[-1], 3).tolist()} of the gap (the trainable regimes about 0.9): "
                         "a long delay rather than a failure, at this size")


@claim(id="gg2025-fig1f-trainable-trains", document=DOC, source="Fig. 1(f); App. C.1",
       claim=r"Small $\beta$ with $\alpha_{SA}=1.5$ or 2 (the trainable region) trains.", scale=_TRAIN)
def _trainable():
    return _scored([(0.02, 1.5, False), (0.02, 2.0, False)], 1.0, "; alpha_SA = 1.5 and 2 pooled")


@claim(id="gg2025-fig1f-entropy-collapse-fails", document=DOC, source="Fig. 1(f); App. C.1",
       claim=r"$\beta=1.8$ (entropy collapse at initialisation, 12 blocks) fails to train.",
       expected="not-reproduced", scale=dict(_TRAIN, paper={**_TRAIN["paper"], "depth": 12, "alpha_SA": "1, 1.5, 2"},
                                             measured={**_TRAIN["measured"], "alpha_SA": "2"}))
def _entropy():

    runs = _runs()
    ent, small = runs[(1.8, 2.0, False)], runs[(0.02, 2.0, False)]
    worse = float((small.eval_loss[-1][:, None] < ent.eval_loss[-1][None, :]).mean())
    return _scored([(1.8, 2.0, False)], 0.0, f"; only alpha_SA = 2 was run (the paper: 1, 1.5 and 2); the networks train, but end "
                               f"above beta = 0.02 at the same alpha_SA in a fraction {worse:g} of seed pairs "
                               f"({ent.eval_loss[-1].mean():.3f} vs {small.eval_loss[-1].mean():.3f} nats) with sharper "
                               "attention throughout; untested in T, depth, width and task difficulty")


@claim(id="gg2025-fig5-gain-control-trains", document=DOC, source="Fig. 5; App. D.1",
       claim=r"At $\alpha_{SA}=1$, gain-controlled attention trains (where vanilla attention collapses).",
       scale=dict(_TRAIN, paper={"depth": 30, "d": 480, "heads": 1, "data": "TinyStories"}))
def _gain():
    return _scored([(0.02, 1.0, True)], 1.0)
