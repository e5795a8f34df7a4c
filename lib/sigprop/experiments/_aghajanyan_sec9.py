r"""A small stand-in for Aghajanyan 2025, Section 9 (training changes the cross-token correlation).

The post trains 0.6B-7B models on FineWeb for 10k steps; that is not reproduced here. The stand-in
(chapter ``aghajanyan2025``, page 3; ledger row ``aghajanyan2025-sec9-training-correlation``) is
:data:`MODEL` -- two pre-LN blocks, one causal head each, width 32, ReLU MLP of width 64, every weight
:math:`\mathcal N(0, 1/\text{fan-in})`, trained in float64 so a record is reproducible to rounding --
trained with Adam on Markov sequences of :class:`sigprop.MarkovSource`: one chain (:func:`single_chain`;
attention is not needed) or a two-topic mixture (:func:`sample_mixture`; the context reveals the topic).
The correlations are measured on **independent** tokens (:func:`iid_tokens`), so the layer-1 values
are independent across positions (a control that reads 0) and any layer-2 correlation comes from the
network, as in the post's theorem.

The ledger row reads a record over training seeds (a single run is not a measurement: the same seed on another CPU
ends elsewhere in the last digits, and seeds differ by far more): :func:`run` trains :data:`SEEDS` on the
two-topic mixture for :data:`STEPS` steps (the page's quick profile) and records, per seed, the layer-2 value
correlation at initialisation and after training; ``python -m sigprop.experiments aghajanyan-sec9 [--out FILE]``
(about half a minute) writes ``records/aghajanyan2025_sec9_record.json``, :func:`load` reads it.
"""
from __future__ import annotations

import json
from importlib import resources
from typing import Callable

import torch

from ..stats._estimate import Estimate, estimate
from ..inputs import MarkovSource
from ..models import LMConfig, TinyLM, fit
from ..stats._random import as_generator
from ..stats._measures import attention_entropy, cross_token_covariance
from ._provenance import provenance

__all__ = ["MODEL", "SEEDS", "STEPS", "RECORD", "single_chain", "topics", "sample_mixture", "iid_tokens",
           "value_metrics", "train", "final_metrics", "run_seed", "run", "load"]

MODEL = LMConfig(vocab=16, T=16, d=32, depth=2, d_k=16, d_ff=64, norm="pre", causal=True, out_proj=True,
                 final_norm=True, mlp_bias=False, pos_std=0.1)
#: Training seeds of the record (seed 1 is the page's mixture run) and its steps (the page's quick profile).
SEEDS = tuple(range(1, 9))
STEPS = 200
#: Name of the committed record (``records/<RECORD>.json``).
RECORD = "aghajanyan2025_sec9_record"


def single_chain() -> MarkovSource:
    """The one-chain task (the next token depends only on the current one)."""
    return MarkovSource(MODEL.vocab, concentration=0.3, generator=0)


def topics() -> list[MarkovSource]:
    """The two chains of the two-topic mixture."""
    return [MarkovSource(MODEL.vocab, concentration=0.3, generator=s) for s in (10, 11)]


def sample_mixture(chains: list[MarkovSource], n: int, generator) -> torch.Tensor:
    """``n`` sequences of length ``MODEL.T``, each from one of ``chains`` chosen at random, ``(n, T)``."""
    gen = as_generator(generator)
    k = torch.randint(2, (n, 1), generator=gen)
    return torch.where(k == 0, chains[0].sample(n, MODEL.T, generator=gen), chains[1].sample(n, MODEL.T, generator=gen))


def iid_tokens(pi: torch.Tensor, n: int, seed: int) -> torch.Tensor:
    """``n`` sequences of independent tokens with marginal ``pi``, ``(n, T)``."""
    return torch.multinomial(pi.float(), n * MODEL.T, replacement=True, generator=as_generator(seed)).reshape(n, MODEL.T)


def value_metrics(model: TinyLM, tokens: torch.Tensor) -> dict[str, float]:
    """Per layer ``l``: ``corr<l>``, the mean over position pairs i != j of the value correlation
    tr Cov(V_i, V_j) / sqrt(tr Cov(V_i) tr Cov(V_j)); ``cmf<l>``, the common-mode fraction
    1^T Sigma 1 / (T tr Sigma) (1/T for independent values, 1 for identical ones); ``ent<l>``, the attention
    entropy over its maximum log t, rows 2..T."""
    T = tokens.shape[1]
    with torch.no_grad():
        _, rec = model(tokens, record=True)
    off = ~torch.eye(T, dtype=torch.bool)
    out = {}
    for l, r in enumerate(rec, start=1):
        v, A = r["values"][:, 0], r["attention"][:, 0]
        tr = torch.einsum("ijdd->ij", cross_token_covariance(v.double()))
        diag = torch.diagonal(tr)
        out[f"corr{l}"] = float((tr / torch.sqrt(diag[:, None] * diag[None]))[off].mean())
        out[f"cmf{l}"] = float(tr.sum() / (T * diag.sum()))
        out[f"ent{l}"] = float((attention_entropy(A)[:, 1:] / torch.log(torch.arange(2, T + 1, dtype=A.dtype))).mean())
    return out


def train(sampler: Callable[[int, int], torch.Tensor], seed: int, *, steps: int,
          evaluate: Callable[[int, TinyLM], dict] | None = None, every: int = 50) -> tuple[TinyLM, list[dict]]:
    """Train :data:`MODEL` (initialised from ``seed``, float64) for ``steps`` Adam steps (lr 3e-3) on batches of
    64 sequences ``sampler(64, step)``; returns the model and the records of ``evaluate``."""
    model = TinyLM(MODEL, generator=seed).double()

    def batch(step):
        tok = sampler(64, step)
        return tok[:, :-1], tok[:, 1:]

    log = fit(model, batch, steps=steps, optimizer=torch.optim.Adam(model.parameters(), lr=3e-3),
              evaluate=evaluate, every=every)
    return model, log


def final_metrics(model: TinyLM, pi: torch.Tensor, seed: int, groups: int = 8) -> dict[str, Estimate]:
    """:func:`value_metrics` as batch means over ``groups`` independent groups of 256 i.i.d.-token sequences
    (seeds ``seed, seed + 1, ...``)."""
    rows = [value_metrics(model, iid_tokens(pi, 256, seed + k)) for k in range(groups)]
    return {k: estimate(torch.tensor([r[k] for r in rows], dtype=torch.float64)) for k in rows[0]}


def run_seed(seed: int, steps: int = STEPS) -> dict:
    """One training seed on the two-topic mixture: the mean layer-2 value correlation on independent tokens at
    initialisation and after ``steps`` steps (with its SE over 8 groups of 256 sequences), and the layer-1 control."""
    chains = topics()
    pi = 0.5 * (chains[0].stationary + chains[1].stationary)
    model, _ = train(lambda n, step: sample_mixture(chains, n, step), seed, steps=steps)
    init = value_metrics(TinyLM(MODEL, generator=seed).double(), iid_tokens(pi, 512, 20_000 + seed))["corr2"]
    final = final_metrics(model, pi, 30_000)
    return dict(seed=int(seed), init_corr2=init, corr2=float(final["corr2"].mean),
                corr2_se=float(final["corr2"].stderr), corr1=float(final["corr1"].mean), corr1_se=float(final["corr1"].stderr))


def run(seeds=SEEDS, steps: int = STEPS, *, command: str = "python -m sigprop.experiments aghajanyan-sec9",
        progress=None) -> dict:
    """Every seed of :func:`run_seed`: ``{"provenance", "setting", "seeds": [...]}`` (JSON-ready)."""
    rows = []
    for seed in seeds:
        rows.append(run_seed(seed, steps))
        if progress:
            progress(f"seed {seed}: layer-2 correlation {rows[-1]['init_corr2']:.3f} -> {rows[-1]['corr2']:.4f}")
    return dict(provenance=provenance(command, seeds=[int(s) for s in seeds]),
                setting=dict(steps=steps, task="two-topic Markov mixture", lr=3e-3, batch=64), seeds=rows)


def load(name: str = RECORD) -> dict:
    """The committed record (a dict: ``provenance``, ``setting``, ``seeds``)."""
    path = resources.files(__package__) / "records" / f"{name}.json"
    if not path.is_file():
        raise FileNotFoundError(f"no record {name!r} in sigprop/experiments/records: run `python -m "
                                "sigprop.experiments aghajanyan-sec9 --out <sigprop/experiments/records>/"
                                "aghajanyan2025_sec9_record.json`")
    return json.loads(path.read_text())
