"""The exact finite-T cross-overlap Y_p of two correlated REM rows (sigprop.attention._rem.cross_overlap), and the
finite-T block map that uses it (Giorlandino & Goldt 2025, App. B.2.2).

The finite-T map used to set Y_p = 1/T (exact for independent rows); in the condensed phase with p > 0 the
true Y_p is several times larger, which made the map miss random transformers by ~0.06 in cosine at
beta = 3 (a gap that does not close with d; book, G&G chapter and errata).
"""
import math

import numpy as np
import pytest

import sigprop as sp
from conftest import Z

th = sp.theory


@pytest.mark.parametrize("beta,T,rho", [(3.0, 64, 0.3), (2.0, 64, 0.5), (0.5, 64, 0.3), (3.0, 64, 0.9),
                                        (5.0, 16, 0.6), (1.5, 1000, 0.3)])
def test_quadrature_against_the_two_row_rem(beta, T, rho):
    mc = sp.cross_overlap_rem(beta, T=T, n=20_000, p=rho, generator=1, device="cpu")     # [Y2, Y_p] per pair
    assert mc[1].agrees(th.cross_overlap(beta, T, 1.0, rho), z=Z)
    assert mc[0].agrees(th.ipr_finite(beta, T, 1.0, rho), z=Z)


def test_limits_and_resolution():
    # independent rows: exactly 1/T; identical rows (p -> q): the row's own Y2
    assert th.cross_overlap(2.0, 50, 1.0, 0.0) == pytest.approx(1 / 50, rel=1e-12)
    assert th.cross_overlap(2.0 / math.sqrt(1e-9), 50, 1.0, 1 - 1e-9) == pytest.approx(
        th.ipr_finite(2.0 / math.sqrt(1e-9), 50, 1.0, 1 - 1e-9), rel=1e-6)
    # a grid four times finer changes nothing at the 1e-9 level
    from sigprop.attention import _rem
    for sigma, T, c in [(3.0, 64, 0.3), (0.4, 1000, 0.5), (12.0, 16, 0.8)]:
        coarse = _rem._cross_quadrature(sigma, T, c)
        old = _rem._DX
        try:
            _rem._DX = old / 4
            fine = _rem._cross_quadrature(sigma, T, c)
        finally:
            _rem._DX = old
        assert coarse == pytest.approx(fine, rel=1e-9)


def test_block_map_cross_overlap_options():
    P = sp.presets.GG_APP_C1
    # spread phase, uncorrelated start: the two choices agree to ~1e-4
    a = th.iterate_block_map(1.0, 0.0, 5, beta=0.1, T=32, **P)
    b = th.iterate_block_map(1.0, 0.0, 5, beta=0.1, T=32, cross_overlap="1/T", **P)
    np.testing.assert_allclose(a, b, atol=2e-4)
    # condensed phase with p > 0: Y_p ~ 5/T raises the cosine (helper measurements: d -> inf chain +0.063)
    q, p = th.iterate_block_map(1.0, 0.1, 24, beta=3.0, T=64, **P)
    q1, p1 = th.iterate_block_map(1.0, 0.1, 24, beta=3.0, T=64, cross_overlap="1/T", **P)
    assert np.mean(p[1:] / q[1:] - p1[1:] / q1[1:]) > 0.05
    with pytest.raises(ValueError, match="cross_overlap must be one of"):
        th.block_map(1.0, 0.1, beta=3.0, T=64, cross_overlap="exact")


def test_attention_layer_cross_overlap_matches():
    # real random attention layers (exact-Gram tokens, d >> T) against the quadrature
    beta, rho, T = 3.0, 0.7, 64
    lay = sp.attention_layer_mc(beta, T=T, d=512, n=48, rho=rho, generator=7, device="cpu")
    assert lay.y_p.agrees(th.cross_overlap(beta, T, 1.0, rho), z=Z)
