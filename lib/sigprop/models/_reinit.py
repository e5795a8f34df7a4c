r"""A :class:`~sigprop.BlockConfig`'s initialisation written into an off-the-shelf model: :func:`reinitialise`.

The inverse of :func:`sigprop.read_init`: fresh Gaussian weights with the config's variances, block by block and
independently, into a model whose blocks have the config's architecture (checked, and the model's reading proved by
replay first, ``sigprop.models._replay``). Normalisation gains are set to the identity (``weight = 1``, or ``0`` for
Gemma's ``1 + weight``) and their biases to zero; a config without an output projection is written as ``W_O = I``
(the documents' networks have none).

**Skip strengths and branch weights.** An HF block computes ``x + m SA(N x)`` (pre-LN) or ``N(x + m SA(x))``
(post-LN), with the model's own branch multiplier ``m`` (1, or Granite's ``residual_multiplier``). The config's
``alpha`` (skip) and ``branch`` strengths are written into ``W_O, b_O`` and ``W_2, b_2``:

* post-LN: ``N(a x + b S(x)) = N(x + (b / a) S(x))``, so the branch is scaled by ``b / (a m)``: exact;
* pre-LN: with ``C`` the product of every skip strength before a sub-layer, the config's stream ``x`` and the
  model's ``y = x / C`` satisfy ``y' = y + (b / (C a)) S(N y)`` (``N`` is scale-invariant), so the branch is scaled by
  ``b / (C a m)`` -- a depth-dependent factor; parallel residuals likewise (``C`` grows by ``a_sa a_mlp`` per block);
  the model's stream is the config's divided by ``C``: every cosine, attention weight and normalised state is the
  config's exactly (up to the norm's ``eps``, whose relative weight grows by ``C^2``), the token norm ``q`` by
  ``C^2``;
* no normalisation: only ``alpha = 1`` is writable (nothing undoes a scale).
"""
from __future__ import annotations

import math

import torch
from torch import nn

from ..block import BlockConfig
from ..stats._config import threads_for
from ..stats._random import as_generator
from ._real import POSITIONAL, _read, architecture, model_blocks, prove, proved_before

__all__ = ["reinitialise"]


def check_writable(parts, c):
    """The model's blocks have ``c``'s architecture, and every part ``c`` gives a variance exists in them. Where the
    blocks differ in where their tokens see (``POSITIONAL``: Gemma2/3's local and global layers), those fields are
    the model's and are not compared (the weights written do not depend on them)."""
    want = dict(d=c.d, heads=c.heads, kv_heads=c.group_count, head_dim=c.head_dim, value_dim=c.value_dim,
                hidden=c.hidden, norm=c.norm, activation=c.activation, gated=c.gated, parallel=c.parallel,
                causal=c.causal, window=c.window, qk_norm=c.qk_norm, branch_norm=c.branch_norm, logit_cap=c.logit_cap,
                alibi=c.alibi_slopes, moe=None if c.experts is None else (c.experts, c.top_k, c.norm_topk),
                rope=(c.rope_theta, c.rope_fraction) if c.positions == "rope" else None, rope_freqs=c.rope_freqs)
    if len({tuple(str(architecture(p)[k]) for k in POSITIONAL) for p in parts}) > 1:
        for k in POSITIONAL:
            want.pop(k)
    for p in parts:
        got = architecture(p)
        if got["rope"] is not None and want["rope"] is not None:  # a float round trip of the base
            got["rope"] = want["rope"] if math.isclose(got["rope"][0], want["rope"][0], rel_tol=1e-9) and \
                got["rope"][1] == want["rope"][1] else got["rope"]
        differ = {k: (got[k], want[k]) for k in want if got[k] != want[k]}
        if differ or abs(p.scale - c.scale) > 1e-12:
            raise ValueError(f"model block {p.layout!r} has " + ", ".join(f"{k}={g!r}" for k, (g, _) in differ.items())
                             + f" and logit scale {p.scale:.4g}; the config has "
                             + ", ".join(f"{k}={w!r}" for k, (_, w) in differ.items()) + f" and {c.scale:.4g}")
    asked = {"b_v": c.sigma_bv2, "b_o": c.sigma_bo2, "b1": c.sigma_b2, "b2": c.b2_variance, "b_q": c.sigma_bqk2,
             "b_k": c.key_bias_variance}
    missing = [k for k, v in asked.items() if v > 0 and parts[0].views.get(k) is None]
    if missing:
        raise ValueError(f"the config gives the biases {', '.join(missing)} a variance, but the model has none "
                         "(built with bias=False): set those variances to 0 or build the model with biases")


def branch_scales(c: BlockConfig, parts) -> list:
    """Per block, the factors ``(s_sa, s_mlp)`` written into ``W_O, b_O`` and ``W_2, b_2`` (module docstring)."""
    if c.norm == "none" and (c.alpha_sa != 1.0 or c.alpha_mlp != 1.0):
        raise ValueError("skip strengths other than 1 cannot be written into a block without normalisation (nothing "
                         f"undoes the scale); got alpha_sa={c.alpha_sa}, alpha_mlp={c.alpha_mlp}")
    out, C = [], 1.0
    for p in parts:
        m_sa, m_mlp = p.branch
        if c.norm != "pre":
            out.append((c.branch_sa / (c.alpha_sa * m_sa), c.branch_mlp / (c.alpha_mlp * m_mlp)))
            continue
        s_sa = c.branch_sa / (C * c.alpha_sa * m_sa)
        C *= c.alpha_sa     # sequential and parallel alike: the MLP's branch sees C a_sa before its own skip
        out.append((s_sa, c.branch_mlp / (C * c.alpha_mlp * m_mlp)))
        C *= c.alpha_mlp
    return out


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
        if hasattr(view, "write"):   # one parameter per expert (transformers 4.x)
            view.write(x)
        else:
            t.copy_(x)
    return put


@torch.no_grad()
def reinitialise(model: nn.Module, config: BlockConfig, *, generator=None, blocks=None) -> nn.Module:
    """Write fresh Gaussian weights with ``config``'s variances into every block of ``model`` (in place;
    returns ``model``). Blocks are drawn independently, in order, from ``generator`` (CPU; an int seed).

    The model must have ``config``'s architecture (width, heads and key/value heads, head, value and feed-forward
    widths, normalisation placement and kind, activation, gated MLP, parallel residual, causal mask and window, RoPE
    base, share and frequencies, logit scale), and its reading must be proved (:func:`sigprop.read_init`'s replay).
    ``W_Q, W_K``: ``sigma_qk2``; ``b_Q`` ``sigma_bqk2``, ``b_K`` ``sigma_bk2``; ``W_V, b_V``, ``W_O, b_O``
    (``W_O = I`` when ``config.sigma_o2`` is None), ``W_1, b_1`` (and ``W_3, b_3`` when gated), ``W_2, b_2`` as in
    :class:`BlockConfig`; normalisation gains 1 and biases 0. The reading is proved once per model structure (the
    blocks and everything :func:`sigprop.read_init` reads of them; re-drawing the weights changes neither), so a
    Monte Carlo over re-initialisations replays the model once. Skip strengths and branch weights are written into
    ``W_O, b_O`` and ``W_2, b_2`` (module docstring: exact for post-LN; for pre-LN and parallel blocks the model's
    stream is the config's rescaled by the product of the skip strengths). A variance given to a bias the model lacks
    is refused.
    """
    if not isinstance(config, BlockConfig):
        raise TypeError(f"config must be a BlockConfig; got {type(config).__name__}")
    c = config
    if c.gain_control or not c.mlp:
        raise ValueError("off-the-shelf blocks have no gain control and always an MLP")
    if c.alpha_sa == 0 or c.alpha_mlp == 0:
        raise ValueError("alpha_sa and alpha_mlp must be > 0")
    with threads_for(0):   # elementwise draws and copies: one thread (threads_for's note on busy machines)
        adapter, parts = model_blocks(model, blocks)
        check_writable(parts, c)
        scales = branch_scales(c, parts)
    if not proved_before(adapter, parts):   # a structure proved once stays proved: weights are all that is written
        prove(model, adapter, parts, _read(parts))
    with threads_for(0):
        _write(parts, c, _drawer(as_generator(generator, "cpu")), scales)
    return model


def _write(parts, c, put, scales):
    for p, (s_sa, s_mlp) in zip(parts, scales):
        d, f, v = p.d, p.hidden, p.views
        put(v["w_q"], c.qk_variance)
        put(v["w_k"], c.qk_variance)
        for role in ("b_q", "b_k"):
            if v.get(role) is not None:
                v[role].get().zero_()
        put(v["w_v"], c.sigma_v2 / d)
        put(v["b_v"], c.sigma_bv2)
        if c.has_out_proj:
            put(v["w_o"], c.sigma_o2 / (p.heads * p.value_dim), s_sa)
        else:
            v["w_o"].get().copy_(s_sa * torch.eye(d, dtype=torch.float64))
        put(v["b_o"], c.sigma_bo2, s_sa)
        put(v["w1"], c.sigma_w2 / d)
        put(v["b1"], c.sigma_b2)
        put(v["w2"], c.w2_variance / f, s_mlp)
        put(v["b2"], c.b2_variance, s_mlp)
        put(v.get("w3"), c.sigma_w2 / d)        # drawn after the documents' parts: their seeds do not move
        put(v.get("router"), c.router_sigma2 / d)
        put(v.get("b3"), c.sigma_b2)
        if c.sigma_bqk2 > 0:
            put(v["b_q"], c.sigma_bqk2)
        if c.key_bias_variance > 0:
            put(v.get("b_k"), c.key_bias_variance)
        for n in (*p.present_norms, *p.qk_norms):
            n.reset()
