r"""Does LocATER improve validation perplexity? Bao, Hataya & Karakida 2024, Sec. 7, Fig. 6(D), in the book's
miniature, over training seeds.

The page ``chapters/bao2024/04_locater_training`` trains one seed of a one-layer post-LN causal LM
(:class:`sigprop.TinyLM`, ``d = 32``, ``T = 32``, 400 AdamW steps) on a lag-4 Markov language, with and without the
LocATER penalty :func:`sigprop.locater_penalty` (``kappa_1 = 100``, ``kappa_2 = 1``), and reads the ratio of the two
final validation perplexities. One training run is not a measurement of that ratio: the same seed on another CPU
kernel ends a few per cent elsewhere (training amplifies the last bit). :func:`run` trains both arms for each of
:data:`SEEDS` (paired: the same initialisation and data for both arms of a seed) and records every seed's
perplexities and ratio with provenance; the claims ledger (``bao2024-sec7-locater-perplexity``) reads the mean
ratio over seeds with its standard error (:func:`~._seeds.seed_summary`), and the page and
``tests/test_training_records.py`` check a fresh seed against the recorded spread.

``python -m sigprop.experiments locater [--out FILE]`` (about a minute on two CPU cores) writes the record
``records/bao2024_locater_record.json``; :func:`load` reads it.
"""
from __future__ import annotations

import json
from importlib import resources

import torch
import torch.nn.functional as F

import sigprop as sp

from ._provenance import provenance

__all__ = ["LOCATER_RUN", "SEEDS", "RECORD", "locater_run", "run", "load"]

#: The page's quick-profile experiment: the same model, language, optimiser and seeds, so the page shows these runs.
LOCATER_RUN = dict(vocab=16, lag=4, concentration=0.1, d=32, T=32, steps=400, batch=32, lr=3e-3, pool=64 * 32,
                   kappa1=100.0, kappa2=1.0)
#: Training seeds of the record (seed 0 is the page's run).
SEEDS = tuple(range(8))
#: Name of the committed record (``records/<RECORD>.json``).
RECORD = "bao2024_locater_record"


def locater_run(kappa1: float, kappa2: float, *, seed: int = 0) -> float:
    """Page 4's quick experiment with LocATER ``(kappa1, kappa2)``: final validation perplexity (positions >= lag).
    ``lag`` interleaved copies of a Markov chain: token ``t+1`` depends on token ``t+1-lag`` only. The model's
    initialisation and its training batches come from ``seed``; the language and the validation set are fixed."""
    c = LOCATER_RUN
    source = sp.MarkovSource(c["vocab"], concentration=c["concentration"], generator=0)

    def lagged(n, generator):
        chains = source.sample(n * c["lag"], -(-(c["T"] + 1) // c["lag"]), generator=generator)
        return chains.reshape(n, c["lag"], -1).transpose(1, 2).reshape(n, -1)[:, :c["T"] + 1]

    model = sp.TinyLM(sp.LMConfig(vocab=c["vocab"], T=c["T"], d=c["d"], norm="post", causal=True, out_proj=True,
                            ln_center=True, ln_affine=True), generator=seed)
    g = torch.Generator().manual_seed(seed + 1)
    pool, val = lagged(c["pool"], g), lagged(256, torch.Generator().manual_seed(999))

    def batch(step):
        xb = pool[torch.randint(len(pool), (c["batch"],), generator=g)]
        return xb[:, :-1], xb[:, 1:]

    def ce(m):
        logits = m(val[:, :-1])[:, c["lag"] - 1:]
        return F.cross_entropy(logits.reshape(-1, c["vocab"]), val[:, c["lag"]:].reshape(-1))

    opt = torch.optim.AdamW(model.parameters(), lr=c["lr"], weight_decay=0.01)
    log = sp.fit(model, batch, steps=c["steps"], optimizer=opt, every=c["steps"],
              evaluate=lambda step, m: dict(val_ppl=float(ce(m).exp())),
              penalty=lambda m: sp.locater_penalty(m.w_q[0, 0], m.w_k[0, 0], kappa1=kappa1, kappa2=kappa2))
    return log[-1]["val_ppl"]


def run(seeds=SEEDS, *, command: str = "python -m sigprop.experiments locater", progress=None) -> dict:
    """Both arms for every seed: ``{"provenance", "setting", "seeds": [{seed, ppl_none, ppl_locater, ratio}]}``."""
    rows = []
    for seed in seeds:
        none = locater_run(0.0, 0.0, seed=seed)
        loc = locater_run(LOCATER_RUN["kappa1"], LOCATER_RUN["kappa2"], seed=seed)
        rows.append(dict(seed=int(seed), ppl_none=none, ppl_locater=loc, ratio=loc / none))
        if progress:
            progress(f"seed {seed}: perplexity {loc:.3f} with LocATER, {none:.3f} without, ratio {loc / none:.3f}")
    return dict(provenance=provenance(command, seeds=[int(s) for s in seeds]), setting=dict(LOCATER_RUN), seeds=rows)


def load(name: str = RECORD) -> dict:
    """The committed record (a dict: ``provenance``, ``setting``, ``seeds``)."""
    path = resources.files(__package__) / "records" / f"{name}.json"
    if not path.is_file():
        raise FileNotFoundError(f"no record {name!r} in sigprop/experiments/records: run `python -m sigprop.experiments "
                                "locater --out <sigprop/experiments/records>/bao2024_locater_record.json`")
    return json.loads(path.read_text())
