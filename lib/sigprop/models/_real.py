r"""An off-the-shelf model's initialisation, read into (and written from) a :class:`~sigprop.BlockConfig`.

:func:`read_init` reads the blocks of a HuggingFace ``BertModel`` / ``GPT2Model`` or a
``torch.nn.TransformerEncoder`` (the families :func:`sigprop.probe` runs) and returns the
:class:`~sigprop.BlockConfig` whose random block has the same architecture and the same weight
variances, so that ``sp.theory.iterate_block_map(1, rho0, depth, read_init(model).config, T=T)`` is the
prediction for *that* initialisation. Each variance is the empirical mean square of the entries (the
maps need second moments about zero), pooled over the blocks, and scaled as the config's fields are:

==================  =========================================  ==================================
field               from                                       default init of the family
==================  =========================================  ==================================
``sigma_qk2``       ``sqrt(ms(W_Q) ms(W_K))`` (the logits see   BERT, GPT-2: ``0.02^2``; torch:
                    the product)                               Xavier over ``(3d, d)``, ``1/(2d)``
``sigma_v2``        ``d ms(W_V)``                              ``0.02^2 d``; torch ``1/2``
``sigma_o2``        ``d ms(W_O)``                              BERT ``0.02^2 d``; GPT-2
                                                               ``0.02^2 d / (2 L)``; torch ``1/3``
``sigma_w2``        ``d ms(W_1)``                              ``0.02^2 d``; torch ``1/3``
``sigma_w2_out``    ``d_ff ms(W_2)``                           BERT ``0.02^2 d_ff``; GPT-2
                                                               ``0.02^2 d_ff/(2L)``; torch ``1/3``
``sigma_b*2``       ``ms(b)`` of ``b_V, b_O, b_1, b_2``        zero; torch ``1/(3 d)``,
                                                               ``1/(3 d_ff)`` for ``b_1, b_2``
==================  =========================================  ==================================

(``ms`` = mean square; GPT-2's ``c_proj`` layers are scaled by ``1/sqrt(2 n_layer)``; torch draws
``linear1/2`` and ``out_proj`` with ``nn.Linear``'s default, variance ``1/(3 fan_in)``, and zeroes the
attention biases.) LayerNorm placement, heads, activation and the causal mask are read from the modules.
What the block does not model is reported in ``notes``: query/key biases that are not zero, LayerNorm
affine parameters that are not the identity, blocks whose variances differ, and **identical blocks**
(``torch.nn.TransformerEncoder`` deep-copies one layer, so all its layers start equal, and the
independent-layer theory does not apply until they are re-initialised).

:func:`reinitialise` is the inverse: it writes fresh Gaussian weights with a config's variances into
a model, block by block and independently, including Giorlandino & Goldt's ``beta`` and skip strengths
(a post-LN ``LN(x + S(x))`` with ``W_O, b_O`` divided by ``alpha_SA`` is ``LN(alpha_SA x + S(x))``), and a
config without an output projection as ``W_O = I`` (their networks have none).

Used in the book's chapter on off-the-shelf transformers.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch
from torch import nn

from ..block import BlockConfig, TransformerParams, iterate_block_map, iterate_gram_map
from ._probe import Family, _family, _find_blocks
from ..stats._random import as_generator

__all__ = ["read_init", "reinitialise", "ModelInit"]

#: Relative spread of a per-block variance beyond which ``notes`` says the blocks differ, on top of the
#: sampling spread: the mean square of n Gaussian entries has relative standard error sqrt(2/n) (1e-2 for a
#: 128 x 128 matrix, 0.1 for a bias of 200 entries); 6 of those are allowed.
_SPREAD = 0.25


@dataclasses.dataclass(frozen=True)
class ModelInit:
    """What :func:`read_init` read: ``config`` (the block at initialisation), ``per_block`` (each field
    of ``config`` that is a variance, per block, numpy ``(L,)``), the model's weights as a one-init
    :class:`~sigprop.TransformerParams` (float64; for :func:`sigprop.transformer_forward`), ``notes``."""

    config: BlockConfig
    per_block: dict
    params: TransformerParams
    family: str
    depth: int
    identical_blocks: bool
    notes: tuple[str, ...]

    def predict(self, rho0: float, *, T: int, q0: float = 1.0, samples: int = 512, generator=0) -> np.ndarray:
        """Predicted mean token cosine after each block, ``(depth + 1,)``, from ``T`` equicorrelated tokens of
        cosine ``rho0``: the finite-``T`` block map (:func:`sigprop.theory.iterate_block_map`), or for a causal
        model the Gram-matrix map (:func:`sigprop.theory.iterate_gram_map`, ``samples`` logit draws per block)."""

        if self.config.causal:
            G0 = q0 * ((1.0 - rho0) * np.eye(T) + rho0)
            return iterate_gram_map(G0, self.depth, self.config, samples=samples, generator=generator).mean_cosine()
        q, p = iterate_block_map(q0, q0 * rho0, self.depth, self.config, T=T)
        return p / q


#: Activation modules and functions, by class name (HF ``ACT2FN`` and torch), -> BlockConfig.activation
_ACT_NAMES = {"ReLU": "relu", "Tanh": "tanh", "LinearActivation": "linear", "Identity": "linear",
              "GELUActivation": "gelu", "NewGELUActivation": "gelu_tanh", "GELUTanh": "gelu_tanh",
              "PytorchGELUTanh": "gelu_tanh", "FastGELUActivation": "gelu_tanh"}


def _act(block, fam):
    """The block's activation as a :class:`BlockConfig` name."""
    f = {Family.BERT: lambda: block.intermediate.intermediate_act_fn, Family.GPT2: lambda: block.mlp.act,
         Family.TORCH: lambda: block.activation}[fam]()
    if f is torch.relu or f is nn.functional.relu:
        return "relu"
    if f is nn.functional.gelu:
        return "gelu"
    if isinstance(f, nn.GELU):
        return "gelu" if f.approximate == "none" else "gelu_tanh"
    if getattr(f, "use_gelu_python", False) is False and type(f).__name__ in _ACT_NAMES:
        return _ACT_NAMES[type(f).__name__]
    raise ValueError(f"activation {f!r} of {type(block).__name__} is not supported (ReLU, tanh, GELU in its erf "
                     "or tanh form, identity)")


def _modules(block):
    """-> dict of the block's weights as ``nn.Linear``-layout matrices (out, in) and vectors, + metadata."""
    fam = _family(block)
    if fam is Family.BERT:
        a, o = block.attention.self, block.attention.output
        out = dict(w_q=a.query.weight, w_k=a.key.weight, w_v=a.value.weight, b_q=a.query.bias, b_k=a.key.bias,
                   b_v=a.value.bias, w_o=o.dense.weight, b_o=o.dense.bias, w1=block.intermediate.dense.weight,
                   b1=block.intermediate.dense.bias, w2=block.output.dense.weight, b2=block.output.dense.bias,
                   ln=(o.LayerNorm, block.output.LayerNorm), heads=a.num_attention_heads, norm="post",
                   causal=bool(a.is_decoder), scale=getattr(a, "scaling", a.attention_head_size ** -0.5))
    elif fam is Family.GPT2:
        a, m = block.attn, block.mlp
        d = a.embed_dim
        W, b = a.c_attn.weight.T, a.c_attn.bias  # Conv1D stores (in, out)
        if getattr(a, "scale_attn_by_inverse_layer_idx", False):
            raise ValueError("GPT-2 with scale_attn_by_inverse_layer_idx=True has a per-layer logit scale; not supported")
        out = dict(w_q=W[:d], w_k=W[d:2 * d], w_v=W[2 * d:], b_q=b[:d], b_k=b[d:2 * d], b_v=b[2 * d:],
                   w_o=a.c_proj.weight.T, b_o=a.c_proj.bias, w1=m.c_fc.weight.T, b1=m.c_fc.bias,
                   w2=m.c_proj.weight.T, b2=m.c_proj.bias, ln=(block.ln_1, block.ln_2), heads=a.num_heads,
                   norm="pre", causal=True, scale=a.head_dim ** -0.5 if a.scale_attn_weights else 1.0)
    elif fam is Family.TORCH:
        a = block.self_attn
        if not a._qkv_same_embed_dim:
            raise ValueError("nn.MultiheadAttention with separate q/k/v projection weights is not supported")
        d = a.embed_dim
        W, b = a.in_proj_weight, a.in_proj_bias
        out = dict(w_q=W[:d], w_k=W[d:2 * d], w_v=W[2 * d:], b_q=None if b is None else b[:d],
                   b_k=None if b is None else b[d:2 * d], b_v=None if b is None else b[2 * d:],
                   w_o=a.out_proj.weight, b_o=a.out_proj.bias, w1=block.linear1.weight, b1=block.linear1.bias,
                   w2=block.linear2.weight, b2=block.linear2.bias, ln=(block.norm1, block.norm2), heads=a.num_heads,
                   norm="pre" if block.norm_first else "post", causal=False, scale=(d // a.num_heads) ** -0.5)
    else:
        raise ValueError(f"{type(block).__name__} is not a BertLayer, GPT2Block or nn.TransformerEncoderLayer")
    for b, w in (("b_q", "w_q"), ("b_k", "w_k"), ("b_v", "w_v"), ("b_o", "w_o"), ("b1", "w1"), ("b2", "w2")):
        if out[b] is None:  # a bias-free Linear: a zero bias that is read but never written
            out[b] = torch.zeros(out[w].shape[0], device=out[w].device, dtype=out[w].dtype)
    out["act"] = _act(block, fam)
    return out


def _ms(t) -> float:
    return float(t.detach().double().pow(2).mean())


def read_init(model: nn.Module, *, blocks=None) -> ModelInit:
    """Read a model's block architecture and initial weight variances (module docstring).

    ``model``: a HF ``BertModel`` / ``GPT2Model`` (or a model wrapping one, e.g. ``BertForMaskedLM``) or a
    ``torch.nn.TransformerEncoder``; ``blocks`` overrides the blocks found. Returns :class:`ModelInit`.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module; got {type(model).__name__}")
    blocks = _find_blocks(model)[1] if blocks is None else list(blocks)
    if not blocks:
        raise ValueError("no blocks to read")
    mods = [_modules(b) for b in blocks]
    first = mods[0]
    for key in ("heads", "norm", "causal", "act"):
        if any(m[key] != first[key] for m in mods):
            raise ValueError(f"the blocks differ in {key}; read them separately (blocks=[...])")
    d, f, H = first["w_q"].shape[1], first["w1"].shape[0], first["heads"]
    notes = []
    per = {"sigma_qk2": np.array([math.sqrt(_ms(m["w_q"]) * _ms(m["w_k"])) for m in mods]),
           "sigma_v2": np.array([d * _ms(m["w_v"]) for m in mods]),
           "sigma_bv2": np.array([_ms(m["b_v"]) for m in mods]),
           "sigma_o2": np.array([d * _ms(m["w_o"]) for m in mods]),
           "sigma_bo2": np.array([_ms(m["b_o"]) for m in mods]),
           "sigma_w2": np.array([d * _ms(m["w1"]) for m in mods]),
           "sigma_b2": np.array([_ms(m["b1"]) for m in mods]),
           "sigma_w2_out": np.array([f * _ms(m["w2"]) for m in mods]),
           "sigma_b2_out": np.array([_ms(m["b2"]) for m in mods])}
    pooled = {k: float(v.mean()) for k, v in per.items()}
    # W_O a multiple of the identity (a network without an output projection): the config says so exactly
    eye = [float(m["w_o"].detach().double().diagonal().mean()) for m in mods]
    is_eye = all(torch.equal(m["w_o"].detach(), c * torch.eye(d, dtype=m["w_o"].dtype, device=m["w_o"].device))
                 for m, c in zip(mods, eye)) and len(set(eye)) == 1
    branch = 1.0
    if is_eye:
        branch, pooled["sigma_o2"] = eye[0], None
        pooled["sigma_bo2"] /= branch**2
        notes.append(f"W_O is {branch:.4g} x the identity in every block: read as no output projection with "
                     f"branch_sa = {branch:.4g}")
    if any(_ms(m["b_q"]) > 0 or _ms(m["b_k"]) > 0 for m in mods):
        notes.append("query/key biases are not zero: the block has none, so the logits' bias terms are not modelled")
    for m in mods:
        for ln in m["ln"]:
            w, b = getattr(ln, "weight", None), getattr(ln, "bias", None)
            if (w is not None and not bool((w == 1).all())) or (b is not None and bool(b.any())):
                notes.append("LayerNorm affine parameters are not the identity: not modelled")
                break
        else:
            continue
        break
    entries = {"sigma_qk2": d * d, "sigma_v2": d * d, "sigma_bv2": d, "sigma_o2": d * d, "sigma_bo2": d,
               "sigma_w2": d * f, "sigma_b2": f, "sigma_w2_out": d * f, "sigma_b2_out": d}
    for k, v in per.items():
        allowed = _SPREAD + 6 * math.sqrt(2 / entries[k])
        if v.mean() > 0 and (v.max() - v.min()) / v.mean() > allowed and not (is_eye and k == "sigma_o2"):
            notes.append(f"{k} differs between blocks (from {v.min():.3g} to {v.max():.3g}); the config pools them")
    identical = len(mods) > 1 and all(torch.equal(mods[0][k].detach(), m[k].detach()) for m in mods[1:]
                                      for k in ("w_q", "w_v", "w1"))
    if identical:
        notes.append("all blocks have identical weights (torch.nn.TransformerEncoder deep-copies its layer): the "
                     "theory assumes independent blocks; re-initialise them (sp.reinitialise) for it to apply")
    if abs(first["scale"] - (d // H) ** -0.5) > 1e-12:
        notes.append(f"logit scale {first['scale']:.4g} instead of 1/sqrt(d_head)")
    config = BlockConfig(d=d, heads=H, d_ff=f, norm=first["norm"], activation=first["act"], causal=first["causal"],
                         ln_center=True, branch_sa=branch, logit_scale=float(first["scale"]), **pooled)
    params = _params(mods, H, is_eye)
    return ModelInit(config, per, params, _family(blocks[0]).value, len(blocks), identical, tuple(notes))


def _params(mods, H, is_eye):
    def stack(key, shape=None):
        t = torch.stack([m[key].detach().double().cpu() for m in mods])
        return (t if shape is None else t.reshape(len(mods), *shape))[None]

    d = mods[0]["w_q"].shape[1]
    dh = d // H
    eye = mods[0]["w_o"].detach().double().diagonal().mean() if is_eye else 1.0
    return TransformerParams(
        w_q=stack("w_q", (H, dh, d)), w_k=stack("w_k", (H, dh, d)), w_v=stack("w_v", (H, dh, d)),
        w1=stack("w1"), b1=stack("b1"), w2=stack("w2"), b2=stack("b2"),
        w_o=torch.zeros(1, len(mods), 0, 0, dtype=torch.float64) if is_eye else stack("w_o"),
        b_v=stack("b_v", (H, dh)), b_o=stack("b_o") / eye)


@torch.no_grad()
def reinitialise(model: nn.Module, config: BlockConfig, *, generator=None, blocks=None) -> nn.Module:
    """Write fresh Gaussian weights with ``config``'s variances into every block of ``model`` (in place;
    returns ``model``). Blocks are drawn independently, in order, from ``generator`` (CPU; an int seed).

    The model must have ``config``'s architecture (width, heads, feed-forward width, LayerNorm placement,
    activation, causal mask). ``W_Q, W_K``: ``sigma_qk2``; their biases zero; ``W_V, b_V``, ``W_O, b_O``
    (``W_O = I`` when ``config.sigma_o2`` is None), ``W_1, b_1``, ``W_2, b_2`` as in :class:`BlockConfig`;
    LayerNorms the identity. Skip strengths and branch weights other than 1 are written into ``W_O, b_O``
    (``branch_sa / alpha_sa``) and ``W_2, b_2`` (``branch_mlp / alpha_mlp``), exact for post-LN blocks only.
    """
    if not isinstance(config, BlockConfig):
        raise TypeError(f"config must be a BlockConfig; got {type(config).__name__}")
    blocks = _find_blocks(model)[1] if blocks is None else list(blocks)
    g = as_generator(generator, "cpu")
    c = config
    if c.gain_control or not c.mlp:
        raise ValueError("off-the-shelf blocks have no gain control and always an MLP")
    s_sa, s_mlp = c.branch_sa / c.alpha_sa if c.alpha_sa else None, c.branch_mlp / c.alpha_mlp if c.alpha_mlp else None
    if (s_sa != 1.0 or s_mlp != 1.0) and c.norm != "post":
        raise ValueError("skip strengths or branch weights other than 1 can be written into the weights of "
                         f"post-LN blocks only; got norm={c.norm!r}")
    if s_sa is None or s_mlp is None:
        raise ValueError("alpha_sa and alpha_mlp must be > 0")
    for block in blocks:
        m = _modules(block)
        d, f = m["w_q"].shape[1], m["w1"].shape[0]
        got = dict(d=d, heads=m["heads"], hidden=f, norm=m["norm"], activation=m["act"], causal=m["causal"])
        want = dict(d=c.d, heads=c.heads, hidden=c.hidden, norm=c.norm, activation=c.activation, causal=c.causal)
        if got != want or c.head_dim != d // m["heads"] or abs(m["scale"] - c.scale) > 1e-12:
            raise ValueError(f"model block {type(block).__name__} has {got}, logit scale {m['scale']:.4g}; config "
                             f"has {want}, d_k={c.head_dim}, logit scale {c.scale:.4g}")

        def put(t, var, scale=1.0):
            t.copy_(scale * math.sqrt(var) * torch.randn(t.shape, generator=g, dtype=torch.float64))

        put(m["w_q"], c.qk_variance)
        put(m["w_k"], c.qk_variance)
        m["b_q"].zero_()
        m["b_k"].zero_()
        put(m["w_v"], c.sigma_v2 / d)
        put(m["b_v"], c.sigma_bv2)
        if c.has_out_proj:
            put(m["w_o"], c.sigma_o2 / d, s_sa)
        else:
            m["w_o"].copy_(s_sa * torch.eye(d, dtype=torch.float64))
        put(m["b_o"], c.sigma_bo2, s_sa)
        put(m["w1"], c.sigma_w2 / d)
        put(m["b1"], c.sigma_b2)
        put(m["w2"], c.w2_variance / f, s_mlp)
        put(m["b2"], c.b2_variance, s_mlp)
        for ln in m["ln"]:
            if getattr(ln, "weight", None) is not None:
                ln.weight.fill_(1.0)
            if getattr(ln, "bias", None) is not None:
                ln.bias.zero_()
    return model
