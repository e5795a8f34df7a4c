"""Published settings, typed once: ``sp.presets.<NAME>``.

Each preset is the setting a document states (with its source), as a plain dict of keyword arguments
for the function named in its comment, so that ``sp.BlockConfig(d=128, **sp.presets.GG_APP_C1)`` or
``sp.theory.iterate_block_map(1.0, 0.1, 60, beta=0.1, **sp.presets.GG_APP_C1)`` reads as the paper
does. Vary one entry with ``{**PRESET, "sigma_v2": 2.0}``. Where the book departs from a document's
setting (a miniature, a value the document does not state), the page says so next to the figure.
"""
from __future__ import annotations

from types import MappingProxyType

__all__ = [
    "GG_APP_C1",
    "GG_TANH_D2",
    "AGHAJANYAN_SEC8",
    "AGHAJANYAN_SEC8_SEED",
    "BAO_FIG5",
    "NOCI_APP_C1",
    "NOCI_SEC32",
    "LLAMA_BLOCK",
    "QWEN2_BLOCK",
    "GPT_NEOX_BLOCK",
    "PUBLISHED_2026",
]

#: Giorlandino & Goldt 2025, App. C.1 (Figs. 1(c)-(e), 2, 4): block variances of every deep-transformer
#: figure; ``sigma_v^2 = sigma_w^2``. For :class:`sigprop.BlockConfig` and :func:`sigprop.theory.block_map`.
GG_APP_C1 = MappingProxyType(dict(sigma_w2=0.2, sigma_b2=0.0004, sigma_v2=0.2, alpha_mlp=1.0))

#: Giorlandino & Goldt 2025, App. D.2 (Fig. 6): the tanh MLP with a fixed point; ``sigma_w`` is 1.0 or 2.5
#: (``sigma_w2 = 1`` or ``6.25``), ``alpha_SA = 6``; ``sigma_v^2 = 1`` is not stated in the paper (our choice).
GG_TANH_D2 = MappingProxyType(dict(sigma_b2=0.1, sigma_v2=1.0, alpha_mlp=1.0, alpha_sa=6.0, activation="tanh"))

#: Aghajanyan 2025, Section 8: one single-head layer, N = 8 tokens, d = 32, d_k = d_v = 16, 2000 input samples
#: per initialisation. For :func:`sigprop.mc_value_correlation`.
AGHAJANYAN_SEC8 = MappingProxyType(dict(n_tokens=8, d=32, d_k=16, d_v=16, samples=2000))
#: The post's seed for its single-initialisation numbers (Section 8); "seeds 0 through 49" for the spread.
AGHAJANYAN_SEC8_SEED = 42

#: Bao, Hataya & Karakida 2024, Fig. 5: W_QK = B diag(w) B^T with w ~ N(mean, scale^2), d = 128, T = 40,
#: lambda = sqrt(d), 300 random walks x 10 draws of W_QK per cell; anisotropic Sigma = R^T R / d with
#: R_ab ~ Unif(-2.5, 2.5).
BAO_FIG5 = MappingProxyType(dict(d=128, T=40, means=(0.0, 0.05, 0.2, 0.5), scales=(0.01, 0.1, 0.5), walks=300,
                                 draws=10, anisotropic_range=(-2.5, 2.5)))

#: Noci et al. 2022, App. C.1 (Fig. 5): the sequence-reversal toy task: 20 digits 0-9, a 5-block post-LN
#: encoder of width 16, one head, ReLU feed-forward of width 16, Adam(0.9, 0.999) at learning rate 0.01,
#: batches of 64 fresh sequences. For :class:`sigprop.LMConfig` and the chapter's training page.
NOCI_APP_C1 = MappingProxyType(dict(T=20, vocab=10, d=16, depth=5, heads=1, d_ff=16, lr=0.01, batch=64))

#: Noci et al. 2022, Sec. 3.2 (Lemmas 3.2-3.3, Theorem 3.3; Figs. 3(a), 4, 8, 10): the block of the depth analysis,
#: ``X + alpha_1 S``, then ``Z + alpha_2 Z W_1 W_2`` with a linear MLP of two d x d matrices of variance 1/d and no
#: layer norm; values of variance 1/d; attention exactly uniform (Assumption 3.1: logit scale 0). The branch
#: weights ``branch_sa`` (alpha_1), ``branch_mlp`` (alpha_2) and ``d`` are the caller's; real softmax attention with
#: Xavier query/key weights is ``{**NOCI_SEC32, "logit_scale": None}``. For :class:`sigprop.BlockConfig`.
NOCI_SEC32 = MappingProxyType(dict(norm="none", activation="linear", sigma_w2=1.0, sigma_v2=1.0, sigma_b2=0.0,
                                   logit_scale=0.0))

#: The block architecture of Llama (Touvron et al. 2023; HF ``LlamaConfig`` defaults, also Mistral): pre-RMSNorm,
#: causal, rotary embeddings (theta 10^4, every dimension), SwiGLU MLP, an output projection; no biases. Widths,
#: heads (``kv_heads`` for grouped-query models) and variances come from the model (``sp.read_init``). For
#: :class:`sigprop.BlockConfig`.
LLAMA_BLOCK = MappingProxyType(dict(norm="pre", ln_center=False, causal=True, positions="rope", rope_theta=10000.0,
                                    activation="silu", gated=True))

#: Qwen2 (HF ``Qwen2Config``): Llama's block with query/key/value biases (``sigma_bqk2``, ``sigma_bv2``; HF
#: initialises them at zero) and rope_theta 10^4 by default.
QWEN2_BLOCK = LLAMA_BLOCK

#: GPT-NeoX (Black et al. 2022; HF ``GPTNeoXConfig`` defaults, Pythia): parallel residuals
#: ``x + SA(LN x) + MLP(LN' x)``, centred LayerNorm, rotary embeddings on a quarter of each head
#: (``rotary_pct = 0.25``), exact GELU, causal, biases everywhere (zero at initialisation).
GPT_NEOX_BLOCK = MappingProxyType(dict(norm="pre", parallel=True, ln_center=True, causal=True, positions="rope",
                                       rope_theta=10000.0, rope_fraction=0.25, activation="gelu"))

#: The blocks of 2026 at their published shapes (each model's ``config.json`` on the HuggingFace hub, read for the
#: book; nothing is downloaded at run time): architecture fields of :class:`sigprop.BlockConfig` at the published
#: width, and ``depth``. Every one initialises each linear layer (router included) from ``N(0, 0.02^2)``:
#: :func:`sigprop.course.published_block` turns an entry into the config of that default initialisation.
#: Windows and per-layer rotary bases are listed but the diagrams' ``T -> infinity`` maps leave them out.
PUBLISHED_2026 = MappingProxyType({
    # Qwen3-0.6B: QK-norm per head, head_dim 128 > 1024 / 16
    "Qwen3-0.6B": MappingProxyType(dict(d=1024, heads=16, kv_heads=8, d_k=128, d_v=128, d_ff=3072, depth=28,
                                        qk_norm="head", **{**LLAMA_BLOCK, "rope_theta": 1e6})),
    # Gemma-3-1B (text): sandwich norms, QK-norm, GeGLU (tanh), 1 key/value head of 256; 5 local layers (window
    # 512, base 10^4) to 1 global (base 10^6); logit scale query_pre_attn_scalar^-1/2 = 1/16
    "Gemma-3-1B": MappingProxyType(dict(d=1152, heads=4, kv_heads=1, d_k=256, d_v=256, d_ff=6912, depth=26,
                                        norm="pre", ln_center=False, causal=True, positions="rope", rope_theta=1e6,
                                        activation="gelu_tanh", gated=True, branch_norm=True, qk_norm="head",
                                        logit_scale=1 / 16)),
    # OLMo-2-0425-1B: a norm after each branch and none before; QK-norm over the whole projection
    "OLMo-2-1B": MappingProxyType(dict(d=2048, heads=16, d_ff=8192, depth=16, norm="none", ln_center=False,
                                       causal=True, positions="rope", rope_theta=5e5, activation="silu", gated=True,
                                       branch_norm=True, qk_norm="all")),
    # Mixtral-8x7B: 8 experts, 2 per token (weights renormalised)
    "Mixtral-8x7B": MappingProxyType(dict(d=4096, heads=32, kv_heads=8, d_ff=14336, depth=32, experts=8, top_k=2,
                                          norm_topk=True, **{**LLAMA_BLOCK, "rope_theta": 1e6})),
    # Qwen3-30B-A3B: 128 experts, 8 per token (norm_topk_prob), QK-norm per head
    "Qwen3-30B-A3B": MappingProxyType(dict(d=2048, heads=32, kv_heads=4, d_k=128, d_v=128, d_ff=768, depth=48,
                                           experts=128, top_k=8, norm_topk=True, qk_norm="head",
                                           **{**LLAMA_BLOCK, "rope_theta": 1e6})),
})
