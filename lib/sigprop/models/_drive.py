r"""Run a HuggingFace model's own forward with chosen hidden states entering its blocks: :func:`drive`.

The probe and the replay proof of a reading need the blocks called exactly as the model calls them: its masks
(causal, sliding windows per layer, padding), positions (rotary tables, ALiBi, relative-position biases passed from
block to block), per-layer types and anything a future family adds. Re-creating those call arguments per family is
what broke on every new family, so the model's own forward is run instead:

* the model is called with ``inputs_embeds`` of zeros of shape ``(B, T, width)`` (and ``attention_mask``, the key
  mask, where given), or with ``pixel_values`` of zeros of the configured image size for vision encoders, so it builds
  every block argument for ``T`` tokens itself;
* a forward pre-hook on the first block replaces its hidden states by the given ``(B, T, d)`` tensor (the embeddings,
  position embeddings, embedding norms and Gemma's ``sqrt(d)`` are bypassed: the probe's input *is* the first block's
  input);
* a forward hook on every block hands ``(index, args, kwargs, output hidden states)`` to the caller, and the last
  requested block stops the forward (:class:`_Stop`), so the model's final norm and head never run.

Used by :func:`sigprop.probe` and :func:`sigprop.read_init`'s replay (``sigprop.models._replay``).
"""
from __future__ import annotations

import contextlib
import inspect

import torch
from torch import nn

from ._adapter import hf_call, stack_of

__all__: list[str] = []


class _Stop(Exception):
    """Raised after the last requested block: the rest of the model does not run."""


def hidden_of(output):
    """A block's output hidden states: the tensor, or the first element of a tuple (transformers 4.x)."""
    return output[0] if isinstance(output, (tuple, list)) else output


def _replace_hidden(args, kwargs, h):
    if args:
        return (h, *args[1:]), kwargs
    if "hidden_states" in kwargs:
        return args, {**kwargs, "hidden_states": h}
    raise ValueError("the first block was called without hidden states as its first argument or hidden_states=")


def _entry(model):
    """-> (keyword, width or image shape) of the model's forward input, or None where it cannot be driven."""
    params = inspect.signature(model.forward).parameters
    cfg = getattr(model, "config", None)
    if "inputs_embeds" in params:
        emb = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
        width = getattr(emb, "embedding_dim", None) or getattr(cfg, "hidden_size", None)
        return ("inputs_embeds", width) if isinstance(width, int) else None
    if "pixel_values" in params and cfg is not None and isinstance(getattr(cfg, "image_size", None), int):
        return "pixel_values", (getattr(cfg, "num_channels", 3), cfg.image_size, cfg.image_size)
    return None


def drivable(model) -> bool:
    """Whether :func:`drive` can run ``model`` (a HF model taking ``inputs_embeds`` or ``pixel_values``)."""
    return isinstance(model, nn.Module) and any(c.__module__.startswith("transformers.") for c in type(model).__mro__) \
        and _entry(model) is not None


def own_forward(model, adapter) -> bool:
    """Whether ``model``'s blocks, as ``adapter`` gives them, run through :func:`drive`: a HF model read by sigprop's HF
    adapter whose blocks are a run of its own stack, in order (blocks given twice or out of order are called one by
    one through the adapter)."""
    if adapter.call is not hf_call or not drivable(model):
        return False
    try:
        stack = [id(b) for b in stack_of(model, adapter.blocks)[1]]
    except ValueError:          # blocks of no one stack of the model: called one by one through the adapter
        return False
    ids = [id(b) for b in adapter.blocks]
    return ids[0] in stack and stack[stack.index(ids[0]):stack.index(ids[0]) + len(ids)] == ids


def model_configs(model) -> tuple:
    """Every HF config of ``model``'s modules (for ``eager_attention``)."""
    return tuple({id(c): c for m in model.modules() for c in [getattr(m, "config", None)]
                  if hasattr(c, "_attn_implementation")}.values())


def drive(model, blocks, h, *, key_mask=None, on_block, weights=False) -> None:
    """Run ``model``'s forward with ``h (B, T, d)`` entering ``blocks[0]``; ``on_block(i, args, kwargs, out)`` after
    each of ``blocks`` (in the model's order), ``out`` the block's hidden states. Stops after ``blocks[-1]``.
    ``weights``: ask for the attention weights (``output_attentions=True`` where the forward takes it: transformers
    4.x's SDPA attention then computes them eagerly)."""
    kind, shape = _entry(model)
    B, T = h.shape[:2]
    if kind == "inputs_embeds":
        kw = dict(inputs_embeds=torch.zeros(B, T, shape, dtype=h.dtype, device=h.device))
        if key_mask is not None:   # no mask: the model's own default (some families take no all-ones integer mask)
            kw["attention_mask"] = key_mask.long()
    else:
        kw = dict(pixel_values=torch.zeros(B, *shape, dtype=h.dtype, device=h.device))
    params = inspect.signature(model.forward).parameters
    if "use_cache" in params:
        kw["use_cache"] = False
    if weights and "output_attentions" in params:
        kw["output_attentions"] = True
    index = {id(b): i for i, b in enumerate(blocks)}
    calls = {}

    def pre(module, args, kwargs):
        if module is blocks[0]:
            args, kwargs = _replace_hidden(args, kwargs, h)
        calls[id(module)] = (args, kwargs)
        return args, kwargs

    def post(module, args, kwargs, output):
        a, k = calls.pop(id(module))
        on_block(index[id(module)], a, k, hidden_of(output))
        if module is blocks[-1]:
            raise _Stop

    handles = []
    try:
        for b in blocks:
            handles.append(b.register_forward_pre_hook(pre, with_kwargs=True))
            handles.append(b.register_forward_hook(post, with_kwargs=True))
        with contextlib.suppress(_Stop):
            model(**kw)
            raise ValueError(f"{type(model).__name__}'s forward did not reach its last block: its blocks are not "
                             "those it runs (pass blocks= or an adapter)")
    finally:
        for handle in handles:
            handle.remove()
