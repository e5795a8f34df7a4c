r"""The block map on the whole Gram matrix of a sequence: causal attention, position by position.

The maps of ``sigprop.block._map`` follow two numbers, the mean norm ``q`` and overlap ``p``, which
suffices while the tokens stay exchangeable. A causal mask breaks that: query ``t`` sees the ``t + 1``
keys ``s <= t``, so early and late tokens are mixed differently and their overlaps drift apart. This
module follows the whole ``T x T`` Gram matrix ``G_ts = E[x_t . x_s] / d`` instead (the d -> infinity
limit at fixed ``T``, weights averaged, layers independent), through the same block
(:class:`~sigprop.BlockConfig`):

* **LayerNorm**: ``G_ts / sqrt(G_tt G_ss)`` (Giorlandino & Goldt 2025, Eq. (5); the feature centring of
  ``torch.nn.LayerNorm`` is an ``O(1/d)`` correction, not modelled).
* **Attention** on input Gram ``H``: the logits are Gaussian with ``E[a_ts a_t's'] = sigma_a^2 H_tt'
  H_ss'`` (App. B.1, Eq. (9), with ``sigma_a^2 = logit_scale^2 d_k (sigma_qk2 d)^2``), i.e.
  ``a = sigma_a L Z L^T`` with ``H = L L^T`` and ``Z`` a ``T x T`` matrix of independent standard
  normals. Averaging over the values, the output Gram is ``sigma_o2 (sigma_v2 E[A H A^T] + sigma_bv2)
  + sigma_bo2`` (``A`` the masked softmax of ``a``; with gain control ``H`` is replaced by ``C H C``,
  ``C`` the centring along the sequence, and the value bias drops). ``E[A H A^T]`` is the finite-``T``
  REM of the equicorrelated case (:func:`sigprop.theory.cross_overlap`) for a general ``H``; it has no
  closed form, so it is integrated by Monte Carlo over ``Z`` alone (no width, no weights): ``samples``
  draws per layer in antithetic pairs ``(Z, -Z)``, float64, a fixed seed.
* **MLP**: elementwise, ``G_1 = sigma_w2 H + sigma_b2`` and ``sigma_w2_out E[phi(u_t) phi(u_s)] +
  sigma_b2_out`` with ``(u_t, u_s)`` Gaussian of covariance ``G_1`` (:func:`sigprop.theory.activation_kernel`).
* **Residuals** add ``alpha^2 G`` and ``branch^2`` times the branch's Gram, as in the ``(q, p)`` map.

For an equicorrelated ``G`` without a mask this reduces to :func:`sigprop.theory.block_map` at
finite ``T`` (``tests/test_block_gram.py`` checks it, and checks the causal map against random causal
transformers). In the first causal layer from equicorrelated tokens, row ``t`` is exactly a REM with
``t + 1`` energies of variance ``sigma_a^2 q (q - p)``: :func:`causal_ipr` gives its ``E Y^(2)`` by the
quadrature of ``sigprop.attention._rem``.

Used in the book's chapter on off-the-shelf transformers (GPT-2's causal mask).
"""
from __future__ import annotations

import dataclasses

import numpy as np
import torch

from ._network import BlockConfig
from ._map import _kernel
from ..stats._config import threads_for
from ..attention import logit_variance
from ..stats._random import as_generator
from ..attention import rem_quadrature
from ..stats._validate import check_int, check_overlaps, check_seq_len

__all__ = ["GramTrajectory"]
__theory__ = ["gram_block_map", "iterate_gram_map", "causal_ipr"]

#: Logit draws per chunk (memory: chunk x T x T float64).
_CHUNK = 256


@dataclasses.dataclass(frozen=True)
class GramTrajectory:
    """Result of :func:`sigprop.theory.iterate_gram_map` (numpy float64).

    ``gram`` (depth+1, T, T): ``G`` after each block (row 0: the input); ``ipr`` (depth, T): the mean
    inverse participation ratio ``E sum_s A_ts^2`` of each query row in each block's attention.
    """

    gram: np.ndarray
    ipr: np.ndarray
    causal: bool
    samples: int

    def cosine_matrix(self) -> np.ndarray:
        """(depth+1, T, T): ``G_ts / sqrt(G_tt G_ss)``."""
        diag = np.sqrt(np.einsum("ltt->lt", self.gram))
        return self.gram / (diag[:, :, None] * diag[:, None, :])

    def mean_cosine(self, positions=None) -> np.ndarray:
        """(depth+1,): mean cosine over pairs ``t != s`` of ``positions`` (default all; e.g. ``slice(-16,
        None)`` for the last 16 tokens), the quantity :func:`sigprop.probe` reports per pair."""
        cos = self.cosine_matrix()
        idx = np.arange(cos.shape[-1])[positions if positions is not None else slice(None)]
        sub = cos[:, idx[:, None], idx[None, :]]
        k = len(idx)
        return (sub.sum((-1, -2)) - np.einsum("ltt->l", sub)) / (k * (k - 1))


def _as_gram(G):
    G = np.asarray(G.detach().cpu().double().numpy() if isinstance(G, torch.Tensor) else G, dtype=float)
    if G.ndim != 2 or G.shape[0] != G.shape[1] or G.shape[0] < 2:
        raise ValueError(f"G must be a (T, T) Gram matrix with T >= 2; got shape {G.shape}")
    if not np.all(np.isfinite(G)) or not np.allclose(G, G.T, rtol=1e-10, atol=1e-12):
        raise ValueError("G must be a finite symmetric matrix")
    if np.any(np.diag(G) <= 0):
        raise ValueError("G must have a positive diagonal (token norms)")
    return 0.5 * (G + G.T)


def _ln(G):
    s = np.sqrt(np.diag(G))
    return G / (s[:, None] * s[None, :])


def _attention(H, c: BlockConfig, samples: int, g: torch.Generator):
    """(E[A H' A^T], E[sum_s A_ts^2]) for the attention on input Gram ``H`` (H' = C H C with gain control)."""
    T = H.shape[0]
    sigma_a = float(np.sqrt(logit_variance(logit_scale=c.scale, d=c.d, d_k=c.head_dim, sigma_qk2=c.qk_variance)))
    lam, U = np.linalg.eigh(H)
    L = torch.from_numpy(U * np.sqrt(np.clip(lam, 0.0, None)))  # H = L L^T (PSD part)
    Hv = H
    if c.gain_control:
        C = np.eye(T) - 1.0 / T
        Hv = C @ H @ C
    Hv = torch.from_numpy(Hv)
    mask = torch.ones(T, T, dtype=torch.bool).triu(1) if c.causal else None
    M = torch.zeros(T, T, dtype=torch.float64)
    y2 = torch.zeros(T, dtype=torch.float64)
    done = 0
    while done < samples:
        m = min(_CHUNK, samples - done) // 2 * 2
        Z = torch.randn(m // 2, T, T, generator=g, dtype=torch.float64)
        a = sigma_a * (L @ torch.cat([Z, -Z]) @ L.T)  # antithetic pairs
        if mask is not None:
            a = a.masked_fill(mask, float("-inf"))
        A = torch.softmax(a, dim=-1)
        M += (A @ Hv @ A.transpose(-1, -2)).sum(0)
        y2 += A.pow(2).sum(-1).sum(0)
        done += m
    return (M / done).numpy(), (y2 / done).numpy()


def _mlp(H, c: BlockConfig):
    G1 = c.sigma_w2 * H + c.sigma_b2
    d = np.diag(G1)
    return c.w2_variance * _kernel(d[:, None], d[None, :], G1, c.activation) + c.b2_variance


def _block(G, c: BlockConfig, samples: int, g: torch.Generator):
    T = G.shape[0]
    ones = np.ones((T, T))
    H = _ln(G) if c.norm == "pre" else G
    M, y2 = _attention(H, c, samples, g)
    bv = 0.0 if c.gain_control else c.sigma_bv2
    S = c.out_variance * (c.sigma_v2 * M + bv * ones) + c.sigma_bo2 * ones
    G = c.alpha_sa**2 * G + c.branch_sa**2 * S
    if c.norm == "post":
        G = _ln(G)
    if c.mlp:
        H = _ln(G) if c.norm == "pre" else G
        G = c.alpha_mlp**2 * G + c.branch_mlp**2 * _mlp(H, c)
        if c.norm == "post":
            G = _ln(G)
    return 0.5 * (G + G.T), y2


def _check(config, samples):
    if not isinstance(config, BlockConfig):
        raise TypeError(f"config must be a BlockConfig; got {type(config).__name__}")
    samples = check_int(samples, "samples", minimum=2)
    return samples + samples % 2


def gram_block_map(G, config: BlockConfig, *, samples: int = 1024, generator=0):
    """One block's map of the Gram matrix ``G (T, T) -> (G', ipr (T,))`` (module docstring).

    ``config`` is the block (``causal=True`` for a decoder); ``samples`` logit draws (even; antithetic
    pairs) integrate the attention's softmax average; ``generator`` an int seed or a CPU generator.
    """
    G = _as_gram(G)
    samples = _check(config, samples)
    with threads_for(G.shape[0] ** 3):  # small products: one thread
        return _block(G, config, samples, as_generator(generator, "cpu"))


def iterate_gram_map(G0, depth: int, config: BlockConfig, *, samples: int = 1024, generator=0) -> GramTrajectory:
    """Iterate :func:`gram_block_map` ``depth`` times from ``G0 (T, T)``; one generator for all layers.

    For ``T`` equicorrelated tokens of norm ``q`` and cosine ``rho`` use ``G0 = q ((1 - rho) I + rho)``.
    Cost ~ ``4 samples T^3`` flops per block (T = 64, 1024 samples: ~0.2 s). The integration error of a
    cosine is ~ its spread over logit draws / sqrt(samples) (below 1e-3 at the defaults in the book's
    uses; ``tests/test_block_gram.py`` compares two seeds).
    """
    G = _as_gram(G0)
    depth = check_int(depth, "depth", minimum=0)
    samples = _check(config, samples)
    g = as_generator(generator, "cpu")
    grams, iprs = [G], []
    for _ in range(depth):
        with threads_for(G.shape[0] ** 3):  # small products: one thread
            G, y2 = _block(G, config, samples, g)
        if not np.all(np.isfinite(G)):
            raise ValueError("the Gram map left the float64 range (no LayerNorm: use fewer blocks)")
        grams.append(G)
        iprs.append(y2)
    return GramTrajectory(np.stack(grams), np.stack(iprs) if iprs else np.zeros((0, G.shape[0])),
                          bool(config.causal), samples)


def causal_ipr(q, p, config: BlockConfig, *, T: int) -> np.ndarray:
    """``E Y^(2)`` of each query row ``t = 0..T-1`` of a causal attention layer on equicorrelated tokens.

    Row ``t`` sees ``t + 1`` keys; after removing the part shared by all keys (App. B.1) its logits are
    ``t + 1`` i.i.d. Gaussians of variance ``sigma_a^2 q (q - p)``, ``sigma_a^2 = logit_scale^2 d_k
    (sigma_qk2 d)^2`` from ``config`` (the finite-T REM at ``T = t + 1``; row 0 attends to itself,
    ``Y = 1``). Exact (one quadrature per row, :func:`sigprop.theory.ipr_finite`'s). ``q, p``: the
    attention input's overlaps (1 and the cosine after a LayerNorm). Returns (T,).
    """
    if not isinstance(config, BlockConfig):
        raise TypeError(f"config must be a BlockConfig; got {type(config).__name__}")
    T = int(check_seq_len(T))
    qa, pa = check_overlaps(q, p, strict=False)
    var = float(logit_variance(logit_scale=config.scale, d=config.d, d_k=config.head_dim,
                               sigma_qk2=config.qk_variance))
    sigma = float(np.sqrt(var * float(qa) * max(float(qa) - float(pa), 0.0)))
    return np.array([1.0] + [rem_quadrature(sigma, float(n))[0] for n in range(2, T + 1)])
