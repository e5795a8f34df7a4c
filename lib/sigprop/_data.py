"""Input sequences used by the four documents, and a synthetic language.

All samplers return tensors of shape ``(*batch, T, d)`` and take ``*, generator``.

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

from ._random import as_generator, draw_seed
from ._validate import check_int, check_positive, check_range

__all__ = [
    "gaussian_tokens",
    "equicorrelated_tokens",
    "orthogonal_tokens",
    "random_walk_tokens",
    "MarkovSource",
]


def _shape(batch, T, d):
    for i, b in enumerate(batch):
        check_int(b, f"batch[{i}]", minimum=1)
    return tuple(batch), check_int(T, "T", minimum=1), check_int(d, "d", minimum=1)


def _gen(generator, device):
    device = torch.device("cpu") if device is None else torch.device(device)
    if isinstance(generator, torch.Generator):
        device = generator.device
    return as_generator(generator, device), device


def gaussian_tokens(*batch: int, T: int, d: int, q: float = 1.0, generator=None, device=None,
                    dtype=torch.float32) -> torch.Tensor:
    """I.i.d. Gaussian tokens with entry variance ``q``: shape ``(*batch, T, d)``."""
    batch, T, d = _shape(batch, T, d)
    check_positive(q, "q")
    g, device = _gen(generator, device)
    return math.sqrt(q) * torch.randn(*batch, T, d, generator=g, device=device, dtype=dtype)


def equicorrelated_tokens(*batch: int, T: int, d: int, rho: float, q: float = 1.0, generator=None,
                          device=None, dtype=torch.float32) -> torch.Tensor:
    """Tokens sharing a common Gaussian component: E[x_t.x_s/d] = q (t = s), rho q (t != s).

    ``x_t = sqrt(q) (sqrt(rho) g + sqrt(1 - rho) z_t)`` with ``g, z_t ~ N(0, I_d)``; ``rho`` in [0, 1].
    """
    batch, T, d = _shape(batch, T, d)
    check_range(rho, "rho", 0.0, 1.0)
    check_positive(q, "q")
    g, device = _gen(generator, device)
    common = torch.randn(*batch, 1, d, generator=g, device=device, dtype=dtype)
    own = torch.randn(*batch, T, d, generator=g, device=device, dtype=dtype)
    return math.sqrt(q) * (math.sqrt(rho) * common + math.sqrt(1.0 - rho) * own)


def orthogonal_tokens(*batch: int, T: int, d: int, generator=None, device=None,
                      dtype=torch.float32) -> torch.Tensor:
    """Rows of a random (Haar) orthogonal frame scaled by sqrt(d): ``X X^T / d = I_T``; needs T <= d."""
    batch, T, d = _shape(batch, T, d)
    if T > d:
        raise ValueError(f"orthogonal tokens need T <= d; got T={T}, d={d}")
    g, device = _gen(generator, device)
    z = torch.randn(*batch, d, T, generator=g, device=device, dtype=torch.float64)
    qmat, r = torch.linalg.qr(z)
    qmat = qmat * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1)).unsqueeze(-2)
    return (math.sqrt(d) * qmat.transpose(-1, -2)).to(dtype)


def random_walk_tokens(*batch: int, T: int, d: int, sigma: torch.Tensor | None = None, generator=None,
                       device=None, dtype=torch.float32) -> torch.Tensor:
    """Gaussian random walk (Bao et al. 2024, Assumption 1): x_1 ~ N(0, Sigma), x_{t+1} ~ N(x_t, Sigma).

    ``sigma`` is the (d, d) step covariance (default identity); shape ``(*batch, T, d)``.
    """
    batch, T, d = _shape(batch, T, d)
    g, device = _gen(generator, device)
    steps = torch.randn(*batch, T, d, generator=g, device=device, dtype=torch.float64)
    if sigma is not None:
        sigma = torch.as_tensor(sigma, dtype=torch.float64, device=device)
        if sigma.shape != (d, d):
            raise ValueError(f"sigma must have shape (d, d)=({d}, {d}); got {tuple(sigma.shape)}")
        if not torch.allclose(sigma, sigma.T, atol=1e-10):
            raise ValueError("sigma must be symmetric")
        evals, evecs = torch.linalg.eigh(sigma)
        if evals.min() < -1e-10 * max(1.0, float(evals.abs().max())):
            raise ValueError(f"sigma must be positive semi-definite; smallest eigenvalue {float(evals.min()):.3g}")
        root = evecs * evals.clamp_min(0).sqrt()  # Sigma = root root^T
        steps = steps @ root.T
    return steps.cumsum(-2).to(dtype)


class MarkovSource:
    """A random first-order Markov chain over ``vocab`` symbols with a known entropy rate.

    ``MarkovSource(vocab, *, concentration=0.3, generator=None)``. Rows of the transition
    matrix are Dirichlet(``concentration``) draws: small concentration gives a predictable
    language (low entropy), large gives a near-uniform one. ``entropy_rate`` (nats per token)
    is the best achievable cross-entropy of any model, so ``exp(entropy_rate)`` is the best
    achievable perplexity.
    """

    def __init__(self, vocab: int, *, concentration: float = 0.3, generator=None):
        vocab = check_int(vocab, "vocab", minimum=2)
        check_positive(concentration, "concentration")
        rng = np.random.default_rng(draw_seed(as_generator(generator)))
        P = rng.dirichlet(np.full(vocab, float(concentration)), size=vocab)
        P = np.clip(P, 1e-12, None)
        P /= P.sum(1, keepdims=True)
        evals, evecs = np.linalg.eig(P.T)
        pi = np.real(evecs[:, np.argmin(np.abs(evals - 1.0))])
        pi = np.abs(pi) / np.abs(pi).sum()
        self._P = torch.as_tensor(P)
        self._pi = torch.as_tensor(pi)

    @property
    def transition(self) -> torch.Tensor:
        """(vocab, vocab) float64 transition matrix (a copy)."""
        return self._P.clone()

    @property
    def stationary(self) -> torch.Tensor:
        """(vocab,) float64 stationary distribution (a copy)."""
        return self._pi.clone()

    @property
    def vocab(self) -> int:
        return int(self._P.shape[0])

    @property
    def entropy_rate(self) -> float:
        """H = -sum_i pi_i sum_j P_ij log P_ij (nats per token)."""
        P = self._P
        return float(-(self._pi * (P * P.log()).sum(1)).sum())

    def sample(self, n: int, T: int, *, generator=None) -> torch.Tensor:
        """``(n, T)`` int64 sequences started from the stationary distribution."""
        n = check_int(n, "n", minimum=1)
        T = check_int(T, "T", minimum=1)
        g = as_generator(generator)
        out = torch.empty(n, T, dtype=torch.long)
        out[:, 0] = torch.multinomial(self._pi.float(), n, replacement=True, generator=g)
        P = self._P.float()
        for t in range(1, T):  # loop over positions, batched over sequences
            out[:, t] = torch.multinomial(P[out[:, t - 1]], 1, generator=g).squeeze(1)
        return out

