r"""How :func:`sigprop.probe` runs a model's blocks on hidden states: :class:`BlockAdapter`.

An adapter says which modules are the blocks, how one block is called on ``(B, T, d)`` hidden states, where its
attention weights come from, and whether it is causal. :func:`adapter_for` builds one for the families sigprop
reads by itself; any other model is probed through a hand-made adapter (``tests/test_probe.py`` probes a
nanoGPT-style model this way)::

    adapter = sp.BlockAdapter(blocks=model.transformer.h, causal=True,
                              attention=lambda block: block.attn,          # the module whose call gives weights
                              weights=lambda module, args, kwargs, out: recompute(module, args[0]))

**HuggingFace models** (transformers 4.44 to 5.x; the conventions below were measured in 4.44, 4.57 and 5.x):

* blocks: the outermost ``nn.ModuleList`` whose children share one class and whose first child holds exactly one
  self-attention (the innermost module named ``*Attention*``, not ``*Cross*``, owning a projection); encoder-decoder
  models are refused (two stacks);
* each block is called as ``block(h, **kw)`` with ``kw`` from its signature: ``attention_mask`` an explicit
  additive float mask ``(B|1, 1, T, T)`` in ``h``'s dtype (``finfo.min`` where a key is not allowed: causal,
  sliding window, padding; an explicit mask is needed because several families' eager attention is *not* causal
  when given none, GPT-2 included from transformers 5), ``position_ids``, ``position_embeddings`` from the
  model-level rotary module, ``output_attentions=True`` where the signature still has it (4.x), ``use_cache=False``;
  the output is ``out[0]`` for a tuple (4.x) and ``out`` for a tensor (5.x);
* attention weights: a forward hook on the attention module reads the first ``(B, H, T, T)`` tensor after position
  0 of its output; only then (``weights=True``) is ``config._attn_implementation`` set to ``"eager"``, for the call,
  and restored.

``torch.nn.TransformerEncoder`` layers get ``src_mask`` / ``src_key_padding_mask`` / ``is_causal``, and their
``nn.MultiheadAttention`` weights are recomputed with ``need_weights=True, average_attn_weights=False``.
"""
from __future__ import annotations

import contextlib
import dataclasses
import inspect
from typing import Callable, Sequence

import torch
from torch import nn

from ._families import causal_of, match

__all__ = ["BlockAdapter"]


@dataclasses.dataclass
class BlockCall:
    """What a block call may need (``BlockAdapter.call``'s ``ctx``): ``mask`` additive float ``(B|1, 1, T, T)``
    (``finfo.min`` where not allowed), ``allowed`` the same as bool, ``position_ids`` ``(B, T)``,
    ``position_embeddings`` ``(cos, sin)`` from the model's rotary module or None, ``want_weights``, ``causal``,
    ``key_mask`` ``(B, T)`` bool or None."""

    mask: torch.Tensor
    allowed: torch.Tensor
    position_ids: torch.Tensor
    position_embeddings: tuple | None
    want_weights: bool
    causal: bool
    key_mask: torch.Tensor | None


@dataclasses.dataclass
class BlockAdapter:
    """How to run a model's blocks on ``(B, T, d)`` hidden states (module docstring).

    Attributes:
        blocks: the modules applied in sequence.
        causal: whether a query sees only keys at or before it. With the default ``call`` it only labels the
            result (the blocks mask themselves); a ``call`` that uses ``ctx.mask`` applies it.
        call: ``call(block, h, ctx) -> hidden states`` (or a tuple whose first element they are); ``ctx`` is a
            ``BlockCall``. Default ``block(h)``.
        attention: ``attention(block) -> module`` whose forward call yields the attention weights, or None.
            Default: the block's single ``nn.MultiheadAttention`` or HF self-attention, found by structure.
        weights: ``weights(module, args, kwargs, output) -> (B, H, T, T)`` tensor or None, from one call of that
            module. Default: the first ``(B, *, T, T)`` tensor after position 0 of its output (for
            ``nn.MultiheadAttention``: recomputed per head).
        window: ``window(block) -> int | None``, a sliding-window length (keys ``s > t - window``).
        rotary: a module ``rotary(h, position_ids) -> (cos, sin)`` passed to ``call`` as
            ``ctx.position_embeddings``, or None.
        final_norm: the model's final normalisation (not applied by ``probe``; reported in its notes).
        family: a name for the result.
        eager: HF configs whose ``_attn_implementation`` is set to ``"eager"`` while weights are read.
    """

    blocks: Sequence[nn.Module]
    causal: bool = False
    call: Callable | None = None
    attention: Callable | None = None
    weights: Callable | None = None
    window: Callable | None = None
    rotary: nn.Module | None = None
    final_norm: nn.Module | None = None
    family: str = "custom"
    eager: tuple = ()

    def __post_init__(self):
        if isinstance(self.blocks, nn.Module) and not isinstance(self.blocks, (nn.ModuleList, nn.Sequential)):
            raise TypeError(f"blocks must be a sequence of modules; got a single {type(self.blocks).__name__}: "
                            "pass [block]")
        self.blocks = list(self.blocks)
        if not self.blocks or not all(isinstance(b, nn.Module) for b in self.blocks):
            raise ValueError("blocks must be a non-empty sequence of nn.Module (the modules applied in sequence to "
                             f"(B, T, d) hidden states); got {self.blocks!r}")
        if not isinstance(self.causal, bool):
            raise TypeError(f"causal must be a bool; got {type(self.causal).__name__}")
        for name in ("call", "attention", "weights", "window"):
            f = getattr(self, name)
            if f is not None and not callable(f):
                raise TypeError(f"{name} must be callable or None; got {type(f).__name__}")

    @property
    def masked(self) -> bool:
        """Whether ``call`` applies ``ctx.mask`` (a given ``call`` is trusted to)."""
        return self.call is not None

    def run(self, block, h, ctx):
        out = block(h) if self.call is None else self.call(block, h, ctx)
        return out[0] if isinstance(out, (tuple, list)) else out

    def attention_of(self, block):
        """-> (module, None) or (None, why not)."""
        if self.attention is not None:
            m = self.attention(block)
            return (m, None) if isinstance(m, nn.Module) else (None, f"the adapter's attention() returned {m!r}")
        found = self_attentions(block)
        if len(found) != 1:
            return None, (f"{type(block).__name__} holds {len(found)} recognised attention modules "
                          "(nn.MultiheadAttention or a self-attention owning its projections); need exactly one")
        return found[0], None

    def read_weights(self, module, args, kwargs, output):
        return (self.weights or weights_from_output)(module, args, kwargs, output)

    def window_of(self, block):
        return None if self.window is None else self.window(block)


def masks(B, T, *, causal, window, key_mask, dtype, device):
    """-> allowed (B|1, 1, T, T) bool and the additive float mask with ``finfo.min`` where not allowed."""
    i = torch.arange(T, device=device)
    allowed = torch.ones(T, T, dtype=torch.bool, device=device)
    if causal:
        allowed &= i[None, :] <= i[:, None]
    if window is not None:
        allowed &= i[None, :] > i[:, None] - window  # HF's sliding_window_overlay: key s > t - window
    allowed = allowed[None, None]
    if key_mask is not None:
        allowed = allowed & key_mask[:, None, None, :]
    additive = torch.zeros(allowed.shape, dtype=dtype, device=device).masked_fill(~allowed, torch.finfo(dtype).min)
    return allowed, additive


def _owns_projection(m):
    return isinstance(m, nn.MultiheadAttention) or any(
        isinstance(c, nn.Linear) or type(c).__name__ == "Conv1D" for c in m.children())


def self_attentions(block):
    """The innermost modules of ``block`` named ``*Attention*`` (not ``*Cross*``) owning a projection, or
    ``nn.MultiheadAttention``."""
    found = [m for n, m in block.named_modules() if m is not block
             and ("Attention" in type(m).__name__ or isinstance(m, nn.MultiheadAttention))
             and "Cross" not in type(m).__name__ and "cross" not in n and _owns_projection(m)]
    return [m for m in found if not any(o is not m and any(c is o for c in m.modules()) for o in found)]


def weights_from_output(module, args, kwargs, output):
    """The first ``(B, *, T, T)`` tensor after position 0 of the module's output; ``nn.MultiheadAttention``'s
    per-head weights recomputed (its fused path and ``need_weights=False`` give none, or head-averaged)."""
    w = None
    if isinstance(output, (tuple, list)):
        w = next((o for o in output[1:] if isinstance(o, torch.Tensor) and o.ndim == 4
                  and o.shape[-1] == o.shape[-2]), None)
    if isinstance(module, nn.MultiheadAttention) and w is None:
        bound = inspect.signature(module.forward).bind(*args, **kwargs)
        bound.arguments.update(need_weights=True, average_attn_weights=False)
        with torch.no_grad():  # .forward, not __call__: no hooks, no recursion
            w = module.forward(*bound.args, **bound.kwargs)[1]
    return w


@contextlib.contextmanager
def eager_attention(configs):
    """Set ``_attn_implementation`` (and, where a config has one, ``_experts_implementation``: transformers 5's fused
    experts run in float32 only) to ``"eager"`` on each HF config for the duration; restore afterwards."""
    keys = ("_attn_implementation", "_experts_implementation")
    saved = [(c, k, getattr(c, k)) for c in configs for k in keys if hasattr(c, k)]
    try:
        for c, k, _ in saved:
            setattr(c, k, "eager")
        yield
    finally:
        for c, k, impl in saved:
            setattr(c, k, impl)


def is_hf(module) -> bool:
    return any(c.__module__.startswith("transformers.") for c in type(module).__mro__)


def find_blocks(model):
    """-> (path, blocks): the outermost homogeneous ``nn.ModuleList`` whose first element holds one self-attention."""
    lists = [(n, m) for n, m in model.named_modules()
             if isinstance(m, nn.ModuleList) and len(m) and len({type(c) for c in m}) == 1
             and len(self_attentions(m[0])) == 1]
    top = [(n, m) for n, m in lists if not any(n.startswith(o + ".") for o, _ in lists if o != n)]
    if len(top) != 1:
        got = ", ".join(f"{n or '<root>'} ({len(m)} x {type(m[0]).__name__})" for n, m in top) or "none"
        owners = [f"model.{n.rsplit('.', 1)[0]}" for n, _ in top if "." in n]
        own = f"read one stack as a model of its own ({' or '.join(owners)}), " if len(owners) > 1 else ""
        raise ValueError(f"could not find transformer blocks in {type(model).__name__} (stacks found: {got}); "
                         f"{own}pass blocks=[...] (the modules applied in sequence to (B, T, d) hidden states) or "
                         "adapter=sp.BlockAdapter(...)")
    return top[0]


def stack_of(model, blocks):
    """-> (path, stack): the ``nn.ModuleList`` of ``model`` that holds every one of ``blocks`` (given by the user)."""
    for n, m in model.named_modules():
        if isinstance(m, nn.ModuleList) and all(any(c is b for c in m) for b in blocks):
            return n, m
    raise ValueError(f"the blocks given are not all in one nn.ModuleList of {type(model).__name__}: pass the blocks of "
                     "one stack, or an adapter=sp.BlockAdapter(...)")


def _ancestors(model, path):
    mods = [model]
    for part in path.split(".")[:-1] if path else []:
        mods.append(getattr(mods[-1], part))
    return mods[::-1]  # nearest first


def _is_norm(m):
    return isinstance(m, nn.LayerNorm) or type(m).__name__.endswith(("RMSNorm", "LayerNorm"))


def hf_call(block, h, ctx):
    """Call one HF block with what its signature takes (module docstring)."""
    params = inspect.signature(block.forward).parameters
    if "position_embeddings" in params and ctx.position_embeddings is None and not any(
            type(m).__name__.endswith("RotaryEmbedding") for m in block.modules()):
        raise ValueError(f"{type(block).__name__} needs position_embeddings (cos, sin), and no rotary embedding module "
                         "was found beside the blocks given: probe the model they belong to, or pass an adapter with "
                         "rotary=")
    kw = {}
    if "attention_mask" in params:
        kw["attention_mask"] = ctx.mask
    elif ctx.causal or ctx.key_mask is not None or not bool(ctx.allowed.all()):
        raise ValueError(f"{type(block).__name__}.forward takes no attention_mask, so the causal, window or padding "
                         "mask cannot be applied; pass an adapter")
    if "position_ids" in params:
        kw["position_ids"] = ctx.position_ids
    if ctx.position_embeddings is not None and "position_embeddings" in params:
        kw["position_embeddings"] = ctx.position_embeddings
    if ctx.want_weights and "output_attentions" in params:
        kw["output_attentions"] = True
    if "use_cache" in params:
        kw["use_cache"] = False
    return block(h, **kw)


def hf_window(block):
    attn = next(iter(self_attentions(block)), None)
    if attn is None:
        return None
    if hasattr(attn, "sliding_window"):  # Qwen2 (per layer type)
        return attn.sliding_window
    if type(attn).__name__.startswith(("Mistral", "Mixtral")):  # Mistral masks every layer when set
        return getattr(getattr(attn, "config", None), "sliding_window", None)
    return None


def _hf_causal(blocks, path):
    found = set()
    for b in blocks:
        try:
            layout = match(b)[0]
        except ValueError:
            layout = None
        found.add(causal_of(self_attentions(b)[0], layout))
    if len(found) != 1:
        raise ValueError(f"the blocks of {path} differ in causality")
    return found.pop()


def hf_adapter(model, blocks=None):
    """The adapter of a HuggingFace model (module docstring); ``blocks`` narrows it to some of its blocks."""
    if getattr(getattr(model, "config", None), "is_encoder_decoder", False) and callable(
            getattr(model, "get_encoder", None)) and model.get_encoder() is not model:
        raise ValueError(f"{type(model).__name__} is an encoder-decoder model (two stacks of blocks): probe or read one "
                         "stack as a model of its own, e.g. sp.probe(model.get_encoder(), x)")
    path, found = find_blocks(model) if blocks is None else stack_of(model, blocks)
    blocks = list(found) if blocks is None else blocks
    anc = _ancestors(model, path)
    rotary = next((c for a in anc for _, c in a.named_children() if type(c).__name__.endswith("RotaryEmbedding")), None)
    needs_pe = "position_embeddings" in inspect.signature(blocks[0].forward).parameters
    final = next((c for a in anc for _, c in a.named_children() if _is_norm(c)), None)
    configs = {id(c): c for b in blocks for m in b.modules()
               for c in [getattr(m, "config", None)] if hasattr(c, "_attn_implementation")}
    return BlockAdapter(blocks=blocks, causal=_hf_causal(blocks, path), call=hf_call, window=hf_window,
                        rotary=rotary if needs_pe else None, final_norm=final,
                        family=_layout_name(blocks[0]), eager=tuple(configs.values()))


def _layout_name(block):
    try:
        layout = match(block)[0]
    except ValueError:
        return type(block).__name__
    return "vit" if layout == "vit5" else layout


def torch_call(block, h, ctx):
    """One ``nn.TransformerEncoderLayer`` (``batch_first=False`` layers are fed ``(T, B, d)``)."""
    T = h.shape[1]
    src_mask = ~torch.ones(T, T, dtype=torch.bool, device=h.device).tril() if ctx.causal else None  # True: masked
    pad = None if ctx.key_mask is None else ~ctx.key_mask
    bf = block.self_attn.batch_first
    out = block(h if bf else h.transpose(0, 1), src_mask=src_mask, src_key_padding_mask=pad, is_causal=ctx.causal)
    return out if bf else out.transpose(0, 1)


def adapter_for(model, blocks=None, causal=None):
    """The adapter for ``model`` (and optionally some of its ``blocks``): torch encoders, HF models, or plain calls
    of given blocks. ``causal`` overrides where the family allows it."""
    layers = None if blocks is None else BlockAdapter(blocks=blocks).blocks
    torch_layers = layers if layers is not None else (list(model.layers) if isinstance(model, nn.TransformerEncoder)
                                                       else None)
    if torch_layers is not None and all(isinstance(b, nn.TransformerEncoderLayer) for b in torch_layers):
        return BlockAdapter(blocks=torch_layers, causal=bool(causal), call=torch_call,
                            attention=lambda b: b.self_attn, family="torch",
                            final_norm=getattr(model, "norm", None) if isinstance(model, nn.TransformerEncoder) else None)
    if is_hf(model) and (layers is None or all(is_hf(b) for b in layers)):
        ad = hf_adapter(model, layers)
    elif layers is not None:
        return BlockAdapter(blocks=layers, causal=bool(causal))
    else:
        raise ValueError(f"could not find transformer blocks in {type(model).__name__}; pass blocks=[...] (the modules "
                         "applied in sequence to (B, T, d) hidden states) or adapter=sp.BlockAdapter(...)")
    if causal is not None and causal != ad.causal:
        raise ValueError(f"probe runs {type(model).__name__}'s blocks as the model calls them, and their attention is "
                         f"{'causal' if ad.causal else 'not causal'}: causal={causal} cannot be imposed (build the model "
                         "with the other mask, e.g. is_decoder=True, or pass an adapter)")
    return ad
