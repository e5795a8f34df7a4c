import pytest
import torch

import sigprop as sp
from conftest import Z


def _normal_mean(n, g):
    return 2.0 + torch.randn(n, 2, generator=g, dtype=torch.float64)


def test_monte_carlo_mean_and_stderr():
    est = sp.monte_carlo(_normal_mean, 5000, generator=3, chunk=700, device="cpu")
    assert est.n == 5000
    assert est.agrees(torch.tensor([2.0, 2.0]), z=Z)
    assert torch.allclose(est.stderr, torch.full((2,), 1 / 5000**0.5, dtype=torch.float64), rtol=0.1)


def test_same_seed_same_numbers():
    a = sp.monte_carlo(_normal_mean, 100, generator=7, chunk=30, device="cpu")
    b = sp.monte_carlo(_normal_mean, 100, generator=7, chunk=30, device="cpu")
    c = sp.monte_carlo(_normal_mean, 100, generator=8, chunk=30, device="cpu")
    assert torch.equal(a.mean, b.mean) and torch.equal(a.stderr, b.stderr)
    assert not torch.equal(a.mean, c.mean)


def test_sample_fn_shape_is_checked():
    with pytest.raises(ValueError, match="leading dimension"):
        sp.monte_carlo(lambda n, g: torch.zeros(n + 1), 10, generator=0, device="cpu")


def test_streaming_sums_are_exact_for_constant_offset():
    # a large common offset must not destroy the variance (shifted sums)
    est = sp.monte_carlo(lambda n, g: 1e8 + torch.randn(n, generator=g, dtype=torch.float64), 2000,
                         generator=0, chunk=128, device="cpu")
    assert 0.8 / 2000**0.5 < float(est.stderr) < 1.2 / 2000**0.5
