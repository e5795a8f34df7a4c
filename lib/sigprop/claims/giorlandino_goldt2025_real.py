"""Claims of Giorlandino & Goldt 2025 about off-the-shelf transformers, measured on HuggingFace models
(chapter ``real-transformers``); the document's other rows are in :mod:`sigprop.claims.giorlandino_goldt2025`.

The paper says its algorithm predicts signal propagation "through deep, off-the-shelf transformers at
initialisation" (Fig. 1(d) uses a BERT). Each row builds a ``transformers.BertModel`` from its config (nothing is
downloaded; ``transformers`` is the ``notebooks`` extra), writes an initialisation into it with
:func:`sigprop.reinitialise` and measures it with :func:`sigprop.probe`. Quick-profile sizes, 1-15 s a row.
"""
from __future__ import annotations

import functools

import torch

import sigprop as sp

from . import Measured, claim

DOC = "giorlandino-goldt2025"
PAPER = sp.presets.GG_APP_C1

# ---------------------------------------------------------------- off-the-shelf transformers (HuggingFace)

_REAL_T, _REAL_D, _REAL_HEADS, _REAL_INITS, _REAL_SEQS = 64, 128, 2, 16, 2
_REAL_SCALE = {"measured": {"T": _REAL_T, "d": _REAL_D, "heads": _REAL_HEADS, "inits": _REAL_INITS},
               "paper": {"d": 600, "heads": 6, "inits": 10}}


@functools.lru_cache(maxsize=2)
def _real_bert(depth):
    """A HuggingFace BertModel built from its config: post-LN, ReLU, feed-forward width d (the authors' code)."""
    import transformers

    transformers.logging.set_verbosity_error()
    cfg = transformers.BertConfig(hidden_size=_REAL_D, num_hidden_layers=depth, num_attention_heads=_REAL_HEADS,
                                  intermediate_size=_REAL_D, hidden_act="relu", vocab_size=2,
                                  max_position_embeddings=_REAL_T, attn_implementation="eager")
    with torch.random.fork_rng(devices=[]):     # its own initialiser draws from torch's global RNG; sp.reinitialise
        return transformers.BertModel(cfg, add_pooling_layer=False).eval()   # overwrites it: leave the global alone


def _real_block(beta, alpha_sa, *, w_o):
    """App. C.1 variances at Result 1's beta, value bias sigma_b^2 (the authors' networks); W_O at sigma_w^2 if w_o."""
    extra = dict(sigma_o2=PAPER["sigma_w2"], sigma_bo2=PAPER["sigma_b2"]) if w_o else {}
    return sp.BlockConfig.from_beta(beta, T=_REAL_T, d=_REAL_D, heads=_REAL_HEADS, d_ff=_REAL_D, alpha_sa=alpha_sa,
                                    sigma_bv2=PAPER["sigma_b2"], ln_center=True, **PAPER, **extra)


def _real_bert_curve(config, depth, seed):
    """Mean cosine after each block of the BertModel: Estimate over re-initialisations (sp.reinitialise), tokens
    of cosine 0.1 (sp.mc_model_cosine: initialisation i draws with seed 1000 seed + i, its tokens with + 500)."""
    return sp.mc_model_cosine(_real_bert(depth), config, T=_REAL_T, inits=_REAL_INITS, seqs=_REAL_SEQS, rho0=0.1,
                              generator=seed)


def _real_compare(depth, beta, alpha, *, w_o, seed):
    """(measured cosine after ``depth`` blocks, SE, Algorithm 1 as printed, the finite-T map of this block)."""
    cfg = _real_block(beta, alpha, w_o=w_o)
    est = _real_bert_curve(cfg, depth, seed=seed)
    r0 = float(est.mean[0])
    q, p = sp.theory.iterate_block_map(1.0, r0, depth, beta=beta, alpha_sa=alpha, **PAPER)   # as printed
    qf, pf = sp.theory.iterate_block_map(1.0, r0, depth, cfg, T=_REAL_T)                      # this block, finite T
    return float(est.mean[-1]), float(est.stderr[-1]), p[-1] / q[-1], pf[-1] / qf[-1]


@claim(id="gg2025-real-bert-spread", document=DOC, source="Fig. 1(d); Sec. 1 ('off-the-shelf transformers')",
       claim=r"A HuggingFace BertModel with the authors' architecture (no $W_O$, value bias) at the App. C.1 "
             r"initialisation ($\beta=0.5$, $\alpha_{SA}=1$) follows Algorithm 1 over 24 blocks.",
       scale={"measured": {**_REAL_SCALE["measured"], "depth": 24}, "paper": {**_REAL_SCALE["paper"], "depth": 60}})
def _real_bert_spread():
    depth = 24
    measured, se, stated, corrected = _real_compare(depth, 0.5, 1.0, w_o=False, seed=0)
    return Measured(stated=stated, measured=measured, stderr=se, tolerance=4 * se, corrected=corrected,
                    note=f"mean cosine after block {depth}; T = {_REAL_T}, d = {_REAL_D}, {_REAL_HEADS} heads, "
                         f"{_REAL_INITS} re-initialisations x {_REAL_SEQS} sequences; tolerance 4 SE; corrected = "
                         "finite-T map of this block (value bias included)")


@claim(id="gg2025-real-bert-condensed", document=DOC, source="Fig. 1(e); Algorithm 1",
       claim=r"A HuggingFace BertModel with the authors' architecture at $\beta=1.8$ ($\alpha_{SA}=1$) "
             r"follows Algorithm 1 over 12 blocks.",
       nature="approximation", expected="approximation",
       scale={"measured": {**_REAL_SCALE["measured"], "depth": 12}, "paper": {**_REAL_SCALE["paper"], "depth": 12}})
def _real_bert_condensed():
    depth = 12
    measured, se, stated, corrected = _real_compare(depth, 1.8, 1.0, w_o=False, seed=1)
    return Measured(stated=stated, measured=measured, stderr=se, tolerance=4 * se, corrected=corrected,
                    note=f"mean cosine after block {depth}; T = {_REAL_T}, d = {_REAL_D}; tolerance 4 SE; stated = "
                         "Algorithm 1 (T -> infinity), corrected = finite-T map of this block: the condensed-phase "
                         "IPR reaches its limit slowly (roughly like 1/log T); the chapter shows a further finite-width gap at deeper blocks "
                         "that shrinks with d")


@claim(id="gg2025-real-bert-output-projection", document=DOC, source="Fig. 1(d); Algorithm 1; App. C.1",
       claim=r"Algorithm 1 describes a vanilla HuggingFace BertLayer (with its output projection $W_O$, App. C.1 "
             r"variances, $\beta=0.5$, $\alpha_{SA}=1$) over 24 blocks.",
       nature="condition", expected="missing-hypothesis",
       scale={"measured": {**_REAL_SCALE["measured"], "depth": 24}, "paper": {**_REAL_SCALE["paper"], "depth": 60}})
def _real_bert_output_projection():
    depth = 24
    measured, se, stated, corrected = _real_compare(depth, 0.5, 1.0, w_o=True, seed=2)
    return Measured(stated=stated, measured=measured, stderr=se, tolerance=4 * se, corrected=corrected,
                    note="Algorithm 1 holds for blocks without an output projection (the authors' networks remove it); "
                         "a random W_O with entries sigma_O^2/d multiplies the attention branch by sigma_O^2 = 0.2 here. "
                         f"Mean cosine after block {depth}; T = {_REAL_T}, d = {_REAL_D}; tolerance 4 SE; corrected = "
                         "the block map with sigma_O^2 (sp.theory.iterate_block_map of the read config)")
