r"""Probe an off-the-shelf transformer at initialisation, block by block.

``probe(model, x)`` feeds the hidden-state sequence ``x`` (B, T, d) straight to the first block
(token and position embeddings are bypassed, so the measured input overlap *is* the theory's
input) and applies the blocks in sequence, ``h^0 = x``, ``h^l = block_l(h^{l-1})``. For every
``h^l`` (l = 0..L) and each sequence it records

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
a post-LN block). A model's final LayerNorm (GPT-2 ``ln_f``, ``TransformerEncoder.norm``) is
not applied, to ``h^L`` nor to what ``loss`` sees; say ``loss=lambda h: f(model.ln_f(h))`` to
include it. The model is probed in eval mode (dropout off); each module's training flag is
restored afterwards, and every hook is removed.

How each family is read (blocks found from the model or its ``base_model``):

* HF ``BertModel`` (post-LN): ``encoder.layer``; each ``BertLayer`` gets an explicit additive
  mask (causal when ``config.is_decoder``) and ``output_attentions=True``; ``A`` is the
  ``attention_probs`` its ``BertSelfAttention`` returns (the SDPA class falls back to eager).
* HF ``GPT2Model`` (pre-LN, always causal): ``h``; ``A`` is what ``GPT2Attention`` returns,
  which is ``None`` unless the model was built with ``attn_implementation="eager"``.
* ``torch.nn.TransformerEncoder`` (either ``norm_first``): ``layers``; ``A`` is recomputed by
  calling the layer's ``self_attn`` again on the inputs it was just called with, with
  ``need_weights=True, average_attn_weights=False``. ``batch_first=False`` layers are fed
  ``(T, B, d)``.
* ``blocks=[...]``: each block is called as ``block(h)`` (first element if it returns a tuple);
  ``A`` is read from its single ``nn.MultiheadAttention`` (as above) or HF attention module.

Used in the book's chapter on off-the-shelf transformers.
"""
from __future__ import annotations

import dataclasses
import enum
import inspect

import torch
from torch import nn

from ..stats._measures import attention_entropy, attention_ipr, cosine_matrix
from ..stats._validate import check_tensor

__all__ = ["probe", "ProbeResult"]


class Family(enum.Enum):
    BERT = "bert"
    GPT2 = "gpt2"
    TORCH = "torch"
    CUSTOM = "custom"


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


def _is(obj, name):
    """``obj`` is an instance of the transformers class ``name`` (or a subclass), without importing it."""
    return any(c.__name__ == name and c.__module__.startswith("transformers.") for c in type(obj).__mro__)


def _family(block) -> Family:
    if _is(block, "BertLayer"):
        return Family.BERT
    if _is(block, "GPT2Block"):
        return Family.GPT2
    if isinstance(block, nn.TransformerEncoderLayer):
        return Family.TORCH
    return Family.CUSTOM


def _find_blocks(model):
    """-> (container, blocks) for the supported families, looking at ``model`` and its ``base_model``."""
    candidates = [model]
    base = getattr(model, "base_model", None)
    if isinstance(base, nn.Module) and base is not model:
        candidates.append(base)
    for m in candidates:
        if _is(m, "BertModel"):
            return m, list(m.encoder.layer)
        if _is(m, "GPT2Model"):
            return m, list(m.h)
        if isinstance(m, nn.TransformerEncoder):
            return m, list(m.layers)
    raise ValueError(f"could not find transformer blocks in {type(model).__name__}; pass blocks=[...] "
                     "(the modules applied in sequence to (B, T, d) hidden states)")


def _attention_module(block):
    """-> (self-attention module, None) or (None, why not)."""
    fam = _family(block)
    if fam is Family.BERT:
        return block.attention.self, None
    if fam is Family.GPT2:
        return block.attn, None
    if fam is Family.TORCH:
        return block.self_attn, None
    found = [m for m in block.modules()
             if isinstance(m, nn.MultiheadAttention) or _is(m, "BertSelfAttention") or _is(m, "GPT2Attention")]
    if len(found) != 1:
        return None, (f"{type(block).__name__} holds {len(found)} recognised attention modules "
                      "(nn.MultiheadAttention, BertSelfAttention, GPT2Attention); need exactly one")
    return found[0], None


def _qkv_slices(attn):
    """-> [(parameter, index)] for W_Q, W_K, W_V, or None."""
    if isinstance(attn, nn.MultiheadAttention):
        if not attn._qkv_same_embed_dim:
            return [(attn.q_proj_weight, ...), (attn.k_proj_weight, ...), (attn.v_proj_weight, ...)]
        E = attn.embed_dim  # in_proj_weight (3E, E): rows [W_Q; W_K; W_V]
        return [(attn.in_proj_weight, slice(i * E, (i + 1) * E)) for i in range(3)]
    if _is(attn, "BertSelfAttention"):
        return [(attn.query.weight, ...), (attn.key.weight, ...), (attn.value.weight, ...)]
    if _is(attn, "GPT2Attention") and not attn.is_cross_attention:
        E = attn.split_size  # Conv1D c_attn.weight (d, 3E), y = x @ W: columns [W_Q | W_K | W_V]
        return [(attn.c_attn.weight, (slice(None), slice(i * E, (i + 1) * E))) for i in range(3)]
    return None


def _width(block):
    """The hidden size a block expects, or None if it cannot be told."""
    fam = _family(block)
    if fam is Family.BERT:
        return block.attention.self.query.in_features
    if fam is Family.GPT2:
        return block.ln_1.normalized_shape[-1]
    attn, _ = _attention_module(block)
    return attn.embed_dim if isinstance(attn, nn.MultiheadAttention) else None


def _capture(store):
    """Forward hook (with kwargs) appending, per call, ``(shape of A, Y^(2) rows, entropy rows)``.

    Rows are averaged over heads, (B, H, T, T) -> (B, T), in float64 as soon as the weights exist,
    so no (L, B, H, T, T) stack is ever held.
    """
    def hook(module, args, kwargs, output):
        w = output[1] if isinstance(output, (tuple, list)) and len(output) > 1 else None
        if isinstance(module, nn.MultiheadAttention) and (w is None or w.ndim != 4):  # not per head
            bound = inspect.signature(module.forward).bind(*args, **kwargs)
            bound.arguments.update(need_weights=True, average_attn_weights=False)
            with torch.no_grad():  # .forward, not __call__: no hooks, no recursion
                w = module.forward(*bound.args, **bound.kwargs)[1]
        if w is None or w.ndim != 4:
            store.append(None if w is None else (tuple(w.shape), None, None))
            return
        w = w.detach().double()
        store.append((tuple(w.shape), attention_ipr(w).mean(1), attention_entropy(w).mean(1)))
    return hook


def _masks(key_mask, causal, T, dtype, device):
    """-> allowed (B|1, 1, T, T) bool and the additive float mask with finfo.min where not allowed."""
    allowed = torch.ones(1, 1, T, T, dtype=torch.bool, device=device)
    if key_mask is not None:
        allowed = allowed & key_mask[:, None, None, :]
    if causal:
        allowed = allowed & torch.ones(T, T, dtype=torch.bool, device=device).tril()
    additive = torch.zeros(allowed.shape, dtype=dtype, device=device).masked_fill(~allowed, torch.finfo(dtype).min)
    return allowed, additive


def _run_block(block, h, *, causal, key_mask, additive):
    fam = _family(block)
    if fam is Family.BERT:
        return block(h, attention_mask=additive, output_attentions=True)[0]
    if fam is Family.GPT2:  # GPT2Attention applies its own causal mask; SDPA needs it in the mask once padded
        return block(h, attention_mask=None if key_mask is None else additive)[0]
    if fam is Family.TORCH:
        T = h.shape[1]
        src_mask = ~torch.ones(T, T, dtype=torch.bool, device=h.device).tril() if causal else None  # True: masked
        pad = None if key_mask is None else ~key_mask
        bf = block.self_attn.batch_first
        out = block(h if bf else h.transpose(0, 1), src_mask=src_mask, src_key_padding_mask=pad, is_causal=causal)
        return out if bf else out.transpose(0, 1)
    out = block(h)
    return out[0] if isinstance(out, (tuple, list)) else out


def _geometry(h, m):
    """h (B, T, d), m (B, T) 0/1 -> mean cosine, q, p over unpadded tokens, each (B,)."""
    T, d = h.shape[-2:]
    pair = m[:, :, None] * m[:, None, :] * (1 - torch.eye(T, dtype=h.dtype, device=h.device))
    gram = h @ h.transpose(-1, -2) / d
    npair = pair.sum((-1, -2))
    cos = (cosine_matrix(h) * pair).sum((-1, -2)) / npair
    q = (torch.diagonal(gram, dim1=-2, dim2=-1) * m).sum(-1) / m.sum(-1)
    return cos, q, (gram * pair).sum((-1, -2)) / npair


def probe(model: nn.Module, x: torch.Tensor, *, blocks=None, attention_mask=None, causal=None,
          loss=None, grads: bool = False, pairs: bool = False) -> ProbeResult:
    """Token geometry and attention statistics of ``model``'s blocks on hidden states ``x``.

    Args:
        model: a ``BertModel`` / ``GPT2Model`` / ``nn.TransformerEncoder`` (or a model wrapping one
            as ``base_model``, e.g. ``BertForMaskedLM``), or any module when ``blocks`` is given.
        x: (B, T, d) or (T, d) hidden states fed to the first block; same device and dtype as the
            blocks' parameters.
        blocks: the modules applied in sequence to (B, T, d) hidden states (default: found).
        attention_mask: (B, T) (or (T,)) key mask, 1 / True for real tokens; padded tokens are
            masked as keys and left out of every mean. Not for custom blocks.
        causal: mask keys after the query; default ``config.is_decoder`` for BERT, True for
            GPT-2 (which cannot be False), False otherwise. Custom blocks get no mask: there it
            only labels the result.
        loss: callable of ``h^L`` (shaped like ``x``) returning a scalar; needs ``grads=True``.
        grads: record ``||dloss/dW_{Q,K,V}||_F`` per block.
        pairs: also return the cosine of every token pair per block (``cosine_pairs``).

    Returns:
        :class:`ProbeResult` (shapes there).
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module; got {type(model).__name__}")
    container = None
    if blocks is None:
        container, blocks = _find_blocks(model)
    else:
        blocks = list(blocks)
        if not blocks or not all(isinstance(b, nn.Module) for b in blocks):
            raise ValueError("blocks must be a non-empty sequence of nn.Module "
                             f"(the modules applied in sequence to (B, T, d) hidden states); got {blocks!r}")
    check_tensor(x, "x")
    if x.ndim not in (2, 3):
        raise ValueError(f"x must have shape (B, T, d) or (T, d); got {tuple(x.shape)}")
    unbatched = x.ndim == 2
    h = x[None] if unbatched else x
    B, T, d = h.shape
    if T < 2:
        raise ValueError(f"x needs T >= 2 tokens; got shape {tuple(x.shape)}")
    width = _width(blocks[0])
    if width is not None and d != width:
        raise ValueError(f"x must have last dimension d = {width} (the hidden size of "
                         f"{type(blocks[0]).__name__}); got shape {tuple(x.shape)}")
    param = next((p for b in blocks for p in b.parameters()), None)
    if param is not None and (x.device != param.device or x.dtype != param.dtype):
        raise ValueError(f"x must be on the model's device and dtype ({param.device}, {param.dtype}); "
                         f"got ({x.device}, {x.dtype}): pass x.to(device, dtype)")
    if not isinstance(pairs, bool):
        raise TypeError(f"pairs must be a bool; got {type(pairs).__name__}")
    if grads and not callable(loss):
        raise ValueError(f"grads=True needs loss, a callable of the last hidden state; got {loss!r}")
    if loss is not None and not grads:
        raise ValueError("loss is only used for gradient norms: pass grads=True as well")

    families = {_family(b) for b in blocks}
    family = families.pop() if len(families) == 1 else Family.CUSTOM
    if causal is None:
        causal = (any(_family(b) is Family.GPT2 for b in blocks)
                  or (family is Family.BERT and all(b.attention.self.is_decoder for b in blocks)))
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be None or a bool; got {type(causal).__name__}")
    if not causal and any(_family(b) is Family.GPT2 for b in blocks):
        raise ValueError("GPT-2 blocks always apply a causal mask; got causal=False")
    notes = []
    if family is Family.CUSTOM and causal:
        notes.append("custom blocks get no mask from probe: causal=True only labels the result")

    key_mask = None
    if attention_mask is not None:
        if any(_family(b) is Family.CUSTOM for b in blocks):
            raise ValueError("attention_mask cannot be passed to custom blocks; mask inside the blocks instead")
        if not isinstance(attention_mask, torch.Tensor):
            raise TypeError(f"attention_mask must be a torch.Tensor; got {type(attention_mask).__name__}")
        key_mask = attention_mask[None] if unbatched else attention_mask
        if key_mask.shape != (B, T):
            want = f"({T},)" if unbatched else f"({B}, {T})"
            raise ValueError(f"attention_mask must have shape {want}; got {tuple(attention_mask.shape)}")
        if not bool(((key_mask == 0) | (key_mask == 1)).all()):
            raise ValueError("attention_mask must hold 0/1 (or bool): 1 for real tokens, 0 for padding")
        key_mask = key_mask.to(device=h.device, dtype=torch.bool)
        if bool((key_mask.sum(-1) < 2).any()):
            raise ValueError("attention_mask must leave at least 2 real tokens in every sequence")
    allowed, additive = _masks(key_mask, causal, T, h.dtype, h.device)
    if not bool(allowed.any(-1).all()):
        raise ValueError("with causal=True every query must see a real key: pad on the right, not the left")

    attn_modules, why = zip(*(_attention_module(b) for b in blocks))
    qkv = [None if a is None else _qkv_slices(a) for a in attn_modules]
    if grads:
        missing = [i for i, s in enumerate(qkv) if s is None]
        if missing:
            notes.append(f"no query/key/value weights found in block(s) {missing}: grad_q/k/v are None")
        elif any(not p.requires_grad for s in qkv for p, _ in s):
            raise ValueError("grads=True needs the query/key/value weights to have requires_grad=True")
    if container is not None and (getattr(container, "ln_f", None) is not None
                                  or getattr(container, "norm", None) is not None):
        notes.append("entries are block outputs: the model's final LayerNorm is not applied")

    names = {id(m): n for n, m in model.named_modules()}
    block_names = tuple(names.get(id(b), f"blocks[{i}]") for i, b in enumerate(blocks))
    modules = {id(m): m for root in (model, *blocks) for m in root.modules()}
    training = {k: m.training for k, m in modules.items()}
    if any(training.values()):
        notes.append("the model was in training mode: probed in eval mode (dropout off), mode restored")
    stores = [[] for _ in blocks]
    handles = []
    try:
        for m in modules.values():
            m.training = False
        for a, store in zip(attn_modules, stores):
            if a is not None:
                handles.append(a.register_forward_hook(_capture(store), with_kwargs=True))
        with torch.set_grad_enabled(grads):
            states = [h]
            for i, block in enumerate(blocks):
                out = _run_block(block, states[-1], causal=causal, key_mask=key_mask, additive=additive)
                if not isinstance(out, torch.Tensor) or out.shape != h.shape:
                    got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
                    raise ValueError(f"block {block_names[i]} must return hidden states of shape {tuple(h.shape)}; "
                                     f"got {got}")
                if not bool(torch.isfinite(out).all()):
                    raise ValueError(f"block {block_names[i]} produced NaN or inf hidden states")
                states.append(out)
            grad_norms = None
            if grads and all(s is not None for s in qkv):
                value = loss(states[-1][0] if unbatched else states[-1])
                if not isinstance(value, torch.Tensor) or value.numel() != 1 or not value.requires_grad:
                    raise ValueError("loss must return a scalar tensor that depends on the hidden states")
                params = list({id(p): p for s in qkv for p, _ in s}.values())
                g = dict(zip(map(id, params), torch.autograd.grad(value.reshape(()), params, allow_unused=True)))
                grad_norms = torch.tensor([[0.0 if g[id(p)] is None else float(g[id(p)][idx].double().norm())
                                            for p, idx in s] for s in qkv], dtype=torch.float64)  # (L, 3)
    finally:
        for handle in handles:
            handle.remove()
        for k, m in modules.items():
            m.training = training[k]

    weight = torch.ones(B, T, dtype=torch.float64, device=h.device) if key_mask is None else key_mask.double()
    geometry = [_geometry(s.detach().double(), weight) for s in states]
    pair_cos = torch.stack([cosine_matrix(s.detach().double()) for s in states]).cpu() if pairs else None
    cosine, q, p = (torch.stack([g[j] for g in geometry]).cpu() for j in range(3))  # (L+1, B) each
    ipr = entropy = by_position = None
    unreadable = [f"block {block_names[i]}: {why[i]}" for i in range(len(blocks)) if why[i] is not None]
    for i, store in enumerate(stores):
        if why[i] is not None:
            continue
        if len(store) != 1:
            unreadable.append(f"block {block_names[i]}: its attention module ran {len(store)} times, expected once"
                              + (" (a fused fast path skipped it)" if not store else ""))
        elif store[0] is None:
            unreadable.append(f"block {block_names[i]}: its attention module returned no weights (HF models "
                              "return them only when built with attn_implementation='eager')")
        elif store[0][1] is None or store[0][0] != (B, store[0][0][1], T, T):
            unreadable.append(f"block {block_names[i]}: attention weights of shape {store[0][0]}, "
                              f"expected (B, H, T, T) = ({B}, H, {T}, {T})")
    if unreadable:
        notes.append("attention weights unavailable, ipr/entropy are None: " + "; ".join(unreadable))
    else:
        by_position = torch.stack([s[0][1] for s in stores])  # (L, B, T)
        ipr = ((by_position * weight).sum(-1) / weight.sum(-1)).cpu()
        entropy = ((torch.stack([s[0][2] for s in stores]) * weight).sum(-1) / weight.sum(-1)).cpu()
        by_position = by_position.cpu()

    def squeeze(t, dim=1):
        return t.squeeze(dim) if (t is not None and unbatched) else t

    return ProbeResult(
        cosine=squeeze(cosine), q=squeeze(q), p=squeeze(p), ipr=squeeze(ipr), entropy=squeeze(entropy),
        ipr_by_position=squeeze(by_position),
        grad_q=None if grad_norms is None else grad_norms[:, 0],
        grad_k=None if grad_norms is None else grad_norms[:, 1],
        grad_v=None if grad_norms is None else grad_norms[:, 2],
        block_names=block_names, family=family.value, causal=causal, notes=tuple(notes),
        cosine_pairs=squeeze(pair_cos))
