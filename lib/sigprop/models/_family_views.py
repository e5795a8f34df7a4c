r"""Per-family readers of a block's projections, experts, QK-norms and position fields (used by
:func:`sigprop.models._families.describe_block`): fused query/key/value projections (Phi3, Bloom, Falcon's three
layouts), mixtures of experts (5.x's stacked experts, 4.x's lists), QK-norms, Falcon's norms and ALiBi's slopes.
"""
from __future__ import annotations

import torch
from torch import nn

from ..block import alibi_slopes
from ._parts import Stacked, View, fused, get, linear, read_norm, rows, view

__all__: list[str] = []


def kv_heads(attn, cfg, heads):
    for owner, key in ((attn, "num_key_value_heads"), (cfg, "num_key_value_heads")):
        v = getattr(owner, key, None)
        if isinstance(v, int):
            return v
    g = getattr(attn, "num_key_value_groups", None)
    return heads // g if isinstance(g, int) and g > 0 else heads


def falcon_views(W, b, attn, H, d):
    """Falcon's fused projection: per head ``(q, k, v)`` like GPT-NeoX; multi-query ``[H queries | key | value]``; or
    (new decoder architecture) per key/value group ``[H/G queries | key | value]`` (HF ``FalconAttention._split_heads``)."""
    hd = attn.head_dim
    if getattr(attn, "new_decoder_architecture", False):
        G = attn.num_kv_heads
        per = H // G + 2

        def part(sl, n):
            return lambda t, f=W.fn: f(t).view(G, per, hd, d)[:, sl].reshape(G * n, hd, d)
        bias = None if b is None else (lambda sl, n: View(b.param, lambda t, f=b.fn: f(t).view(G, per, hd)[:, sl]
                                                          .reshape(G * n, hd)))
        out = {}
        for r, sl, n in (("q", slice(0, per - 2), H // G), ("k", slice(per - 2, per - 1), 1),
                         ("v", slice(per - 1, per), 1)):
            out[f"w_{r}"], out[f"b_{r}"] = View(W.param, part(sl, n)), None if b is None else bias(sl, n)
        return out
    if not getattr(attn, "multi_query", False):
        return fused("neox", W, b, H)
    cuts = [0, H * hd, (H + 1) * hd, (H + 2) * hd]
    return {f"{k}_{r}": rows(v, slice(cuts[j], cuts[j + 1])) for j, r in enumerate("qkv") for k, v in (("w", W), ("b", b))}


def attention_views_of(layout, mods, attn, H, cfg):
    if "qkv" in mods:
        W, b = linear(mods["qkv"])
        if layout == "falcon":
            return falcon_views(W, b, attn, H, W.get().shape[-1])
        if layout == "bloom":
            return fused("neox", W, b, H)
        if layout == "phi3":   # concatenated q | k | v with grouped key/value heads
            hd = attn.head_dim
            G = kv_heads(attn, cfg, H)
            cuts = [0, H * hd, (H + G) * hd, (H + 2 * G) * hd]
            return {f"{k}_{r}": rows(v, slice(cuts[j], cuts[j + 1])) for j, r in enumerate("qkv")
                    for k, v in (("w", W), ("b", b))}
        if getattr(attn, "is_cross_attention", False):
            raise ValueError(f"{type(attn).__name__} is a cross-attention")
        return fused(layout, W, b, H)
    t = {}
    for r in "qkv":
        t[f"w_{r}"], t[f"b_{r}"] = linear(mods[r])
    return t


def expert_views(mods, t):
    """A mixture of experts' views: the router ``(E, d)``; experts' ``W_1, W_3 (E, f, d)`` and ``W_2 (E, d, f)`` as
    slices of 5.x's stacked ``gate_up_proj`` / ``down_proj``, or stacked from 4.x's list of expert MLPs."""
    t["w_o"], t["b_o"] = linear(mods["o"])
    router = mods["router"]
    weight = getattr(router, "weight", None)
    if not isinstance(weight, torch.Tensor) or weight.ndim != 2:
        raise ValueError(f"the router {type(router).__name__} holds no (experts, d) weight matrix (a router of another "
                         "form than Mixtral's): not read")
    t["router"] = view(weight)
    ex = mods["experts"]
    if isinstance(ex, nn.ModuleList):
        names = ("w1", "w3", "w2") if hasattr(ex[0], "w1") else ("gate_proj", "up_proj", "down_proj")
        for role, n in zip(("w1", "w3", "w2"), names):
            t[role] = Stacked(tuple(view(getattr(e, n).weight) for e in ex))
    else:
        f = ex.gate_up_proj.shape[1] // 2
        t["w1"], t["w3"] = view(ex.gate_up_proj, lambda x: x[:, :f]), view(ex.gate_up_proj, lambda x: x[:, f:])
        t["w2"] = view(ex.down_proj)
    t["b1"] = t["b2"] = t["b3"] = None
    return t


def mlp_views(mods, t):
    if "experts" in mods:
        return expert_views(mods, t)
    t["w_o"], t["b_o"] = linear(mods["o"])
    t["w2"], t["b2"] = linear(mods["w2"])
    if "w13" in mods:      # Phi3: gate | up in one projection
        W, b = linear(mods["w13"])
        f = W.get().shape[0] // 2
        t["w1"], t["w3"] = rows(W, slice(0, f)), rows(W, slice(f, 2 * f))
        t["b1"], t["b3"] = rows(b, slice(0, f)), rows(b, slice(f, 2 * f))
        return t
    t["w1"], t["b1"] = linear(mods["w1"])
    t["w3"], t["b3"] = linear(mods["w3"]) if "w3" in mods else (None, None)
    return t


def expert_act(experts):
    return getattr(experts[0] if isinstance(experts, nn.ModuleList) else experts, "act_fn", None)


def moe_of(mods, t):
    """``(experts, top_k, norm_topk)`` of a mixture of experts (Mixtral always renormalises its top-k weights;
    Qwen3-MoE where ``norm_topk_prob``), or None."""
    if "experts" not in mods:
        return None
    owners = (mods["router"], mods["moe_block"])
    k = next((o.top_k for o in owners if isinstance(getattr(o, "top_k", None), int)), None)
    if k is None:
        raise ValueError("the number of experts per token (top_k) of the mixture of experts could not be read")
    norm = next((o.norm_topk_prob for o in owners if isinstance(getattr(o, "norm_topk_prob", None), bool)), True)
    return int(t["router"].get().shape[0]), int(k), bool(norm)


def falcon_norms(block, roles, mods):
    """Falcon's normalisations: sequential (``input_layernorm``, ``post_attention_layernorm``), parallel with two
    (``ln_attn``, ``ln_mlp``) or parallel with one shared by both branches (``input_layernorm`` twice)."""
    names = next(pair for pair in (("input_layernorm", "post_attention_layernorm"), ("ln_attn", "ln_mlp"),
                                   ("input_layernorm", "input_layernorm")) if all(get(block, n) for n in pair))
    return {**roles, "ln1": names[0], "ln2": names[1]}, {**mods, "ln1": get(block, names[0]), "ln2": get(block, names[1])}


def alibi_of(layout, cfg, heads, scale):
    """ALiBi's slopes as the block adds them to its scaled logits, or None: Bloom's ``m_h``. Falcon's ALiBi field is
    rounded to bfloat16 at every position (HF ``build_alibi_tensor``), which is not a linear field: refused."""
    if layout == "bloom":
        return alibi_slopes(heads)
    if layout == "falcon" and getattr(cfg, "alibi", False):
        raise ValueError("Falcon with ALiBi computes its position field in bfloat16 (slope x position rounded to 8 bits "
                         "at every position): not the linear field -m_h (t - s) sigprop models; not read")
    return None


def qk_norms(attn, name, hd, H, G):
    """-> (qk_norm, (query's NormPart, key's)) of the attention's ``q_norm``/``k_norm``: RMS over each head's ``d_k``
    features (Qwen3, Gemma3) or over the whole projection (OLMo2); anything else is refused."""
    qn, kn = getattr(attn, "q_norm", None), getattr(attn, "k_norm", None)
    if qn is None and kn is None:
        return "none", ()
    if not (isinstance(qn, nn.Module) and isinstance(kn, nn.Module)):
        raise ValueError(f"{name} normalises only its queries or only its keys: not modelled")
    w = getattr(qn, "weight", None)
    width = w.shape[-1] if isinstance(w, torch.Tensor) else hd
    kind = "head" if width == hd else "all" if width == H * hd else None
    if kind is None:
        raise ValueError(f"{name}.q_norm acts on {width} features: neither a head ({hd}) nor all heads ({H * hd})")
    parts = (read_norm(qn, width, f"{name}.q_norm"), read_norm(kn, hd if kind == "head" else G * hd, f"{name}.k_norm"))
    if any(p.center or bool(p.bias.any()) for p in parts):
        raise ValueError(f"{name}: a centred QK-norm or one with biases is not modelled (sigprop's is an RMSNorm)")
    return kind, parts
