r"""The proof of a reading: sigprop's block, built from the config read and the model's own weights, replays the
model's block (:func:`replay`).

:func:`sigprop.read_init` turns a model into a :class:`~sigprop.BlockConfig` and the model's weights as
:class:`~sigprop.TransformerParams`. A reading is a claim about the model; it is checked before it is returned: on
``B = 2`` sequences of ``T`` random tokens (``N(0, 1)`` features, a fixed seed) in float64, every block of the model,
called exactly as the model calls it, is compared with :func:`sigprop.models.apply_block` of the config read on the
same input,

.. math::  \text{error} = \max_l \frac{\max |y^{sigprop}_l - y^{model}_l|}{\mathrm{rms}(y^{model}_l)}.

**How the model's block is called.** For a HuggingFace model the call arguments (masks, rotary tables, position ids,
anything a family passes) are captured from the model's own forward (``sigprop.models._drive``), at ``T`` tokens,
from a float32 copy where the model is in half precision (so its rotary tables are float32, as the config's); each
block is then run as a float64 copy with those arguments (floating tensors cast to float64) on the float64 tokens.
Other models (``torch.nn.TransformerEncoder``, a :class:`~sigprop.BlockAdapter`) are called through their adapter.
``T`` is 12, or a window plus 4 where the model has a sliding window of fewer than 60 keys (so the window is
exercised); a longer window is read from the config and cannot matter below its length.

**Tolerance** ``_TOL = 1e-4`` of the rms. Both sides run in float64, except what HF computes in float32 whatever
the input's dtype: RMSNorm casts to float32 (Llama and its descendants), eager attention takes its softmax in float32.
Those leave up to 4.4e-7 in these replays (scrambled weights, logits of order one; measured on every family in
``tests/test_hf_registry.py``: BERT and GPT-2, wholly float64, to 1e-15), growing with the logits' size; the tolerance
is 200 times that, while a misread part moves the output by 1e-3 or more (a branch multiplier, a window, a gain
convention, a value width, a norm placement). ``eps`` is not left to the replay: it is measured
(``sigprop.models._parts``). The replay
proves the *forward*; that the *map* describes the config is proved by the Monte Carlo tests of the maps
(``tests/test_block*.py``) and, per family, by ``tests/test_hf_predictions.py``.
"""
from __future__ import annotations

import dataclasses

import torch
from torch import nn

from ..block import apply_block
from ._adapter import BlockCall, eager_attention, masks
from ._drive import drive, hidden_of, model_configs, own_forward
from ._parts import own_copy

__all__ = ["Replay"]

#: Replay tolerance, relative to the rms of the model's block output (module docstring).
_TOL = 1e-4
#: Tokens per replay sequence; a sliding window shorter than _WINDOW_MAX keys is exercised at window + 4.
_T, _WINDOW_MAX = 12, 60
HALF = (torch.float16, torch.bfloat16)


@dataclasses.dataclass(frozen=True)
class Replay:
    """A reading's proof (module docstring): ``error`` the largest relative difference, at ``block``, on ``T``
    tokens; ``tolerance``; ``errors`` per block."""

    error: float
    block: int
    T: int
    tolerance: float
    errors: tuple

    @property
    def proved(self) -> bool:
        return self.error <= self.tolerance


def _cast(v):
    if isinstance(v, torch.Tensor):
        return v.double() if v.is_floating_point() else v
    if isinstance(v, (tuple, list)):
        return type(v)(_cast(u) for u in v)
    if isinstance(v, dict):
        return {k: _cast(u) for k, u in v.items()}
    return v


def _replay_T(parts) -> int:
    windows = [p.window for p in parts if p.window is not None and p.window < _WINDOW_MAX]
    return max([_T] + [w + 4 for w in windows])


def _captured_calls(model, adapter, x):
    """Each block's own call ``(args, kwargs)`` on ``x`` from the model's forward (module docstring)."""
    param = next(model.parameters())
    run_model, blocks = model, adapter.blocks
    if param.dtype in HALF:
        run_model = own_copy(model).float()
        where = {id(m): n for n, m in model.named_modules()}
        copies = dict(run_model.named_modules())
        blocks = [copies[where[id(b)]] for b in adapter.blocks]
    calls = [None] * len(blocks)

    def keep(i, args, kwargs, out):
        calls[i] = (args, kwargs)

    with torch.no_grad(), eager_attention(model_configs(run_model)):
        drive(run_model, blocks, x.to(next(run_model.parameters()).dtype), on_block=keep)
    return calls


def _adapter_ctx(adapter, x):
    B, T = x.shape[:2]
    pos = torch.arange(T)[None].expand(B, T)

    def ctx(block):
        allowed, additive = masks(B, T, causal=adapter.causal, window=adapter.window_of(block), key_mask=None,
                                  dtype=x.dtype, device=x.device)
        rot = None if adapter.rotary is None else _cast(adapter.rotary(x.float(), pos))
        return BlockCall(additive, allowed, pos, rot, False, adapter.causal, None)
    return ctx


@torch.no_grad()
def replay(model: nn.Module, adapter, parts, configs, params) -> Replay:
    """Replay every block of ``model`` with sigprop's block of ``configs`` (one per block) and ``params`` (module
    docstring)."""
    T = _replay_T(parts)
    d = configs[0].d
    x = torch.randn(2, T, d, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    calls = _captured_calls(model, adapter, x) if own_forward(model, adapter) else None
    ctx = None if calls is not None else _adapter_ctx(adapter, x)
    errors = []
    with eager_attention(model_configs(model)):
        for i, block in enumerate(adapter.blocks):
            try:
                b64 = own_copy(block).double().eval()
                if calls is not None:
                    args, kwargs = calls[i]
                    y = hidden_of(b64(x, *_cast(args[1:]), **_cast(kwargs)))
                else:
                    y = adapter.run(b64, x, ctx(block))
                mine = apply_block(x[None], params, configs[i], i)[0]
            except Exception as e:   # the block cannot even be run as read: not proved, say why
                raise ValueError(f"the reading of {type(block).__name__} could not be replayed in float64 "
                                 f"({type(e).__name__}: {str(e)[:300]}): not read") from e
            err = float((mine - y).abs().max() / y.pow(2).mean().sqrt().clamp_min(1e-300))
            errors.append(err if err == err else float("inf"))
    worst = max(range(len(errors)), key=lambda i: errors[i])
    return Replay(errors[worst], worst, T, _TOL, tuple(errors))
