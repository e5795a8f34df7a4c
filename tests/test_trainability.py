"""Tests for sigprop.block._trainability (Giorlandino & Goldt 2025, Fig. 1(c))."""
import time

import numpy as np
import pytest

import sigprop as sp
from sigprop.block import _kernels

PAPER = dict(sigma_w2=0.2, sigma_b2=0.0004, sigma_v2=0.2, alpha_mlp=1.0)   # App. C.1


def test_100x100_grid_60_layers_under_two_seconds():
    b, a = np.linspace(0.05, 3, 100), np.linspace(0.5, 3, 100)
    for norm, gc in [("post", False), ("pre", False), ("post", True)]:
        t = time.process_time()
        D = sp.theory.trainability_diagram(b, a, depth=60, norm=norm, gain_control=gc, **PAPER)
        assert time.process_time() - t < 2.0
        assert D.phase.shape == (100, 100)


def test_tanh_diagram_under_two_seconds_and_equal_to_the_quadrature():
    # tanh MLP kernels are tabulated in rho (one Chebyshev table per variance); same diagram as point-by-point
    # quadrature (sigprop.block._kernels)
    b, a = np.linspace(0.05, 3, 100), np.linspace(0.5, 3, 100)
    tanh = dict(activation="tanh", sigma_w2=6.25, sigma_b2=0.1, sigma_v2=1.0)
    _kernels._table.cache_clear()
    t = time.process_time()   # CPU time: the test must not fail because the machine is busy
    D = sp.theory.trainability_diagram(b, a, depth=60, **tanh)
    assert time.process_time() - t < 2.0
    rho = sp.theory.cosine_vs_depth(60, beta=b[::10][None], alpha_sa=a[::10][:, None], **tanh)[0][-1]
    q1 = np.full(1000, 6.35)
    c = q1 * np.resize(rho.ravel(), 1000)
    got = _kernels.tabulated("tanh", np.tanh, q1, q1, c, odd=True)[:100]     # the table, checked at rho's 100 values
    np.testing.assert_allclose(got, _kernels.quadrature(np.tanh, q1[:100], q1[:100], c[:100]), rtol=0, atol=1e-11)
    # 60 layers of ~1e-13 interpolation error
    np.testing.assert_allclose(D.rho_final[::10, ::10], rho, rtol=0, atol=1e-10)


def test_tanh_table_keeps_odd_symmetry():
    # tanh without bias keeps rho = 0 exactly; a table that did not would seed p < 0 and break the map
    b, a = np.linspace(0.05, 3, 100), np.linspace(0.05, 3, 100)
    D = sp.theory.trainability_diagram(b, a, depth=60, activation="tanh")        # sigma_w2 = 2, sigma_b2 = 0
    np.testing.assert_array_equal(D.rho_final, 0.0)
    r = np.linspace(0, 1, 600)
    q = np.full(1200, 2.0)
    got = _kernels.tabulated("tanh", np.tanh, q, q, 2.0 * np.concatenate([r, -r]), odd=True)
    assert got[0] == 0.0 and got[600] == 0.0
    np.testing.assert_allclose(got[:600], -got[600:], rtol=0, atol=1e-15)


def test_tanh_table_falls_back_to_quadrature_for_step_like_tanh():
    assert _kernels._table("tanh", np.tanh, 1.0, 1.0, True, True) is not None
    assert _kernels._table("tanh", np.tanh, 400.0, 400.0, True, True) is None    # tanh(20 z) is a step: refused
    q = np.full(520, 400.0)                                # >= 512 entries: the table is tried, then refused
    c = 400.0 * np.linspace(-1, 1, 520)
    # refused table -> Mehler's expansion where its tail bound is below _MEHLER_TOL relative (small |c|), the
    # rest by quadrature: equal to quadrature within that bound (1e-14 seen), far from any table's error
    np.testing.assert_allclose(_kernels.tabulated("tanh", np.tanh, q, q, c, odd=True)[::26],
                               _kernels.quadrature(np.tanh, q[::26], q[::26], c[::26]), rtol=0, atol=_kernels._MEHLER_TOL)


def test_phases_match_the_criteria():
    b, a = np.linspace(0.05, 3, 40), np.linspace(0.5, 3, 30)
    D = sp.theory.trainability_diagram(b, a, depth=60, rank_threshold=0.99, **PAPER)
    # entropy collapse exactly where beta > beta_c(rho0 = 0) = sqrt(2) (first layer decides)
    np.testing.assert_array_equal(D.phase[:, b > np.sqrt(2)], sp.ENTROPY_COLLAPSE)
    low = D.phase[:, b < np.sqrt(2)]
    assert set(np.unique(low)) == {sp.TRAINABLE, sp.RANK_COLLAPSE}
    # in the spread phase the diagram depends on alpha only; the boundary is critical_alpha_sa
    ac = sp.theory.critical_alpha_sa(60, beta=0.5, rank_threshold=0.99, **PAPER)[0]
    assert np.all(low[a < ac - 1e-6] == sp.RANK_COLLAPSE) and np.all(low[a > ac + 1e-6] == sp.TRAINABLE)
    # Fig. 1(d): alpha = 1 collapses over 60 layers, 1.5 and 2 do not
    assert 1.0 < ac < 1.5


def test_diagram_agrees_with_elementwise_block_map():
    b, a = np.array([0.3, 2.0]), np.array([1.0, 2.0])
    rho, y2 = sp.theory.cosine_vs_depth(5, beta=b[None, :], alpha_sa=a[:, None], rho0=0.1, **PAPER)
    for i, ai in enumerate(a):
        for j, bj in enumerate(b):
            q, p = sp.theory.iterate_block_map(1.0, 0.1, 5, beta=bj, alpha_sa=ai, **PAPER)
            np.testing.assert_allclose(rho[:, i, j], p / q, rtol=1e-12)
            assert y2[0, i, j] == pytest.approx(sp.theory.ipr(bj, 1.0, 0.1))


def test_gain_control_removes_rank_collapse_in_spread_phase():
    D = sp.theory.trainability_diagram([0.5], [1.0], depth=60, norm="post", gain_control=True, **PAPER)
    assert D.phase[0, 0] == sp.TRAINABLE
    D = sp.theory.trainability_diagram([0.5], [1.0], depth=60, norm="post", **PAPER)
    assert D.phase[0, 0] == sp.RANK_COLLAPSE


def test_validation():
    with pytest.raises(ValueError, match="rank_threshold"):
        sp.theory.trainability_diagram([1.0], [1.0], depth=3, rank_threshold=2.0)
    with pytest.raises(ValueError, match="norm"):
        sp.theory.trainability_diagram([1.0], [1.0], depth=3, norm="middle")
    with pytest.raises(ValueError, match="depth"):
        sp.theory.trainability_diagram([1.0], [1.0], depth=0)
