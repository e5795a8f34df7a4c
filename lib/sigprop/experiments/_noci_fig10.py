r"""How the Fig. 10 gap of Noci et al. (2022) closes with width: softmax attention against Lemma 3.3.

Noci et al. 2022, App. B.2, Fig. 10 (centre), state that with input entries of standard deviation
:math:`1/\sqrt d` the uniform-attention assumption (Assumption 3.1) is "an excellent approximation" for
the norm :math:`\|X^\ell\|_F^2` of an encoder of depth 1 to 10 at :math:`d = 30`. Lemma 3.3 gives that
norm's mean under uniform attention. Here the random network is the one of Lemma 3.3 -- no layer norm,
residual branches of weight :math:`\alpha_1 = \alpha_2 = 1`, Xavier weights (variance :math:`1/d`; a ReLU
MLP has :math:`W^{F_1}` of variance :math:`2/d`, the paper's footnote 3), :math:`n` tokens with i.i.d.
:math:`\mathcal N(0, 1/d)` entries drawn per network ("simulating an embedding layer") -- run twice on
the same weights and input: with real softmax attention and with exactly uniform attention
(``logit_scale=0``). The relative gap at depth :math:`\ell` is

.. math:: g_\ell = \frac{\mathbb E\|X^\ell_{\rm softmax}\|_F^2}{\mathbb E\|X^\ell_{\rm uniform}\|_F^2} - 1,

a ratio of means (the uniform mean *is* Lemma 3.3, averaged over the input), estimated from paired
per-network samples with the delta-method standard error
:math:`\mathrm{SE} = \mathrm{sd}(F_s - R F_u)/(\sqrt N\,\bar F_u)`, :math:`R = \bar F_s/\bar F_u`
(pairing removes most of the spread the two networks share).

Two experiments, both recorded (``records/noci2022_fig10_finite_size.json``):

* **the ladder** (:data:`LADDER`): :math:`g_{10}` for :math:`n = 10`, a linear MLP and
  :math:`d = 30 \dots 480`, fitted by weighted least squares with :math:`g = a\,d^{-1} + b`
  (:func:`fit_inverse_width`; :math:`b` is the gap at :math:`d\to\infty`, which Lemma A.7 --
  :math:`A\to U` as :math:`d_k\to\infty` -- says is zero). Fits with :math:`d^{-1/2}`,
  :math:`d^{-2}` and a constant are recorded beside it;
* **the unstated choices** (:data:`CHOICES`): :math:`g_{10}` at the figure's :math:`d = 30` for the
  choices the figure does not state, :math:`n \in \{5, 10, 20\}` and a linear or ReLU MLP.

Per network the ladder also keeps the mean token cosine of the softmax network and the mean IPR
:math:`\sum_j A_{ij}^2` of its attention rows (:math:`1/n` uniform, 1 one-hot) at every block: attention
sharpens at every width, but at larger :math:`d` it does so later in depth, when the tokens are already
nearly aligned and sharp attention no longer changes the norm.

Run ``python -m sigprop.experiments noci-fig10 [--out FILE]`` (about 5 CPU-minutes on one thread);
the chapter page ``chapters/noci2022/03_depth`` and the ledger rows ``noci2022-fig10-*`` read the
committed record through :func:`load`, and ``tests/test_noci_fig10.py`` replays its smallest rung.
"""
from __future__ import annotations

import dataclasses
import enum
import json
import math
import sys
from importlib import resources

import numpy as np
import torch

from ..block import BlockConfig, sample_transformer, transformer_forward
from ..attention._layer import self_attention
from ..stats._measures import attention_ipr, mean_cosine
from ..stats._estimate import Estimate
from ..stats._random import as_generator
from ._provenance import provenance
from ..stats._fits import InverseWidthFit, fit_inverse_width
from ..stats._validate import check_int, check_option, check_real


class _Activation(str, enum.Enum):
    LINEAR = "linear"
    RELU = "relu"

__all__ = ["LADDER", "CHOICES", "RECORD", "fig10_config", "fig10_samples", "relative_gap", "fit_inverse_width",
           "InverseWidthFit", "run_ladder", "run_choices", "run", "load"]

#: The setting of the ladder: tokens, depth (the figure's largest), MLP activation.
SETTING = dict(n=10, depth=10, activation="linear")
#: (d, networks, seed) of each rung; networks chosen for a gap SE of a few 1e-3 at depth 10.
LADDER = ((30, 4000, 30), (60, 2000, 60), (120, 800, 120), (240, 400, 240), (480, 200, 480))
#: (n, activation, networks, seed) at d = 30: the choices Fig. 10 does not state.
CHOICES = tuple((n, act, 3000, 1000 + 10 * n + (act == "relu")) for act in ("linear", "relu") for n in (5, 10, 20))
#: Name of the committed record (``records/<RECORD>.json``).
RECORD = "noci2022_fig10_finite_size"
#: Parameter memory per chunk of networks (bytes): the weights of one network at d = 480, depth 10, are 92 MB.
_CHUNK_BYTES = 2**29


def fig10_config(d: int, *, activation: str = "linear", uniform: bool = False) -> BlockConfig:
    """The block of Lemma 3.3 / Fig. 10: no LN, branches of weight 1, Xavier weights (variance 1/d).

    ``uniform=True`` makes every attention matrix exactly ``U`` (logit scale 0, Assumption 3.1). With a ReLU
    MLP, ``W^{F_1}`` has variance 2/d and ``W^{F_2}`` 1/d (Noci et al. 2022, footnote 3): ``sigma_w2 = 2`` gives
    both 2/d and the branch weight ``1/sqrt 2`` brings ``W^{F_2}`` back to 1/d.
    """
    activation = check_option(activation, _Activation, "activation").value
    relu = activation == "relu"
    return BlockConfig(d=d, norm="none", activation=activation, branch_sa=1.0,
                       branch_mlp=1 / math.sqrt(2) if relu else 1.0, sigma_w2=2.0 if relu else 1.0, sigma_v2=1.0,
                       sigma_b2=0.0, d_ff=d, logit_scale=0.0 if uniform else None)


def _chunk(d: int, depth: int) -> int:
    return max(1, _CHUNK_BYTES // (5 * depth * d * d * 8))


def fig10_samples(d: int, networks: int, *, n: int = 10, depth: int = 10, activation: str = "linear",
                  input_std: float | None = None, generator=0, diagnostics: bool = False) -> dict:
    r"""Per-network samples of the Fig. 10 experiment at width ``d`` (float64, CPU).

    Returns ``{"softmax": F_s, "uniform": F_u}``, each ``(networks, depth + 1)``: :math:`\|X^\ell\|_F^2` of the
    same network and input with softmax and with uniform attention (row 0: the input). With ``diagnostics``
    also ``"cosine"`` ``(networks, depth + 1)``, the mean token cosine of the softmax network, and ``"ipr"``
    ``(networks, depth)``, the mean IPR of the attention rows of block ``l + 1``. Input entries are
    :math:`\mathcal N(0, s^2)`, ``s = input_std`` (default :math:`1/\sqrt d`; Fig. 10 (right) uses 1), one
    input per network; Lemma 3.3 averaged over them is ``uniform_sq_norm(n d s^2, n d s^2, n, l)``
    (:math:`\mathbb E\|X\|_F^2 = \mathbb E\,C(X) = n d s^2`). Networks are drawn in chunks
    (weights, then inputs, from ``generator``); the chunk size depends only on ``d`` and ``depth``.
    """
    d = check_int(d, "d", minimum=1)
    networks = check_int(networks, "networks", minimum=2)
    n = check_int(n, "n", minimum=2)
    depth = check_int(depth, "depth", minimum=1)
    std = None if input_std is None else check_real(input_std, "input_std", minimum=0.0)
    soft, unif = fig10_config(d, activation=activation), fig10_config(d, activation=activation, uniform=True)
    g = as_generator(generator)
    chunk = _chunk(d, depth)
    out = {k: [] for k in (("softmax", "uniform", "cosine", "ipr") if diagnostics else ("softmax", "uniform"))}
    for start in range(0, networks, chunk):
        m = min(chunk, networks - start)
        p = sample_transformer(soft, depth, inits=m, generator=g, dtype=torch.float64)
        x = torch.randn(m, 1, n, d, generator=g, dtype=torch.float64)          # (m, 1 sample, n, d)
        x = x / math.sqrt(d) if std is None else x * std
        norm = lambda y: y[:, 0].pow(2).sum((-2, -1))                                # (m,) per layer
        out["uniform"].append(transformer_forward(x, p, unif, measure=norm).T)
        if not diagnostics:
            out["softmax"].append(transformer_forward(x, p, soft, measure=norm).T)
            continue
        xs = transformer_forward(x, p, soft)[:, :, 0]                                 # (depth + 1, m, n, d)
        out["softmax"].append(xs.pow(2).sum((-2, -1)).T)
        out["cosine"].append(mean_cosine(xs).T)
        ipr = [attention_ipr(self_attention(xs[l], p.w_q[:, l, 0], p.w_k[:, l, 0])[1]).mean(-1) for l in range(depth)]
        out["ipr"].append(torch.stack(ipr, 1))
    return {k: torch.cat(v) for k, v in out.items()}


def relative_gap(softmax: torch.Tensor, uniform: torch.Tensor) -> Estimate:
    r""":math:`\bar F_s/\bar F_u - 1` along dim 0 of paired samples ``(networks, ...)``, delta-method SE."""
    if softmax.shape != uniform.shape or softmax.ndim < 1 or softmax.shape[0] < 2:
        raise ValueError(f"softmax and uniform must be paired samples (networks >= 2, ...) of one shape; got "
                         f"{tuple(softmax.shape)} and {tuple(uniform.shape)}")
    fs, fu = softmax.double(), uniform.double()
    N = fs.shape[0]
    ms, mu = fs.mean(0), fu.mean(0)
    r = ms / mu
    se = (fs - r * fu).std(0, unbiased=True) / (math.sqrt(N) * mu)
    return Estimate(r - 1.0, se, int(N))


def _rung(d, networks, seed, *, n, depth, activation, diagnostics):
    s = fig10_samples(d, networks, n=n, depth=depth, activation=activation, generator=seed, diagnostics=diagnostics)
    gap = relative_gap(s["softmax"], s["uniform"])
    row = dict(d=d, n=n, activation=activation, depth=depth, networks=networks, seed=seed,
               gap=gap.mean.tolist(), gap_se=gap.stderr.tolist(),
               softmax_norm=s["softmax"].mean(0).tolist(), uniform_norm=s["uniform"].mean(0).tolist())
    if diagnostics:
        row.update(cosine=s["cosine"].mean(0).tolist(), ipr=s["ipr"].mean(0).tolist())
    return row


def run_ladder(ladder=LADDER, *, progress: bool = False) -> dict:
    """The ladder and its fits: ``{"rungs": [...], "fit": {...}, "alternatives": {...}}`` (JSON-ready)."""
    rungs = []
    for d, networks, seed in ladder:
        rungs.append(_rung(d, networks, seed, **SETTING, diagnostics=True))
        if progress:
            print(f"  d = {d}: gap at depth {SETTING['depth']} {rungs[-1]['gap'][-1]:+.4f} ± "
                  f"{rungs[-1]['gap_se'][-1]:.4f}", file=sys.stderr, flush=True)
    ds = [r["d"] for r in rungs]
    gap, se = [r["gap"][-1] for r in rungs], [r["gap_se"][-1] for r in rungs]
    fits = {f"gamma={g:g}": fit_inverse_width(ds, gap, se, gamma=g).as_dict() for g in (1.0, 0.5, 2.0, 0.0)}
    return dict(rungs=rungs, fit=fits.pop("gamma=1"), alternatives=fits)


def run_choices(choices=CHOICES, *, d: int = 30) -> list:
    """The gap at depth 10 and width ``d`` for each (n, activation) the figure does not state."""
    return [_rung(d, networks, seed, n=n, depth=SETTING["depth"], activation=act, diagnostics=False)
            for n, act, networks, seed in choices]


def run(*, command: str = "python -m sigprop.experiments noci-fig10", progress: bool = False) -> dict:
    """Both experiments with provenance (the content of the committed record)."""
    return dict(provenance=provenance(
        command, seeds=dict(ladder={r[0]: r[2] for r in LADDER}, choices={f"n={c[0]}, {c[1]}": c[3] for c in CHOICES})), setting=dict(SETTING, input_std="1/sqrt(d)", norm="none",
                                                             branches=1.0, weights="Xavier (1/d)"),
                ladder=run_ladder(progress=progress), choices=run_choices())


def load(name: str = RECORD) -> dict:
    """The committed record (a dict: ``provenance``, ``setting``, ``ladder`` {rungs, fit, alternatives},
    ``choices``)."""
    path = resources.files(__package__) / "records" / f"{name}.json"
    if not path.is_file():
        raise FileNotFoundError(f"no record {name!r} in sigprop/experiments/records")
    return json.loads(path.read_text())
