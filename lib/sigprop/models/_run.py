r"""How :func:`sigprop.probe` runs a model's blocks: through the model's own forward (:func:`apply_driven`,
``sigprop.models._drive``) for a HF model whose blocks are a run of its own stack, else one call per block through
its adapter (:func:`apply_blocks`); both return every block's output and its attention statistics (or why not).
"""
from __future__ import annotations

import torch

from ..stats._measures import attention_entropy, attention_ipr
from ._adapter import BlockCall, eager_attention, masks
from ._drive import drive, model_configs
from ._parts import own_copy

__all__: list[str] = []

HALF = (torch.float16, torch.bfloat16)


def _attention_stats(w, B, T, name):
    """Weights (B, H, T, T) of one block -> ((IPR rows, entropy rows) each (B, T) in the measure dtype, None), or
    (None, why not). Rows are averaged over heads at once, so no (L, B, H, T, T) stack is ever held."""
    if not isinstance(w, torch.Tensor):
        return None, (f"block {name}: its attention module returned no weights" if w is None else
                      f"block {name}: the adapter's weights() returned {type(w).__name__}")
    if w.ndim != 4 or w.shape[0] != B or w.shape[-2:] != (T, T):
        return None, f"block {name}: attention weights of shape {tuple(w.shape)}, expected (B, H, T, T) = ({B}, H, {T}, {T})"
    w = w.detach()
    if not bool(torch.isfinite(w).all()):
        raise ValueError(f"block {name}: the attention weights are not finite (the logits overflowed in {w.dtype}; "
                         "are the inputs' norms far from those the model expects?)")
    w = w.float() if w.dtype in HALF else w
    sums = w.sum(-1)
    if not bool(((sums - 1).abs() <= 1e-3).all()):   # float16 rows sum to 1 within ~1e-3
        return None, (f"block {name}: its attention weights are not a distribution over the {T} tokens (rows sum to "
                      f"{float(sums.min()):.3g} ... {float(sums.max()):.3g}: attention sinks or extra keys)")
    return (attention_ipr(w).mean(1), attention_entropy(w).mean(1)), None


def _runnable(block, work):
    """The module to call: the block itself, or a float32 copy of a half-precision block."""
    param = next(block.parameters(), None)
    if param is None or param.dtype not in HALF:
        return block
    return own_copy(block).to(work)


def _checked(out, h, name):
    if not isinstance(out, torch.Tensor) or out.shape != h.shape:
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise ValueError(f"block {name} must return hidden states of shape {tuple(h.shape)}; got {got}")
    if not bool(torch.isfinite(out).all()):
        raise ValueError(f"block {name} produced NaN or inf hidden states")
    return out


def _weights_hook(adapter, block, weights, store):
    """-> (hook handle or None, why not) for reading ``block``'s attention weights into ``store``."""
    attn, why = adapter.attention_of(block) if weights else (None, "not requested (weights=False)")
    if attn is None:
        return None, why
    return attn.register_forward_hook(lambda m, a, k, o: store.append(adapter.read_weights(m, a, k, o)),
                                      with_kwargs=True), None


def _stats(store, why, B, T, name):
    if why is None and len(store) != 1:
        why = (f"its attention module ran {len(store)} times, expected once"
               + (" (a fused fast path skipped it)" if not store else ""))
    if why is not None:
        return None, why if why.startswith("block") else f"block {name}: {why}"
    return _attention_stats(store[0], B, T, name)


def apply_blocks(adapter, h, key_mask, names, *, weights):
    """Run the blocks on ``h`` one call each, through the adapter (grad mode set by the caller) -> (states,
    per-block stats or why-not, modules run)."""
    B, T, _ = h.shape
    pos = torch.arange(T, device=h.device)[None].expand(B, T)
    states, stats, ran = [h], [], []
    for i, block in enumerate(adapter.blocks):
        run = _runnable(block, h.dtype)
        allowed, additive = masks(B, T, causal=adapter.causal, window=adapter.window_of(block), key_mask=key_mask,
                                  dtype=h.dtype, device=h.device)
        ctx = BlockCall(additive, allowed, pos, None if adapter.rotary is None else adapter.rotary(states[-1], pos),
                        weights, adapter.causal, key_mask)
        store = []
        handle, why = _weights_hook(adapter, run, weights, store)
        try:
            out = adapter.run(run, states[-1], ctx)
        except ValueError:
            raise
        except Exception as e:   # the block's own code failed on this call: a refusal naming the block
            raise ValueError(f"block {names[i]} ({type(block).__name__}) could not be run as block(h, ...) on hidden "
                             f"states {tuple(h.shape)} ({type(e).__name__}: {str(e)[:300]}); pass an adapter") from e
        finally:
            if handle is not None:
                handle.remove()
        states.append(_checked(out, h, names[i]))
        stats.append(_stats(store, why, B, T, names[i]))
        ran.append(run)
    return states, stats, ran


def apply_driven(model, adapter, h, key_mask, names, *, weights):
    """The same through the model's own forward (``sigprop.models._drive``): its masks, positions and per-layer
    arguments; a half-precision model runs as a float32 copy."""
    B, T, _ = h.shape
    blocks = adapter.blocks
    if next(model.parameters()).dtype in HALF:
        where = {id(m): n for n, m in model.named_modules()}
        model = own_copy(model).float()
        copies = dict(model.named_modules())
        blocks = [copies[where[id(b)]] for b in blocks]
    stores = [[] for _ in blocks]
    hooked = [_weights_hook(adapter, b, weights, s) for b, s in zip(blocks, stores)]
    states = [h] + [None] * len(blocks)

    def keep(i, args, kwargs, out):
        states[i + 1] = _checked(out, h, names[i])

    try:
        with eager_attention(model_configs(model) if weights else ()):
            drive(model, blocks, h, key_mask=key_mask, on_block=keep, weights=weights)
    except ValueError:
        raise
    except Exception as e:   # the model's own code failed: say where, as a refusal
        cfg = getattr(model, "config", None)
        n = getattr(cfg, "max_position_embeddings", None) or getattr(cfg, "n_positions", None)
        raise ValueError(f"{type(model).__name__}'s own forward failed at T = {T} tokens ({type(e).__name__}: "
                         f"{str(e)[:300]})" + (f"; T may exceed its {n} positions: build it with more"
                                               if n and T > n else "")) from e
    finally:
        for handle, _ in hooked:
            if handle is not None:
                handle.remove()
    stats = [_stats(s, why, B, T, names[i]) for i, (s, (_, why)) in enumerate(zip(stores, hooked))]
    return states, stats, blocks
