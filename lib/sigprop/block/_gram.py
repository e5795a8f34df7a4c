r"""The block map on the whole Gram matrix of a sequence: causal attention, position by position.

The maps of ``sigprop.block._map`` follow two numbers, the mean norm ``q`` and overlap ``p``, which
suffices while the tokens stay exchangeable. A causal mask breaks that: query ``t`` sees the ``t + 1``
keys ``s <= t``, so early and late tokens are mixed differently and their overlaps drift apart. This
module follows the whole ``T x T`` Gram matrix ``G_ts = E[x_t . x_s] / d`` instead (the d -> infinity
limit at fixed ``T``, weights averaged, layers independent), through the same block
(:class:`~sigprop.BlockConfig`) and the same components as the network (``_components.compose``):

* **normalisation**: ``G_ts / sqrt(G_tt G_ss)`` (Giorlandino & Goldt 2025, Eq. (5); RMS and centred alike to
  ``O(1/d)``, ``sigprop.block._components``).
* **attention** on input Gram ``H``: the logits are Gaussian with ``E[a_ts a_t's'] = sigma_a^2 H_tt'
  H_ss'`` (App. B.1, Eq. (9), with ``sigma_a^2 = logit_scale^2 d_k (sigma_qk2 d)^2``; a query bias adds
  ``e`` to ``H_tt'``), i.e. ``a = sigma_a L_Q Z L^T`` with ``Z`` a ``T x T`` matrix of independent standard
  normals; with rotary embeddings (``positions="rope"``) the logits are drawn from their exact law at the
  config's ``d_k`` instead, the query and key vectors turned by their positions (``sigprop.block._attention``;
  r2-theory report, Eqs. (R1)-(R2), (R12)). Averaging over the values, the output Gram is ``sigma_o2 (sigma_v2 E[A H A^T] + sigma_bv2) +
  sigma_bo2`` (``A`` the masked softmax of ``a``; with gain control ``H`` is replaced by ``C H C``, ``C`` the
  centring along the sequence, and the value bias drops). ``E[A H A^T]`` has no closed form for a general
  ``H``, so it is integrated by Monte Carlo over ``Z`` alone (no width, no weights): ``samples`` draws per
  layer in antithetic pairs ``(Z, -Z)``, float64, a fixed seed (``sigprop.block._attention``).
* **MLP**: elementwise, ``G_1 = sigma_w2 H + sigma_b2`` and ``sigma_w2_out K(G_1,tt, G_1,ss, G_1,ts) +
  sigma_b2_out`` (:func:`sigprop.theory.activation_kernel`; gated: times ``G_1,ts``).
* **Residuals** add ``alpha^2 G`` and ``branch^2`` times the branch's Gram, in the config's layout.

Input: a real symmetric positive semi-definite ``G`` (token norms on the diagonal, ``|G_ts| <= sqrt(G_tt
G_ss)``); anything else is refused. For an equicorrelated ``G`` without a mask this reduces to
:func:`sigprop.theory.block_map` at finite ``T`` (``tests/test_block_gram.py`` checks it, and checks the causal
map against random causal transformers). In the first causal layer from equicorrelated tokens, row ``t`` is
exactly a REM with ``t + 1`` energies of variance ``sigma_a^2 q (q - p)``: :func:`causal_ipr`.

Used in the book's chapter on off-the-shelf transformers (GPT-2's causal mask).
"""
from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np
import torch
from scipy.interpolate import CubicSpline

from ..attention import rem_quadrature
from ..stats._config import threads_for
from ..stats._random import as_generator
from ..stats._validate import check_gram_bound, check_int, check_memory, check_overlaps, theory_function
from ._attention import attention_gram
from ._components import RMS_NORM, combine_moments, compose, mlp_gram
from ._config import BlockConfig
from ._map import refuse_rope

__all__ = ["GramTrajectory", "GramStep"]
__theory__ = ["gram_block_map", "iterate_gram_map", "causal_ipr"]


class GramStep(NamedTuple):
    """:func:`sigprop.theory.gram_block_map`'s result: ``gram (T, T)`` after the block, ``ipr (T,)`` of its attention."""

    gram: np.ndarray
    ipr: np.ndarray


@dataclasses.dataclass(frozen=True)
class GramTrajectory:
    """Result of :func:`sigprop.theory.iterate_gram_map` (numpy float64).

    ``gram`` (depth+1, T, T): ``G`` after each block (row 0: the input); ``ipr`` (depth, T): the mean
    inverse participation ratio ``E sum_s A_ts^2`` of each query row in each block's attention.
    """

    gram: np.ndarray
    ipr: np.ndarray
    causal: bool
    samples: int

    def cosine_matrix(self) -> np.ndarray:
        """(depth+1, T, T): ``G_ts / sqrt(G_tt G_ss)``."""
        g = self.gram   # numpy, or tensors through sp.theory's contract
        diag = g.diagonal(0, -2, -1).sqrt() if torch.is_tensor(g) else np.sqrt(np.einsum("ltt->lt", g))
        return g / (diag[:, :, None] * diag[:, None, :])

    def mean_cosine(self, positions=None) -> np.ndarray:
        """(depth+1,): mean cosine over pairs ``t != s`` of ``positions`` (default all; distinct indices, at least
        two, e.g. ``slice(-16, None)`` for the last 16 tokens), the quantity :func:`sigprop.probe` reports."""
        cos = self.cosine_matrix()
        T = cos.shape[-1]
        idx = _positions(positions, T)
        sub = cos[:, idx[:, None], idx[None, :]]
        k = len(idx)
        trace = sub.diagonal(0, -2, -1).sum(-1) if torch.is_tensor(sub) else np.einsum("ltt->l", sub)
        return (sub.sum((-1, -2)) - trace) / (k * (k - 1))


def _positions(positions, T):
    """Distinct token indices in ``[-T, T)`` (at least two) as an index array."""
    if positions is None:
        return np.arange(T)
    if not isinstance(positions, slice) and len(positions) < 2:
        raise ValueError(f"a mean cosine needs at least two positions; got {list(positions)}")
    if isinstance(positions, slice):
        idx = np.arange(T)[positions]
    else:
        raw = np.asarray(positions)
        if raw.dtype == bool or raw.dtype.kind not in "iu" or raw.ndim != 1:
            raise TypeError(f"positions must be a slice or a 1-D sequence of ints; got {positions!r}")
        if np.any((raw < -T) | (raw >= T)):
            raise ValueError(f"positions must lie in [-{T}, {T}) for T = {T} tokens; got {raw.tolist()}")
        idx = raw % T
    if len(np.unique(idx)) != len(idx):
        raise ValueError(f"positions must be distinct tokens (a repeated index would count a token's cosine with "
                         f"itself); got {np.asarray(idx).tolist()}")
    if len(idx) < 2:
        raise ValueError(f"a mean cosine needs at least two positions; got {len(idx)}")
    return idx


def check_gram(G, name="G"):
    """A real, finite, symmetric, positive semi-definite ``(T, T)`` matrix with a positive diagonal, as float64."""
    if isinstance(G, torch.Tensor):
        if G.dtype == torch.bool or G.is_complex():
            raise TypeError(f"{name} must be a real Gram matrix; got a {G.dtype} tensor")
        G = G.detach().cpu().double().numpy()
    raw = np.asarray(G)
    if raw.dtype == bool or raw.dtype.kind not in "iuf":
        raise TypeError(f"{name} must be a real Gram matrix; got an array of {raw.dtype}")
    G = raw.astype(float)
    if G.ndim != 2 or G.shape[0] != G.shape[1] or G.shape[0] < 2:
        raise ValueError(f"{name} must be a (T, T) Gram matrix with T >= 2; got shape {G.shape}")
    if not np.all(np.isfinite(G)) or not np.allclose(G, G.T, rtol=1e-10, atol=1e-12):
        raise ValueError(f"{name} must be a finite symmetric matrix")
    diag = np.diag(G)
    if np.any(diag <= 0):
        raise ValueError(f"{name} must have a positive diagonal (token norms)")
    cos = G / (np.sqrt(diag)[:, None] * np.sqrt(diag)[None, :])
    if np.any(np.abs(cos) > 1 + 1e-10):
        raise ValueError(f"{name} must satisfy |G_ts| <= sqrt(G_tt G_ss) (cosines in [-1, 1]); got a cosine of "
                         f"{float(np.max(np.abs(cos))):.4g}")
    lam = np.linalg.eigvalsh(cos)
    if lam[0] < -1e-10 * G.shape[0]:
        raise ValueError(f"{name} must be positive semi-definite (a Gram matrix of real tokens); its smallest "
                         f"eigenvalue (as cosines) is {lam[0]:.4g}. Equicorrelated tokens need a cosine >= "
                         f"-1/(T-1) = {-1 / (G.shape[0] - 1):.4g}")
    return 0.5 * (G + G.T)


def _block(G, c: BlockConfig, samples: int, g: torch.Generator):
    y2 = []

    def attention(H):
        S, ipr = attention_gram(H, c, samples, g)
        y2.append(ipr)
        return S

    with np.errstate(over="ignore", invalid="ignore"):   # an overflow is refused below
        out = compose(G, c, attention=attention, mlp=lambda H: mlp_gram(H, c), norm=lambda H, k: RMS_NORM.gram(H),
                      combine=combine_moments)
    out = 0.5 * (out + out.T)
    if not np.all(np.isfinite(out)):
        raise ValueError("the Gram map left the float64 range (no LayerNorm: the token norms grow with depth; use "
                         "fewer blocks, norm='post' or 'pre', or smaller variances)")
    return out, y2[0]


def _check(config, samples, T):
    if not isinstance(config, BlockConfig):
        raise TypeError(f"config must be a BlockConfig; got {type(config).__name__}")
    samples = check_int(samples, "samples", minimum=2, maximum=SAMPLES_MAX)
    check_memory(8.0 * (4 * min(samples, 256) + 8) * T * T, f"the Gram map at T = {T} (chunks of 256 logit draws)")
    return samples + samples % 2


#: Most logit draws per block: the integration error falls like 1/sqrt(samples), ~1e-3 of a cosine's spread here.
SAMPLES_MAX = 2**20


@theory_function
def gram_block_map(G, config: BlockConfig, *, samples: int = 1024, generator=0) -> GramStep:
    """One block's map of the Gram matrix ``G (T, T) -> GramStep(gram (T, T), ipr (T,))`` (module docstring).

    ``config`` is the block (``causal=True`` for a decoder); ``samples`` logit draws (even; antithetic
    pairs) integrate the attention's softmax average; ``generator`` an int seed or a CPU generator.
    """
    G = check_gram(G)
    samples = _check(config, samples, G.shape[0])
    with threads_for(G.shape[0] ** 3):  # small products: one thread
        return GramStep(*_block(G, config, samples, as_generator(generator, "cpu")))


@theory_function
def iterate_gram_map(G0, depth: int, config, *, samples: int = 1024, generator=0) -> GramTrajectory:
    """Iterate :func:`gram_block_map` ``depth`` times from ``G0 (T, T)``; one generator for all layers. ``config`` is
    one :class:`~sigprop.BlockConfig` for every block, or a sequence of ``depth`` of them (blocks that differ in where
    their tokens see, e.g. Gemma2/3's sliding-window and global layers).

    For ``T`` equicorrelated tokens of norm ``q`` and cosine ``rho`` use ``G0 = q ((1 - rho) I + rho)`` (a Gram
    matrix for ``rho >= -1/(T-1)``). Cost ~ ``4 samples T^3`` flops per block: measured 0.26 s (T = 64) and 0.5 s
    (T = 96) per block at 1024 samples on two busy cores (ReLU, causal, no LayerNorm); tanh, SiLU and tanh-GELU
    MLPs on tokens of different norms 0.3-0.6 s and 0.6-1.1 s (their kernels by Mehler's expansion,
    ``sigprop.block._kernels``; 20 s per block at T = 96 before issue 37). ``samples`` at most ``SAMPLES_MAX`` (2^20).
    The integration error of a cosine is ~ its spread over logit draws / sqrt(samples) (below 1e-3 at the
    defaults in the book's uses; ``tests/test_block_gram.py`` compares two seeds).
    """
    G = check_gram(G0, "G0")
    depth = check_int(depth, "depth", minimum=0)
    configs = _per_block(config, depth)
    samples = _check(configs[0] if configs else config, samples, G.shape[0])
    g = as_generator(generator, "cpu")
    grams, iprs = [G], []
    for c in configs:
        with threads_for(G.shape[0] ** 3):  # small products: one thread
            G, y2 = _block(G, c, samples, g)
        grams.append(G)
        iprs.append(y2)
    return GramTrajectory(np.stack(grams), np.stack(iprs) if iprs else np.zeros((0, G.shape[0])),
                          bool((configs[0] if configs else config).causal), samples)


def _per_block(config, depth):
    if isinstance(config, BlockConfig) or depth == 0:
        return (config,) * depth
    if isinstance(config, (str, bytes)) or not hasattr(config, "__len__"):
        raise TypeError(f"config must be a BlockConfig or a sequence of them; got {type(config).__name__}")
    configs = tuple(config)
    if not all(isinstance(c, BlockConfig) for c in configs) or isinstance(config, dict):
        raise TypeError(f"config must be a BlockConfig or a sequence of them; got {type(config).__name__}")
    if len(configs) != depth:
        raise ValueError(f"config as a sequence must hold depth = {depth} BlockConfigs; got {len(configs)}")
    return configs


#: Rows up to this many keys are computed one by one; beyond it E Y2 is interpolated in log(keys) from a grid of
#: _PER_OCTAVE points per doubling (cubic spline; measured error 2e-10 up to 1e6 keys, tests/test_block_gram.py).
_EXACT_KEYS, _PER_OCTAVE = 64, 8


@theory_function
def causal_ipr(q, p, config: BlockConfig, *, T: int) -> np.ndarray:
    """``E Y^(2)`` of each query row ``t = 0..T-1`` of a causal attention layer on equicorrelated tokens.

    Row ``t`` sees ``t + 1`` keys (``min(t + 1, window)`` with a sliding window); after removing the part shared by all keys (App. B.1) its logits are
    ``t + 1`` i.i.d. Gaussians of variance ``sigma_a^2 (q + e)(q - p)``, ``sigma_a^2 = logit_scale^2 d_k
    (sigma_qk2 d)^2`` and ``e`` the query bias's share from ``config`` (the finite-T REM at ``T = t + 1``; row 0
    attends to itself, ``Y = 1``). One quadrature per row (:func:`sigprop.theory.ipr_finite`'s) up to 64 keys, and
    a cubic interpolation in ``log(t + 1)`` beyond (8 quadratures per doubling; error < 1e-9). ``q, p``: the attention input's overlaps (1
    and the cosine after a LayerNorm). ``T``: an int >= 2. Returns (T,).
    """
    if not isinstance(config, BlockConfig):
        raise TypeError(f"config must be a BlockConfig; got {type(config).__name__}")
    refuse_rope(config, "causal_ipr (a REM quadrature) does")
    if config.alibi_slopes is not None or config.logit_cap is not None:
        raise ValueError("causal_ipr's rows are REMs of i.i.d. energies: ALiBi (a field over key positions) and "
                         "soft-capped logits are not; use sp.theory.iterate_gram_map")
    T = check_int(T, "T", minimum=2)
    check_memory(8.0 * 2 * T, f"causal_ipr's rows at T = {T}")
    qa, pa = (float(v) for v in check_overlaps(q, p, strict=False))
    check_gram_bound(qa, pa, T)   # T tokens of overlap p exist for p >= -q/(T-1)
    sigma = float(np.sqrt(config.logit_var * (qa + config.qk_bias) * max(qa - pa, 0.0)))
    W = T if config.window is None else min(T, config.window)   # row t sees min(t + 1, window) keys
    keys = np.arange(2, min(W, _EXACT_KEYS) + 1)
    exact = [rem_quadrature(sigma, float(n))[0] for n in keys]
    if W <= _EXACT_KEYS:
        rows = np.array([1.0, *exact])
    else:
        grid = np.exp(np.linspace(np.log(_EXACT_KEYS / 2), np.log(W),
                                  int(np.ceil(_PER_OCTAVE * np.log2(2 * W / _EXACT_KEYS))) + 1))
        spline = CubicSpline(np.log(grid), np.array([rem_quadrature(sigma, float(n))[0] for n in grid]))
        rows = np.concatenate([[1.0], exact, spline(np.log(np.arange(_EXACT_KEYS + 1, W + 1)))])
    return np.concatenate([rows, np.full(T - W, rows[-1])])
