"""Tests for sigprop.block._kernels' Mehler path (issue 37, item 9): the MLP kernels of tokens of many different norms
(a Gram map without LayerNorm) by Mehler's expansion, against the two-dimensional quadrature, and its speed."""
import time

import numpy as np
import pytest

import sigprop as sp
from sigprop.block import _kernels
from sigprop.block._components import ACTIVATIONS


def _gram(T, lo, hi, seed):
    """Variances log-uniform in [lo, hi] and cosines in [0.4, 1]: (a, b, c) arrays (T, T)."""
    rng = np.random.default_rng(seed)
    d = np.exp(rng.uniform(np.log(lo), np.log(hi), T))
    X = rng.standard_normal((T, T + 5))
    C = X @ X.T
    C = 0.6 * C / np.sqrt(np.outer(np.diag(C), np.diag(C))) + 0.4
    np.fill_diagonal(C, 1.0)
    A, B = d[:, None] + 0 * C, d[None, :] + 0 * C
    return A, B, C * np.sqrt(A * B)


@pytest.mark.parametrize("name", ["tanh", "silu", "gelu_tanh"])
@pytest.mark.parametrize("lo, hi", [(0.5, 2.0), (1e-3, 1e4)])
def test_mehler_path_equals_the_quadrature(name, lo, hi):
    # 16 tokens (256 entries: the Mehler path) of 16 norms; measured largest error 8e-12 of sqrt(K(a,a,a) K(b,b,b))
    # at T = 48 (the module docstring); tolerance 5e-11, the path's own bound 1e-11 plus the quadrature's 1e-13
    act = ACTIVATIONS[name]
    A, B, G = _gram(16, lo, hi, seed=1)
    fast = act.kernel(A, B, G)
    exact = _kernels.quadrature(act.numpy, A, B, G, smooth=act.smooth)
    scale = np.sqrt(np.outer(np.diag(exact), np.diag(exact)))
    assert np.max(np.abs(fast - exact) / scale) < 5e-11
    assert np.array_equal(fast, fast.T)


def test_pairs_beyond_the_bound_go_to_the_quadrature():
    # a step-like tanh (variance 1e4) at cosine 0.999 between two different norms: the tail bound fails, the pair is
    # integrated directly
    a, b = np.full(300, 1e4), np.full(300, 2e4)
    c = 0.999 * np.sqrt(a * b)
    out = _kernels._mehler(np.tanh, a, b, c, True, True)
    assert out == pytest.approx(_kernels.quadrature(np.tanh, a[:1], b[:1], c[:1])[0], rel=1e-12)


def test_a_gram_map_without_layernorm_is_fast():
    # issue 37, item 9: tanh without LayerNorm, causal, T = 96: 20 s per block before, 1.1 s measured on two busy
    # cores after (ReLU 0.5 s). Bound 8 s per block
    c = sp.BlockConfig(d=64, norm="none", activation="tanh", causal=True)
    G0 = 0.8 * np.eye(96) + 0.2
    t0 = time.perf_counter()
    sp.theory.iterate_gram_map(G0, 1, c, samples=1024)
    assert time.perf_counter() - t0 < 8.0
