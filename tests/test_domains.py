"""Every map's domain (issue 37, item 1): declared, enforced by one check, and tested against Monte Carlo at its edges.

The maps on ``T`` equicorrelated tokens of norm ``q`` and overlap ``p`` have one domain, the Gram bound ``p >=
-q/(T-1)`` (``p >= 0`` as ``T -> infinity``): every ``T`` tokens with a positive semi-definite Gram matrix, negative
overlaps included. ``sigprop.stats._validate.check_gram_bound`` enforces it for all of them. Below: (1) every such map
accepts the edge itself and refuses just below it (``DOMAIN``, a property over all of them); (2) the maps against the
random objects they describe at the edge ``p/q = -1/(T-1)``, halfway and 0 (continuity) for ``T = 4`` and 16: the
random attention layer on exact-Gram tokens (``q'``, ``p'``, ``Y_p``; z <= Z per point from the Monte Carlo SE) and a
pure-attention post-LN network at depth 1 (each block's map is exact as ``d -> infinity`` at fixed ``T`` for one
layer; ``z <= Z`` with the network's SE at two widths).

Beyond one layer at small ``T`` the maps are a closure, not the ``d -> infinity`` limit: they iterate the *mean* Gram
matrix, while at fixed ``T`` one network's attention matrix, hence its Gram matrix, stays random as ``d -> infinity``.
Measured (``sigprop.block._depth``'s docstring): ``T = 4``, ``beta = 4``, ``rho0 = -0.3``, three post-LN attention
blocks: maps -0.0135, the exact ``d -> infinity`` chain -0.0235 +- 0.0009, the network -0.0238 +- 0.0017 (``d = 64``)
and -0.0205 +- 0.0017 (``d = 256``); at ``T = 16`` the closure gap is 0.002.
"""
import math

import numpy as np
import pytest
import torch

import sigprop as sp
from conftest import Z

th = sp.theory
CFG = sp.BlockConfig(d=16, mlp=False)
CAUSAL = sp.BlockConfig(d=16, causal=True)

#: Every map on equicorrelated tokens: name -> call(q, p, T); T None where the map has a T -> infinity form
DOMAIN = {
    "attention_map": lambda q, p, T: th.attention_map(q, p, beta=1.0, T=T),
    "cross_overlap": lambda q, p, T: th.cross_overlap(1.0, T, q, p),
    "ipr": lambda q, p, T: th.ipr(1.0, q, p),
    "ipr_finite": lambda q, p, T: th.ipr_finite(1.0, T, q, p),
    "rem_moments": lambda q, p, T: th.rem_moments(1.0, q, p, T=T),
    "block_map": lambda q, p, T: th.block_map(q, p, CFG, T=T) if T else th.block_map(q, p, beta=1.0),
    "iterate_block_map": lambda q, p, T: (th.iterate_block_map(q, p, 2, CFG, T=T) if T
                                          else th.iterate_block_map(q, p, 2, beta=1.0)),
    "cosine_vs_depth": lambda q, p, T: (th.cosine_vs_depth(CFG, 2, T=T, rho0=p / q, q0=q) if T
                                        else th.cosine_vs_depth(2, beta=1.0, rho0=p / q, q0=q)),
    "causal_ipr": lambda q, p, T: th.causal_ipr(q, p, CAUSAL, T=T),
    "iterate_gram_map": lambda q, p, T: th.iterate_gram_map((q - p) * np.eye(T) + p, 1, CFG, samples=16),
}
#: maps with no T -> infinity form (T is required)
FINITE_ONLY = {"cross_overlap", "ipr_finite", "causal_ipr", "iterate_gram_map"}
#: maps with only the T -> infinity form
LIMIT_ONLY = {"ipr"}


def test_every_map_on_equicorrelated_tokens_is_listed():
    # the theory functions that take overlaps (q, p) or a cosine rho0 and a length T
    takes_overlaps = {"attention_map", "cross_overlap", "ipr", "ipr_finite", "rem_moments", "block_map",
                      "iterate_block_map", "cosine_vs_depth", "causal_ipr", "capped_ipr", "gram_block_map",
                      "iterate_gram_map"}
    assert takes_overlaps <= set(th.__all__)
    # capped_ipr declares a narrower domain (p >= 0: its cap breaks the softmax's invariance that makes p < 0
    # tractable) and refuses below it; gram_block_map is iterate_gram_map's one block
    assert takes_overlaps - set(DOMAIN) == {"capped_ipr", "gram_block_map"}
    with pytest.raises(ValueError, match="capped_ipr needs p >= 0"):
        th.capped_ipr(1.0, 4, 5.0, p=-0.1)


@pytest.mark.parametrize("name", sorted(DOMAIN))
@pytest.mark.parametrize("T", [2, 4, 64, None])
def test_the_gram_bound_is_inside_and_below_it_is_refused(name, T):
    if (T is None and name in FINITE_ONLY) or (T is not None and name in LIMIT_ONLY):
        return
    call, q = DOMAIN[name], 1.3
    edge = 0.0 if T is None else -q / (T - 1)
    call(q, edge, T)                                   # the edge itself: a result, finite
    call(q, 0.5 * edge, T)
    below = edge - 1e-6 * q
    # at T = 2 the bound is p = -q, and below it is |p| > q (Cauchy-Schwarz), refused as such
    match = "p >= 0" if T is None else r"exist only for p/q >= -1/\(T-1\)|positive semi-definite|Cauchy-Schwarz|" \
                                       r"cosines in \[-1, 1\]|must lie in \[-1.0, 1.0\]"
    with pytest.raises(ValueError, match=match):
        call(q, below, T)


def test_the_issue_cases():
    # attention_map(1, -0.3, beta=1, T=4).p was 0.025 (the rows' correlation set to 0); the random layer: -0.039
    assert th.attention_map(1.0, -0.3, beta=1.0, T=4)[1] == pytest.approx(-0.0395, abs=5e-4)
    with pytest.raises(ValueError, match=r"p/q >= -0.3333 at T = 4; got p/q = -0.9"):
        th.attention_map(1.0, -0.9, beta=1.0, T=4)        # no 4 tokens have it
    # continuity at p = 0 from below and above
    for beta, T in ((2.0, 16), (4.0, 4)):   # Y_p is continuous (its D is odd to first order in p)
        left, right = (th.cross_overlap(beta, T, 1.0, s * 1e-9) for s in (-1, 1))
        assert abs(left - right) < 1e-9 and left < 1 / T < right


@pytest.mark.parametrize("share", [1.0, 0.5, 0.0])     # p/q = -share/(T-1): the Gram bound, halfway, 0
def test_attention_map_against_the_random_layer_at_the_edges(share):
    # T = 4: exact-Gram tokens (their Gram matrix is the map's input, no fluctuations), d = 64 >> T, 1500 draws of
    # W_Q, W_K: q' = p + (q-p) Y2 and p' = p + (q-p) Y_p per draw; z <= Z per point
    T, rho = 4, -share / 3
    for beta in (1.0, 3.0):
        layer = sp.mc_attention_layer(beta, T=T, d=64, n=1500, rho=rho, generator=11, device="cpu",
                                      dtype=torch.float64)
        q1, p1 = th.attention_map(1.0, rho, beta=beta, T=T)
        assert layer.q_out.agrees(q1, z=Z) and layer.p_out.agrees(p1, z=Z), (beta, layer.p_out, p1)
        assert layer.y_p.agrees(th.cross_overlap(beta, T, 1.0, rho), z=Z)


@pytest.mark.parametrize("share", [1.0, 0.5])
def test_the_cross_overlap_below_zero_against_the_random_layer_at_t16(share):
    # T = 16, d = 64: the layer's Y_p exceeds the d -> infinity value by ~+0.0011 at every overlap (its shared keys'
    # O(1/d) norm spread: +0.00107 at p = 0, +0.00108 at the Gram bound, beta = 1), ~8-15 SE of 1500 draws; the change
    # from p = 0, which the negative-overlap law decides, is compared (SE of a difference of independent runs)
    T, rho = 16, -share / 15
    for beta in (1.0, 3.0):
        at = sp.mc_attention_layer(beta, T=T, d=64, n=1500, rho=rho, generator=11, device="cpu", dtype=torch.float64)
        zero = sp.mc_attention_layer(beta, T=T, d=64, n=1500, rho=0.0, generator=12, device="cpu", dtype=torch.float64)
        diff = float(at.y_p.mean - zero.y_p.mean)
        se = math.hypot(float(at.y_p.stderr), float(zero.y_p.stderr))
        assert abs(diff - (th.cross_overlap(beta, T, 1.0, rho) - 1 / T)) <= Z * se, (beta, diff, se)


@pytest.mark.parametrize("T, share", [(4, 1.0), (4, 0.5), (16, 1.0)])
def test_one_block_against_the_network_at_the_edges(T, share):
    # a post-LN pure-attention block at beta = 3 (condensed at T = 4) on exact-Gram tokens at two widths: the map of
    # one block is the d -> infinity limit at fixed T; the measured gap is within Z SE at d = 128 and at d = 256
    rho = -share / (T - 1)
    for d in (128, 256):
        c = sp.BlockConfig.from_beta(3.0, T=T, d=d, mlp=False, norm="post")
        params = sp.sample_transformer(c, 1, inits=200, generator=5, dtype=torch.float64)
        x = sp.exact_equicorrelated_tokens(200, 4, T=T, d=d, rho=rho, generator=6, dtype=torch.float64)
        cos = sp.transformer_forward(x, params, c, measure=sp.mean_cosine)[1].mean(-1)   # (inits,)
        est = sp.estimate(cos)
        assert est.agrees(torch.tensor(th.cosine_vs_depth(c, 1, T=T, rho0=rho).rho[1]), z=Z), (d, est)
