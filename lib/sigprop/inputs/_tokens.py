"""Random token sequences: the inputs of every random transformer in the book.

All samplers return tensors of shape ``(*batch, T, d)`` and take ``*, generator`` (an int seed, a
``torch.Generator`` or None) and ``device`` (default: the generator's device, else the CPU).

* :func:`gaussian_tokens` -- i.i.d. N(0, q) entries: token norms ``|x|^2/d -> q``, overlaps
  ``x_t.x_s/d -> 0`` (Giorlandino & Goldt 2025, Sec. 2.1; Noci et al. 2022, Sec. 3).
* :func:`equicorrelated_tokens` -- ``x_t = sqrt(q) (sqrt(rho) g + sqrt(1-rho) z_t)``: expected
  overlap ``q`` on the diagonal and ``rho q`` off it (Noci et al. 2022, Sec. 3.3).
* :func:`orthogonal_tokens` -- exactly orthogonal rows with ``X X^T / d = I`` (T <= d).
* :func:`random_walk_tokens` -- ``x_1 ~ N(0, Sigma)``, ``x_{t+1} ~ N(x_t, Sigma)``
  (Bao, Hataya & Karakida 2024, Assumption 1).
* :class:`MarkovSource` -- a random first-order Markov language with a known entropy
  rate, the training corpus of every experiment in the book (nothing is downloaded).
"""
from __future__ import annotations

import math

import numpy as np
import torch

from ..stats._config import widest_float
from ..stats._random import as_generator
from ..stats._validate import (check_allocation, check_flag, check_float_dtype, check_gram_bound, check_int, check_positive,
                               check_real, check_scale_fits, check_tensor)

__all__ = [
    "gaussian_tokens",
    "equicorrelated_tokens",
    "orthogonal_tokens",
    "random_walk_tokens",
    "exact_equicorrelated_tokens",
]


def _shape(batch, T, d, dtype=torch.float32):
    """Validated sizes (the output's memory estimated before it is drawn) and a floating-point dtype."""
    for i, b in enumerate(batch):
        check_int(b, f"batch[{i}]", minimum=1)
    T, d = check_int(T, "T", minimum=1), check_int(d, "d", minimum=1)
    check_float_dtype(dtype)
    check_allocation((*batch, T, d), torch.float64, f"tokens of shape {(*batch, T, d)}")
    return tuple(batch), T, d


def _gram_root(T, rho, dtype, device):
    """``S (T, T)``, the symmetric square root of ``(1 - rho) I + rho 1 1^T``: eigenvalue ``1 - rho`` (``T - 1``
    times) and ``1 + (T - 1) rho`` on the mean direction."""
    a, b = math.sqrt(1.0 - rho), math.sqrt(max(1.0 + (T - 1) * rho, 0.0))
    return a * torch.eye(T, dtype=dtype, device=device) + (b - a) / T


def _gen(generator, device):
    g = as_generator(generator, device)
    return g, g.device


def gaussian_tokens(*batch: int, T: int, d: int, q: float = 1.0, generator=None, device=None,
                    dtype=torch.float32) -> torch.Tensor:
    """I.i.d. Gaussian tokens with entry variance ``q``: shape ``(*batch, T, d)``."""
    batch, T, d = _shape(batch, T, d, dtype)
    q = check_real(q, "q", minimum=0.0, strict=True)
    check_scale_fits(math.sqrt(q), dtype, "q")   # q = 1e300 in float32: refused, not -inf (issue 26, item 16)
    g, device = _gen(generator, device)
    return math.sqrt(q) * torch.randn(*batch, T, d, generator=g, device=device, dtype=dtype)


def equicorrelated_tokens(*batch: int, T: int, d: int, rho: float, q: float = 1.0, normalised: bool = False,
                          generator=None, device=None, dtype=torch.float32) -> torch.Tensor:
    """Tokens sharing a common Gaussian component: E[x_t.x_s/d] = q (t = s), rho q (t != s).

    ``x_t = sqrt(q) (sqrt(rho) g + sqrt(1 - rho) z_t)`` with ``g, z_t ~ N(0, I_d)``; ``rho`` in [0, 1]. Below 0,
    down to the Gram bound ``-1/(T-1)``: ``X = sqrt(q) S Z``, ``S`` the symmetric square root of ``(1 - rho) I +
    rho 1 1^T`` (no shared component exists).
    ``normalised=True``: the common part is rescaled to norm ``sqrt(d)`` and every token to norm
    ``sqrt(q d)`` (tokens as they leave a LayerNorm), so ``q_tt = q`` exactly and the mean cosine is
    ``rho`` up to ``O(d^{-1/2})`` fluctuations.
    """
    batch, T, d = _shape(batch, T, d, dtype)
    rho = check_real(rho, "rho", minimum=-1.0, maximum=1.0)
    check_gram_bound(1.0, rho, T)   # issue 37: down to -1/(T-1), where no shared component exists
    q = check_real(q, "q", minimum=0.0, strict=True)
    check_scale_fits(math.sqrt(q * d), dtype, "q")   # token norms sqrt(q d) must be finite in dtype
    normalised = check_flag(normalised, "normalised")
    g, device = _gen(generator, device)
    if rho < 0:
        x = math.sqrt(q) * _gram_root(T, rho, dtype, device) @ torch.randn(*batch, T, d, generator=g, device=device,
                                                                           dtype=dtype)
        return x * (math.sqrt(q * d) / x.norm(dim=-1, keepdim=True)) if normalised else x
    common = torch.randn(*batch, 1, d, generator=g, device=device, dtype=dtype)
    own = torch.randn(*batch, T, d, generator=g, device=device, dtype=dtype)
    if normalised:
        common = common * (math.sqrt(d) / common.norm(dim=-1, keepdim=True))
    x = math.sqrt(q) * (math.sqrt(rho) * common + math.sqrt(1.0 - rho) * own)
    return x * (math.sqrt(q * d) / x.norm(dim=-1, keepdim=True)) if normalised else x


def exact_equicorrelated_tokens(*batch: int, T: int, d: int, rho: float, generator=None, device=None,
                                dtype=torch.float32) -> torch.Tensor:
    """Tokens with Gram matrix exactly ``d (rho + (1 - rho) delta_ts)`` (needs ``T + 1 <= d``).

    ``X_s = sqrt(d) (sqrt(rho) e_0 + sqrt(1 - rho) e_s)`` for a random orthonormal frame ``e_0..e_T``
    (Gram-Schmidt of Gaussian vectors, via Cholesky): Giorlandino & Goldt 2025, Eq. (21)'s
    ``q_ss' = p + (q - p) delta`` without the ``O(d^{-1/2})`` fluctuations of random tokens. For ``-1/(T-1) <= rho
    < 0``: ``sqrt(d) S (e_1..e_T)`` with ``S`` the symmetric square root of the Gram matrix.
    """
    batch, T, d = _shape(batch, T, d, dtype)
    if T + 1 > d:
        raise ValueError(f"exact equicorrelated tokens need T + 1 <= d; got T={T}, d={d}")
    rho = check_real(rho, "rho", minimum=-1.0, maximum=1.0)
    check_gram_bound(1.0, rho, T)   # issue 37: down to -1/(T-1), where no shared component exists
    g, device = _gen(generator, device)
    G = torch.randn(*batch, T + 1, d, generator=g, device=device, dtype=widest_float(device))
    L = torch.linalg.cholesky(G @ G.transpose(-1, -2))  # G G^T = L L^T
    E = torch.linalg.solve_triangular(L, G, upper=False)  # (..., T+1, d), E E^T = I
    if rho < 0:
        x = math.sqrt(d) * _gram_root(T, rho, E.dtype, device) @ E[..., 1:, :]
    else:
        x = math.sqrt(d) * (math.sqrt(rho) * E[..., :1, :] + math.sqrt(1.0 - rho) * E[..., 1:, :])
    return x.to(dtype)


def orthogonal_tokens(*batch: int, T: int, d: int, generator=None, device=None,
                      dtype=torch.float32) -> torch.Tensor:
    """Rows of a random (Haar) orthogonal frame scaled by sqrt(d): ``X X^T / d = I_T``; needs T <= d."""
    batch, T, d = _shape(batch, T, d, dtype)
    if T > d:
        raise ValueError(f"orthogonal tokens need T <= d; got T={T}, d={d}")
    g, device = _gen(generator, device)
    z = torch.randn(*batch, d, T, generator=g, device=device, dtype=widest_float(device))
    qmat, r = torch.linalg.qr(z)
    qmat = qmat * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1)).unsqueeze(-2)
    return (math.sqrt(d) * qmat.transpose(-1, -2)).to(dtype)


def random_walk_tokens(*batch: int, T: int, d: int, sigma: torch.Tensor | None = None, generator=None,
                       device=None, dtype=torch.float32) -> torch.Tensor:
    """Gaussian random walk (Bao et al. 2024, Assumption 1): x_1 ~ N(0, Sigma), x_{t+1} ~ N(x_t, Sigma).

    ``sigma`` is the (d, d) step covariance (default identity); shape ``(*batch, T, d)``.
    """
    batch, T, d = _shape(batch, T, d, dtype)
    g, device = _gen(generator, device)
    steps = torch.randn(*batch, T, d, generator=g, device=device, dtype=widest_float(device))
    if sigma is not None:
        if not isinstance(sigma, torch.Tensor):
            sigma = torch.as_tensor(np.asarray(sigma, dtype=float))
        check_tensor(sigma, "sigma")   # finite: an inf diagonal gave NaN tokens (issue 26, item 16)
        sigma = sigma.to(dtype=steps.dtype, device=device)
        if sigma.shape != (d, d):
            raise ValueError(f"sigma must have shape (d, d)=({d}, {d}); got {tuple(sigma.shape)}")
        if not torch.allclose(sigma, sigma.T, atol=1e-10):
            raise ValueError("sigma must be symmetric")
        evals, evecs = torch.linalg.eigh(sigma)
        if evals.min() < -1e-10 * max(1.0, float(evals.abs().max())):
            raise ValueError(f"sigma must be positive semi-definite; smallest eigenvalue {float(evals.min()):.3g}")
        root = evecs * evals.clamp_min(0).sqrt()  # Sigma = root root^T
        steps = steps @ root.T
        # the walk after T steps has entries of size ~sqrt(T lambda_max): they must fit dtype
        check_scale_fits(math.sqrt(T * max(float(evals.max()), 0.0)), dtype, "sigma")
    return steps.cumsum(-2).to(dtype)
