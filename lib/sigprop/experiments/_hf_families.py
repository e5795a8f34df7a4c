r"""Predictions for today's HF families against Monte Carlo of the HF models themselves (issues 32, 33, 34): the
committed record ``records/hf_families_record.json`` and its replay.

For every family of :data:`FAMILIES` (built from its config at width 128, 6 blocks, 8 heads of 16; windows of 8 keys where
the family has them, so that they act at ``T = 32``) and two initialisation scales (the family's default
``initializer_range`` and 0.3, where QK-norm and logit scales show), the model is drawn :data:`INITS` times by its
*own* initialiser (``model.apply(model._init_weights)`` under a seed; the q/k-bias case by :func:`sigprop.reinitialise`
with bias variances, since HF initialises biases to zero), fed 2 sequences of 32 equicorrelated tokens of cosine 0.2
(:func:`sigprop.mc_model_cosine`: the mean cosine after each block, per draw), and :func:`sigprop.read_init` of the
first draw predicts the curve (:meth:`sigprop.ModelInit.predict`, the Gram-matrix map where the model is causal, has
RoPE, a cap or per-block windows, 1024 logit draws). The record keeps the per-draw curves, the prediction, the config
read and the curve-level test (level 0.001, 9999 sign-flip resamples over blocks 1..6).

``python -m sigprop.experiments hf-families [--out FILE]`` re-records (a few CPU-minutes); run it when the reader
changes. ``tests/test_hf_families.py`` replays the record: the curve test from the recorded curves, and each family
read again and compared with the recorded config (architecture equal, variances within 6 relative standard errors of
a mean square, ``6 sqrt(2 / entries)``), so a change of reading is caught without the Monte Carlo.
"""
from __future__ import annotations

import dataclasses
import json
import math
import pathlib

import numpy as np
import torch

from ..block import BlockConfig
from ..models._montecarlo import mc_model_cosine
from ..models._real import read_init
from ..models._reinit import reinitialise
from ..stats._agreement import curve_agreement
from ._provenance import provenance

__all__: list[str] = []

RECORD = pathlib.Path(__file__).parent / "records" / "hf_families_record.json"
D, DEPTH, HEADS, T, INITS, SEQS, RHO0, WINDOW = 128, 6, 8, 32, 16, 2, 0.2, 8
SCALES = ("default", 0.3)
LEVEL, RESAMPLES = 1e-3, 9999

_LLAMA = dict(hidden_size=D, intermediate_size=2 * D, num_hidden_layers=DEPTH, num_attention_heads=HEADS,
              vocab_size=8, max_position_embeddings=128)
_BERT = dict(hidden_size=D, intermediate_size=2 * D, num_hidden_layers=DEPTH, num_attention_heads=HEADS, vocab_size=8,
             max_position_embeddings=128)
_VIT = dict(hidden_size=D, intermediate_size=2 * D, num_hidden_layers=DEPTH, num_attention_heads=HEADS, image_size=16,
            patch_size=8)
#: name -> (HF config/model class stem, config fields); "qk_bias" is drawn by sigprop.reinitialise (module docstring).
FAMILIES = {
    "llama": ("Llama", dict(_LLAMA, num_key_value_heads=2)),
    "qwen2": ("Qwen2", dict(_LLAMA, num_key_value_heads=2)),
    "mistral": ("Mistral", dict(_LLAMA, num_key_value_heads=2, sliding_window=WINDOW)),
    "gpt_neox": ("GPTNeoX", dict(_LLAMA, rotary_pct=0.5)),
    "vit": ("ViT", _VIT),
    "deit": ("DeiT", _VIT),
    "bert": ("Bert", _BERT),
    "roberta": ("Roberta", dict(_BERT, pad_token_id=1)),
    "gpt2": ("GPT2", dict(n_embd=D, n_layer=DEPTH, n_head=HEADS, vocab_size=8, n_positions=128)),
    "stablelm": ("StableLm", dict(_LLAMA, num_key_value_heads=HEADS)),
    "gemma": ("Gemma", dict(_LLAMA, num_key_value_heads=2, head_dim=16)),
    "granite": ("Granite", dict(_LLAMA, num_key_value_heads=HEADS, residual_multiplier=0.22, attention_multiplier=0.1)),
    "olmo": ("Olmo", dict(_LLAMA, num_key_value_heads=HEADS, pad_token_id=1)),
    "phi3": ("Phi3", dict(_LLAMA, num_key_value_heads=HEADS, sliding_window=WINDOW, pad_token_id=1)),
    "head_dim": ("Mistral", dict(_LLAMA, num_key_value_heads=2, head_dim=24)),        # heads x 24 = 192 != 128
    "qk_bias": ("Qwen2", dict(_LLAMA, num_key_value_heads=HEADS)),
    "qwen3": ("Qwen3", dict(_LLAMA, num_key_value_heads=2, head_dim=16)),
    "olmo2": ("Olmo2", dict(_LLAMA, num_key_value_heads=HEADS, pad_token_id=1)),
    "gemma2": ("Gemma2", dict(_LLAMA, num_key_value_heads=2, head_dim=16, sliding_window=WINDOW)),
    "gemma3": ("Gemma3Text", dict(_LLAMA, num_key_value_heads=2, head_dim=16, sliding_window=WINDOW,
                                  sliding_window_pattern=2)),
    "bloom": ("Bloom", dict(hidden_size=D, n_layer=DEPTH, n_head=HEADS, vocab_size=8)),
    "falcon": ("Falcon", dict(_LLAMA, new_decoder_architecture=True, num_kv_heads=2)),
    "mixtral": ("Mixtral", dict(_LLAMA, num_key_value_heads=2, num_local_experts=8, num_experts_per_tok=2)),
    "qwen3_moe": ("Qwen3Moe", dict(_LLAMA, num_key_value_heads=2, head_dim=16, num_experts=8, num_experts_per_tok=2,
                                   moe_intermediate_size=D, norm_topk_prob=True)),
}


def build(name: str, scale="default"):
    """The family's model in eval mode at the record's sizes, with ``initializer_range = scale`` unless default."""
    import transformers as tf
    stem, fields = FAMILIES[name]
    cfg_cls = getattr(tf, stem + "Config")
    kw = dict(fields)
    if scale != "default":
        kw["initializer_range"] = float(scale)
    cfg = cfg_cls(**kw)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return getattr(tf, stem + "Model")(cfg).eval()


def own_initialiser(model, seed):
    """A fresh draw of the model's library initialisation (HF's ``_init_weights`` on every module)."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model.apply(model._init_weights)
    return model


def _bias_config(model, scale):
    """The q/k-bias case: the model's own reading with query/key biases of variance 1 and 0.25 (HF initialises
    biases to zero), and ``scale`` read as the weights' standard deviation."""
    c = read_init(model).config
    s2 = (0.02 if scale == "default" else float(scale)) ** 2
    return dataclasses.replace(c, sigma_qk2=s2, sigma_bqk2=1.0, sigma_bk2=0.25, sigma_v2=s2 * D, sigma_o2=s2 * D,
                               sigma_w2=s2 * D, sigma_w2_out=s2 * c.hidden)


def run_one(name: str, scale, generator: int = 0) -> dict:
    """One family at one scale (module docstring) -> a record entry."""
    model = build(name, scale)
    init = _bias_config(model, scale) if name == "qk_bias" else own_initialiser
    est = mc_model_cosine(model, init, T=T, inits=INITS, seqs=SEQS, rho0=RHO0, generator=generator)
    if name == "qk_bias":
        reinitialise(model, init, generator=0)
    else:
        own_initialiser(model, 0)
    read = read_init(model)
    pred = read.predict(float(est.mean[0]), T=T, samples=1024, generator=0)
    check = curve_agreement(est.samples[:, 1:], pred[1:], level=LEVEL, n_resamples=RESAMPLES)
    z = (est.mean.numpy() - pred) / np.where(est.stderr.numpy() > 0, est.stderr.numpy(), np.inf)
    return dict(family=name, scale=scale, samples=est.samples.tolist(), prediction=pred.tolist(), p=check.p,
                passed=bool(check.passed), max_abs_z=float(np.abs(z[1:]).max()), config=config_fields(read.config),
                depth=read.depth, proof_error=read.proof.error)


def config_fields(config: BlockConfig) -> dict:
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(config).items()}


#: The width ladder of the finite-width gap: Llama at the record's scale 0.3, the same variances per unit width
#: (``initializer_range = 0.3 sqrt(128 / d)``) at d = 64, 128, 256 (heads of 16).
LADDER = (64, 128, 256)


def run_ladder(generator: int = 0) -> list:
    """Llama's last-block gap (Monte Carlo minus prediction, with its SE) at each width of :data:`LADDER`."""
    import transformers as tf
    rows = []
    for d in LADDER:
        cfg = tf.LlamaConfig(**dict(FAMILIES["llama"][1], hidden_size=d, intermediate_size=2 * d,
                                    num_attention_heads=d // 16, num_key_value_heads=d // 32,
                                    initializer_range=0.3 * math.sqrt(D / d)))
        with torch.random.fork_rng():
            torch.manual_seed(0)
            model = tf.LlamaModel(cfg).eval()
        est = mc_model_cosine(model, own_initialiser, T=T, inits=INITS, seqs=SEQS, rho0=RHO0, generator=generator)
        pred = read_init(own_initialiser(model, 0)).predict(float(est.mean[0]), T=T, samples=1024, generator=0)
        rows.append(dict(d=d, gap=float(est.mean[-1]) - float(pred[-1]), stderr=float(est.stderr[-1])))
    return rows


def run(out=RECORD, *, families=None) -> dict:
    """Every family at both scales, and the width ladder; writes the record ``out`` (module docstring); with
    ``families``, only those are re-run and replace theirs in the existing record."""
    import transformers as tf
    entries = [run_one(n, s) for n in (families or FAMILIES) for s in SCALES]
    if families and pathlib.Path(out).exists():
        entries = [e for e in load(out)["entries"] if e["family"] not in families] + entries
        entries.sort(key=lambda e: (list(FAMILIES).index(e["family"]), SCALES.index(e["scale"])))
    old = load(out) if families and pathlib.Path(out).exists() else None
    ladder = old["ladder"] if old else run_ladder()
    history = (old.get("history", []) + [old["provenance"]]) if old else []   # the runs that made the other entries
    record = dict(entries=entries, ladder=ladder, history=history,
                  sizes=dict(d=D, depth=DEPTH, heads=HEADS, T=T, inits=INITS, seqs=SEQS, rho0=RHO0,
                             window=WINDOW, level=LEVEL, n_resamples=RESAMPLES),
                  provenance=provenance("python -m sigprop.experiments hf-families" + (
                      " --family " + " ".join(families) if families else ""), transformers=tf.__version__))
    pathlib.Path(out).write_text(json.dumps(record, indent=1) + "\n")
    return record


def load(path=RECORD) -> dict:
    return json.loads(pathlib.Path(path).read_text())


def variance_tolerance(field: str, config: BlockConfig, depth: int) -> float:
    """Six relative standard errors of a mean square pooled over ``depth`` blocks (``sqrt(2 / entries)``)."""
    d, f = config.d, config.hidden
    hv, kv = config.heads * config.value_dim, config.group_count * config.head_dim
    entries = {"sigma_qk2": d * kv, "sigma_v2": d * config.group_count * config.value_dim, "sigma_o2": d * hv,
               "sigma_w2": 2 * d * f if config.gated else d * f, "sigma_w2_out": d * f}
    return 6 * math.sqrt(2 / (entries.get(field, d) * depth))
