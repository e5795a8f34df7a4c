r"""One self-attention layer in detail: correlated scores, cross-overlap, the cosine map.

Giorlandino & Goldt (2025), Appendix B.1-B.2. Setting of Result 1: tokens ``X (T, d)``
with overlaps ``q_ts = X_t . X_s / d``, ``W_Q, W_K`` entries of variance
``beta sqrt(log T) / d``, scores ``a_ts = (W_Q X_t).(W_K X_s)/sqrt(d)`` (Eq. 6).

**Correlated scores (B.1, Eq. 9).** For fixed tokens, exactly (any ``d``),

.. math::  \mathbb{E}[a_{ts} a_{\tau\sigma}] = \beta^2 \log T \; q_{t\tau}\, q_{s\sigma},

i.e. the score field is ``sigma_a (Q^{1/2} \otimes Q^{1/2}) g`` with ``sigma_a^2 = beta^2 log T``
(:func:`score_covariance`). For ``q_tt = q`` and ``q_ts = p`` it splits into a constant
(variance ``p^2``), a row part (``p (q-p)``), a column part ``b_s`` shared by all rows
(``p (q-p)``) and a private part (``(q-p)^2``); in the softmax only ``b_s + e_ts`` survives:
a REM of variance ``beta^2 log T q (q - p)`` per row, and two rows are correlated REMs with
correlation ``p / q``.

**Cross-overlap (B.2.2).** ``Y_p = E sum_s A_ts A_t's`` (``t != t'``). Averaging over
``W_V`` (variance ``sigma_v^2/d``), exactly,

.. math::  \tfrac1d \mathbb{E}_V[S_t\cdot S_{t'}] = \sigma_v^2\,[\,p + (q-p)\textstyle\sum_s A_{ts}A_{t's}\,],

so ``q' = sigma_v^2 (p + (q-p) Y^(2))`` and ``p' = sigma_v^2 (p + (q-p) Y_p)`` (Eqs. 20-23).
The paper claims ``Y_p`` is sub-leading. For ``p = 0`` rows are independent and
``Y_p = 1/T`` exactly; for ``p > 0`` :func:`cross_overlap_rem` measures it in the two-row REM.

**Cosine map (Eq. 3).** With ``Y_p -> 0``: ``Phi_S(rho) = rho / (rho + (1-rho) Y^(2))`` (``q = 1``),
i.e. 1 for ``beta < beta_c`` and ``rho / (1 - sqrt(2 (1-rho)) / beta)`` above. Appendix B.2.3
prints ``rho / (1 + (1-rho) Y^(2))`` instead (``form="appendix"``), which contradicts Eq. (3)
and the algorithm; Monte Carlo decides (errata page).

Used in ``chapters/giorlandino-goldt2025/02_rem_in_depth.ipynb``.
"""
from __future__ import annotations

import enum
import math

import numpy as np
import torch

from ._estimate import Estimate
from ._montecarlo import monte_carlo
from ._rem import _ipr_limit
from ._rem_gradients import _rem_moments_finite_scalar
from ._validate import (check_int, check_option, check_positive, check_range, check_tensor, to_output)

__all__ = ["sample_scores", "attention_layer_mc", "cross_overlap_rem"]
__theory__ = ["score_covariance", "cosine_map", "attention_map_finite", "iterate_block_map_finite"]


def score_covariance(x, *, beta):
    r"""Covariance of the attention scores for fixed tokens, Eq. (9): ``beta^2 log T q_{t tau} q_{s sigma}``.

    ``x (..., T, d)`` -> ``(..., T, T, T, T)`` float64 tensor ``C[t, s, tau, sigma] =
    E[a_ts a_tau sigma]`` for ``W_Q, W_K`` of variance ``beta sqrt(log T)/d`` (Result 1).
    Memory ``T^4``: meant for small ``T``.
    """
    check_tensor(x, "x", ndim_min=2)
    check_positive(beta, "beta", allow_zero=True)
    T, d = x.shape[-2], x.shape[-1]
    if T < 2:
        raise ValueError(f"x needs T >= 2 tokens; got shape {tuple(x.shape)}")
    xd = x.double()
    Q = xd @ xd.transpose(-1, -2) / d                     # (..., T, T)
    s2 = float(beta) ** 2 * math.log(T)
    return s2 * Q[..., :, None, :, None] * Q[..., None, :, None, :]   # [t, s, tau, sigma]


def sample_scores(x, n, *, beta, generator=None):
    """``n`` independent draws of the score matrix ``a (n, ..., T, T)`` for fixed tokens ``x (..., T, d)``.

    Fresh ``W_Q, W_K`` (entries ``N(0, beta sqrt(log T)/d)``) per draw; Eq. (6).
    """
    check_tensor(x, "x", ndim_min=2)
    n = check_int(n, "n", minimum=1)
    check_positive(beta, "beta", allow_zero=True)
    from ._random import as_generator
    g = as_generator(generator, x.device)
    T, d = x.shape[-2], x.shape[-1]
    s = math.sqrt(float(beta) * math.sqrt(math.log(T)) / d)
    shape = (n,) + tuple(x.shape[:-2]) + (d, d)
    w_q = s * torch.randn(shape, generator=g, device=x.device, dtype=x.dtype)
    w_k = s * torch.randn(shape, generator=g, device=x.device, dtype=x.dtype)
    return (x @ w_q.transpose(-1, -2)) @ (x @ w_k.transpose(-1, -2)).transpose(-1, -2) / math.sqrt(d)


class _Form(str, enum.Enum):
    RESULT1 = "result1"
    APPENDIX = "appendix"


def cosine_map(rho, beta, *, form="result1"):
    r"""Cosine map of one attention layer, ``Phi_S(rho)`` (Result 1, Eq. 3), tokens with ``q = 1``.

    ``form="result1"``: ``rho / (rho + (1 - rho) Y^(2)(beta; 1, rho))`` (Eq. 3, equal to 1 for
    ``beta <= beta_c(rho) = sqrt(2/(1-rho))``); ``form="appendix"``: the printed end of App.
    B.2.3, ``rho / (1 + (1 - rho) Y^(2))`` (an erratum). Broadcasts; ``0 <= rho < 1``.
    """
    form = check_option(form, _Form, "form")
    r = check_range(rho, "rho", 0.0, 1.0)
    b = check_positive(beta, "beta")
    r, b = np.broadcast_arrays(r.astype(float), b.astype(float))
    y = _ipr_limit(b, np.ones_like(r), r, 2.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        if form is _Form.RESULT1:
            den = r + (1.0 - r) * y
            out = np.where(den > 0, r / np.where(den > 0, den, 1.0), 1.0)
        else:
            out = r / (1.0 + (1.0 - r) * y)
    return to_output(out, rho, beta)


def attention_map_finite(q, p, *, beta, T, y2=None, yp=None, sigma_v2=1.0, gain_control=False):
    r"""Attention layer ``(q, p) -> (q', p')`` with finite-``T`` participation ratios (Eqs. 20-23).

    ``q' = sigma_v2 (p + (q-p) Y2)``, ``p' = sigma_v2 (p + (q-p) Y_p)``; gain control (values
    centred over the sequence, Sec. 3) gives ``q' = sigma_v2 (q-p)(Y2 - 1/T)``,
    ``p' = sigma_v2 (q-p)(Y_p - 1/T)``. Defaults: ``Y2 = ipr_finite(beta, T, q, p)`` and
    ``Y_p = 1/T`` (exact for independent rows, ``p = 0``). Scalars (or ``beta`` arrays); ``y2``
and ``yp`` may be given (e.g. measured) to override.
    """
    T = check_int(T, "T", minimum=2)
    check_positive(beta, "beta", allow_zero=True)
    if y2 is None:
        y2 = np.vectorize(lambda b: _y2_finite(float(b), T, float(q), float(p)))(beta)
    if yp is None:
        yp = 1.0 / T
    y2, yp = np.asarray(y2, dtype=float), np.asarray(yp, dtype=float)
    q, p, sv = float(q), float(p), float(sigma_v2)
    if gain_control:
        return to_output(sv * (q - p) * (y2 - 1.0 / T), beta), to_output(sv * (q - p) * (yp - 1.0 / T), beta)
    return to_output(sv * (p + (q - p) * y2), beta), to_output(sv * (p + (q - p) * yp), beta)


def _y2_finite(beta, T, q, p):
    """Finite-T E[Y2] (the quadrature of :func:`sigprop.theory.rem_moments`; ~10-60 ms)."""
    return _rem_moments_finite_scalar(beta * math.sqrt(math.log(T) * q * max(q - p, 0.0)), float(T))[0]


def iterate_block_map_finite(q0, p0, depth, *, T, beta, alpha_sa=1.0, alpha_mlp=1.0, sigma_w2=2.0,
                             sigma_b2=0.0, sigma_v2=1.0, norm="post", gain_control=False, activation="relu"):
    r"""Algorithms 1-3 with the finite-``T`` attention of :func:`attention_map_finite`.

    Same block as :func:`sigprop.theory.block_map` (post/pre/none LN, gain control, MLP of
    App. B.6.2), but each attention layer uses the exact finite-``T`` ``E[Y2]`` of its input
    (quadrature) and ``Y_p = 1/T`` instead of the ``T -> infinity`` values ``max(0, 1 - beta_c/beta)``
    and 0. ``Y_p = 1/T`` is exact for independent rows and for ``beta -> 0`` (uniform rows); in
    the condensed phase with ``p > 0`` it underestimates ``Y_p`` (see :func:`cross_overlap_rem`).
    Scalars only; returns ``(q, p)`` arrays of shape ``(depth + 1,)``.
    """
    from ._blockmaps import _block_with, _mlp
    depth = check_int(depth, "depth", minimum=0)
    T = check_int(T, "T", minimum=2)
    beta = float(check_positive(beta, "beta"))
    a2, m2 = float(alpha_sa) ** 2, float(alpha_mlp) ** 2
    if norm not in ("post", "pre", "none"):
        raise ValueError(f"norm must be one of 'post', 'pre', 'none'; got {norm!r}")
    q, p = float(q0), float(p0)
    qs, ps = [q], [p]

    def attn(qi, pi):
        y2 = _y2_finite(beta, T, qi, pi)
        qa, pa = attention_map_finite(qi, pi, beta=beta, T=T, y2=y2, sigma_v2=sigma_v2, gain_control=gain_control)
        return float(qa), float(pa)

    def mlp(qi, pi):
        qm, pm = _mlp(np.float64(qi), np.float64(pi), float(sigma_w2), float(sigma_b2), activation)
        return float(qm), float(pm)

    for _ in range(depth):
        q, p = (float(v) for v in _block_with(np.float64(q), np.float64(p), attn, mlp, a2, m2, 1.0, 1.0, norm))
        qs.append(q)
        ps.append(p)
    return np.array(qs), np.array(ps)


def _tokens(n, T, d, rho, gen, dtype):
    """Equicorrelated tokens with overlap rho (common part of fixed norm), rescaled to q_tt = 1 exactly."""
    g = torch.randn(n, 1, d, generator=gen, device=gen.device, dtype=dtype)
    z = torch.randn(n, T, d, generator=gen, device=gen.device, dtype=dtype)
    g = g * (math.sqrt(d) / g.norm(dim=-1, keepdim=True))   # common part of norm exactly sqrt(d)
    x = math.sqrt(rho) * g + math.sqrt(1.0 - rho) * z
    return x * (math.sqrt(d) / x.norm(dim=-1, keepdim=True))


def _exact_tokens(n, T, d, rho, gen, dtype):
    """Tokens with Gram matrix exactly ``d (rho + (1 - rho) delta_ts)`` (needs ``T + 1 <= d``).

    ``X_s = sqrt(d) (sqrt(rho) e_0 + sqrt(1 - rho) e_s)`` for a random orthonormal frame
    ``e_0..e_T`` (Gram-Schmidt of Gaussian vectors, via Cholesky): Eq. (21)'s
    ``q_ss' = p + (q - p) delta`` without the ``O(d^{-1/2})`` fluctuations of random tokens.
    """
    G = torch.randn(n, T + 1, d, generator=gen, device=gen.device, dtype=torch.float64)
    L = torch.linalg.cholesky(G @ G.transpose(-1, -2))          # G G^T = L L^T
    E = torch.linalg.solve_triangular(L, G, upper=False)        # (n, T+1, d), E E^T = I
    x = math.sqrt(d) * (math.sqrt(rho) * E[:, :1] + math.sqrt(1.0 - rho) * E[:, 1:])
    return x.to(dtype)


def attention_layer_mc(beta, *, T, d, n, rho=0.0, tokens="exact", generator=None, chunk=None, device=None,
                       dtype=torch.float32) -> Estimate:
    r"""Monte Carlo of one random attention layer on tokens of cosine ``rho`` (``q_tt = 1``).

    Per sample (one draw of tokens and of ``W_Q, W_K``) returns, averaged over its rows,
    the statistics ``[q_in, p_in, Y2, Y3, Y_p, q_out, p_out, rho_out]`` where ``q_out, p_out`` are
    the output overlaps averaged exactly over ``W_V`` (``sigma_v^2 = 1``):
    ``(A Q A^T)`` diagonal / off-diagonal means, and ``rho_out = p_out / q_out`` per sample.
    Compare ``q_out, p_out`` with Eqs. (20)-(23) and ``rho_out`` with :func:`cosine_map`.

    ``tokens="exact"`` (default, needs ``T < d``): Gram matrix exactly ``rho + (1-rho) delta``
    (Eq. 21 holds without fluctuations, so ``q_out = p + (q-p) Y2`` per draw);
    ``tokens="gaussian"``: equicorrelated Gaussian tokens normalised to ``q_tt = 1``, whose
    ``O(d^{-1/2})`` overlap fluctuations correlate with the attention and add ``O(log T / d)`` to ``q_out``.
    """
    check_positive(beta, "beta", allow_zero=True)
    T = check_int(T, "T", minimum=2)
    d = check_int(d, "d", minimum=1)
    check_range(rho, "rho", 0.0, 1.0 - 1e-12)
    if tokens not in ("exact", "gaussian"):
        raise ValueError(f"tokens must be 'exact' or 'gaussian'; got {tokens!r}")
    if tokens == "exact" and T + 1 > d:
        raise ValueError(f"tokens='exact' needs T + 1 <= d; got T={T}, d={d}")
    s = math.sqrt(float(beta) * math.sqrt(math.log(T)) / d)
    make = _exact_tokens if tokens == "exact" else _tokens

    def sample(m, gen):
        x = make(m, T, d, float(rho), gen, dtype)
        w_q = s * torch.randn(m, d, d, generator=gen, device=gen.device, dtype=dtype)
        w_k = s * torch.randn(m, d, d, generator=gen, device=gen.device, dtype=dtype)
        a = (x @ w_q.transpose(-1, -2)) @ (x @ w_k.transpose(-1, -2)).transpose(-1, -2) / math.sqrt(d)
        A = torch.softmax(a.double(), dim=-1)                    # (m, T, T)
        xd = x.double()
        Q = xd @ xd.transpose(-1, -2) / d
        off = 1.0 - torch.eye(T, dtype=torch.float64, device=gen.device)
        npair = T * (T - 1)
        q_in = torch.diagonal(Q, dim1=-2, dim2=-1).mean(-1)
        p_in = (Q * off).sum((-1, -2)) / npair
        y2 = A.pow(2).sum(-1).mean(-1)
        y3 = A.pow(3).sum(-1).mean(-1)
        AAt = A @ A.transpose(-1, -2)                           # sum_s A_ts A_t's
        yp = (AAt * off).sum((-1, -2)) / npair
        out = A @ Q @ A.transpose(-1, -2)
        q_out = torch.diagonal(out, dim1=-2, dim2=-1).mean(-1)
        p_out = (out * off).sum((-1, -2)) / npair
        return torch.stack([q_in, p_in, y2, y3, yp, q_out, p_out, p_out / q_out], dim=-1)

    if chunk is None:
        chunk = max(1, min(n, int(4e6 // (T * T + T * d + d * d))))
    return monte_carlo(sample, n, generator=generator, chunk=chunk, device=device)


ATTENTION_STATS = ("q_in", "p_in", "Y2", "Y3", "Y_p", "q_out", "p_out", "rho_out")


def cross_overlap_rem(beta, *, T, n, q=1.0, p=0.0, generator=None, device=None) -> Estimate:
    r"""``Y_p = sum_s A_ts A_t's`` for two rows of the REM of App. B.1 (Monte Carlo, no ``d``).

    Row energies ``sigma (sqrt(c) b_s + sqrt(1-c) e_ts)`` with ``sigma^2 = beta^2 log T q (q-p)``,
    ``c = p/q`` (the column field ``b_s`` is shared: Eq. 9). Returns an Estimate of
    ``[Y2, Y_p]`` over ``n`` independent pairs of rows. ``p = 0`` gives ``Y_p = 1/T`` in mean.
    """
    check_positive(beta, "beta", allow_zero=True)
    T = check_int(T, "T", minimum=2)
    check_positive(q, "q")
    check_range(p / q, "p/q", 0.0, 1.0 - 1e-12)
    sigma = float(beta) * math.sqrt(math.log(T) * q * (q - p))
    c = p / q

    def sample(m, gen):
        b = torch.randn(m, 1, T, generator=gen, device=gen.device, dtype=torch.float64)
        e = torch.randn(m, 2, T, generator=gen, device=gen.device, dtype=torch.float64)
        A = torch.softmax(sigma * (math.sqrt(c) * b + math.sqrt(1.0 - c) * e), dim=-1)
        return torch.stack([A[:, 0].pow(2).sum(-1), (A[:, 0] * A[:, 1]).sum(-1)], dim=-1)

    chunk = max(1, min(n, int(2e6 // T)))
    return monte_carlo(sample, n, generator=generator, chunk=chunk, device=device)
