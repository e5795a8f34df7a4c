"""The exact finite-T cross-overlap Y_p of two correlated REM rows (sigprop.attention._cross.cross_overlap), and the
finite-T maps that use it (Giorlandino & Goldt 2025, App. B.2.2).

The finite-T map used to set Y_p = 1/T (exact for independent rows); in the condensed phase with p > 0 the
true Y_p is several times larger, which made the map miss random transformers by ~0.06 in cosine at
beta = 3 (a gap that does not close with d; book, G&G chapter and errata).

Issue 26, item 2: the shared column field was integrated on the y-lattice (spacing 0.1) even when its scale
s_m = sqrt(c) sigma was far below it, so ``cross_overlap(0.5, 2, 1, 0.99) - 1/2`` read 2.44e-4 for 4.28e-4,
and the gain-control map, which multiplies Y_p - 1/T and Y2 - 1/T, gave p'/q' = 0.021 for 0.999. The excess
D = Y_p - 1/T is now computed directly; the references below are independent of that code: T = 2 exactly
(nested scipy quadrature of a cancellation-free formula), c = 1 (the one-row quadrature), the first order in
s_m^2, and Monte Carlo of the two rows.
"""
import math

import numpy as np
import pytest
from scipy import integrate

import sigprop as sp
from conftest import Z
from sigprop.attention import _cross

th = sp.theory


# ----------------------------------------------------------------------------- T = 2, exactly
def _sigmoid_excess(x, su):
    """E_u sigmoid(x + u) - 1/2 for u ~ N(0, su^2): int_0^inf n(u) sinh(x) / (cosh((u+x)/2) cosh((u-x)/2)) du / 2."""
    if su == 0.0:
        return 0.5 * math.tanh(x / 2)

    def f(v):
        u, ax = su * v, abs(x)
        s = max(u, ax)  # (|u + x| + |u - x|) / 2
        num = 0.5 * (math.exp(ax - s) - math.exp(-ax - s)) if ax > 1e-3 else math.exp(-s) * math.sinh(ax)
        den = (1 + math.exp(-abs(u + x))) * (1 + math.exp(-abs(u - x)))
        return math.exp(-0.5 * v * v) / math.sqrt(2 * math.pi) * 4 * num / den

    return math.copysign(0.5 * integrate.quad(f, 0, 40, epsabs=0, epsrel=1e-13, limit=500)[0], x)


def exact_excess_t2(sigma, c):
    """Y_p - 1/2 at T = 2: A = sigmoid(x + u), x ~ N(0, 2 c sigma^2) shared, u ~ N(0, 2 (1-c) sigma^2) private,
    Y_p = E[A A' + (1-A)(1-A')], so Y_p - 1/2 = 2 E_x[(E_u A - 1/2)^2]: a sum of squares, no cancellation."""
    sx, su = sigma * math.sqrt(2 * c), sigma * math.sqrt(2 * (1 - c))
    f = lambda t: math.exp(-0.5 * t * t) / math.sqrt(2 * math.pi) * _sigmoid_excess(sx * t, su) ** 2  # noqa: E731
    return 4 * integrate.quad(f, 0, 40, epsabs=0, epsrel=1e-12, limit=500)[0]


@pytest.mark.parametrize("sigma", [1e-8, 0.03, 1.0, 30.0])
@pytest.mark.parametrize("c", [1e-12, 0.5, 1 - 1e-9, 1.0])
def test_excess_against_the_exact_two_token_value(sigma, c):
    # the grid's corners: sigma from 1e-8 (first-order branch) to 30 (the lattice), c from independent rows
    # to identical ones. Measured agreement 3e-12 or better; tolerance 1e-9 (relative, on D itself).
    if sigma == 30.0 and c == 1 - 1e-9:
        with pytest.raises(ValueError, match="outside its domain"):  # beta ~ 1e6: refused, not slow or wrong
            _cross.cross_excess(sigma, 2.0, c)
        return
    assert _cross.cross_excess(sigma, 2.0, c) == pytest.approx(exact_excess_t2(sigma, c), rel=1e-9)


def test_issue_26_item_2_regressions():
    # cross_overlap(0.5, 2, 1, 0.99) - 1/2: 2.44e-4 before, exact 4.2814343e-4
    sigma = 0.5 * math.sqrt(math.log(2) * 0.01)
    assert th.cross_overlap(0.5, 2, 1.0, 0.99) - 0.5 == pytest.approx(exact_excess_t2(sigma, 0.99), rel=1e-9)
    # gain control through attention_map, T = 2: q' = (q - p) (Y2 - 1/2), p' = (q - p) (Y_p - 1/2), both exact
    q1, p1 = th.attention_map(1.0, 0.99, beta=0.5, T=2, gain_control=True)
    assert q1 == pytest.approx(0.01 * exact_excess_t2(sigma, 1.0), rel=1e-9)
    assert p1 == pytest.approx(0.01 * exact_excess_t2(sigma, 0.99), rel=1e-9)
    # the issue's cases: p'/q' was 0.021 (Monte Carlo 0.999) and 0.440 (0.500). To first order in sigma^2,
    # p'/q' = c (1 - E Y2(private))^2 T^2 / (T - 1)^2 = c (1 + O(sigma^2)); sigma^2 = 6.9e-4 and 6.5e-3 here
    q1, p1 = th.attention_map(1.0, 0.999, beta=0.5, T=16, gain_control=True)
    assert p1 / q1 == pytest.approx(0.999, abs=2e-3)
    q1, p1 = th.attention_map(1.0, 0.5, beta=0.05, T=64, gain_control=True)
    assert p1 / q1 == pytest.approx(0.5, abs=2e-3)


# ----------------------------------------------------------------------------- other independent references
@pytest.mark.parametrize("T", [3.0, 64.0, 1e6, 1e12])
def test_identical_rows_give_the_one_row_excess(T):
    # c = 1: D = E Y2 - 1/T. Against the one-row quadrature minus 1/T where that difference keeps its digits
    # (sigma >= 0.3: cancellation costs eps / sigma^2 ~ 1e-15), and against sigma^2 (T-1)/T^2 (1 + O(sigma^2))
    # at sigma = 1e-4 (measured relative gap -0.5 sigma^2)
    for sigma in (0.3, 1.0, 5.0):
        one_row = sp.attention.rem_quadrature(sigma, T)[0] - 1 / T
        assert _cross.excess_y2(sigma, T) == pytest.approx(one_row, rel=1e-10)
    assert _cross.excess_y2(1e-4, T) == pytest.approx(1e-8 * (T - 1) / T**2, rel=1e-7)


@pytest.mark.parametrize("T, se", [(2.0, 0.0), (64.0, 0.5), (1e6, 3.0)])
def test_first_order_branch_joins_the_quadrature(T, se):
    # D = s_m^2 (1 - E Y2(s_e))^2 / (T - 1) below s_m = 1e-5; the Gauss-Hermite branch just above must agree to
    # O(s_m^2) = 1e-10 (relative error of the first order) plus its own rounding (eps / s_m ~ 1e-11)
    sm = _cross._SM_SERIES
    c = sm**2 / (sm**2 + se**2)
    below = _cross.cross_excess(math.hypot(sm, se) * (1 - 1e-9), T, c)
    above = _cross._excess_hermite(sm * 1.001, se, T) / 1.001**2
    assert below == pytest.approx(above, rel=1e-8)


@pytest.mark.parametrize("T", [2.0, 64.0, 1e6, 1e12])
@pytest.mark.parametrize("sm, se", [(0.15, 0.0), (0.3, 0.5), (0.45, 3.0)])
def test_hermite_and_lattice_branches_agree_where_both_apply(T, sm, se):
    # two different integrations of the shared field (12-node Gauss-Hermite on the pair formula for D; the
    # trapezoid lattice on Y_p itself): measured within 2e-11 of each other
    lattice = _cross._yp_lattice(sm, se, T) - 1 / T
    assert _cross._excess_hermite(sm, se, T) == pytest.approx(lattice, rel=1e-9)


@pytest.mark.parametrize("beta,T,rho", [(3.0, 64, 0.3), (2.0, 64, 0.5), (0.5, 64, 0.3), (3.0, 64, 0.9),
                                        (5.0, 16, 0.6), (1.5, 1000, 0.3)])
def test_quadrature_against_the_two_row_rem(beta, T, rho):
    mc = sp.mc_cross_overlap(beta, T=T, n=20_000, p=rho, generator=1, device="cpu")     # [Y2, Y_p] per pair
    assert mc[1].agrees(th.cross_overlap(beta, T, 1.0, rho), z=Z)
    assert mc[0].agrees(th.ipr_finite(beta, T, 1.0, rho), z=Z)


def test_limits_resolution_and_domain():
    # independent rows: exactly 1/T; identical rows (p -> q): the row's own Y2
    assert th.cross_overlap(2.0, 50, 1.0, 0.0) == 1 / 50
    assert th.cross_overlap(2.0 / math.sqrt(1e-9), 50, 1.0, 1 - 1e-9) == pytest.approx(
        th.ipr_finite(2.0 / math.sqrt(1e-9), 50, 1.0, 1 - 1e-9), rel=1e-6)
    # a site grid four times finer changes nothing at the 1e-9 level
    from sigprop.attention import _rem
    for sigma, T, c in [(3.0, 64, 0.3), (0.4, 1000, 0.5), (12.0, 16, 0.8)]:
        coarse = _cross.cross_excess(sigma, T, c)
        old = _rem._DX
        try:
            _rem._DX = old / 4
            fine = _cross.cross_excess(sigma, T, c)
        finally:
            _rem._DX = old
        assert coarse == pytest.approx(fine, rel=1e-9)
    # T up to T_MAX = 1e12 (measured < 2 s per point on 2 busy cores at beta <= 30); beyond, refused clearly
    assert 0 < th.cross_overlap(3.0, 1e12, 1.0, 0.5) < th.ipr_finite(3.0, 1e12, 1.0, 0.5)
    with pytest.raises(ValueError, match=r"T \(sequence length\) must be <= 1e\+12 \(the two-row quadrature"):
        th.cross_overlap(3.0, 1e300, 1.0, 0.5)
    with pytest.raises(ValueError, match=r"must be <= 1e\+12"):
        th.attention_map(1.0, 0.5, beta=1.0, T=1e13)
    with pytest.raises(ValueError, match=r"exist only for p/q >= -1/\(T-1\) .* at T = 16; got p/q = -0.1"):
        th.cross_overlap(1.0, 16, 1.0, -0.1)   # below the Gram bound: no 16 tokens have it
    # huge beta (issue 26, the fuzzer's OverflowError at beta = 1e300): Y_p has converged long before sigma = 1e6
    assert th.cross_overlap(1e4, 16, 1.0, 0.3) == pytest.approx(th.cross_overlap(5e5, 16, 1.0, 0.3), rel=1e-8)
    with pytest.raises(ValueError, match=r"energy scale sigma .* must be at most 1e\+06"):
        th.cross_overlap(1e300, 16, 1.0, 0.3)


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
    lay = sp.mc_attention_layer(beta, T=T, d=512, n=48, rho=rho, generator=7, device="cpu")
    assert lay.y_p.agrees(th.cross_overlap(beta, T, 1.0, rho), z=Z)


# ----------------------------------------------------------------------------- negative overlaps (issue 37, item 1)
@pytest.mark.parametrize("sigma", [1e-8, 0.03, 1.0, 8.0])
@pytest.mark.parametrize("c", [0.5, 1.0])
def test_two_keys_negative_overlap_is_exactly_odd(sigma, c):
    # T = 2: the second row's logit difference is -x + u' where the first's is x + u, so Y_p - 1/2 =
    # 2 E_x[(E_u A(x) - 1/2)(E_u A(-x) - 1/2)] = -2 E_x[(E_u A - 1/2)^2]: minus the value at +c (exact reference)
    assert _cross.cross_excess(sigma, 2.0, -c) == pytest.approx(-exact_excess_t2(sigma, c), rel=1e-9)
    if c == 1.0:   # two tokens of cosine -1: the second row is the first reversed, Y_p = 2 A_1 A_2 = 1 - Y2
        beta = sigma / math.sqrt(math.log(2) * 2.0)
        assert th.cross_overlap(beta, 2, 1.0, -1.0) == pytest.approx(1.0 - th.ipr_finite(beta, 2, 1.0, -1.0), rel=1e-9)


@pytest.mark.parametrize("T, sm, se", [(3.0, 0.45, 0.5), (4.0, 0.3, 0.6), (16.0, 0.3, 1.2), (64.0, 0.15, 1.2)])
def test_negative_overlap_hermite_and_lattice_branches_agree(T, sm, se):
    # c = -sm^2 / (sm^2 + se^2) >= -1/(T-1): the two integrations of the reversed shared field (Gauss-Hermite on the
    # pair formula; the lattice on Y_p), measured within 1e-11 of each other
    lattice = _cross._yp_lattice(sm, se, T, True) - 1 / T
    assert lattice < 0
    assert _cross._excess_hermite(sm, se, T, True) == pytest.approx(lattice, rel=1e-9)


@pytest.mark.parametrize("T, se", [(4.0, 0.5), (64.0, 3.0)])
def test_negative_overlap_first_order_branch_joins_the_quadrature(T, se):
    # D = -s_m^2 (1 - E Y2(s_e))^2 / (T - 1) to first order: the covariance of the two rows' weights is linear in
    # the shared field's cross-covariance, which changes sign
    sm = _cross._SM_SERIES
    c = -sm**2 / (sm**2 + se**2)
    below = _cross.cross_excess(math.hypot(sm, se) * (1 - 1e-9), T, c)
    above = _cross._excess_hermite(sm * 1.001, se, T, True) / 1.001**2
    assert below < 0 and below == pytest.approx(above, rel=1e-8)


@pytest.mark.parametrize("T", [4, 64])
@pytest.mark.parametrize("share", [1.0, 0.5, 0.0])   # p/q = -share/(T-1): the Gram bound, halfway, and 0
@pytest.mark.parametrize("beta", [1.0, 4.0])
def test_negative_overlaps_against_the_two_row_rem(T, share, beta):
    # the random object: two rows whose key-wise logits have correlation c = p/q < 0 (mc_cross_overlap draws the
    # shared field with opposite signs); z <= Z per point from the Monte Carlo SE (20,000 pairs: SE ~ 4e-4 at T = 4)
    rho = -share / (T - 1)
    mc = sp.mc_cross_overlap(beta, T=T, n=20_000, p=rho, generator=3, device="cpu")
    yp = th.cross_overlap(beta, T, 1.0, rho)
    assert mc[1].agrees(yp, z=Z) and (yp < 1 / T or share == 0.0)
    assert mc[0].agrees(th.ipr_finite(beta, T, 1.0, rho), z=Z)
