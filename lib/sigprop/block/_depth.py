r"""The token cosine through depth: the block map's prediction and its Monte Carlo, side by side.

:func:`cosine_vs_depth` iterates the block map (Giorlandino & Goldt 2025, Algorithms 1-3) and returns the mean
cosine after each block with the participation ratio ``Y^(2)`` of each block's attention;
:func:`mc_cosine_vs_depth` measures the same cosine on random transformers (Figs. 1(d), 1(e), 2, 6). Both take
``(config, depth, *, T, rho0)``; the theory also takes the map's keywords instead of a config (the broadcasting
form the trainability diagrams use: ``cosine_vs_depth(depth, beta=..., alpha_sa=...)``).

**What the maps are at finite T** (issue 37). The block maps (and the Gram map) iterate the *mean* Gram matrix. One
block on given tokens is exact as ``d -> infinity`` at fixed ``T``; beyond it they are a closure: at fixed ``T`` one
network's attention matrix stays random as ``d -> infinity`` (its logits are ``T^2`` Gaussians of O(1) variance), so
its Gram matrix does, and the next block's output is a nonlinear function of it (post-LN normalises each network's
own). Measured for three post-LN attention blocks at ``beta = 4`` from ``rho0 = -0.3``, ``T = 4``: maps -0.0135, the
``d -> infinity`` limit (each network's Gram chain with fresh Gaussian logits given it, 20,000 chains) -0.0235 +-
0.0009, random networks -0.0238 +- 0.0017 at ``d = 64`` and -0.0205 +- 0.0017 at ``d = 256`` (800 networks each):
the network's gap to the maps does not shrink with ``d`` -- not a finite-width effect, and not the negative
overlaps' logit law (one block agrees, ``tests/test_domains.py``). From ``rho0 = +0.3`` the chain gives 0.7519 +-
0.0005 against the maps' 0.7553; at ``T = 16`` from the Gram bound the gap is 0.002 (chain 0.0083 +- 0.0001, maps
0.0104) and the network approaches the chain like ``1/d`` (0.0171 at ``d = 64``, 0.0106 at 256). In the spread
phase (the default ``beta = 0.85`` at ``T = 4``) network and maps agree within 1 SE at depth 3.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from ..attention import ipr_limit, rem_quadrature
from ..inputs import equicorrelated_tokens
from ..stats._config import threads_for
from ..stats._estimate import Estimate, estimate
from ..stats._measures import mean_cosine
from ..stats._random import as_generator
from ..stats._validate import check_gram_bound, check_int, check_positive, check_range, check_real, theory_function
from ._config import BlockConfig
from ._map import _REALS, check_domain, checked, one_block, _parameters
from ._network import sample_transformer, transformer_forward

__all__ = ["CosineCurve", "mc_cosine_vs_depth"]
__theory__ = ["cosine_vs_depth"]


class CosineCurve(NamedTuple):
    """:func:`sigprop.theory.cosine_vs_depth`'s result, arrays ``(depth + 1, *broadcast)``: ``rho`` the mean
    cosine after each block (row 0: the input), ``y2`` the IPR of an attention layer acting on those tokens
    (``y2[l]`` is block ``l + 1``'s; ``y2[depth]`` that of one more block)."""

    rho: np.ndarray
    y2: np.ndarray


def _ipr(P, q, p, T):
    """``E Y^(2)`` of the attention on the block input ``(q, p)``: pre-LN attention reads ``LN x`` (``(1, p/q)``),
    post-LN and no-LN attention ``x`` itself -- under post-LN that is the raw input of norm ``q0`` in block 1
    (issue 37, item 2: it was normalised, so ``y2[0]`` ignored ``q0``), normalised tokens after it; QK-norm
    logits see the cosines ``(1, p/q)`` (as ``sigprop.block._attention.attention_overlaps``), a query bias
    ``(q + e, p + e)``."""
    if P["norm"] == "pre" or P.get("qk_norm", False):
        q, p = np.ones(np.shape(q)), p / q
    e = 0.0 if P.get("qk_norm", False) else P["qk_bias"]
    if T is None:
        return ipr_limit(P["beta"], q + e, p + e, 2.0)
    sig = P["beta"] * np.sqrt(np.log(T) * (q + e) * np.maximum(q - p, 0.0))
    sig, TT = np.broadcast_arrays(sig, T)
    return np.array([rem_quadrature(float(s), float(t))[0] for s, t in zip(sig.ravel(), TT.ravel())]).reshape(sig.shape)


@theory_function
def cosine_vs_depth(config=None, depth=None, *, T=None, rho0=0.0, q0=1.0, **params) -> CosineCurve:
    """The mean token cosine after each block and each block's attention IPR, from the block map.

    ``cosine_vs_depth(config, depth, T=T, rho0=...)``: the block ``config`` samples (as
    :func:`sigprop.mc_cosine_vs_depth`), at the finite length ``T`` (exact finite-T REM quantities). Or, as the
    trainability diagrams use it, ``cosine_vs_depth(depth, beta=..., alpha_sa=..., **keywords)``: the T ->
    infinity map with the keywords of :func:`sigprop.theory.block_map`, all broadcasting (``rho0 >= 0``).
    Returns :class:`CosineCurve` ``(rho, y2)``.
    """
    if depth is None and not isinstance(config, BlockConfig):   # cosine_vs_depth(depth, beta=...)
        config, depth = None, config
    depth = check_int(depth, "depth", minimum=0)
    r0 = check_range(rho0, "rho0", -1.0, 1.0)
    qa = check_positive(q0, "q0")
    if config is None:
        P = _parameters(None, None, dict(params))      # validates every keyword
        T = None
    else:
        P = _parameters(config, T, dict(params))
        T = check_range(T, "T", 2.0, np.inf)
    try:
        shape = np.broadcast_shapes(*(np.shape(P[k]) for k in _REALS + ("beta",)), r0.shape, qa.shape)
    except ValueError:
        raise ValueError("beta, alpha_sa, rho0, q0 and the block parameters must broadcast against each other; got "
                         f"shapes beta {np.shape(P['beta'])}, alpha_sa {np.shape(P['alpha_sa'])}, rho0 {r0.shape}, "
                         f"q0 {qa.shape}") from None
    P.update({k: np.broadcast_to(P[k], shape).astype(float) for k in _REALS + ("beta",)})
    q = np.broadcast_to(qa, shape).astype(float)
    p = np.broadcast_to(r0 * qa, shape).astype(float)
    check_domain(q, p, T)
    rho, y2 = np.empty((depth + 1,) + shape), np.empty((depth + 1,) + shape)
    for l in range(depth + 1):
        rho[l] = p / q
        y2[l] = _ipr(P, q, p, T)
        if l < depth:
            q, p = checked(one_block(q, p, P, T), l + 1, P["norm"])
            q, p = np.broadcast_to(q, shape), np.broadcast_to(p, shape)
    return CosineCurve(rho, y2)


def mc_cosine_vs_depth(config: BlockConfig, depth: int, *, T: int, inits: int = 16, seqs: int = 1,
                       rho0: float = 0.0, generator=None, device=None, dtype=torch.float32,
                       chunk: int | None = None) -> Estimate:
    """Mean token cosine after each block of random transformers: the Monte Carlo twin of
    :func:`sigprop.theory.cosine_vs_depth` (Giorlandino & Goldt 2025, Figs. 1(d), 1(e), 2, 6).

    ``inits`` independent networks of ``depth`` blocks (``config``), each fed ``seqs`` sequences of ``T``
    equicorrelated tokens of cosine ``rho0`` (:func:`sigprop.equicorrelated_tokens`; ``rho0`` down to the Gram bound
    ``-1/(T-1)``). Returns an
    :class:`~sigprop.Estimate` of shape ``(depth + 1,)`` (row 0: the input) over the ``inits`` networks,
    each averaged over its sequences; ``.samples`` holds the per-network curves ``(inits, depth + 1)``
    for curve-level tests (layers of one network are correlated). Networks run in batches of ``chunk``
    (default: all at once); each batch draws its weights, then its tokens, from ``generator``.
    """
    if not isinstance(config, BlockConfig):
        raise TypeError(f"config must be a BlockConfig; got {type(config).__name__}")
    depth = check_int(depth, "depth", minimum=1)
    T = check_int(T, "T", minimum=2)
    inits = check_int(inits, "inits", minimum=2)
    seqs = check_int(seqs, "seqs", minimum=1)
    rho0 = check_real(rho0, "rho0", minimum=-1.0, maximum=1.0)
    check_gram_bound(1.0, rho0, T)
    chunk = inits if chunk is None else check_int(chunk, "chunk", minimum=1)
    g = as_generator(generator, device)
    curves = []
    for start in range(0, inits, chunk):
        m = min(chunk, inits - start)
        params = sample_transformer(config, depth, inits=m, generator=g, device=g.device, dtype=dtype)
        x = equicorrelated_tokens(m, seqs, T=T, d=config.d, rho=rho0, generator=g, dtype=dtype)
        with threads_for(m * seqs * T * config.d * max(config.d, config.hidden)):  # small products: one thread
            rho = transformer_forward(x, params, config, measure=mean_cosine)  # (depth + 1, m, seqs)
        curves.append(rho.double().mean(-1).T.cpu())  # (m, depth + 1)
    return estimate(torch.cat(curves))
