r"""An off-the-shelf model's initialisation, read into a :class:`~sigprop.BlockConfig`, and proved: :func:`read_init`.

:func:`read_init` reads the blocks of a model (HF Llama, Qwen2, Mistral, Gemma, Granite, OLMo, StableLM, Phi3,
GPT-NeoX, ViT, DeiT, BERT, RoBERTa, GPT-2 and models sharing their layers, bare or wrapped;
``torch.nn.TransformerEncoder``; layouts in ``sigprop.models._families``) and returns the
:class:`~sigprop.BlockConfig` whose random block has the same architecture and the same weight variances, so that
``read_init(model).predict(rho0, T=T)`` is the prediction for *that* initialisation. **A reading is proved before
it is returned**: every parameter has a role or the block is refused by name (``_families``), and sigprop's block,
built from the config and the model's own weights, must replay every block of the model on random inputs in float64
(``sigprop.models._replay``; the largest discrepancy and its block are in the refusal). ``ModelInit.proof`` holds the
replay.

Each variance is the empirical mean square of the entries (the maps need second moments about zero), pooled over the
blocks, and scaled as the config's fields are:

==================  =========================================  ==========================================
field               from                                       default init of the family
==================  =========================================  ==========================================
``sigma_qk2``       ``sqrt(ms(W_Q) ms(W_K))`` (the logits see   ``0.02^2`` (every HF family); torch:
                    the product)                               Xavier over ``(3d, d)``, ``1/(2d)``
``sigma_bqk2``,     ``ms(b_Q)``, ``ms(b_K)`` (without RoPE the  0 (Qwen2 and NeoX have the biases)
``sigma_bk2``       key bias adds one logit to a whole row and
                    drops out; with RoPE it is turned by its
                    position and does not)
``sigma_v2``        ``d ms(W_V)``                              ``0.02^2 d``; torch ``1/2``
``sigma_o2``        ``heads d_v ms(W_O)`` (its fan-in)         ``0.02^2 heads d_v``; GPT-2 ``/ (2 L)``;
                                                               torch ``1/3``
``sigma_w2``        ``d ms(W_1)`` (and ``W_3``, the gate's     ``0.02^2 d``; torch ``1/3``
                    partner, when gated)
``sigma_w2_out``    ``d_ff ms(W_2)``                           ``0.02^2 d_ff``; GPT-2 ``0.02^2 d_ff/(2L)``;
                                                               torch ``1/3``
``sigma_b*2``       ``ms(b)`` of ``b_V, b_O, b_1, b_2``        zero; torch ``1/(3 d)``, ``1/(3 d_ff)``
==================  =========================================  ==========================================

(``ms`` = mean square; no HF family above scales its initialisation with depth except GPT-2's ``c_proj``, by
``1/sqrt(2 n_layer)``.) Architecture is read from the modules: normalisation placement, kind and ``eps`` (measured),
heads, key/value heads, query/key and value widths per head (HF's ``head_dim``), logit scale (Granite's
``attention_multiplier`` included), activation (recognised numerically), gated MLP, parallel residual, the model's
own branch multipliers (Granite's ``residual_multiplier``), causal mask, sliding window, RoPE base, rotated share and
frequencies (Llama 3's and linear scaling included). What the maps do not model is said in ``notes`` and refused by
:meth:`ModelInit.predict` where it changes the prediction: normalisation gains that are not the identity, blocks that
differ, identical blocks (``torch.nn.TransformerEncoder`` deep-copies one layer).

:func:`sigprop.reinitialise` (``sigprop.models._reinit``) is the inverse. Used in the book's chapter on
off-the-shelf transformers.
"""
from __future__ import annotations

import dataclasses
import math
import weakref

import numpy as np
import torch
from torch import nn

from ..block import BlockConfig, TransformerParams, iterate_block_map, iterate_gram_map
from ..stats._config import threads_for
from ..stats._validate import check_int, check_real
from ._adapter import adapter_for
from ._families import describe_block
from ._replay import Replay, replay

__all__ = ["read_init", "ModelInit"]

#: Relative spread of a per-block variance beyond which ``notes`` says the blocks differ, on top of the
#: sampling spread: the mean square of n Gaussian entries has relative standard error sqrt(2/n) (1e-2 for a
#: 128 x 128 matrix, 0.1 for a bias of 200 entries); 6 of those are allowed.
_SPREAD = 0.25
#: A normalisation eps above this (against the unit mean square of the tokens the maps assume) is reported.
_EPS_NOTE = 1e-3
#: Memory the causal prediction may use for its Gram-map samples (bytes).
_PREDICT_BYTES = 2**31


@dataclasses.dataclass(frozen=True)
class ModelInit:
    """What :func:`read_init` read: ``config`` (the block at initialisation), ``per_block`` (each field
    of ``config`` that is a variance, per block, numpy ``(L,)``), the model's weights as a one-init
    :class:`~sigprop.TransformerParams` (float64, normalisation gains included; for
    :func:`sigprop.transformer_forward`), ``family`` (the block layout), ``notes``, ``proof`` (the replay that proved
    the reading, :class:`sigprop.models._replay.Replay`). ``rope_exact`` is True: the config's RoPE frequencies are
    the model's own (read from its ``inv_freq``; a model whose rotary tables are not plain rotations is refused)."""

    config: BlockConfig
    per_block: dict
    params: TransformerParams
    family: str
    depth: int
    identical_blocks: bool
    notes: tuple[str, ...]
    rope_exact: bool = True
    proof: Replay | None = None
    block_configs: tuple = ()

    def __post_init__(self):
        if not self.block_configs:
            object.__setattr__(self, "block_configs", (self.config,) * self.depth)

    @property
    def unit_gains(self) -> bool:
        """Whether every normalisation (QK-norms included) has gain 1 and bias 0 (what the maps assume)."""
        p = self.params
        return bool((p.ln_gain == 1).all() and (p.ln_bias == 0).all() and (p.q_gain == 1).all()
                    and (p.k_gain == 1).all())

    def predict(self, rho0: float, *, T: int, q0: float = 1.0, samples: int = 512, generator=0,
                ignore_rope: bool = False) -> np.ndarray:
        """Predicted mean token cosine after each block, ``(depth + 1,)``, from ``T`` equicorrelated tokens of
        cosine ``rho0`` (``-1/(T-1) <= rho0 <= 1``) and norm ``q0``: the finite-``T`` block map
        (:func:`sigprop.theory.iterate_block_map`), or for a causal model or a model with rotary position
        embeddings the Gram-matrix map (:func:`sigprop.theory.iterate_gram_map`, ``samples`` logit draws per block;
        sliding windows masked as the model masks them).

        RoPE is modelled by the Gram map with the model's own frequencies, rotated share of each head, head width
        ``d_k`` and key/value heads (the logits drawn from their exact law at that ``d_k``); ``ignore_rope=True``
        predicts the same block without positions instead. Refused: normalisation gains or biases that are not the
        identity (the maps assume unit gains; ``sp.reinitialise`` writes them), identical blocks (the theory's
        blocks are independent)."""
        if isinstance(T, (bool, np.bool_)) or not isinstance(T, (int, np.integer)):
            raise TypeError(f"T must be an integer number of tokens; got {T!r} ({type(T).__name__})")
        T = check_int(T, "T", minimum=2)
        rho0 = check_real(rho0, "rho0", minimum=-1.0 / (T - 1), maximum=1.0)
        q0 = check_real(q0, "q0", minimum=0.0, strict=True)
        if not self.unit_gains:
            raise ValueError("this model's normalisation gains or biases are not the identity, and the maps assume "
                             "unit gains: re-initialise it (sp.reinitialise writes gain 1, bias 0) or predict for "
                             "another initialisation")
        if self.identical_blocks:
            raise ValueError("all blocks have identical weights, and the theory describes independent blocks: "
                             "re-initialise them (sp.reinitialise) first")
        configs = self.block_configs
        if configs[0].positions == "rope" and ignore_rope:
            configs = tuple(dataclasses.replace(c, positions="none", rope_freqs=None) for c in configs)
        config = configs[0]
        if len(set(configs)) > 1 or config.causal or config.positions == "rope" or config.logit_cap is not None:
            samples = check_int(samples, "samples", minimum=2)
            need = 8 * 6 * samples * T * T
            if need > _PREDICT_BYTES:
                raise ValueError(f"the Gram-map prediction at T = {T} with {samples} samples needs about "
                                 f"{need / 2**30:.3g} GiB (limit {_PREDICT_BYTES / 2**30:.0f} GiB): use fewer tokens "
                                 "or samples")
            G0 = q0 * ((1.0 - rho0) * np.eye(T) + rho0)
            return iterate_gram_map(G0, self.depth, configs, samples=samples, generator=generator).mean_cosine()
        q, p = iterate_block_map(q0, q0 * rho0, self.depth, config, T=T)
        return p / q


def _ms(t) -> float:
    return float(t.detach().double().pow(2).mean())


def model_blocks(model, blocks):
    """-> (adapter, the parts of its blocks) of a model, validated."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module; got {type(model).__name__}")
    adapter = adapter_for(model, blocks)
    if any(p.is_meta for b in adapter.blocks for p in b.parameters()):
        raise ValueError("the model's parameters are on the meta device (shapes without values): materialise and "
                         "initialise it before reading its initialisation")
    inside = {id(m) for b in adapter.blocks for m in b.modules()}
    rotaries = {n: m for n, m in model.named_modules() if type(m).__name__.endswith("RotaryEmbedding")
                and id(m) not in inside}
    return adapter, [describe_block(b, _rotary_for(b, rotaries, adapter.rotary)) for b in adapter.blocks]


def _rotary_for(block, rotaries, default):
    """The model-level rotary module of ``block``: the ``*local*`` one for a sliding-window layer where the model keeps
    two (Gemma3 in transformers 4.x: ``rotary_emb`` and ``rotary_emb_local``), else the adapter's."""
    sliding = any(getattr(m, "is_sliding", False) for m in block.modules())
    local = [m for n, m in rotaries.items() if "local" in n.rsplit(".", 1)[-1]]
    other = [m for n, m in rotaries.items() if "local" not in n.rsplit(".", 1)[-1]]
    if sliding and local:
        return local[0]
    return default if default is not None or not other else other[0]


#: Fields that may differ from block to block (Gemma2/3's local and global layers): where each block's tokens see.
POSITIONAL = ("window", "rope", "rope_freqs")


def architecture(p) -> dict:
    """What must agree between blocks (and with a config), the fields of ``POSITIONAL`` aside: the block's parts."""
    rope = None if p.rope is None else (p.rope[0], p.rope[1])
    return dict(d=p.d, heads=p.heads, kv_heads=p.kv_heads, head_dim=p.head_dim, value_dim=p.value_dim,
                hidden=p.hidden, norm=p.norm, ln_center=p.norm_kind == "layer", activation=p.activation,
                gated=p.gated, parallel=p.parallel, causal=p.causal, window=p.window, rope=rope,
                rope_freqs=p.rope[4] if p.rope is not None else None, branch=p.branch, qk_norm=p.qk_norm,
                branch_norm=p.branch_norm, logit_cap=p.logit_cap, alibi=p.alibi, moe=p.moe)


def _variances(parts) -> dict:
    """Per-block variances in the config's units, numpy (L,) each."""
    def col(f):
        return np.array([f(p) for p in parts])

    def pooled(p, a, b):  # W_1 and the gate's partner W_3 share sigma_w2 (b_1, b_3 share sigma_b2)
        t = p.tensor(a) if p.views.get(b) is None else torch.cat([p.matrix(a).reshape(-1), p.matrix(b).reshape(-1)])
        return _ms(t)

    def ms(p, role):
        return 0.0 if p.views.get(role) is None else _ms(p.tensor(role))

    return {"sigma_qk2": col(lambda p: math.sqrt(ms(p, "w_q") * ms(p, "w_k"))),
            "sigma_bqk2": col(lambda p: ms(p, "b_q")),
            "sigma_bk2": col(lambda p: ms(p, "b_k")),
            "sigma_v2": col(lambda p: p.d * ms(p, "w_v")),
            "sigma_bv2": col(lambda p: ms(p, "b_v")),
            "sigma_o2": col(lambda p: p.heads * p.value_dim * ms(p, "w_o")),
            "sigma_bo2": col(lambda p: ms(p, "b_o")),
            "sigma_w2": col(lambda p: p.d * pooled(p, "w1", "w3")),
            "sigma_b2": col(lambda p: 0.0 if p.views.get("b1") is None else pooled(p, "b1", "b3")),
            "sigma_w2_out": col(lambda p: p.hidden * ms(p, "w2")),
            "sigma_b2_out": col(lambda p: ms(p, "b2")),
            "router_sigma2": col(lambda p: p.d * ms(p, "router"))}


def _identity_scale(parts):
    """``c`` if ``W_O = c I`` with the same ``c != 0`` in every block (a network without an output projection),
    else None."""
    w = [p.tensor("w_o").detach() for p in parts]
    if any(x.shape[0] != x.shape[1] for x in w):
        return None
    c = [float(x.double().diagonal().mean()) for x in w]
    if len(set(c)) != 1 or c[0] == 0.0:
        return None
    eye = torch.eye(w[0].shape[0], dtype=w[0].dtype, device=w[0].device)
    return c[0] if all(torch.equal(x, c[0] * eye) for x in w) else None


def _notes(parts, per, branch):
    first, notes = parts[0], []
    if branch is not None:
        notes.append(f"W_O is {branch:.4g} x the identity in every block: read as no output projection with "
                     f"branch_sa = {branch:.4g}")
    if first.rope is None and any(_ms(p.tensor("b_k")) > 0 for p in parts if p.views.get("b_k") is not None):
        notes.append("key biases are not zero: without rotary embeddings each adds one logit to a whole attention "
                     "row, which the softmax removes (read, not needed by the maps)")
    if not all(n.identity for p in parts for n in (*p.present_norms, *p.qk_norms)):
        notes.append("normalisation gains or biases are not the identity: not modelled by the maps (params carries "
                     "them; predict refuses until sp.reinitialise writes unit gains)")
    if first.eps > _EPS_NOTE:
        notes.append(f"normalisation eps = {first.eps:.3g} is not small against the unit-norm tokens the maps assume")
    if first.window is not None:
        notes.append(f"a sliding window of {first.window} keys: modelled by the Gram-matrix map (predict), not by "
                     "the (q, p) maps")
    d, f, dv = first.d, first.hidden, first.heads * first.value_dim
    entries = {"sigma_qk2": d * d, "sigma_bqk2": d, "sigma_bk2": d, "sigma_v2": d * d, "sigma_bv2": d,
               "sigma_o2": d * dv, "sigma_bo2": d, "sigma_w2": d * f, "sigma_b2": f, "sigma_w2_out": d * f,
               "sigma_b2_out": d, "router_sigma2": d * (first.moe[0] if first.moe else 1)}
    for k, v in per.items():
        allowed = _SPREAD + 6 * math.sqrt(2 / entries[k])
        if v.mean() > 0 and (v.max() - v.min()) / v.mean() > allowed and not (branch is not None and k == "sigma_o2"):
            notes.append(f"{k} differs between blocks (from {v.min():.3g} to {v.max():.3g}); the config pools them")
    if abs(first.scale - first.head_dim ** -0.5) > 1e-12:
        notes.append(f"logit scale {first.scale:.4g} instead of 1/sqrt(d_head)")
    return notes


def read_init(model: nn.Module, *, blocks=None) -> ModelInit:
    """Read a model's block architecture and initial weight variances, and prove the reading by replay (module
    docstring).

    ``model``: any model :func:`sigprop.probe` finds the blocks of (or a model wrapping one, e.g.
    ``LlamaForCausalLM``); ``blocks`` overrides the blocks found. Returns :class:`ModelInit`; raises a ValueError
    naming what cannot be read, or the replay's largest discrepancy where the reading is not proved.
    """
    with threads_for(0):   # mean squares of weight tensors: elementwise, one thread
        adapter, parts = model_blocks(model, blocks)
        init = _read(parts)
    return prove(model, adapter, parts, init)


#: Blocks whose structure has been proved (a block -> the signature proved and the proof); weak, so a model's
#: blocks leave with it. What is proved is the reading of the block's structure: re-drawn weights keep it.
_PROVED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _signature(p) -> tuple:
    """Everything read of a block's structure: its architecture, scale, norms' kinds and eps, the dtypes."""
    arch = architecture(p)
    return (tuple(sorted((k, repr(v)) for k, v in arch.items())), repr(p.scale), p.layout,
            tuple((n.center, n.eps, n.style) for n in (*p.present_norms, *p.qk_norms)),
            tuple(sorted({str(v.get().dtype) for v in p.views.values() if v is not None})))


def proved_before(adapter, parts) -> bool:
    """Whether every block of ``adapter`` was proved with the structure ``parts`` reads now."""
    return all(b in _PROVED and _PROVED[b][0] == _signature(p) for b, p in zip(adapter.blocks, parts))


def prove(model, adapter, parts, init) -> ModelInit:
    """``init`` with its replay proof, or a refusal giving the largest discrepancy and where."""
    with threads_for(2 * init.config.d ** 2 * 16):
        proof = replay(model, adapter, parts, init.block_configs, init.params)
    if not proof.proved:
        raise ValueError(f"the reading of {type(adapter.blocks[proof.block]).__name__} (layout {init.family!r}) is not "
                         f"proved: sigprop's block built from it, with the model's own weights, differs from the "
                         f"model's block {proof.block} by {proof.error:.3g} of its rms on {proof.T} random tokens in "
                         f"float64 (tolerance {proof.tolerance:g}). The model does something the reading does not "
                         "see (a multiplier, a mask, a position scheme, a norm): not read")
    for b, p in zip(adapter.blocks, parts):
        _PROVED[b] = (_signature(p), proof)
    return dataclasses.replace(init, proof=proof)


def _read(parts) -> ModelInit:
    first = architecture(parts[0])
    for p in parts[1:]:
        arch = architecture(p)
        differ = [k for k in first if arch[k] != first[k] and k not in POSITIONAL]
        if differ:
            raise ValueError(f"the blocks differ in {', '.join(differ)} (e.g. {differ[0]} = {first[differ[0]]} and "
                             f"{arch[differ[0]]}); read them separately (blocks=[...])")
    p0 = parts[0]
    if p0.window is not None and not p0.causal:
        raise ValueError(f"{type(p0.attention).__name__} has a bidirectional sliding window ({p0.window} keys): not "
                         "modelled (sigprop's windows are causal)")
    per = _variances(parts)
    pooled = {k: float(v.mean()) for k, v in per.items()}
    branch = _identity_scale(parts)
    if branch is not None:
        pooled["sigma_o2"] = None
        pooled["sigma_bo2"] /= branch**2
    if pooled["sigma_bk2"] == pooled["sigma_bqk2"]:
        pooled["sigma_bk2"] = None
    notes = _notes(parts, per, branch)
    identical = len(parts) > 1 and all(torch.equal(parts[0].tensor(k).detach(), p.tensor(k).detach())
                                       for p in parts[1:] for k in ("w_q", "w_v", "w1"))
    if identical:
        notes.append("all blocks have identical weights (torch.nn.TransformerEncoder deep-copies its layer): the "
                     "theory assumes independent blocks; re-initialise them (sp.reinitialise) for it to apply")
    m_sa, m_mlp = p0.branch
    config = BlockConfig(
        d=p0.d, heads=p0.heads, d_k=None if p0.head_dim * p0.heads == p0.d else p0.head_dim,
        d_v=None if p0.value_dim * p0.heads == p0.d else p0.value_dim, d_ff=p0.hidden,
        kv_heads=None if p0.kv_heads == p0.heads else p0.kv_heads, norm=p0.norm, activation=p0.activation,
        causal=p0.causal, ln_center=p0.norm_kind == "layer", norm_eps=p0.eps, gated=p0.gated,
        parallel=p0.parallel, branch_sa=m_sa * (1.0 if branch is None else branch), branch_mlp=m_mlp,
        logit_scale=float(p0.scale), qk_norm=p0.qk_norm, branch_norm=p0.branch_norm, logit_cap=p0.logit_cap,
        alibi_slopes=p0.alibi, **_moe_fields(p0, pooled),
        qk_norm_eps=max([n.eps for n in p0.qk_norms], default=0.0), **_positional(p0), **pooled)
    blocks = tuple(dataclasses.replace(config, **_positional(p)) for p in parts)
    if len(set(blocks)) > 1:
        notes.append("blocks differ in where their tokens see (windows, rotary bases: local and global layers): "
                     "predict runs each block's own Gram-matrix map")
    return ModelInit(blocks[0], per, _params(parts, branch), p0.layout, len(parts), identical, tuple(notes),
                     block_configs=blocks)


def _moe_fields(p, pooled) -> dict:
    """A mixture of experts' config fields (``router_sigma2`` taken out of the pooled variances either way)."""
    router = pooled.pop("router_sigma2")
    if p.moe is None:
        return {}
    experts, top_k, norm_topk = p.moe
    return dict(experts=experts, top_k=top_k, norm_topk=norm_topk, router_sigma2=router)


def _positional(p) -> dict:
    """The ``POSITIONAL`` fields of a block's config."""
    rope = dict(positions="none", rope_freqs=None) if p.rope is None else dict(
        positions="rope", rope_theta=p.rope[0], rope_fraction=p.rope[1], rope_freqs=p.rope[4])
    return dict(window=p.window, **rope)


def _or_zeros(t, shape):
    return torch.zeros(shape, dtype=torch.float64) if t is None else t


def _params(parts, branch):
    p0 = parts[0]
    H, G, dk, dv = p0.heads, p0.kv_heads, p0.head_dim, p0.value_dim

    def stack(role, shape=None, scale=1.0):
        if p0.views.get(role) is None:
            return None
        t = torch.stack([p.tensor(role).detach().double().cpu() for p in parts]) / scale
        return (t if shape is None else t.reshape(len(parts), *shape))[None]

    one, zero = torch.ones(p0.d, dtype=torch.float64), torch.zeros(p0.d, dtype=torch.float64)
    gains = torch.stack([torch.stack([one if n is None else n.gain for n in p.norms]) for p in parts])[None]
    biases = torch.stack([torch.stack([zero if n is None else n.bias for n in p.norms]) for p in parts])[None]
    qk = {} if not p0.qk_norms else dict(q_gain=torch.stack([p.qk_norms[0].gain for p in parts])[None],
                                          k_gain=torch.stack([p.qk_norms[1].gain for p in parts])[None])
    return TransformerParams(
        w_q=stack("w_q", (H, dk, p0.d)), w_k=stack("w_k", (G, dk, p0.d)), w_v=stack("w_v", (G, dv, p0.d)),
        w1=stack("w1"), b1=_or_zeros(stack("b1"), (1, len(parts), p0.hidden)), w2=stack("w2"),
        b2=_or_zeros(stack("b2"), (1, len(parts), p0.d)),
        w_o=torch.zeros(1, len(parts), 0, 0, dtype=torch.float64) if branch is not None else stack("w_o"),
        b_v=stack("b_v", (G, dv)), b_o=stack("b_o", scale=1.0 if branch is None else branch),
        w3=stack("w3"), b3=stack("b3"), b_q=stack("b_q", (H, dk)), b_k=stack("b_k", (G, dk)),
        ln_gain=gains, ln_bias=biases, router=stack("router"), **qk)
