r"""What a block of an off-the-shelf transformer is made of, read from its modules: :func:`describe_block`.

A block is matched **structurally**, by the attribute paths of its parts (a *layout*), not by its class, so
families that share a layer share a layout:

==========  =====================================================  ========================================
layout      families (HF classes unless said)                      parts
==========  =====================================================  ========================================
``llama``   Llama, Qwen2, Qwen3, Mistral, Gemma, Granite, OLMo,    pre-norm, RoPE, grouped-query heads, gated
            StableLM (``*DecoderLayer``)                           MLP (``gate/up/down_proj``; SwiGLU, GeGLU),
                                                                   QK-norm per head (Qwen3)
``sandwich``  Gemma2, Gemma3                                       ``llama``'s parts and a norm after each branch
                                                                   (``post_*``), QK-norm (Gemma3), soft-cap
``olmo2``   OLMo2                                                  a norm after each branch only, QK-norm over
                                                                   the whole projection
``moe``     Mixtral, Qwen3-MoE (``mlp.gate`` and ``mlp.experts``;   ``llama``'s attention, a router and experts
            4.x: ``block_sparse_moe``, experts in a list)          (gated MLPs), top-k routing
``phi3``    Phi3 (fused ``qkv_proj``, ``gate_up_proj``)            as ``llama``
``neox``    GPT-NeoX (``GPTNeoXLayer``)                            LayerNorm pre-LN, partial RoPE, fused
                                                                   head-interleaved ``query_key_value``,
                                                                   parallel or sequential residual
``bert``    BERT, RoBERTa (``BertLayer``, ``RobertaLayer``)         post-LN, ``attention.self.query/key/value``
``vit``     ViT, DeiT 4.x (``attention.attention.query``) and       pre-LN LayerNorm, non-causal
            5.x (``attention.q_proj``)
``bloom``   Bloom                                                  pre-LN, fused head-interleaved projection,
                                                                   ALiBi, causal
``falcon``  Falcon (all three fused layouts: per head, multi-query,  pre-LN, parallel or sequential, RoPE or
            grouped per key/value head)                            ALiBi, one or two norms when parallel
``gpt2``    GPT-2 (``GPT2Block``, ``Conv1D`` stored ``(in, out)``)  pre-LN, fused ``c_attn``, causal
``torch``   ``torch.nn.TransformerEncoderLayer``                    either ``norm_first``, packed ``in_proj``
==========  =====================================================  ========================================

**A reading is a claim** (issue 32): every parameter of the block must be given a role (a projection, a
normalisation's gain or bias) and every buffer a known one (rotary frequencies, a causal-mask buffer); a parameter
left over (QK-norm's ``q_norm``, Gemma2's ``pre_feedforward_layernorm``, experts and routers, ...) or an attention
option that changes the forward and is not modelled (logit soft-capping, clipped queries and keys) is refused,
naming it. What is read is then proved by replay (``sigprop.models._replay``).

Weights and normalisations are read as ``sigprop.models._parts`` says: views of the parameters in ``nn.Linear``'s
``(out, in)`` layout; normalisations measured (kind, ``eps``, gain and bias); activations recognised numerically;
RoPE base and share from the config, checked against ``inv_freq``. The model's own residual multipliers (Granite's
``residual_multiplier``) are read as branch weights. Conventions measured in transformers 4.44, 4.57 and 5.x
(``tests/test_probe.py``, ``tests/test_hf_registry.py``).
"""
from __future__ import annotations

import dataclasses
import math

import torch
from torch import nn

from ._family_views import alibi_of, attention_views_of, expert_act, falcon_norms, mlp_views, moe_of, qk_norms
from ._parts import Stacked, config_of, fused, get, linear, mha_views, read_norm, recognise_activation, rope_of

__all__: list[str] = []

#: The attention projections and the gated MLP of the Llama-like layouts (each layout below lists its own norms).
_QKVO = dict(q="self_attn.q_proj", k="self_attn.k_proj", v="self_attn.v_proj", o="self_attn.o_proj")
_GATED = dict(w1="mlp.gate_proj", w3="mlp.up_proj", w2="mlp.down_proj", act="mlp.act_fn")

#: role -> attribute path, per layout; a block matches the layout whose paths all resolve.
LAYOUTS = {
    "sandwich": dict(_QKVO, **_GATED, ln1="input_layernorm", ln2="pre_feedforward_layernorm",
                     ln3="post_attention_layernorm", ln4="post_feedforward_layernorm", attn="self_attn"),
    "olmo2": dict(_QKVO, **_GATED, ln3="post_attention_layernorm", ln4="post_feedforward_layernorm", attn="self_attn"),
    "moe": dict(_QKVO, router="mlp.gate", experts="mlp.experts", ln1="input_layernorm",
                ln2="post_attention_layernorm", attn="self_attn"),
    "moe4": dict(_QKVO, router="block_sparse_moe.gate", experts="block_sparse_moe.experts", ln1="input_layernorm",
                 ln2="post_attention_layernorm", attn="self_attn"),
    "llama": dict(_QKVO, **_GATED, ln1="input_layernorm", ln2="post_attention_layernorm", attn="self_attn"),
    "phi3": dict(qkv="self_attn.qkv_proj", o="self_attn.o_proj", w13="mlp.gate_up_proj", w2="mlp.down_proj",
                 act="mlp.activation_fn", ln1="input_layernorm", ln2="post_attention_layernorm", attn="self_attn"),
    "neox": dict(qkv="attention.query_key_value", o="attention.dense", w1="mlp.dense_h_to_4h",
                 w2="mlp.dense_4h_to_h", act="mlp.act", ln1="input_layernorm", ln2="post_attention_layernorm",
                 attn="attention"),
    "bert": dict(q="attention.self.query", k="attention.self.key", v="attention.self.value",
                 o="attention.output.dense", ln1="attention.output.LayerNorm", w1="intermediate.dense",
                 act="intermediate.intermediate_act_fn", w2="output.dense", ln2="output.LayerNorm",
                 attn="attention.self"),
    "vit": dict(q="attention.attention.query", k="attention.attention.key", v="attention.attention.value",
                o="attention.output.dense", w1="intermediate.dense", act="intermediate.intermediate_act_fn",
                w2="output.dense", ln1="layernorm_before", ln2="layernorm_after", attn="attention.attention"),
    "vit5": dict(q="attention.q_proj", k="attention.k_proj", v="attention.v_proj", o="attention.o_proj",
                 w1="mlp.fc1", act="mlp.activation_fn", w2="mlp.fc2", ln1="layernorm_before", ln2="layernorm_after",
                 attn="attention"),
    "bloom": dict(qkv="self_attention.query_key_value", o="self_attention.dense", w1="mlp.dense_h_to_4h",
                  w2="mlp.dense_4h_to_h", act="mlp.gelu_impl", ln1="input_layernorm", ln2="post_attention_layernorm",
                  attn="self_attention"),
    "falcon": dict(qkv="self_attention.query_key_value", o="self_attention.dense", w1="mlp.dense_h_to_4h",
                   w2="mlp.dense_4h_to_h", act="mlp.act", attn="self_attention"),   # norms: _falcon_norms
    "gpt2": dict(qkv="attn.c_attn", o="attn.c_proj", w1="mlp.c_fc", w2="mlp.c_proj", act="mlp.act", ln1="ln_1",
                 ln2="ln_2", attn="attn"),
}

#: Parts sigprop has no map for yet, by a word of their parameter's path: what a refusal calls them.
UNMODELLED = (
    (("q_layernorm", "k_layernorm", "query_layernorm", "key_layernorm"),
     "a QK-norm of another form than an RMSNorm of each head or of the whole projection"),
    (("pre_feedforward_layernorm", "post_feedforward_layernorm"),
     "normalisations of each branch in another placement than Gemma2/3's or OLMo2's"),
    (("kv_a_proj_with_mqa", "kv_a_layernorm", "q_a_proj"), "multi-head latent attention (DeepSeek: keys and values "
     "compressed behind an RMSNorm, a decoupled RoPE part)"),
    (("shared_expert", "shared_experts"), "shared experts beside the routed ones (DeepSeek, Qwen2-MoE)"),
    (("experts", "router", "block_sparse_moe", "moe"), "a mixture of experts of another form than Mixtral's"),
    (("relative_attention_bias", "rel_pos", "distance_embedding"), "relative-position logits"),
)
def _set(v) -> bool:
    return v is not None and v is not False and not (isinstance(v, (int, float)) and v == 0)


#: Attention or config options that change the block's forward and that no map here models: (key, when, what).
UNMODELLED_OPTIONS = (
    ("clip_qkv", _set, "queries, keys and values clipped to [-c, c]"),
    ("scale_attn_by_inverse_layer_idx", _set, "a per-layer logit scale 1 / (layer + 1)"),
    ("attention_type", lambda v: v == "block_sparse", "block-sparse attention beyond a length (BigBird)"),
    ("apply_residual_connection_post_layernorm", _set, "the residual taken after the normalisation (Bloom's option)"),
)
#: Buffers a block may hold, and what they are.
BUFFERS = {"inv_freq": "rotary frequencies", "original_inv_freq": "rotary frequencies",
           "bias": "a causal-mask buffer (GPT-2 4.x)", "masked_bias": "a mask value (GPT-2 4.x)"}


@dataclasses.dataclass
class BlockParts:
    """One block, read (module docstring). ``views`` maps ``w_q, w_k, w_v, w_o, w1, w2, w3`` and ``b_*`` to
    :class:`View` of the parameters ((out, in) layout; GPT-NeoX's ``w_q`` head-shaped ``(H, d_k, d)``; ``None``
    where absent); :meth:`tensor` gives the view itself. ``norms``: the two normalisations, measured
    (:class:`~sigprop.models._parts.NormPart`); ``branch``: the model's own multipliers of the attention and MLP
    branches (1 unless it scales them, e.g. Granite's ``residual_multiplier``)."""

    layout: str
    attention: nn.Module
    views: dict
    norms: tuple            # (pre-attention, pre-MLP[, after attention, after MLP]) NormPart or None where absent
    heads: int
    kv_heads: int
    head_dim: int
    value_dim: int
    scale: float
    activation: str
    norm: str               # "pre" | "post"
    parallel: bool
    causal: bool
    rope: tuple | None      # (theta, fraction, rope_type, inv_freq matches theta) or None
    window: int | None
    branch: tuple = (1.0, 1.0)
    qk_norm: str = "none"   # "none" | "head" | "all"
    qk_norms: tuple = ()    # (query's, key's) NormPart
    logit_cap: float | None = None
    alibi: tuple | None = None  # the slopes added to each head's scaled logits
    moe: tuple | None = None    # (experts, top_k, norm_topk) of a mixture of experts

    @property
    def branch_norm(self) -> bool:
        return len(self.norms) == 4

    def tensor(self, role):
        """The weight or bias ``role`` as a view of its parameter (None where absent)."""
        v = self.views.get(role)
        return None if v is None else v.get()

    def matrix(self, role):
        """The weight ``role`` flattened to (out, in) (a copy where the view is head-shaped)."""
        t = self.tensor(role)
        return t.reshape(-1, t.shape[-1])

    @property
    def d(self) -> int:
        return self.tensor("w_q").shape[-1]

    @property
    def hidden(self) -> int:
        return self.tensor("w1").shape[-2]

    @property
    def gated(self) -> bool:
        return self.views.get("w3") is not None

    @property
    def present_norms(self) -> list:
        return [n for n in self.norms if n is not None]

    @property
    def norm_kind(self) -> str:
        return self.present_norms[0].kind

    @property
    def eps(self) -> float:
        return max(n.eps for n in self.present_norms)


def causal_of(attn, layout):
    if layout in ("gpt2", "bloom"):
        return True
    for key in ("is_causal", "is_decoder"):
        v = getattr(attn, key, None)
        if isinstance(v, bool):
            return v
    return bool(getattr(getattr(attn, "config", None), "is_decoder", False))


def _heads(attn, cfg):
    for owner, key in ((attn, "num_heads"), (attn, "num_attention_heads"), (cfg, "num_attention_heads"),
                       (cfg, "n_head")):
        v = getattr(owner, key, None)
        if isinstance(v, int):
            return v
    raise ValueError(f"the number of heads of {type(attn).__name__} could not be read")


def _window(attn, cfg):
    """The sliding window of this block's attention: its own ``sliding_window`` (Qwen2, Qwen3, Gemma2/3: per layer
    type), else the config's (Mistral, Phi3, Starcoder2 window every layer when it is set)."""
    if hasattr(attn, "sliding_window"):
        return attn.sliding_window
    w = getattr(cfg, "sliding_window", None)
    if w is not None and getattr(cfg, "use_sliding_window", True) is False:
        return None
    return w


def _scale(attn, layout, head_dim):
    if layout == "gpt2":
        return head_dim ** -0.5 if attn.scale_attn_weights else 1.0
    s = getattr(attn, "scaling", None)
    if isinstance(s, (int, float)):
        return float(s)
    nf = getattr(attn, "norm_factor", None)  # GPT-NeoX before 4.48: head_size ** -0.5 (older: its inverse)
    if isinstance(nf, (int, float, torch.Tensor)) and float(nf) > 0:
        nf = float(nf)
        return nf if abs(nf - head_dim ** -0.5) < 1e-12 else 1.0 / nf
    return head_dim ** -0.5


def _torch_parts(block):
    a = block.self_attn
    t = mha_views(a)
    if t is None:
        raise ValueError(f"{type(block).__name__}: nn.MultiheadAttention with separate q/k/v projection weights is not "
                         "supported")
    d, H = a.embed_dim, a.num_heads
    t["w_o"], t["b_o"] = linear(a.out_proj)
    t["w1"], t["b1"] = linear(block.linear1)
    t["w2"], t["b2"] = linear(block.linear2)
    t["w3"] = t["b3"] = None
    name = type(block).__name__
    norms = (read_norm(block.norm1, d, f"{name}.norm1"), read_norm(block.norm2, d, f"{name}.norm2"))
    return BlockParts("torch", a, t, norms, H, H, d // H, d // H, (d // H) ** -0.5,
                      recognise_activation(block.activation, name), "pre" if block.norm_first else "post", False,
                      False, None, None)


def match(block):
    """-> (layout, modules by role) of the layout whose paths all resolve; else a refusal naming what is missing."""
    best = None
    for layout, roles in LAYOUTS.items():
        # the activation is a path only where two layouts differ by it (Bloom's gelu_impl, Falcon's act)
        mods = {r: get(block, p) for r, p in roles.items() if r != "act" or layout in ("bloom", "falcon")}
        if all(m is not None for m in mods.values()):
            return layout, {r: m for r, m in mods.items() if r != "act"}
        found = sum(m is not None for m in mods.values())
        if best is None or found > best[0]:
            best = (found, layout, [roles[r] for r, m in mods.items() if m is None])
    name = type(block).__name__
    hint = _hint([n for n, _ in block.named_parameters()])
    raise ValueError(f"{name} matches none of the block layouts sigprop reads (Llama-like, Phi3, GPT-NeoX, BERT, ViT, "
                     f"GPT-2, nn.TransformerEncoderLayer); nearest: {best[1]!r}, missing {', '.join(best[2])}"
                     + (f"; it has {hint}" if hint else "") + ". probe runs it (the model's own forward); read_init "
                     "needs a layout")


def _hint(names) -> str:
    found = [what for words, what in UNMODELLED if any(w in n.split(".") or any(p.startswith(w) for p in n.split("."))
                                                          for n in names for w in words)]
    return "; ".join(dict.fromkeys(found))


def describe_block(block: nn.Module, rotary: nn.Module | None = None) -> BlockParts:
    """Read one block's parts (module docstring); ``rotary`` is the model-level rotary-embedding module, if any.
    Raises a ValueError naming what it cannot read: the block's class when it matches no layout, a parameter
    without a role, an option that changes the forward."""
    if isinstance(block, nn.TransformerEncoderLayer):
        parts = _torch_parts(block)
        account(block, parts)
        return parts
    layout, mods = match(block)
    roles = LAYOUTS[layout]
    if "router" in roles:
        mods["moe_block"] = get(block, roles["router"].rsplit(".", 1)[0])
    layout = {"vit5": "vit", "moe4": "moe"}.get(layout, layout)
    attn = mods["attn"]
    cfg = config_of(attn, block)
    _refuse_options(block, attn, cfg)
    H = _heads(attn, cfg)
    t = mlp_views(mods, attention_views_of(layout, mods, attn, H, cfg))
    q_rows = math.prod(t["w_q"].get().shape[:-1])
    hd = next((v for v in (getattr(attn, k, None) for k in ("head_dim", "head_size", "attention_head_size"))
               if isinstance(v, int)), q_rows // H)
    kv = math.prod(t["w_k"].get().shape[:-1]) // hd
    d = t["w_q"].get().shape[-1]
    name = type(block).__name__
    if layout == "falcon":
        roles, mods = falcon_norms(block, roles, mods)
    keys = [k for k in ("ln1", "ln2", "ln3", "ln4") if k in roles]
    norms = {k: read_norm(mods[k], d, f"{name}.{roles[k]}") for k in keys}
    if len({n.center for n in norms.values()}) > 1:
        raise ValueError(f"{name} mixes LayerNorms and RMSNorms ({', '.join(roles[k] for k in keys)})")
    norms = tuple(norms.get(k) for k in ("ln1", "ln2", "ln3", "ln4")[:4 if "ln3" in roles else 2])
    act = get(block, roles["act"]) if "act" in roles else expert_act(mods["experts"])
    alibi = alibi_of(layout, cfg, q_rows // hd, _scale(attn, layout, hd))
    rope = None if alibi or layout not in ("llama", "phi3", "neox", "sandwich", "olmo2", "falcon", "moe") else \
        rope_of(attn, block, rotary, hd)
    mult = getattr(block, "residual_multiplier", 1.0)
    cap = getattr(attn, "attn_logit_softcapping", None)
    H = q_rows // hd
    parts = BlockParts(
        layout, attn, t, norms, H, kv, hd, math.prod(t["w_v"].get().shape[:-1]) // kv,
        _scale(attn, layout, hd), recognise_activation(act, f"{name}.{roles.get('act', 'experts.act_fn')}"),
        {"bert": "post", "olmo2": "none"}.get(layout, "pre"),
        bool(getattr(block, "use_parallel_residual", False) or (layout == "falcon" and cfg.parallel_attn)),
        causal_of(attn, layout), rope, _window(attn, cfg), (float(mult), float(mult)),
        *qk_norms(attn, name, hd, H, kv), None if cap is None else float(cap), alibi, moe_of(mods, t))
    account(block, parts)
    return parts


def _refuse_options(block, attn, cfg):
    name = type(block).__name__
    for key, when, what in UNMODELLED_OPTIONS:
        for owner in (attn, block, cfg):
            v = getattr(owner, key, None)
            if when(v):
                raise ValueError(f"{name}: {what} ({type(owner).__name__}.{key} = {v!r}) is not modelled by sigprop's "
                                 "block: not read")
    pos = getattr(attn, "position_embedding_type", None) or getattr(cfg, "position_embedding_type", None)
    if pos not in (None, "absolute", "rope", "rotary"):
        raise ValueError(f"{name}: relative-position logits (position_embedding_type = {pos!r}) are not modelled by "
                         "sigprop's block: not read")


def account(block, parts: BlockParts) -> None:
    """Every parameter of ``block`` has a role in ``parts`` and every buffer is a known one; else refuse, naming
    them (module docstring)."""
    claimed = {id(q) for v in parts.views.values() if v is not None
               for q in (v.params if isinstance(v, Stacked) else [v.param])}
    claimed |= {id(p) for n in (*parts.present_norms, *parts.qk_norms) for p in n.params()}
    left = [n for n, p in block.named_parameters() if id(p) not in claimed]
    name = type(block).__name__
    if left:
        hint = _hint(left)
        shown = ", ".join(left[:6]) + (f" and {len(left) - 6} more" if len(left) > 6 else "")
        raise ValueError(f"{name} has parameters sigprop's reading gives no role: {shown}"
                         + (f" ({hint}: not modelled)" if hint else "") + ". Not read: a prediction without them "
                         "would be for another model")
    odd = [n for n, _ in block.named_buffers() if n.split(".")[-1] not in BUFFERS]
    if odd:
        raise ValueError(f"{name} has buffers sigprop does not know: {', '.join(odd[:6])}. Not read")


def attention_views(attn) -> dict | None:
    """``w_q, w_k, w_v`` (and biases) views of a self-attention module's projections: ``nn.MultiheadAttention``,
    ``q/k/v_proj``, ``query/key/value``, GPT-2's ``c_attn`` or GPT-NeoX's ``query_key_value``; None otherwise."""
    if isinstance(attn, nn.MultiheadAttention):
        return mha_views(attn)
    for names in (("q_proj", "k_proj", "v_proj"), ("query", "key", "value")):
        mods = [getattr(attn, n, None) for n in names]
        if all(isinstance(m, nn.Linear) for m in mods):
            out = {}
            for r, m in zip("qkv", mods):
                out[f"w_{r}"], out[f"b_{r}"] = linear(m)
            return out
    for name, layout in (("c_attn", "gpt2"), ("query_key_value", "neox")):
        m = getattr(attn, name, None)
        if m is not None and (isinstance(m, nn.Linear) or type(m).__name__ == "Conv1D"):
            return fused(layout, *linear(m), _heads(attn, config_of(attn, attn)))
    return None
