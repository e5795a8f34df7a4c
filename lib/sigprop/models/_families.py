r"""What a block of an off-the-shelf transformer is made of, read from its modules: :func:`describe_block`.

A block is matched **structurally**, by the attribute paths of its parts (a *layout*), not by its class, so
families that share a layer share a layout (RoBERTa, ELECTRA and XLM-R are BERT's; Qwen2 and Mistral are
Llama's):

==========  ==============================================  =============================================
layout      families (HF classes unless said)               parts
==========  ==============================================  =============================================
``llama``   Llama, Qwen2, Mistral (``*DecoderLayer``)       RMSNorm pre-LN, RoPE, grouped-query heads,
                                                            gated MLP (``gate/up/down_proj``; SwiGLU)
``neox``    GPT-NeoX (``GPTNeoXLayer``)                     LayerNorm pre-LN, partial RoPE, fused
                                                            head-interleaved ``query_key_value``,
                                                            parallel or sequential residual
``bert``    BERT, RoBERTa (``BertLayer``, ``RobertaLayer``)  post-LN, ``attention.self.query/key/value``
``vit``     ViT 4.x (``attention.attention.query``) and     pre-LN LayerNorm, non-causal
            5.x (``attention.q_proj``)
``gpt2``    GPT-2 (``GPT2Block``, ``Conv1D`` stored          pre-LN, fused ``c_attn``, causal
            ``(in, out)``)
``torch``   ``torch.nn.TransformerEncoderLayer``            either ``norm_first``, packed ``in_proj``
==========  ==============================================  =============================================

Every weight is returned in ``nn.Linear``'s layout ``(out, in)`` as a **view** of the module's parameter (a
transposed ``Conv1D`` weight, a slice of a fused projection), so :func:`sigprop.reinitialise` writes through
it. Names follow :class:`sigprop.BlockConfig`: ``w_q, w_k, w_v, w_o`` and biases, the MLP
``W_2 (phi(W_1 x + b_1) [* (W_3 x + b_3)]) + b_2`` (``W_1`` is HF's ``gate_proj`` in a gated MLP, ``W_3`` its
``up_proj``). The activation is recognised numerically against sigprop's own activations on ``[-6, 6]`` (class
names differ between transformers versions), RoPE's base and rotated share from the config in either spelling
(4.x ``rope_theta`` / ``rotary_pct``; 5.x ``rope_parameters``) and checked against the module's
``inv_freq``. Conventions measured in transformers 4.44, 4.57 and 5.x (``tests/test_probe.py``).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable

import torch
from torch import nn

from ..block import ACTIVATIONS

__all__: list[str] = []

#: role -> attribute path, per layout; a block matches the first layout whose paths all resolve.
LAYOUTS = {
    "llama": dict(q="self_attn.q_proj", k="self_attn.k_proj", v="self_attn.v_proj", o="self_attn.o_proj",
                  w1="mlp.gate_proj", w3="mlp.up_proj", w2="mlp.down_proj", act="mlp.act_fn",
                  ln1="input_layernorm", ln2="post_attention_layernorm", attn="self_attn"),
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
    "gpt2": dict(qkv="attn.c_attn", o="attn.c_proj", w1="mlp.c_fc", w2="mlp.c_proj", act="mlp.act", ln1="ln_1",
                 ln2="ln_2", attn="attn"),
}


@dataclasses.dataclass(frozen=True)
class View:
    """A weight as a view of a parameter: ``fn(param)`` (a transpose, a slice of a fused projection). ``of(t)``
    applies the same view to a tensor shaped like the parameter, e.g. its gradient."""

    param: torch.Tensor
    fn: Callable = lambda t: t

    def get(self) -> torch.Tensor:
        return self.fn(self.param)

    def of(self, t: torch.Tensor) -> torch.Tensor:
        return self.fn(t)


def _view(param, fn=None):
    return None if param is None else View(param, fn or (lambda t: t))


@dataclasses.dataclass
class BlockParts:
    """One block, read (module docstring). ``views`` maps ``w_q, w_k, w_v, w_o, w1, w2, w3`` and ``b_*`` to
    :class:`View` of the parameters ((out, in) layout; GPT-NeoX's ``w_q`` head-shaped ``(H, d_k, d)``; ``None``
    where absent); :meth:`tensor` gives the view itself."""

    layout: str
    attention: nn.Module
    views: dict
    norms: tuple
    norm_kind: str          # "rms" | "layer"
    eps: float
    heads: int
    kv_heads: int
    head_dim: int
    scale: float
    activation: str
    norm: str               # "pre" | "post"
    parallel: bool
    causal: bool
    rope: tuple | None      # (theta, fraction, rope_type, inv_freq matches theta) or None
    window: int | None
    relative_positions: bool = False

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
        return self.tensor("w1").shape[0]

    @property
    def gated(self) -> bool:
        return self.views.get("w3") is not None


def get(module, path):
    """``module.a.b.c`` for path ``"a.b.c"``, or None."""
    for part in path.split("."):
        module = getattr(module, part, None)
        if module is None:
            return None
    return module


def _transpose(t):
    return t.T


def _linear(m):
    """-> (W, b) views in nn.Linear's (out, in) layout of an nn.Linear or HF Conv1D (stored (in, out))."""
    if type(m).__name__ == "Conv1D":
        return _view(m.weight, _transpose), _view(m.bias)
    if not isinstance(m, nn.Linear):
        raise ValueError(f"{type(m).__name__} is not an nn.Linear or Conv1D")
    return _view(m.weight), _view(m.bias)


def _slice(view, index):
    """A view of rows ``index`` of ``view`` (None stays None)."""
    if view is None:
        return None
    fn = view.fn
    return View(view.param, lambda t: fn(t)[index])


_RECOGNISED: dict = {}


def recognise_activation(f, where) -> str:
    """The :class:`~sigprop.BlockConfig` name of activation ``f`` (module or function), recognised numerically
    against sigprop's activations in float64 on [-6, 6] (the erf and tanh GELUs differ by 4.7e-4 there);
    remembered per parameter-free module class and options."""
    key = None
    if isinstance(f, nn.Module) and next(f.parameters(), None) is None:
        key = (type(f), tuple(sorted((k, v) for k, v in vars(f).items()
                                     if not k.startswith("_") and isinstance(v, (bool, int, float, str)))))
        if key in _RECOGNISED:
            return _RECOGNISED[key]
    name = _recognise(f, where)
    if key is not None:
        _RECOGNISED[key] = name
    return name


def _recognise(f, where) -> str:
    x = torch.linspace(-6, 6, 1201, dtype=torch.float64)
    try:
        with torch.no_grad():
            y = f(x)
    except Exception as e:  # a module that cannot run on a float64 vector
        raise ValueError(f"the activation {f!r} of {where} could not be evaluated ({type(e).__name__}: {e})") from None
    for name, act in ACTIVATIONS.items():
        if isinstance(y, torch.Tensor) and y.shape == x.shape and float((y - act.forward(x)).abs().max()) < 1e-9:
            return name
    raise ValueError(f"the activation {f!r} of {where} is none of sigprop's {', '.join(ACTIVATIONS)}")


def _norm(m, where):
    name = type(m).__name__
    if name.endswith("RMSNorm"):
        kind = "rms"
    elif isinstance(m, nn.LayerNorm) or name.endswith("LayerNorm"):
        kind = "layer"
    else:
        raise ValueError(f"{where} is a {name}: neither a LayerNorm nor an RMSNorm")
    eps = getattr(m, "variance_epsilon", getattr(m, "eps", None))
    if eps is None:  # nn.RMSNorm(eps=None) uses the dtype's machine epsilon
        eps = torch.finfo(m.weight.dtype).eps
    return kind, float(eps)


def _config(attn, block):
    return getattr(attn, "config", None) or getattr(block, "config", None)


def rope_of(attn, block, rotary, head_dim):
    """-> (theta, fraction, rope_type, inv_freq agrees with theta) for a block with rotary embeddings, else None.
    ``rotary`` is the model-level rotary module (4.57+, 5.x), or None (4.44: inside the attention)."""
    inner = next((m for m in attn.modules() if type(m).__name__.endswith("RotaryEmbedding")), None)
    module = rotary if rotary is not None else inner
    if module is None:
        return None
    cfg = _config(attn, block)
    params = dict(getattr(cfg, "rope_parameters", None) or {})
    theta = params.get("rope_theta", getattr(cfg, "rope_theta", None) or getattr(cfg, "rotary_emb_base", None))
    if theta is None:
        theta = getattr(module, "base", None)
    dims = getattr(attn, "rotary_ndims", None)
    if dims is None:
        frac = params.get("partial_rotary_factor", getattr(cfg, "partial_rotary_factor", None) or 1.0)
        dims = int(head_dim * float(frac))
    if dims == 0:   # GPT-NeoX with rotary_pct = 0: nothing is rotated
        return None
    rope_type = params.get("rope_type", (getattr(cfg, "rope_scaling", None) or {}).get("rope_type", "default"))
    inv = getattr(module, "inv_freq", None)
    matches = False
    if theta is not None and inv is not None and inv.numel() == dims // 2:
        want = float(theta) ** (-torch.arange(0, dims, 2, dtype=torch.float64) / dims)
        matches = bool(torch.allclose(inv.detach().double().cpu(), want, rtol=1e-2 if inv.dtype in
                                      (torch.float16, torch.bfloat16) else 1e-5))
    if theta is None:
        raise ValueError(f"{type(attn).__name__} rotates queries and keys but its RoPE base (rope_theta) could not be "
                         "read from its config")
    return float(theta), dims / head_dim, str(rope_type or "default"), matches


def _window(attn, cfg):
    if hasattr(attn, "sliding_window"):           # Qwen2 (per layer type)
        return attn.sliding_window
    if type(attn).__name__.startswith(("Mistral", "Mixtral")):
        return getattr(cfg, "sliding_window", None)  # Mistral masks every layer when set
    return None


def _causal(attn, layout):
    if layout == "gpt2":
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


def mha_views(a):
    """Query/key/value weight and bias views of an ``nn.MultiheadAttention`` (packed ``in_proj``), or None."""
    if not a._qkv_same_embed_dim:
        return None
    d = a.embed_dim
    W, b = _view(a.in_proj_weight), _view(a.in_proj_bias)
    out = {}
    for j, r in enumerate("qkv"):
        out[f"w_{r}"], out[f"b_{r}"] = _slice(W, slice(j * d, (j + 1) * d)), _slice(b, slice(j * d, (j + 1) * d))
    return out


def _torch_parts(block):
    a = block.self_attn
    t = mha_views(a)
    if t is None:
        raise ValueError(f"{type(block).__name__}: nn.MultiheadAttention with separate q/k/v projection weights is not "
                         "supported")
    d, H = a.embed_dim, a.num_heads
    t["w_o"], t["b_o"] = _linear(a.out_proj)
    t["w1"], t["b1"] = _linear(block.linear1)
    t["w2"], t["b2"] = _linear(block.linear2)
    t["w3"] = t["b3"] = None
    kind, eps = _norm(block.norm1, "norm1")
    return BlockParts("torch", a, t, (block.norm1, block.norm2), kind, eps, H, H, d // H, (d // H) ** -0.5,
                      recognise_activation(block.activation, type(block).__name__),
                      "pre" if block.norm_first else "post", False, False, None, None)


def _fused(layout, W, b, heads, attn):
    """Query/key/value views of a fused projection: GPT-NeoX interleaves per head, GPT-2 concatenates."""
    out_rows, d = W.get().shape
    if layout == "neox":
        hd = out_rows // (3 * heads)
        fw, fb = W.fn, None if b is None else b.fn
        views = {}
        for j, r in enumerate("qkv"):
            views[f"w_{r}"] = View(W.param, lambda t, j=j: fw(t).view(heads, 3, hd, d)[:, j])
            views[f"b_{r}"] = None if b is None else View(b.param, lambda t, j=j: fb(t).view(heads, 3, hd)[:, j])
        return views
    if getattr(attn, "is_cross_attention", False):
        raise ValueError(f"{type(attn).__name__} is a cross-attention")
    E = out_rows // 3
    views = {}
    for j, r in enumerate("qkv"):
        views[f"w_{r}"], views[f"b_{r}"] = _slice(W, slice(j * E, (j + 1) * E)), _slice(b, slice(j * E, (j + 1) * E))
    return views


def _scale(attn, layout, head_dim):
    if layout == "gpt2":
        if getattr(attn, "scale_attn_by_inverse_layer_idx", False):
            raise ValueError("GPT-2 with scale_attn_by_inverse_layer_idx=True has a per-layer logit scale; not supported")
        return head_dim ** -0.5 if attn.scale_attn_weights else 1.0
    s = getattr(attn, "scaling", None)
    if isinstance(s, (int, float)):
        return float(s)
    nf = getattr(attn, "norm_factor", None)  # GPT-NeoX before 4.48: head_size ** -0.5 (older: its inverse)
    if isinstance(nf, (int, float, torch.Tensor)) and float(nf) > 0:
        nf = float(nf)
        return nf if abs(nf - head_dim ** -0.5) < 1e-12 else 1.0 / nf
    return head_dim ** -0.5


def describe_block(block: nn.Module, rotary: nn.Module | None = None) -> BlockParts:
    """Read one block's parts (module docstring); ``rotary`` is the model-level rotary-embedding module, if any.
    Raises a ValueError naming the block's class when it matches no layout."""
    if isinstance(block, nn.TransformerEncoderLayer):
        return _torch_parts(block)
    for layout, roles in LAYOUTS.items():
        mods = {r: get(block, p) for r, p in roles.items() if r != "act"}
        if all(m is not None for m in mods.values()):
            break
    else:
        raise ValueError(f"{type(block).__name__} matches none of the block layouts sigprop reads (Llama/Qwen2/Mistral, "
                         "GPT-NeoX, BERT/RoBERTa, ViT, GPT-2, nn.TransformerEncoderLayer): read it with blocks= and an "
                         "adapter for probe; read_init needs one of these layouts")
    layout = "vit" if layout == "vit5" else layout
    attn = mods["attn"]
    cfg = _config(attn, block)
    H = _heads(attn, cfg)
    if "qkv" in mods:
        t = _fused(layout, *_linear(mods["qkv"]), H, attn)
    else:
        t = {}
        for r in "qkv":
            t[f"w_{r}"], t[f"b_{r}"] = _linear(mods[r])
    t["w_o"], t["b_o"] = _linear(mods["o"])
    t["w1"], t["b1"] = _linear(mods["w1"])
    t["w2"], t["b2"] = _linear(mods["w2"])
    t["w3"], t["b3"] = _linear(mods["w3"]) if "w3" in mods else (None, None)
    q_rows = math.prod(t["w_q"].get().shape[:-1])
    hd = next((v for v in (getattr(attn, k, None) for k in ("head_dim", "head_size", "attention_head_size"))
               if isinstance(v, int)), q_rows // H)
    kv = math.prod(t["w_k"].get().shape[:-1]) // hd
    act = get(block, roles["act"])
    kinds = [_norm(mods[n], f"{type(block).__name__}.{roles[n]}") for n in ("ln1", "ln2")]
    if kinds[0][0] != kinds[1][0]:
        raise ValueError(f"{type(block).__name__} mixes LayerNorm and RMSNorm")
    rope = rope_of(attn, block, rotary, hd) if layout in ("llama", "neox") else None
    return BlockParts(
        layout, attn, t, (mods["ln1"], mods["ln2"]), kinds[0][0], max(kinds[0][1], kinds[1][1]), q_rows // hd, kv, hd,
        _scale(attn, layout, hd), recognise_activation(act, f"{type(block).__name__}.{roles['act']}"),
        "post" if layout == "bert" else "pre", bool(getattr(block, "use_parallel_residual", False)),
        _causal(attn, layout), rope, _window(attn, cfg),
        relative_positions=getattr(attn, "position_embedding_type", "absolute") not in ("absolute", None))


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
                out[f"w_{r}"], out[f"b_{r}"] = _linear(m)
            return out
    for name, layout in (("c_attn", "gpt2"), ("query_key_value", "neox")):
        m = getattr(attn, name, None)
        if m is not None and (isinstance(m, nn.Linear) or type(m).__name__ == "Conv1D"):
            return _fused(layout, *_linear(m), _heads(attn, _config(attn, attn)), attn)
    return None
