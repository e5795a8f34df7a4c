import numpy as np
import pytest
import torch

import sigprop as sp
from conftest import Z


def test_estimate_matches_numpy():
    x = torch.randn(1000, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    est = sp.estimate(x)
    assert np.allclose(est.mean.numpy(), x.numpy().mean(0))
    assert np.allclose(est.stderr.numpy(), x.numpy().std(0, ddof=1) / np.sqrt(1000))
    assert est.n == 1000


def test_estimate_of_known_mean_covers_truth():
    # mean of N(0.3, 1): |mean - 0.3| <= Z SE with a fixed seed, and SE ~ 1/sqrt(n)
    x = 0.3 + torch.randn(4000, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    est = sp.estimate(x)
    assert est.agrees(0.3, z=Z)
    assert abs(float(est.stderr) - 1 / np.sqrt(4000)) < 0.1 / np.sqrt(4000)
    assert not est.agrees(0.4, z=Z)  # the check can fail


def test_zscore_and_format():
    est = sp.Estimate(torch.tensor(1.0), torch.tensor(0.5), 10)
    assert float(est.zscore(0.0)) == pytest.approx(2.0)
    assert "±" in format(est)
    zero = sp.Estimate(torch.tensor(1.0), torch.tensor(0.0), 10)
    assert np.isinf(zero.zscore(0.0)) and zero.zscore(1.0) == 0


def test_estimate_needs_two_samples():
    with pytest.raises(ValueError, match="at least 2"):
        sp.estimate(torch.zeros(1))


# ----------------------------------------------------------------------------- issue 26, item 16 and issue 24
def test_non_finite_samples_are_refused_with_their_position():
    x = torch.randn(10, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    x[4, 2] = float("nan")
    with pytest.raises(ValueError, match=r"got 1 NaN/inf values \(the first at index \(4, 2\)\)"):
        sp.estimate(x)
    with pytest.raises(ValueError, match="a dimension to average over"):
        sp.estimate(torch.tensor(1.0))
    with pytest.raises(ValueError, match="must not be empty"):
        sp.estimate(torch.zeros(6, 0))


@pytest.mark.parametrize("scale", [1e-300, 1e-200, 1e200, 1e300])
def test_standard_error_at_any_finite_scale(scale):
    # the sum of squares of 1e200 values overflowed (SE inf); samples are scaled by their largest magnitude first
    x = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)
    est = sp.estimate(scale * x)
    assert float(est.mean) == pytest.approx(2.5 * scale, rel=1e-14)
    assert float(est.stderr) == pytest.approx(scale * float(x.std()) / 2, rel=1e-14)


def test_estimate_formats_itself_as_mean_plus_minus_se():
    est = sp.Estimate(torch.tensor(0.43431), torch.tensor(0.01203), 16)
    assert str(est) == format(est, "") == "0.434 ± 0.012"               # SE to 2 digits, mean to the same place
    assert format(est, ".4f") == "0.4343 ± 0.0120"                      # a spec: both (f) ...
    assert format(est, ".3g") == "0.434 ± 0.012"                        # ... or the mean, SE to 2 digits
    assert str(sp.Estimate(torch.tensor(3.1e-6), torch.tensor(4.2e-8), 9)) == "(3.100 ± 0.042) × 10⁻⁶"
    assert str(sp.Estimate(torch.tensor(0.25), torch.tensor(0.0), 9)) == "0.25 (exact)"
    vec = sp.estimate(torch.tensor([[0.1, 1.0], [0.3, 1.2], [0.2, 1.4]], dtype=torch.float64))
    assert str(vec) == "[0.200 ± 0.058, 1.20 ± 0.12]"
