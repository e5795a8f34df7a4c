r"""A mixture-of-experts MLP (Mixtral, Qwen3-MoE): its forward and its Gaussian map, side by side.

**Forward** (HF ``MixtralSparseMoeBlock``): router logits ``r(x) = W_g x`` (``E`` experts, ``W_g`` entries of variance
``router_sigma2 / d``), probabilities ``softmax(r)``, the ``top_k`` largest kept, their weights ``w_e(x)`` renormalised
to sum to one (``norm_topk``; Qwen3-MoE's ``norm_topk_prob``) or not; each expert is an independent copy of the block's
MLP (gated where the config is, without biases), and ``MoE(x) = sum_{e in S(x)} w_e(x) MLP_e(x)``.

**Map** (the ``d -> infinity`` limit, weights averaged, as the documents' MLP map, Giorlandino & Goldt 2025, App.
B.6.2). Different experts have independent zero-mean output weights, so only a shared expert correlates two tokens:

.. math::  \frac{1}{d}\,\mathbb E\,\mathrm{MoE}(x)\cdot\mathrm{MoE}(x') = g(x, x')\, K(x, x'),\qquad
           g = \mathbb E_r \sum_e w_e(x)\, w_e(x')\, \mathbf 1[e \in S(x) \cap S(x')],

with ``K`` one expert's kernel (:func:`sigprop.block._components.mlp_overlaps`) and ``g`` the *routing factor*: the
router logits of two tokens are Gaussian, independent across experts, with covariance ``router_sigma2 [[q, c], [c,
q']]``. For one token ``g(x, x) = E sum_e w_e^2`` (``1/k`` for ``k`` equal weights); two tokens routed to different
experts are independent (issue 34's "probability that they share experts", weighted). ``g`` has no closed form for
``E > 2``; it is integrated by Monte Carlo over the router logits (:data:`_DRAWS` antithetic draws, a fixed seed, one
table in the cosine ``c / sqrt(q q')`` per distinct ``(E, k, router_sigma2 q, norm_topk)``: 65 Chebyshev points and
a polynomial of degree 16 through them); it agrees with an independent Monte Carlo of 10^5 draws within 4 combined
standard errors, the table's own taken as 0.002 (``tests/test_positions_routing.py``). The MLP's input is normalised
in the blocks that carry experts (pre-LN and post-LN), so ``q = q'`` is the norms' unit: other inputs are refused.
"""
from __future__ import annotations

import functools

import numpy as np
import torch

__all__: list[str] = []

#: Router-logit draws per point of the routing factor's table (antithetic pairs), its grid in the cosine (Chebyshev
#: points) and the degree of the polynomial fitted through them (smoothing the Monte Carlo's noise).
_DRAWS, _GRID, _DEGREE = 2**14, 65, 16


def route(x, router, c):
    """``(weights (n, b, T, E), ...)``: each token's weight on each expert (zero off its top ``k``), from router
    logits ``x @ router^T`` (``router (n, E, d)``) with the softmax in at least float32 (HF computes it in float32)."""
    logits = torch.einsum("nbtd,ned->nbte", x, router)
    probs = torch.softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
    top, idx = torch.topk(probs, c.top_k, dim=-1)
    if c.norm_topk:
        top = top / top.sum(-1, keepdim=True)
    return torch.zeros_like(probs).scatter(-1, idx, top).to(x.dtype)


def moe_forward(x, p, l, c, act):
    """The experts' MLP of block ``l`` on ``x (n, b, T, d)`` with activation ``act``: every expert on every token (a
    dense reference, exact), weighted by :func:`route`. ``p.router (n, L, E, d)``, ``p.w1, p.w3 (n, L, E, f, d)``,
    ``p.w2 (n, L, E, d, f)``."""
    w = route(x, p.router[:, l], c)                                   # (n, b, T, E)
    h = act(torch.einsum("nbtd,nefd->nebtf", x, p.w1[:, l]))            # (n, E, b, T, f)
    if c.gated:
        h = h * torch.einsum("nbtd,nefd->nebtf", x, p.w3[:, l])
    out = torch.einsum("nebtf,nedf->nebtd", h, p.w2[:, l])             # (n, E, b, T, d)
    return torch.einsum("nebtd,nbte->nbtd", out, w)


@functools.lru_cache(maxsize=64)
def _table(experts: int, top_k: int, scale2: float, norm_topk: bool):
    """Routing factor ``g`` on the cosine grid (Chebyshev points in [-1, 1]) for router-logit variance ``scale2``."""
    g = torch.Generator().manual_seed(0)
    rho = np.cos(np.pi * (np.arange(_GRID) + 0.5) / _GRID)
    out = np.empty(_GRID)
    u = torch.randn(_DRAWS // 2, experts, generator=g, dtype=torch.float64)
    v = torch.randn(_DRAWS // 2, experts, generator=g, dtype=torch.float64)
    u, v = torch.cat([u, -u]), torch.cat([v, -v])
    s = float(np.sqrt(scale2))
    wa = _weights(s * u, top_k, norm_topk)            # the first token's weights: the same for every rho
    for i, r in enumerate(rho):
        wb = _weights(s * (r * u + np.sqrt(max(0.0, 1 - r * r)) * v), top_k, norm_topk)
        out[i] = float((wa * wb).sum(-1).mean())
    same = float(wa.pow(2).sum(-1).mean())
    return np.polynomial.chebyshev.chebfit(rho, out, _DEGREE), same


def _weights(logits, k, norm_topk):
    probs = torch.softmax(logits, -1)
    top, idx = torch.topk(probs, k, dim=-1)
    if norm_topk:
        top = top / top.sum(-1, keepdim=True)
    return torch.zeros_like(probs).scatter(-1, idx, top)


def routing_factor(q, p, c):
    """``g`` of the module docstring at the MLP input's overlaps ``(q, p)`` (broadcast arrays, ``q`` one value: the
    normalised input); ``p == q`` gives the single token's ``E sum_e w_e^2``."""
    q = np.asarray(q, dtype=float)
    if q.size and (q.max() - q.min()) > 1e-9 * max(1.0, q.max()):
        raise ValueError("the routing factor is tabulated at one input norm: a mixture of experts needs its MLP input "
                         "normalised (norm='pre' or 'post', unit gains)")
    q0 = float(q.flat[0]) if q.size else 1.0
    coef, same = _table(c.experts, c.top_k, float(c.router_sigma2) * q0, bool(c.norm_topk))
    rho = np.clip(np.asarray(p, dtype=float) / q0, -1.0, 1.0)
    out = np.polynomial.chebyshev.chebval(rho, coef)
    return np.where(rho >= 1.0 - 1e-12, same, out)
