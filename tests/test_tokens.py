import math

import pytest
import torch

import sigprop as sp
from conftest import Z


def test_gaussian_tokens_overlaps():
    x = sp.gaussian_tokens(400, T=8, d=64, q=2.0, generator=0, dtype=torch.float64)
    q, p = sp.token_overlaps(x)
    assert sp.estimate(q).agrees(2.0, z=Z) and sp.estimate(p).agrees(0.0, z=Z)


@pytest.mark.parametrize("rho", [0.0, 0.3, 0.9])
def test_equicorrelated_tokens(rho):
    x = sp.equicorrelated_tokens(500, T=6, d=32, rho=rho, q=1.5, generator=1, dtype=torch.float64)
    q, p = sp.token_overlaps(x)
    assert sp.estimate(q).agrees(1.5, z=Z)
    assert sp.estimate(p).agrees(rho * 1.5, z=Z)


def test_orthogonal_tokens_exact():
    x = sp.orthogonal_tokens(3, T=5, d=16, generator=2, dtype=torch.float64)
    gram = x @ x.transpose(-1, -2) / 16
    assert torch.allclose(gram, torch.eye(5, dtype=torch.float64).expand(3, 5, 5), atol=1e-12)
    with pytest.raises(ValueError, match="T <= d"):
        sp.orthogonal_tokens(T=5, d=4)


def test_random_walk_covariance():
    # Assumption 1 of Bao et al.: Cov(x_i, x_j) = min(i, j) Sigma (1-based positions)
    d = 3
    r = torch.tensor([[1.0, 0.5, 0.0], [0.0, 1.0, 0.2], [0.3, 0.0, 1.0]], dtype=torch.float64)
    sigma = r.T @ r
    x = sp.random_walk_tokens(20000, T=4, d=d, sigma=sigma, generator=3, dtype=torch.float64)
    i, j = 1, 3  # positions 2 and 4
    emp = torch.einsum("na,nb->nab", x[:, i], x[:, j])
    est = sp.estimate(emp)
    assert est.agrees(2 * sigma, z=Z)


def test_markov_source_entropy_rate():
    src = sp.MarkovSource(6, concentration=0.5, generator=0)
    P = src.transition
    assert torch.allclose(P.sum(1), torch.ones(6, dtype=torch.float64))
    assert torch.allclose(src.stationary @ P, src.stationary, atol=1e-10)
    seq = src.sample(400, 60, generator=1)
    # empirical conditional negative log-likelihood under the true chain = entropy rate
    nll = -P[seq[:, :-1], seq[:, 1:]].log()
    est = sp.estimate(nll.mean(1))
    assert est.agrees(src.entropy_rate, z=Z)
    assert 0 < src.entropy_rate < math.log(6)


# ----------------------------------------------------------------------------- issue 26, item 16: the boundary
def test_scales_beyond_the_dtype_are_refused_not_infinite():
    # q = 1e300 in float32 gave -inf tokens; refused with the remedy, and float64 holds it
    with pytest.raises(ValueError, match=r"q gives entries of size ~1e\+150, beyond the range of torch.float32"):
        sp.gaussian_tokens(2, T=3, d=4, q=1e300, generator=0)
    x = sp.gaussian_tokens(2, T=3, d=4, q=1e300, generator=0, dtype=torch.float64)
    assert torch.isfinite(x).all()
    with pytest.raises(ValueError, match="below the smallest normal torch.float16"):
        sp.gaussian_tokens(2, T=3, d=4, q=1e-12, generator=0, dtype=torch.float16)
    with pytest.raises(ValueError, match="beyond the range of torch.float32"):
        sp.equicorrelated_tokens(2, T=3, d=4, rho=0.3, q=1e80, generator=0)


def test_random_walk_refuses_non_finite_and_oversized_steps():
    sigma = torch.eye(3)
    sigma[0, 0] = float("inf")   # gave NaN tokens
    with pytest.raises(ValueError, match="sigma must be finite"):
        sp.random_walk_tokens(2, T=4, d=3, sigma=sigma, generator=0)
    with pytest.raises(ValueError, match="sigma gives entries .* beyond the range of torch.float32"):
        sp.random_walk_tokens(2, T=4, d=3, sigma=1e80 * torch.eye(3, dtype=torch.float64), generator=0)


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool, torch.complex64, "float32", None])
def test_integer_and_other_dtypes_are_refused_at_the_boundary(dtype):
    for sampler in (sp.gaussian_tokens, sp.orthogonal_tokens, sp.random_walk_tokens):
        with pytest.raises(TypeError, match="dtype must be a floating-point torch dtype"):
            sampler(2, T=3, d=4, generator=0, dtype=dtype)


def test_meta_device_and_huge_sizes_are_refused_before_allocating():
    with pytest.raises(ValueError, match="'meta' holds shapes without values"):
        sp.gaussian_tokens(2, T=3, d=4, generator=0, device="meta")
    with pytest.raises(ValueError, match="would need .* of memory, more than the budget"):
        sp.gaussian_tokens(2**20, T=2**12, d=2**12, generator=0)
