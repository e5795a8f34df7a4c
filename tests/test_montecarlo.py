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


# ----------------------------------------------------------------------------- issue 26, item 16; issue 29, item 11
def test_non_finite_statistics_are_refused_with_the_sample_index():
    def sample(n, g):
        x = torch.randn(n, 2, generator=g, dtype=torch.float64)
        if n > 3:
            x[3, 1] = float("nan")
        return x
    with pytest.raises(ValueError, match="sample_fn returned NaN or inf for sample 3 "):
        sp.monte_carlo(sample, 10, generator=0, chunk=8, device="cpu")


def test_huge_statistics_keep_a_finite_standard_error():
    est = sp.monte_carlo(lambda n, g: 1e200 * (2.0 + torch.randn(n, 1, generator=g, dtype=torch.float64)), 400,
                         generator=0, chunk=50, device="cpu")
    assert torch.isfinite(est.stderr).all() and abs(float(est.mean) / 1e200 - 2.0) <= 4 * float(est.stderr) / 1e200
    assert float(est.stderr) / 1e200 == pytest.approx(1 / 20, rel=0.2)   # sd 1 over sqrt(400); sample sd +-7%


def test_small_work_runs_on_one_thread():
    # the one decision for small workloads (sigprop.threads_for): below SMALL_WORK the calls see one torch thread
    seen = []

    def sample(n, g):
        seen.append(torch.get_num_threads())
        return torch.randn(n, 1, generator=g, dtype=torch.float64)
    before = torch.get_num_threads()
    sp.monte_carlo(sample, 8, generator=0, chunk=4, device="cpu", work=1000)
    assert seen == [1, 1] and torch.get_num_threads() == before
    sp.monte_carlo(sample, 8, generator=0, chunk=4, device="cpu")
    assert seen[2:] == [before, before]
