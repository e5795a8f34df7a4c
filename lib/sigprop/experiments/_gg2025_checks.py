r"""Measurements behind some rows of the Giorlandino & Goldt 2025 claims ledger (``sigprop.claims.giorlandino_goldt2025``)
that are not library objects: the printed (mistyped) Algorithm 2, the depth at which a cosine curve crosses a level,
one attention layer's outputs measured two ways, the logit variance of the HuggingFace initialisation, and the mean
per-pair cosine of two correlated REM rows. Each is a few seconds on a CPU; the errata page cites them.
"""
from __future__ import annotations

import math

import numpy as np
import torch

import sigprop as sp

__all__ = ["printed_algorithm2", "crossing_depth", "attention_outputs", "hf_logit_variance", "rem_pair_cosine"]


def printed_algorithm2(rho0, depth, *, beta, sigma_w2, sigma_b2, sigma_v2, alpha_sa=1.0, alpha_mlp=1.0, clip=True):
    """Algorithm 2 (pre-LN) as printed, with ``q_1 = sigma_w2 q_LN / 2 + sigma_b2``, T -> infinity.

    Returns ``(p_1/q_1 per block, cosine per block incl. the input)``. The ReLU kernel ``f`` is undefined for
    ``p_1/q_1 > 1``; ``clip=True`` clips its argument to 1 (an unclipped implementation gives NaN from there on).
    """
    q, p, ratios, cos = 1.0, float(rho0), [], [float(rho0)]
    for _ in range(depth):
        pln = p / q                                              # LN before attention
        y = float(sp.theory.ipr(beta, 1.0, pln))
        q, p = sigma_v2 * (pln + (1 - pln) * y) + alpha_sa**2 * q, sigma_v2 * pln + alpha_sa**2 * p
        pln = p / q                                              # LN before the MLP
        q1, p1 = sigma_w2 / 2 + sigma_b2, sigma_w2 * pln + sigma_b2
        ratios.append(p1 / q1)
        r = min(p1 / q1, 1.0) if clip else p1 / q1
        f = (math.sqrt(1 - r * r) + r * (math.pi - math.acos(r))) / math.pi if abs(r) <= 1 else math.nan
        q, p = sigma_w2 * q1 / 2 + sigma_b2 + alpha_mlp**2 * q, sigma_w2 * q1 * f / 2 + sigma_b2 + alpha_mlp**2 * p
        cos.append(p / q)
    return np.array(ratios), np.array(cos)


def crossing_depth(r, level):
    """First (linearly interpolated) block at which each curve of ``r`` ``(depth + 1, n)`` exceeds ``level``; NaN if never."""
    r = np.asarray(r, dtype=float)
    above = r > level
    first = above.argmax(0)
    lo = np.clip(first - 1, 0, None)
    r0 = np.take_along_axis(r, lo[None], 0)[0]
    r1 = np.take_along_axis(r, first[None], 0)[0]
    frac = np.where(r1 > r0, (level - r0) / np.where(r1 > r0, r1 - r0, 1.0), 0.0)
    return np.where(above.any(0), lo + frac, np.nan)


def attention_outputs(beta, rho, T, d, n, seed):
    """Per random attention layer (``n`` of them, exactly equicorrelated tokens of cosine ``rho``, ``sigma_v^2 = 1``):
    the ``W_V``-averaged ratio ``p'/q'`` and the mean pairwise cosine of the sampled outputs ``S = A X W_V``;
    returns two :class:`~sigprop.Estimate`."""
    g = torch.Generator().manual_seed(seed)
    s = math.sqrt(beta * math.sqrt(math.log(T)) / d)
    off = ~torch.eye(T, dtype=torch.bool)
    ratio, cosine = [], []
    for _ in range(n // 8):
        x = sp.exact_equicorrelated_tokens(8, T=T, d=d, rho=rho, generator=g, dtype=torch.float64)
        wq, wk = (s * torch.randn(8, d, d, generator=g, dtype=torch.float64) for _ in range(2))
        wv = torch.randn(8, d, d, generator=g, dtype=torch.float64) / math.sqrt(d)
        A = torch.softmax((x @ wq.transpose(-1, -2)) @ (x @ wk.transpose(-1, -2)).transpose(-1, -2) / math.sqrt(d), -1)
        out = A @ (x @ x.transpose(-1, -2) / d) @ A.transpose(-1, -2)       # E_V of S S^T / d
        ratio.append(out[:, off].mean(-1) / torch.diagonal(out, dim1=-2, dim2=-1).mean(-1))
        cosine.append(sp.mean_cosine(A @ x @ wv.transpose(-1, -2)))
    return sp.estimate(torch.cat(ratio)), sp.estimate(torch.cat(cosine))


def hf_logit_variance(*, d, heads, std, draws, generator):
    """Variance over keys of the per-head logits ``q.k/sqrt(d_k)`` of a HuggingFace ``BertModel``'s first block,
    its weights drawn by the library's own initialiser (``initializer_range = std``), on LayerNorm'd orthogonal
    tokens (``|x|^2 = d``, 64 per draw): an :class:`~sigprop.Estimate` over ``draws`` initialisations. The model
    is built from its config (nothing is downloaded); ``transformers`` is the ``notebooks`` extra."""
    import transformers

    transformers.logging.set_verbosity_error()
    dk, Tm = d // heads, 64
    config = transformers.BertConfig(hidden_size=d, num_hidden_layers=1, num_attention_heads=heads, intermediate_size=d,
                                     vocab_size=2, initializer_range=std, max_position_embeddings=Tm)
    with torch.random.fork_rng():                          # the constructor's draw (redrawn below) leaves the global RNG
        model = transformers.BertModel(config, add_pooling_layer=False)
    att = model.encoder.layer[0].attention.self
    g = torch.Generator().manual_seed(generator)
    var = []
    for i in range(draws):
        with torch.random.fork_rng():
            torch.manual_seed(generator * 100_003 + i)
            model.apply(model._init_weights)          # HF's default: N(0, initializer_range^2), zero biases
        x = math.sqrt(d) * torch.linalg.qr(torch.randn(d, Tm, generator=g, dtype=torch.float64))[0].T
        with torch.no_grad():
            q = att.query(x.float()).double().unflatten(-1, (heads, dk)).transpose(0, 1)    # (heads, T, d_k)
            k = att.key(x.float()).double().unflatten(-1, (heads, dk)).transpose(0, 1)
        var.append((q @ k.transpose(-1, -2) / math.sqrt(dk)).var(-1).mean())
    return sp.estimate(torch.stack(var))


def rem_pair_cosine(beta, rho, T, *, n, generator):
    """Mean over ``n`` pairs of two correlated REM rows (App. B.1, correlation ``rho``) of the per-pair output cosine
    ``(rho + (1-rho) Y_p,tt') / sqrt((rho + (1-rho) Y2_t)(rho + (1-rho) Y2_t'))``: the mean pairwise cosine of one
    attention layer's outputs at ``d -> infinity`` (``W_V`` averaged), an :class:`~sigprop.Estimate`."""
    g = torch.Generator().manual_seed(generator)
    sig = beta * math.sqrt(math.log(T) * (1 - rho))
    b = torch.randn(n, 1, T, generator=g, dtype=torch.float64)
    e = torch.randn(n, 2, T, generator=g, dtype=torch.float64)
    A = torch.softmax(sig * (math.sqrt(rho) * b + math.sqrt(1 - rho) * e), -1)
    y2 = A.pow(2).sum(-1)
    return sp.estimate((rho + (1 - rho) * (A[:, 0] * A[:, 1]).sum(-1))
                       / torch.sqrt((rho + (1 - rho) * y2[:, 0]) * (rho + (1 - rho) * y2[:, 1])))
