r"""An off-the-shelf model's initialisation, read into (and written from) a :class:`~sigprop.BlockConfig`.

:func:`read_init` reads the blocks of a model :func:`sigprop.probe` runs (HF Llama, Qwen2, Mistral, GPT-NeoX, ViT,
BERT, RoBERTa, GPT-2 and models sharing their layers, bare or wrapped; ``torch.nn.TransformerEncoder``; block
layouts in ``sigprop.models._families``) and returns the :class:`~sigprop.BlockConfig` whose random block has the
same architecture and the same weight variances, so that ``read_init(model).predict(rho0, T=T)`` is the prediction
for *that* initialisation. Each variance is the empirical mean square of the entries (the maps need second moments
about zero), pooled over the blocks, and scaled as the config's fields are:

==================  =========================================  ==========================================
field               from                                       default init of the family
==================  =========================================  ==========================================
``sigma_qk2``       ``sqrt(ms(W_Q) ms(W_K))`` (the logits see   ``0.02^2`` (every HF family); torch:
                    the product)                               Xavier over ``(3d, d)``, ``1/(2d)``
``sigma_bqk2``      ``ms(b_Q)`` (``b_K`` adds one logit to a    0 (Qwen2 and NeoX have the biases)
                    whole row: it drops out of the softmax)
``sigma_v2``        ``d ms(W_V)``                              ``0.02^2 d``; torch ``1/2``
``sigma_o2``        ``d ms(W_O)``                              ``0.02^2 d``; GPT-2 ``0.02^2 d / (2 L)``;
                                                               torch ``1/3``
``sigma_w2``        ``d ms(W_1)`` (and ``W_3``, the gate's     ``0.02^2 d``; torch ``1/3``
                    partner, when gated)
``sigma_w2_out``    ``d_ff ms(W_2)``                           ``0.02^2 d_ff``; GPT-2 ``0.02^2 d_ff/(2L)``;
                                                               torch ``1/3``
``sigma_b*2``       ``ms(b)`` of ``b_V, b_O, b_1, b_2``        zero; torch ``1/(3 d)``, ``1/(3 d_ff)``
==================  =========================================  ==========================================

(``ms`` = mean square; no HF family above scales its initialisation with depth except GPT-2's ``c_proj``, by
``1/sqrt(2 n_layer)``.) Architecture is read from the modules: normalisation placement and kind (LayerNorm:
``ln_center=True``; RMSNorm: ``False``), heads and key/value heads (grouped-query), head width, logit scale,
activation (recognised numerically), gated MLP, parallel residual, causal mask, RoPE base and rotated share.
What the block does not model is reported in ``notes``: normalisation gains that are not the identity, RoPE
scaling (``rope_type`` other than default), sliding windows, relative-position logits, a normalisation ``eps``
that is not small, blocks whose variances differ, and **identical blocks** (``torch.nn.TransformerEncoder``
deep-copies one layer, so all its layers start equal, and the independent-layer theory does not apply until
they are re-initialised).

:func:`reinitialise` is the inverse: it writes fresh Gaussian weights with a config's variances into a model,
block by block and independently, including Giorlandino & Goldt's ``beta`` and skip strengths (a post-LN
``LN(x + S(x))`` with ``W_O, b_O`` divided by ``alpha_SA`` is ``LN(alpha_SA x + S(x))``), and a config without
an output projection as ``W_O = I`` (their networks have none).

Used in the book's chapter on off-the-shelf transformers.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch
from torch import nn

from ..block import BlockConfig, TransformerParams, iterate_block_map, iterate_gram_map
from ..stats._config import threads_for
from ..stats._random import as_generator
from ..stats._validate import check_int, check_real
from ._adapter import adapter_for
from ._families import describe_block

__all__ = ["read_init", "reinitialise", "ModelInit"]

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
    :func:`sigprop.transformer_forward`), ``family`` (the block layout), ``notes``, ``rope_exact`` (False when
    the model's RoPE is scaled or has other frequencies than the config's plain RoPE)."""

    config: BlockConfig
    per_block: dict
    params: TransformerParams
    family: str
    depth: int
    identical_blocks: bool
    notes: tuple[str, ...]
    rope_exact: bool = True     # False: RoPE scaled or with other frequencies (not modelled; see ``notes``)

    def predict(self, rho0: float, *, T: int, q0: float = 1.0, samples: int = 512, generator=0,
                ignore_rope: bool = False) -> np.ndarray:
        """Predicted mean token cosine after each block, ``(depth + 1,)``, from ``T`` equicorrelated tokens of
        cosine ``rho0`` (``-1/(T-1) <= rho0 <= 1``) and norm ``q0``: the finite-``T`` block map
        (:func:`sigprop.theory.iterate_block_map`), or for a causal model or a model with rotary position
        embeddings the Gram-matrix map (:func:`sigprop.theory.iterate_gram_map`, ``samples`` logit draws per block).

        RoPE is modelled by the Gram map with the model's own base, rotated share of each head, head width ``d_k``
        and key/value heads (the logits drawn from their exact law at that ``d_k``); ``ignore_rope=True`` predicts
        the same block without positions instead. RoPE scaling (``rope_type`` other than default) and rotary
        frequencies other than ``base^(-2k/r)`` are not modelled: such a model is refused unless
        ``ignore_rope=True``."""
        if isinstance(T, (bool, np.bool_)) or not isinstance(T, (int, np.integer)):
            raise TypeError(f"T must be an integer number of tokens; got {T!r} ({type(T).__name__})")
        T = check_int(T, "T", minimum=2)
        rho0 = check_real(rho0, "rho0", minimum=-1.0 / (T - 1), maximum=1.0)
        q0 = check_real(q0, "q0", minimum=0.0, strict=True)
        config = self.config
        if config.positions == "rope" and ignore_rope:
            config = dataclasses.replace(config, positions="none")
        elif config.positions == "rope" and not self.rope_exact:
            raise ValueError("this model's rotary embeddings are scaled (rope_type other than 'default') or use "
                             "frequencies other than base^(-2k/r), which the Gram map does not model (it has plain "
                             f"RoPE of base {config.rope_theta:.6g}); predict(..., ignore_rope=True) gives the same "
                             "block without positions")
        if config.causal or config.positions == "rope":
            samples = check_int(samples, "samples", minimum=2)
            need = 8 * 6 * samples * T * T
            if need > _PREDICT_BYTES:
                raise ValueError(f"the Gram-map prediction at T = {T} with {samples} samples needs about "
                                 f"{need / 2**30:.3g} GiB (limit {_PREDICT_BYTES / 2**30:.0f} GiB): use fewer tokens "
                                 "or samples")
            G0 = q0 * ((1.0 - rho0) * np.eye(T) + rho0)
            return iterate_gram_map(G0, self.depth, config, samples=samples, generator=generator).mean_cosine()
        q, p = iterate_block_map(q0, q0 * rho0, self.depth, config, T=T)
        return p / q


def _ms(t) -> float:
    return float(t.detach().double().pow(2).mean())


def _blocks(model, blocks):
    """-> (blocks, their parts) of a model, validated."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module; got {type(model).__name__}")
    adapter = adapter_for(model, blocks)
    if any(p.is_meta for b in adapter.blocks for p in b.parameters()):
        raise ValueError("the model's parameters are on the meta device (shapes without values): materialise and "
                         "initialise it before reading its initialisation")
    return adapter.blocks, [describe_block(b, adapter.rotary) for b in adapter.blocks]


def _architecture(p) -> dict:
    """What must agree between blocks (and with a config): the block's shape and parts."""
    rope = None if p.rope is None else (p.rope[0], p.rope[1])
    return dict(d=p.d, heads=p.heads, kv_heads=p.kv_heads, head_dim=p.head_dim, hidden=p.hidden, norm=p.norm,
                ln_center=p.norm_kind == "layer", activation=p.activation, gated=p.gated, parallel=p.parallel,
                causal=p.causal, rope=rope)


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
            "sigma_v2": col(lambda p: p.d * ms(p, "w_v")),
            "sigma_bv2": col(lambda p: ms(p, "b_v")),
            "sigma_o2": col(lambda p: p.d * ms(p, "w_o")),
            "sigma_bo2": col(lambda p: ms(p, "b_o")),
            "sigma_w2": col(lambda p: p.d * pooled(p, "w1", "w3")),
            "sigma_b2": col(lambda p: 0.0 if p.views.get("b1") is None else pooled(p, "b1", "b3")),
            "sigma_w2_out": col(lambda p: p.hidden * ms(p, "w2")),
            "sigma_b2_out": col(lambda p: ms(p, "b2"))}


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
    if any(_ms(p.tensor("b_k")) > 0 for p in parts if p.views.get("b_k") is not None):
        notes.append("key biases are not zero: each adds one logit to a whole attention row, which the softmax "
                     "removes (read, not needed by the maps)")
    for p in parts:
        if any((getattr(n, "weight", None) is not None and not bool((n.weight == 1).all()))
               or (getattr(n, "bias", None) is not None and bool(n.bias.any())) for n in p.norms):
            notes.append("normalisation gains or biases are not the identity: not modelled by the maps "
                         "(params carries them)")
            break
    if first.eps > _EPS_NOTE:
        notes.append(f"normalisation eps = {first.eps:.3g} is not small against the unit-norm tokens the maps assume")
    if first.rope is not None and (first.rope[2] != "default" or not first.rope[3]):
        notes.append(f"RoPE scaling (rope_type {first.rope[2]!r}) or rotary frequencies other than "
                     f"base^(-2k/dims) are not modelled: the config holds plain RoPE of base {first.rope[0]:.6g}")
    if any(p.window is not None for p in parts):
        notes.append("a sliding attention window is not modelled (it matters only for sequences longer than it)")
    if any(p.relative_positions for p in parts):
        notes.append("relative-position logits are not modelled")
    d, f = first.d, first.hidden
    entries = {"sigma_qk2": d * d, "sigma_bqk2": d, "sigma_v2": d * d, "sigma_bv2": d, "sigma_o2": d * d,
               "sigma_bo2": d, "sigma_w2": d * f, "sigma_b2": f, "sigma_w2_out": d * f, "sigma_b2_out": d}
    for k, v in per.items():
        allowed = _SPREAD + 6 * math.sqrt(2 / entries[k])
        if v.mean() > 0 and (v.max() - v.min()) / v.mean() > allowed and not (branch is not None and k == "sigma_o2"):
            notes.append(f"{k} differs between blocks (from {v.min():.3g} to {v.max():.3g}); the config pools them")
    if abs(first.scale - first.head_dim ** -0.5) > 1e-12:
        notes.append(f"logit scale {first.scale:.4g} instead of 1/sqrt(d_head)")
    return notes


def read_init(model: nn.Module, *, blocks=None) -> ModelInit:
    """Read a model's block architecture and initial weight variances (module docstring).

    ``model``: any model :func:`sigprop.probe` finds the blocks of (or a model wrapping one, e.g.
    ``LlamaForCausalLM``); ``blocks`` overrides the blocks found. Returns :class:`ModelInit`.
    """
    with threads_for(0):   # mean squares of weight tensors: elementwise, one thread
        return _read(*_blocks(model, blocks))


def _read(blocks, parts) -> ModelInit:
    first = _architecture(parts[0])
    for p in parts[1:]:
        arch = _architecture(p)
        differ = [k for k in first if arch[k] != first[k]]
        if differ:
            raise ValueError(f"the blocks differ in {', '.join(differ)} (e.g. {differ[0]} = {first[differ[0]]} and "
                             f"{arch[differ[0]]}); read them separately (blocks=[...])")
    per = _variances(parts)
    pooled = {k: float(v.mean()) for k, v in per.items()}
    branch = _identity_scale(parts)
    if branch is not None:
        pooled["sigma_o2"] = None
        pooled["sigma_bo2"] /= branch**2
    notes = _notes(parts, per, branch)
    identical = len(parts) > 1 and all(torch.equal(parts[0].tensor(k).detach(), p.tensor(k).detach())
                                       for p in parts[1:] for k in ("w_q", "w_v", "w1"))
    if identical:
        notes.append("all blocks have identical weights (torch.nn.TransformerEncoder deep-copies its layer): the "
                     "theory assumes independent blocks; re-initialise them (sp.reinitialise) for it to apply")
    p0 = parts[0]
    rope = {} if p0.rope is None else dict(positions="rope", rope_theta=p0.rope[0], rope_fraction=p0.rope[1])
    config = BlockConfig(
        d=p0.d, heads=p0.heads, d_k=None if p0.head_dim * p0.heads == p0.d else p0.head_dim, d_ff=p0.hidden,
        kv_heads=None if p0.kv_heads == p0.heads else p0.kv_heads, norm=p0.norm, activation=p0.activation,
        causal=p0.causal, ln_center=p0.norm_kind == "layer", gated=p0.gated, parallel=p0.parallel,
        branch_sa=1.0 if branch is None else branch, logit_scale=float(p0.scale), **rope, **pooled)
    rope_exact = p0.rope is None or (p0.rope[2] == "default" and bool(p0.rope[3]))
    return ModelInit(config, per, _params(parts, branch), p0.layout, len(parts), identical, tuple(notes), rope_exact)


def _or_zeros(t, shape):
    return torch.zeros(shape, dtype=torch.float64) if t is None else t


def _params(parts, branch):
    p0 = parts[0]
    H, G, dk, d = p0.heads, p0.kv_heads, p0.head_dim, p0.d

    def stack(role, shape=None, scale=1.0):
        if p0.views.get(role) is None:
            return None
        t = torch.stack([p.tensor(role).detach().double().cpu() for p in parts]) / scale
        return (t if shape is None else t.reshape(len(parts), *shape))[None]

    dv = p0.matrix("w_v").shape[0] // G
    gains = [torch.stack([getattr(n, "weight", None).detach().double().cpu() if getattr(n, "weight", None)
                          is not None else torch.ones(d, dtype=torch.float64) for n in p.norms]) for p in parts]
    biases = [torch.stack([getattr(n, "bias", None).detach().double().cpu() if getattr(n, "bias", None)
                           is not None else torch.zeros(d, dtype=torch.float64) for n in p.norms]) for p in parts]
    return TransformerParams(
        w_q=stack("w_q", (H, dk, d)), w_k=stack("w_k", (G, dk, d)), w_v=stack("w_v", (G, dv, d)),
        w1=stack("w1"), b1=_or_zeros(stack("b1"), (1, len(parts), p0.hidden)), w2=stack("w2"),
        b2=_or_zeros(stack("b2"), (1, len(parts), d)),
        w_o=torch.zeros(1, len(parts), 0, 0, dtype=torch.float64) if branch is not None else stack("w_o"),
        b_v=stack("b_v", (G, dv)), b_o=stack("b_o", scale=1.0 if branch is None else branch),
        w3=stack("w3"), b3=stack("b3"), b_q=stack("b_q", (H, dk)), b_k=stack("b_k", (G, dk)),
        ln_gain=torch.stack(gains)[None], ln_bias=torch.stack(biases)[None])


def _check_writable(parts, c):
    """The model's blocks have ``c``'s architecture, and every part ``c`` gives a variance exists in them."""
    want = dict(d=c.d, heads=c.heads, kv_heads=c.group_count, head_dim=c.head_dim, hidden=c.hidden, norm=c.norm,
                activation=c.activation, gated=c.gated, parallel=c.parallel, causal=c.causal,
                rope=(c.rope_theta, c.rope_fraction) if c.positions == "rope" else None)
    for p in parts:
        got = _architecture(p)
        got.pop("ln_center")   # LayerNorm or RMS: the maps treat both alike (to O(1/d)); nothing to write
        if got["rope"] is not None and want["rope"] is not None:  # a float round trip of the base
            got["rope"] = want["rope"] if np.allclose(got["rope"], want["rope"], rtol=1e-9) else got["rope"]
        differ = {k: (got[k], want[k]) for k in want if got[k] != want[k]}
        if differ or abs(p.scale - c.scale) > 1e-12:
            raise ValueError(f"model block {p.layout!r} has " + ", ".join(f"{k}={g!r}" for k, (g, _) in differ.items())
                             + f" and logit scale {p.scale:.4g}; the config has "
                             + ", ".join(f"{k}={w!r}" for k, (_, w) in differ.items()) + f" and {c.scale:.4g}")
    asked = {"b_v": c.sigma_bv2, "b_o": c.sigma_bo2, "b1": c.sigma_b2, "b2": c.b2_variance, "b_q": c.sigma_bqk2}
    missing = [k for k, v in asked.items() if v > 0 and parts[0].views.get(k) is None]
    if missing:
        raise ValueError(f"the config gives the biases {', '.join(missing)} a variance, but the model has none "
                         "(built with bias=False): set those variances to 0 or build the model with biases")


def _drawer(g):
    def put(view, var, scale=1.0):
        """Write N(0, scale^2 var) entries through ``view`` (refused if they do not fit its dtype)."""
        if view is None:
            return
        t = view.get()
        x = torch.randn(t.shape, generator=g, dtype=torch.float64).mul_(scale * math.sqrt(var))
        big = torch.finfo(t.dtype).max
        if t.dtype != torch.float64 and abs(scale) * math.sqrt(var) * 40 > big and bool((x.abs() > big).any()):
            raise ValueError(f"a variance of {scale**2 * var:.3g} draws entries beyond the largest {t.dtype} "
                             f"({big:.3g}): the model cannot hold this initialisation")
        t.copy_(x)
    return put


@torch.no_grad()
def reinitialise(model: nn.Module, config: BlockConfig, *, generator=None, blocks=None) -> nn.Module:
    """Write fresh Gaussian weights with ``config``'s variances into every block of ``model`` (in place;
    returns ``model``). Blocks are drawn independently, in order, from ``generator`` (CPU; an int seed).

    The model must have ``config``'s architecture (width, heads and key/value heads, head and feed-forward width,
    normalisation placement and kind, activation, gated MLP, parallel residual, causal mask, RoPE base and share,
    logit scale). ``W_Q, W_K``: ``sigma_qk2``; their biases ``sigma_bqk2``; ``W_V, b_V``, ``W_O, b_O``
    (``W_O = I`` when ``config.sigma_o2`` is None), ``W_1, b_1`` (and ``W_3, b_3`` when gated), ``W_2, b_2`` as in
    :class:`BlockConfig`; normalisation gains 1 and biases 0. A variance given to a bias the model lacks is
    refused. Skip strengths and branch weights other than 1 are written into ``W_O, b_O``
    (``branch_sa / alpha_sa``) and ``W_2, b_2`` (``branch_mlp / alpha_mlp``), exact for post-LN blocks only.
    """
    if not isinstance(config, BlockConfig):
        raise TypeError(f"config must be a BlockConfig; got {type(config).__name__}")
    c = config
    if c.gain_control or not c.mlp:
        raise ValueError("off-the-shelf blocks have no gain control and always an MLP")
    if c.alpha_sa == 0 or c.alpha_mlp == 0:
        raise ValueError("alpha_sa and alpha_mlp must be > 0")
    s_sa, s_mlp = c.branch_sa / c.alpha_sa, c.branch_mlp / c.alpha_mlp
    if (s_sa != 1.0 or s_mlp != 1.0) and c.norm != "post":
        raise ValueError("skip strengths or branch weights other than 1 can be written into the weights of "
                         f"post-LN blocks only; got norm={c.norm!r}")
    with threads_for(0):   # elementwise draws and copies: one thread (threads_for's note on busy machines)
        _, parts = _blocks(model, blocks)
        _check_writable(parts, c)
        _write(parts, c, _drawer(as_generator(generator, "cpu")), s_sa, s_mlp)
    return model


def _write(parts, c, put, s_sa, s_mlp):
    for p in parts:
        d, f, v = p.d, p.hidden, p.views
        put(v["w_q"], c.qk_variance)
        put(v["w_k"], c.qk_variance)
        for role in ("b_q", "b_k"):
            if v.get(role) is not None:
                v[role].get().zero_()
        put(v["w_v"], c.sigma_v2 / d)
        put(v["b_v"], c.sigma_bv2)
        if c.has_out_proj:
            put(v["w_o"], c.sigma_o2 / d, s_sa)
        else:
            v["w_o"].get().copy_(s_sa * torch.eye(d, dtype=torch.float64))
        put(v["b_o"], c.sigma_bo2, s_sa)
        put(v["w1"], c.sigma_w2 / d)
        put(v["b1"], c.sigma_b2)
        put(v["w2"], c.w2_variance / f, s_mlp)
        put(v["b2"], c.b2_variance, s_mlp)
        put(v.get("w3"), c.sigma_w2 / d)        # drawn after the documents' parts: their seeds do not move
        put(v.get("b3"), c.sigma_b2)
        if c.sigma_bqk2 > 0:
            put(v["b_q"], c.sigma_bqk2)
            put(v.get("b_k"), c.sigma_bqk2)
        for n in p.norms:
            if getattr(n, "weight", None) is not None:
                n.weight.fill_(1.0)
            if getattr(n, "bias", None) is not None:
                n.bias.zero_()
