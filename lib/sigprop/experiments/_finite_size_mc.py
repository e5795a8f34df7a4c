r"""Samplers of the finite-size study (``sigprop.experiments._finite_size``): per-initialisation values.

Every sampler returns one row per independent initialisation (numpy, float64) and takes an integer
``seed``; a ladder rung is a list of batches, each with its own seed, so any batch can be re-run alone
(``tests/test_finite_size.py`` replays the first batch of the smallest rung of each record).

* :func:`block_curves` -- the mean token cosine after each block of random transformers
  (:func:`sigprop.mc_cosine_vs_depth`, the book's Monte Carlo of Algorithms 1-2), ``(inits, depth + 1)``.
* :func:`gram_chain` -- the same stack at ``d = infinity`` and finite ``T``: the ``T x T`` Gram matrix
  ``Q`` of the tokens evolves exactly, with fresh Gaussian scores ``beta sqrt(log T) L G L^T`` per block
  (``Q = L L^T``; App. B.1, Eq. (9) with Gaussian ``G``, exact as ``d -> infinity``), values and MLP
  averaged exactly (``Q <- alpha^2 Q + sigma_v^2 A Q A^T``; the ReLU kernel per pair; LN rescales the
  diagonal). No equicorrelation is assumed: it tests the scalar maps' assumptions, not only their algebra.
* :func:`ipr_samples` -- the mean IPR ``Y^(2)`` of attention rows of random layers (the law of
  :func:`sigprop.mc_attention_ipr`: ``W_Q, W_K`` entries ``N(0, beta sqrt(log T)/d)``, Gaussian tokens,
  the first ``queries`` tokens attend over all ``T``), ``(inits, len(betas))``. The logits of query ``t``
  are ``beta sqrt(log T) d^{-3/2} w_t . x_s`` with ``w_t = G_K^T G_Q x_t``, so a layer costs
  ``O(T d queries)`` instead of ``O(T d^2)``; all betas share one draw.
* :func:`qgrad_samples` -- ``T/(d^2 sqrt(log T)) E_G ||dL/dW_Q||^2`` of random attention layers (the law
  of :func:`sigprop.mc_rem_query_grad_sq_norm` with ``rho = 0``), evaluated by the exact Jacobian identity
  :func:`sigprop.query_jacobian_sq_norm` (the read-out average ``E_G`` done exactly, so no read-out noise),
  ``(n, len(betas))``; all betas share one draw (``W_Q, W_K`` scale as ``sqrt(beta)``).
"""
from __future__ import annotations

import math

import numpy as np
import torch

import sigprop as sp

__all__ = ["block_curves", "gram_chain", "ipr_samples", "qgrad_samples"]


def block_curves(config: sp.BlockConfig, depth: int, *, T: int, inits: int, seqs: int, rho0: float,
                 seed: int) -> np.ndarray:
    """Per-network mean cosine after each block, ``(inits, depth + 1)`` (:func:`sigprop.mc_cosine_vs_depth`)."""
    est = sp.mc_cosine_vs_depth(config, depth, T=T, inits=inits, seqs=seqs, rho0=rho0, generator=int(seed),
                                device="cpu")
    return est.samples.double().numpy()


# ----------------------------------------------------------------------------- d = infinity, finite T


def _normalise(Q):
    dg = torch.diagonal(Q, dim1=-2, dim2=-1).clamp_min(1e-300).sqrt()
    return Q / dg[..., :, None] / dg[..., None, :]


def _relu_branch(Q, sigma_w2, sigma_b2):
    """Exact output Gram of ``W_2 relu(W_1 x + b_1) + b_2`` over the weights (infinite width), per pair."""
    Q1 = sigma_w2 * Q + sigma_b2
    dg = torch.diagonal(Q1, dim1=-2, dim2=-1).sqrt()
    nrm = dg[..., :, None] * dg[..., None, :]
    r = (Q1 / nrm).clamp(-1, 1)
    f = (torch.sqrt((1 - r * r).clamp_min(0)) + r * (math.pi - torch.arccos(r))) / math.pi
    return sigma_w2 * nrm * f / 2 + sigma_b2


def gram_chain(config: sp.BlockConfig, depth: int, *, T: int, chains: int, rho0: float, seed: int) -> np.ndarray:
    """Mean pairwise cosine after each block of the ``d -> infinity`` stack, ``(chains, depth + 1)``.

    Starts from the exactly equicorrelated Gram matrix ``rho0 + (1 - rho0) I``; each block draws its scores
    ``beta sqrt(log T) L G L^T`` (``G`` standard Gaussian ``T x T``, ``L`` a square root of the attention
    input's Gram matrix). ReLU MLP, ``norm`` "post" or "pre", no gain control.
    """
    if config.activation != "relu" or config.gain_control or config.norm not in ("post", "pre"):
        raise ValueError("gram_chain covers post-/pre-LN blocks with a ReLU MLP and no gain control")
    dt = torch.float64
    g = torch.Generator().manual_seed(int(seed))
    s = config.beta(T) * math.sqrt(math.log(T))
    a2, m2 = config.alpha_sa**2, config.alpha_mlp**2
    pre = config.norm == "pre"
    eye = torch.eye(T, dtype=dt)
    off = ~torch.eye(T, dtype=torch.bool)
    Q = (rho0 + (1 - rho0) * eye).expand(chains, T, T).clone()
    out = np.zeros((chains, depth + 1))
    out[:, 0] = rho0
    for layer in range(1, depth + 1):
        Qin = _normalise(Q) if pre else Q
        L, info = torch.linalg.cholesky_ex(Qin + 1e-13 * eye)
        if bool(info.any()):               # numerically rank-deficient: an eigen-decomposition square root
            w, U = torch.linalg.eigh(Qin)
            L = U * w.clamp_min(0).sqrt()[..., None, :]
        G = torch.randn(chains, T, T, generator=g, dtype=dt)
        A = torch.softmax(s * (L @ G @ L.transpose(-1, -2)), dim=-1)
        Q = a2 * Q + config.sigma_v2 * (A @ Qin @ A.transpose(-1, -2))
        Q = Q if pre else _normalise(Q)
        Qin = _normalise(Q) if pre else Q
        Q = m2 * Q + _relu_branch(Qin, config.sigma_w2, config.sigma_b2)
        Q = Q if pre else _normalise(Q)
        out[:, layer] = _normalise(Q)[:, off].mean(-1).numpy()
    return out


# ----------------------------------------------------------------------------- attention IPR (Fig. 3)


def ipr_samples(betas, *, T: int, d: int, inits: int, seed: int, queries: int = 32) -> np.ndarray:
    """Per-layer mean IPR of the first ``queries`` rows at every beta, ``(inits, len(betas))`` (float64)."""
    betas = np.asarray(betas, dtype=float)
    out = np.zeros((inits, len(betas)))
    c = math.sqrt(math.log(T)) / d**1.5
    g = torch.Generator().manual_seed(int(seed))
    for i in range(inits):
        gq = torch.randn(d, d, generator=g, dtype=torch.float64)
        gk = torch.randn(d, d, generator=g, dtype=torch.float64)
        x = torch.randn(T, d, generator=g, dtype=torch.float64)
        w = (x[:queries] @ gq.T) @ gk                    # (queries, d): w_t = G_K^T G_Q x_t
        base = c * (w @ x.T)                             # (queries, T) logits per unit beta
        for j, b in enumerate(betas):
            out[i, j] = float(torch.softmax(b * base, dim=-1).pow(2).sum(-1).mean())
    return out


# ----------------------------------------------------------------------------- query gradient (Fig. 4)


def qgrad_samples(betas, *, T: int, d: int, n: int, seed: int, sigma_v2: float = 1.0) -> np.ndarray:
    """Per-sample scaled query-gradient norm at every beta, ``(n, len(betas))`` (float64, rho = 0)."""
    betas = np.asarray(betas, dtype=float)
    out = np.zeros((n, len(betas)))
    g = torch.Generator().manual_seed(int(seed))
    scale = 1.0 / (T * d**2 * math.sqrt(math.log(T)))
    unit = math.sqrt(math.sqrt(math.log(T)) / d)          # W_Q, W_K std per sqrt(beta)
    chunk = max(1, int(2e7 // (T * T + 3 * T * d + 3 * d * d)))
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        x = sp.equicorrelated_tokens(m, T=T, d=d, rho=0.0, normalised=True, generator=g, dtype=torch.float64)
        gq = unit * torch.randn(m, d, d, generator=g, dtype=torch.float64)
        gk = unit * torch.randn(m, d, d, generator=g, dtype=torch.float64)
        wv = math.sqrt(sigma_v2 / d) * torch.randn(m, d, d, generator=g, dtype=torch.float64)
        for j, b in enumerate(betas):
            r = math.sqrt(b)
            out[start:start + m, j] = (scale * sp.query_jacobian_sq_norm(x, r * gq, r * gk, wv)).numpy()
    return out
