import math

import pytest
import torch

import sigprop as sp


def test_overlaps_and_cosine_on_known_matrix():
    x = torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 2.0]], dtype=torch.float64)
    q, p = sp.token_overlaps(x)
    gram = x @ x.T / 2
    assert q == pytest.approx(gram.diagonal().mean().item())
    assert p == pytest.approx((gram.sum() - gram.diagonal().sum()).item() / 6)
    cos = sp.cosine_matrix(x)
    assert cos[0, 1] == pytest.approx(1 / math.sqrt(2))
    assert sp.mean_cosine(x) == pytest.approx((1 / math.sqrt(2) + 0 + 1 / math.sqrt(2)) / 3)


def test_ipr_and_entropy_limits():
    T = 8
    uniform = torch.full((T,), 1.0 / T, dtype=torch.float64)
    onehot = torch.zeros(T, dtype=torch.float64)
    onehot[3] = 1
    assert sp.attention_ipr(uniform) == pytest.approx(1 / T)
    assert sp.attention_ipr(uniform, r=3) == pytest.approx(T ** -2)
    assert sp.attention_ipr(onehot) == 1
    assert sp.attention_entropy(uniform) == pytest.approx(math.log(T))
    assert sp.attention_entropy(onehot) == 0


def test_cross_token_covariance_matches_numpy():
    v = torch.randn(50, 3, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    cov = sp.cross_token_covariance(v)
    flat = v.reshape(50, 6).numpy()
    import numpy as np
    ref = np.cov(flat, rowvar=False).reshape(3, 2, 3, 2).transpose(0, 2, 1, 3)
    assert np.allclose(cov.numpy(), ref)


def test_stable_rank_bounds():
    x = torch.randn(6, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    sr = sp.stable_rank(x)
    assert 1 <= sr <= 4
    assert sp.stable_rank(torch.ones(5, 3, dtype=torch.float64)) == pytest.approx(1.0)


def test_measures_reject_bad_input():
    with pytest.raises(ValueError, match="T >= 2"):
        sp.token_overlaps(torch.zeros(1, 4))
    with pytest.raises(ValueError, match="non-negative"):
        sp.attention_ipr(torch.tensor([0.5, -0.1, 0.6]))
    with pytest.raises(ValueError, match="r must be >= 1"):
        sp.attention_ipr(torch.tensor([0.5, 0.5]), r=0.5)
    with pytest.raises(TypeError, match="torch.Tensor"):
        sp.mean_cosine([[1.0, 0.0], [0.0, 1.0]])
