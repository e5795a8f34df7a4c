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
