r"""Probe an off-the-shelf transformer at initialisation, block by block.

``probe(model, x)`` feeds the hidden-state sequence ``x`` (B, T, d) straight to the first block
(token and position embeddings are bypassed, so the measured input overlap *is* the theory's
input) and applies the blocks in sequence, ``h^0 = x``, ``h^l = block_l(h^{l-1})``. A HuggingFace model runs
its **own forward** (``sigprop.models._drive``: a pre-hook puts ``x`` into the first block, hooks collect every
block's output), so its masks, sliding windows per layer, rotary tables, ALiBi, relative-position biases and
per-layer types are its own; other models (``torch.nn.TransformerEncoder``, blocks given out of their model's order, a
:class:`~sigprop.BlockAdapter`) are called block by block. For every ``h^l`` (l = 0..L) and each sequence it records

* the token overlaps (Giorlandino & Goldt 2025, Eq. (1)) ``q = mean_t |h_t|^2 / d`` and
  ``p = mean_{t != s} h_t . h_s / d``;
* the mean off-diagonal cosine ``rho = mean_{t != s} h_t . h_s / (|h_t| |h_s|)`` (rank
  collapse: ``rho -> 1``; equal to ``p / q`` for tokens of equal norm);

and for every block whose self-attention exposes its weights ``A`` (B, H, T, T)

* the inverse participation ratio of each row ``Y^(2)_t = sum_s A_ts^2`` and its entropy
  ``-sum_s A_ts log A_ts`` (Eq. (2); entropy collapse: ``Y^(2) -> 1``), averaged over heads
  and query rows; the REM predicts ``Y^(2)`` from ``(q, p)`` (Result 1, Eq. (4)).

With ``grads=True`` and a ``loss`` of the last hidden state ``h^L`` it also records, per block,
the Frobenius norms of ``dloss/dW_Q``, ``dloss/dW_K``, ``dloss/dW_V`` (the quantities Noci et al.
2022, Eqs. (6)-(8), compare at initialisation), through ``torch.autograd.grad`` so no ``.grad``
is touched.

Entries are **block outputs** (the residual stream a pre-LN block emits; the post-LN output of
a post-LN block). A model's final normalisation (GPT-2 ``ln_f``, Llama ``norm``) is not applied, to ``h^L``
nor to what ``loss`` sees; say ``loss=lambda h: f(model.ln_f(h))`` to include it. The model is probed in eval
mode (dropout off); each module's training flag is restored afterwards, and every hook is removed.

**Which models.** HuggingFace models whose stack of blocks sigprop finds (``sigprop.models._adapter``; every
text and vision family of the installed transformers is tried in ``tests/test_hf_registry.py``: probed, or refused
with a ValueError naming why), bare or wrapped (e.g. ``LlamaForCausalLM``; transformers 4.44 to 5.x; an
encoder-decoder's encoder as a model of its own, ``model.get_encoder()``), ``torch.nn.TransformerEncoder``, any
``blocks=[...]`` called as ``block(h)``, and any model through a :class:`~sigprop.BlockAdapter` (its call signature,
masks, rotary embeddings and attention weights). A model's own failure at ``T`` tokens (a position table shorter than
``T``) is refused with its message. Attention weights are read by a hook on each block's attention module; for HF
models the eager implementation is switched on for the call only when they are wanted (``weights=True``); weights
that are not a distribution over the ``T`` tokens (attention sinks) leave ``ipr`` None with a note.

**Precision.** A float16 / bfloat16 model is run as a float32 copy (its weights are exactly representable), so every
product accumulates in float32 and the half-precision model is not touched; ``x`` is given in the model's dtype.
Measures are computed in float64 (float32 on devices without it).

Used in the book's chapter on off-the-shelf transformers.
"""
from __future__ import annotations

import dataclasses

import torch
from torch import nn

from ..stats._config import threads_for, widest_float
from ..stats._measures import cosine_matrix
from ..stats._validate import check_flag, check_tensor
from ._adapter import BlockAdapter, adapter_for, eager_attention
from ._drive import own_forward
from ._families import attention_views
from ._run import HALF, apply_blocks, apply_driven

__all__ = ["probe", "ProbeResult"]



@dataclasses.dataclass(frozen=True)
class ProbeResult:
    """What :func:`probe` measured; float64 CPU tensors. ``B`` is dropped when ``x`` was (T, d).

    * ``cosine``, ``q``, ``p``: (L+1, B); index 0 is the input ``x``, index l the output of block l.
    * ``ipr``, ``entropy``: (L, B), mean over heads and (unpadded) query rows; ``None`` if some
      block's attention weights could not be read (``notes`` says why).
    * ``ipr_by_position``: (L, B, T), mean over heads of the IPR of query row t (for a causal
      model row t sees t + 1 keys, so uniform attention gives ``1/(t+1)``); padded rows included.
    * ``grad_q``, ``grad_k``, ``grad_v``: (L,), ``||dloss/dW||_F`` per block; ``None`` without
      ``grads=True`` or if some block's projections could not be found.
    * ``cosine_pairs``: (L+1, B, T, T), the cosine of every token pair (padded tokens included), with
      ``pairs=True``; else ``None``. For causal models, where early and late tokens differ.
    * ``family``: the block layout (``"llama"``, ``"neox"``, ``"bert"``, ``"vit"``, ``"gpt2"``, ``"torch"``)
      or ``"custom"``.
    """

    cosine: torch.Tensor
    q: torch.Tensor
    p: torch.Tensor
    ipr: torch.Tensor | None
    entropy: torch.Tensor | None
    ipr_by_position: torch.Tensor | None
    grad_q: torch.Tensor | None
    grad_k: torch.Tensor | None
    grad_v: torch.Tensor | None
    block_names: tuple[str, ...]
    family: str
    causal: bool
    notes: tuple[str, ...]
    cosine_pairs: torch.Tensor | None = None

    @property
    def depth(self) -> int:
        return len(self.block_names)

    def to_dict(self) -> dict:
        """Plain Python values (tensors as nested lists, tuples as lists)."""
        def plain(v):
            if isinstance(v, torch.Tensor):
                return v.tolist()
            return list(v) if isinstance(v, tuple) else v
        return {f.name: plain(getattr(self, f.name)) for f in dataclasses.fields(self)}


def qkv_views(adapter, blocks):
    """Per block, the views of ``W_Q, W_K, W_V`` in its attention module, or None if some cannot be found."""
    views = []
    for block in blocks:
        attn, _ = adapter.attention_of(block)
        v = None if attn is None else attention_views(attn)
        if v is None:
            return None
        views.append([v["w_q"], v["w_k"], v["w_v"]])
    return views


def _grad_norms(value, views):
    """``||d value / dW_{Q,K,V}||_F`` per block, (L, 3), for the views of the modules actually run."""
    params = list({id(v.param): v.param for vs in views for v in vs}.values())
    if any(not p.requires_grad for p in params):
        raise ValueError("grads=True needs the query/key/value weights to have requires_grad=True")
    g = dict(zip(map(id, params), torch.autograd.grad(value.reshape(()), params, allow_unused=True)))
    norms = [[0.0 if g[id(v.param)] is None else float(v.of(g[id(v.param)]).double().norm()) for v in vs]
             for vs in views]
    if not all(map(lambda n: n == n and n != float("inf"), (n for row in norms for n in row))):
        raise ValueError("the gradient norms overflowed (inf or NaN): scale the loss down, or probe in float64")
    return torch.tensor(norms, dtype=torch.float64)


def _geometry(h, m):
    """h (B, T, d), m (B, T) 0/1 -> mean cosine, q, p over unpadded tokens, each (B,)."""
    T, d = h.shape[-2:]
    pair = m[:, :, None] * m[:, None, :] * (1 - torch.eye(T, dtype=h.dtype, device=h.device))
    gram = h @ h.transpose(-1, -2) / d
    npair = pair.sum((-1, -2))
    cos = (cosine_matrix(h) * pair).sum((-1, -2)) / npair
    q = (torch.diagonal(gram, dim1=-2, dim2=-1) * m).sum(-1) / m.sum(-1)
    return cos, q, (gram * pair).sum((-1, -2)) / npair


def _width(adapter, block, model=None):
    """The hidden size a block expects: a HF model's ``hidden_size`` where its own forward runs the blocks, else the
    input width of the block's first attention projection; None if it cannot be told."""
    hidden = getattr(getattr(model, "config", None), "hidden_size", None)
    if model is not None and isinstance(hidden, int) and own_forward(model, adapter):
        return hidden
    attn, _ = adapter.attention_of(block)
    if isinstance(attn, nn.MultiheadAttention):
        return attn.embed_dim
    first = next((c for c in (attn.children() if attn is not None else ())
                  if isinstance(c, nn.Linear) or type(c).__name__ == "Conv1D"), None)
    if first is None:
        return None
    return int(first.weight.shape[0] if type(first).__name__ == "Conv1D" else first.weight.shape[1])


def _key_mask(attention_mask, adapter, B, T, unbatched, device):
    if attention_mask is None:
        return None
    if not adapter.masked:
        raise ValueError("attention_mask cannot be passed to custom blocks (probe calls them as block(h)); mask inside "
                         "the blocks, or give an adapter whose call applies ctx.mask")
    if not isinstance(attention_mask, torch.Tensor):
        raise TypeError(f"attention_mask must be a torch.Tensor; got {type(attention_mask).__name__}")
    key_mask = attention_mask[None] if unbatched else attention_mask
    if key_mask.shape != (B, T):
        want = f"({T},)" if unbatched else f"({B}, {T})"
        raise ValueError(f"attention_mask must have shape {want}; got {tuple(attention_mask.shape)}")
    if not bool(((key_mask == 0) | (key_mask == 1)).all()):
        raise ValueError("attention_mask must hold 0/1 (or bool): 1 for real tokens, 0 for padding")
    key_mask = key_mask.to(device=device, dtype=torch.bool)
    if bool((key_mask.sum(-1) < 2).any()):
        raise ValueError("attention_mask must leave at least 2 real tokens in every sequence")
    if adapter.causal and not bool(key_mask[:, 0].all()):
        raise ValueError("with causal=True every query must see a real key: pad on the right, not the left")
    return key_mask


def _check_positions(adapter, T):
    """GPT-2 in transformers 4.x masks with a causal buffer of n_positions rows: longer sequences cannot run."""
    for block in adapter.blocks[:1]:
        attn, _ = adapter.attention_of(block)
        buf = getattr(attn, "bias", None) if attn is not None else None
        if isinstance(buf, torch.Tensor) and buf.ndim == 4 and buf.dtype == torch.bool and buf.shape[-1] < T:
            raise ValueError(f"T = {T} exceeds the {buf.shape[-1]} positions of {type(attn).__name__}'s causal-mask "
                             f"buffer (n_positions); build the model with n_positions >= {T}")


def _prepare(model, x, blocks, adapter, causal, flags):
    """Validate the arguments -> (adapter, hidden states (B, T, d), unbatched)."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module; got {type(model).__name__}")
    if causal is not None:
        causal = check_flag(causal, "causal")
    for name, value in flags.items():
        check_flag(value, name)
    if adapter is not None:
        if not isinstance(adapter, BlockAdapter):
            raise TypeError(f"adapter must be a sigprop.BlockAdapter; got {type(adapter).__name__}")
        if blocks is not None or causal is not None:
            raise ValueError("give the blocks and causality in the adapter, not as blocks= / causal=")
    else:
        adapter = adapter_for(model, blocks, causal)
    if any(p.is_meta for b in adapter.blocks for p in b.parameters()):
        raise ValueError("the model's parameters are on the meta device (shapes without values): materialise and "
                         "initialise it (model.to_empty(device=...), then its initialiser) before probing")
    check_tensor(x, "x")
    if x.ndim not in (2, 3):
        raise ValueError(f"x must have shape (B, T, d) or (T, d); got {tuple(x.shape)}")
    h = x[None] if x.ndim == 2 else x
    if h.shape[1] < 2:
        raise ValueError(f"x needs T >= 2 tokens; got shape {tuple(x.shape)}")
    width = _width(adapter, adapter.blocks[0], model)
    if width is not None and h.shape[-1] != width:
        raise ValueError(f"x must have last dimension d = {width} (the hidden size of "
                         f"{type(adapter.blocks[0]).__name__}); got shape {tuple(x.shape)}")
    param = next((p for b in adapter.blocks for p in b.parameters()), None)
    if param is not None and (x.device != param.device or x.dtype != param.dtype):
        raise ValueError(f"x must be on the model's device and dtype ({param.device}, {param.dtype}); "
                         f"got ({x.device}, {x.dtype}): pass x.to(device, dtype)")
    if adapter.masked:
        _check_positions(adapter, h.shape[1])
    return adapter, h, x.ndim == 2


def probe(model: nn.Module, x: torch.Tensor, *, blocks=None, adapter: BlockAdapter | None = None,
          attention_mask=None, causal=None, loss=None, grads: bool = False, pairs: bool = False,
          weights: bool = True) -> ProbeResult:
    """Token geometry and attention statistics of ``model``'s blocks on hidden states ``x``.

    Args:
        model: a HuggingFace model (Llama, Qwen2, Mistral, GPT-NeoX, ViT, BERT, RoBERTa, GPT-2 and models
            sharing their layers; bare or wrapped, e.g. ``LlamaForCausalLM``), an ``nn.TransformerEncoder``, or
            any module when ``blocks`` or ``adapter`` is given.
        x: (B, T, d) or (T, d) hidden states fed to the first block; same device and dtype as the
            blocks' parameters (half precision included: run in float32, module docstring).
        blocks: the modules applied in sequence to (B, T, d) hidden states (default: found). Blocks of a
            recognised family (e.g. ``model.h[:12]``) are called as the family's; others as ``block(h)``.
        adapter: a :class:`~sigprop.BlockAdapter` saying how to run the blocks (instead of ``blocks``).
        attention_mask: (B, T) (or (T,)) key mask, 1 / True for real tokens; padded tokens are
            masked as keys and left out of every mean. Not for blocks called as ``block(h)``.
        causal: mask keys after the query; default the model's own (True for Llama-family, GPT-NeoX and GPT-2
            blocks, which cannot be made non-causal for GPT-2; ``config.is_decoder`` for BERT), False otherwise.
            Blocks called as ``block(h)`` get no mask: there it only labels the result.
        loss: callable of ``h^L`` (shaped like ``x``; float32 for a half-precision model) returning a scalar;
            needs ``grads=True``.
        grads: record ``||dloss/dW_{Q,K,V}||_F`` per block.
        pairs: also return the cosine of every token pair per block (``cosine_pairs``).
        weights: read the attention weights (``ipr``, ``entropy``); False skips the eager attention.

    Returns:
        :class:`ProbeResult` (shapes there).
    """
    ad, h, unbatched = _prepare(model, x, blocks, adapter, causal,
                                dict(grads=grads, pairs=pairs, weights=weights))
    if grads and not callable(loss):
        raise ValueError(f"grads=True needs loss, a callable of the last hidden state; got {loss!r}")
    if loss is not None and not grads:
        raise ValueError("loss is only used for gradient norms: pass grads=True as well")
    B, T, _ = h.shape
    key_mask = _key_mask(attention_mask, ad, B, T, unbatched, h.device)
    notes = []
    if not ad.masked and ad.causal:
        notes.append("custom blocks get no mask from probe: causal=True only labels the result")
    if h.dtype in HALF:
        notes.append(f"{h.dtype} blocks run as float32 copies (float32 accumulation)")
    if ad.final_norm is not None:
        notes.append("entries are block outputs: the model's final LayerNorm is not applied")
    names = {id(m): n for n, m in model.named_modules()}
    names = tuple(names.get(id(b), f"blocks[{i}]") for i, b in enumerate(ad.blocks))
    modules = {id(m): m for root in (model, *ad.blocks) for m in root.modules()}
    training = {k: m.training for k, m in modules.items()}
    if any(training.values()):
        notes.append("the model was in training mode: probed in eval mode (dropout off), mode restored")
    grad_norms = None
    try:
        for m in modules.values():
            m.training = False
        with eager_attention(ad.eager if weights else ()), torch.set_grad_enabled(grads), \
                threads_for(B * T * h.shape[-1] ** 2):
            work = h.float() if h.dtype in HALF else h
            if own_forward(model, ad):
                states, stats, ran = apply_driven(model, ad, work, key_mask, names, weights=weights)
            else:
                states, stats, ran = apply_blocks(ad, work, key_mask, names, weights=weights)
            if grads:
                views = qkv_views(ad, ran)
                if views is None:
                    notes.append("no query/key/value weights found in some block: grad_q/k/v are None")
                else:
                    value = loss(states[-1][0] if unbatched else states[-1])
                    if not isinstance(value, torch.Tensor) or value.numel() != 1 or not value.requires_grad:
                        raise ValueError("loss must return a scalar tensor that depends on the hidden states")
                    grad_norms = _grad_norms(value, views)
    finally:
        for k, m in modules.items():
            m.training = training[k]
    return _result(states, stats, key_mask, grad_norms, names, ad, notes, unbatched, pairs, weights)


def _result(states, stats, key_mask, grad_norms, names, ad, notes, unbatched, pairs, weights):
    B, T = states[0].shape[:2]
    wide = widest_float(states[0].device)
    weight = torch.ones(B, T, dtype=wide, device=states[0].device) if key_mask is None else key_mask.to(wide)
    geometry = [_geometry(s.detach().to(wide), weight) for s in states]
    cosine, q, p = (torch.stack([g[j] for g in geometry]).cpu().double() for j in range(3))  # (L+1, B) each
    pair_cos = torch.stack([cosine_matrix(s.detach().to(wide)) for s in states]).cpu().double() if pairs else None
    ipr = entropy = by_position = None
    unreadable = [why for _, why in stats if why is not None]
    if not weights:
        notes.append("attention weights not read (weights=False): ipr/entropy are None")
    elif unreadable:
        notes.append("attention weights unavailable, ipr/entropy are None: " + "; ".join(unreadable))
    else:
        rows = torch.stack([s[0].to(wide) for s, _ in stats])  # (L, B, T)
        w = weight.to(rows.device)
        ipr = ((rows * w).sum(-1) / w.sum(-1)).cpu().double()
        entropy = ((torch.stack([s[1].to(wide) for s, _ in stats]) * w).sum(-1) / w.sum(-1)).cpu().double()
        by_position = rows.cpu().double()

    def squeeze(t, dim=1):
        return t.squeeze(dim) if (t is not None and unbatched) else t

    return ProbeResult(
        cosine=squeeze(cosine), q=squeeze(q), p=squeeze(p), ipr=squeeze(ipr), entropy=squeeze(entropy),
        ipr_by_position=squeeze(by_position),
        grad_q=None if grad_norms is None else grad_norms[:, 0],
        grad_k=None if grad_norms is None else grad_norms[:, 1],
        grad_v=None if grad_norms is None else grad_norms[:, 2],
        block_names=names, family=ad.family, causal=ad.causal, notes=tuple(notes), cosine_pairs=squeeze(pair_cos))
