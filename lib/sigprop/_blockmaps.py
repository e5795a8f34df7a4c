r"""Transformer block maps of the mean token norm ``q`` and overlap ``p`` (Giorlandino & Goldt 2025).

Attention with residual (App. B.2.3, B.6.1, Eqs. (23), (34)), values ``W_V`` of variance
``sigma_v2 / d``:

.. math::  q \leftarrow \sigma_v^2\,(p + (q-p) Y^{(2)}) + \alpha_{SA}^2 q, \qquad
           p \leftarrow \sigma_v^2 p + \alpha_{SA}^2 p,

with ``Y^(2) = max(0, 1 - beta_c(q, p)/beta)`` (Result 1). Gain control (values centred along
the sequence, Algorithm 3) drops the ``p`` carried by the values: ``q <- sigma_v2 (q-p) Y +
alpha^2 q``, ``p <- alpha^2 p``. LayerNorm (Eq. (5)) maps ``(q, p) -> (1, p/q)``.

MLP ``W_2 phi(W_1 x + b_1) + b_2`` (App. B.6.2, Eqs. (35)-(37), Poole et al. 2016):
``q_1 = sigma_w2 q + sigma_b2``, ``p_1 = sigma_w2 p + sigma_b2``, then
``q_2 = sigma_w2 E[phi(u)^2] + sigma_b2``, ``p_2 = sigma_w2 E[phi(u) phi(v)] + sigma_b2`` for
``(u, v)`` Gaussian with variances ``q_1`` and covariance ``p_1``. ReLU has the closed form
``E = q_1 f(rho_1) / 2`` with ``f(rho) = (sqrt(1-rho^2) + rho (pi - arccos rho)) / pi``
(Cho & Saul 2009); tanh uses 2-D Gauss-Hermite quadrature (tabulated in ``rho`` when few distinct
``q_1`` occur); linear is the identity.

Algorithm 1 (post-LN), Algorithm 2 (pre-LN) and Algorithm 3 (gain control, post-LN) are
``norm="post"|"pre"`` with ``gain_control=False|True``; ``norm="none"`` applies no LN.
Algorithms 2 and 3 as printed write ``q_1 = sigma_w2 q / 2 + sigma_b2``; the factor 1/2 is a
typo (see the errata page): the MLP's first layer is linear, as in Algorithm 1.
"""
from __future__ import annotations

import functools

import numpy as np

from ._rem import _ipr_limit
from ._validate import check_int, check_option, check_overlaps, check_positive, to_output
from ._blocks import Activation, Norm

__all__: list[str] = []
__theory__ = ["block_map", "iterate_block_map", "attention_map", "mlp_map", "relu_kernel"]

#: Cosines are clipped to [-1, 1] before arccos: rounding can push p/q a few ulp past 1.
_RHO_CLIP = 1.0

_GH_NODES = 48
_gh_x, _gh_w = np.polynomial.hermite_e.hermegauss(_GH_NODES)
_gh_w = _gh_w / _gh_w.sum()


def relu_kernel(rho):
    """``f(rho) = (sqrt(1 - rho^2) + rho (pi - arccos rho)) / pi``, so E[relu(u) relu(v)] = q f(rho)/2.

    Cho & Saul 2009; Giorlandino & Goldt 2025, App. B.6.2. ``f(1) = 1``, ``f(0) = 1/pi``.
    """
    r = np.clip(np.asarray(rho, dtype=float), -_RHO_CLIP, _RHO_CLIP)
    return to_output((np.sqrt(1.0 - r**2) + r * (np.pi - np.arccos(r))) / np.pi, rho)


def _phi_moments(q1, p1, activation):
    """(E[phi(u)^2], E[phi(u) phi(v)]) for u, v ~ N(0, q1) with covariance p1."""
    if activation == "linear":
        return q1, p1
    # q1 = 0 (sigma_w2 = sigma_b2 = 0, or zero tokens): u = v = 0 and both moments vanish; take rho = 0
    # there instead of 0/0 = NaN (issue 9, tests/test_properties.py)
    q1, p1 = np.broadcast_arrays(np.asarray(q1, dtype=float), np.asarray(p1, dtype=float))
    rho = np.clip(np.divide(p1, q1, out=np.zeros(q1.shape), where=q1 > 0), -_RHO_CLIP, _RHO_CLIP)
    if activation == "relu":
        return q1 / 2.0, q1 * ((np.sqrt(1.0 - rho**2) + rho * (np.pi - np.arccos(rho))) / np.pi) / 2.0
    return _tanh_moments(q1, rho)


def _tanh_quadrature(q1, rho):
    """48 x 48 Gauss-Hermite rule: u = sqrt(q1) z1, v = sqrt(q1) (rho z1 + sqrt(1 - rho^2) z2)."""
    sq = np.sqrt(q1)[..., None, None]
    r = rho[..., None, None]
    z1, z2 = _gh_x[:, None], _gh_x[None, :]
    w = _gh_w[:, None] * _gh_w[None, :]
    u = np.tanh(sq * z1)
    v = np.tanh(sq * (r * z1 + np.sqrt(1.0 - r**2) * z2))
    return (w * u * u).sum((-1, -2)), (w * u * v).sum((-1, -2))


#: Chebyshev degree of the tanh cross-moment table in rho, and the largest tail coefficient accepted
#: (beyond it, e.g. for q1 >~ 15 where tanh is almost a step, the quadrature is used point by point).
_CHEB_DEG, _CHEB_TAIL = 128, 1e-11


@functools.lru_cache(maxsize=256)
def _tanh_table(q1: float):
    """``(E[tanh(u)^2], Chebyshev coefficients in rho of E[tanh u tanh v])`` at fixed ``q1``, or None."""
    x = np.cos(np.pi * (np.arange(_CHEB_DEG + 1) + 0.5) / (_CHEB_DEG + 1))
    e_qq, cross = _tanh_quadrature(np.full(x.shape, q1), x)
    coef = np.polynomial.chebyshev.chebfit(x, cross, _CHEB_DEG)
    # tanh is odd, so the cross moment is odd in rho: drop the (round-off) even terms. Then rho = 0 maps
    # to exactly 0, as in the quadrature; without this a 1e-15 seed grows into an unphysical p < 0, q < 0.
    coef[0::2] = 0.0
    if np.abs(coef[-8:]).max() > _CHEB_TAIL:
        return None
    return float(e_qq[0]), coef


def _tanh_moments(q1, rho):
    """tanh moments; when few distinct ``q1`` occur (LayerNorm'd inputs: one per ``sigma_w2, sigma_b2``),
    each is tabulated once in ``rho`` (Chebyshev, error ~1e-13 against the quadrature, tested), which
    makes a 100 x 100 x 60 tanh trainability diagram as fast as a ReLU one."""
    values, inverse = np.unique(q1, return_inverse=True)
    if q1.size < 4 * _CHEB_DEG or values.size > 16:
        return _tanh_quadrature(q1, rho)
    tables = [_tanh_table(float(v)) for v in values]
    if any(t is None for t in tables):
        return _tanh_quadrature(q1, rho)
    inverse = inverse.reshape(q1.shape)
    e_qq, cross = np.empty(q1.shape), np.empty(q1.shape)
    for k, (sq_moment, coef) in enumerate(tables):
        sel = inverse == k
        e_qq[sel] = sq_moment
        cross[sel] = np.polynomial.chebyshev.chebval(rho[sel], coef)
    return e_qq, cross


def _mlp(q, p, sigma_w2, sigma_b2, activation):
    q1, p1 = sigma_w2 * q + sigma_b2, sigma_w2 * p + sigma_b2
    e_qq, e_pq = _phi_moments(q1, p1, activation)
    return sigma_w2 * e_qq + sigma_b2, sigma_w2 * e_pq + sigma_b2


def _attention(q, p, beta, sigma_v2, gain_control):
    y = _ipr_limit(beta, q, p, 2.0)
    if gain_control:
        return sigma_v2 * (q - p) * y, np.zeros_like(p)
    return sigma_v2 * (p + (q - p) * y), sigma_v2 * p


def _block_with(q, p, attention, mlp, a2, m2, ba2, bm2, norm):
    """One block given its attention and MLP maps ``(q, p) -> (q', p')``: residuals and LN.

    Shared by the T -> infinity map below and the finite-T map of ``_rem_corrections``.
    """
    if norm == "pre":
        qa, pa = attention(np.ones_like(q), p / q)
        q, p = ba2 * qa + a2 * q, ba2 * pa + a2 * p
        qm, pm = mlp(np.ones_like(q), p / q)
        return bm2 * qm + m2 * q, bm2 * pm + m2 * p
    qa, pa = attention(q, p)
    q, p = ba2 * qa + a2 * q, ba2 * pa + a2 * p
    if norm == "post":
        q, p = np.ones_like(q), p / q
    qm, pm = mlp(q, p)
    q, p = bm2 * qm + m2 * q, bm2 * pm + m2 * p
    if norm == "post":
        q, p = np.ones_like(q), p / q
    return q, p


def _block(q, p, beta, alpha_sa, alpha_mlp, sigma_w2, sigma_b2, sigma_v2, branch_sa, branch_mlp, norm,
           gain_control, activation):
    return _block_with(q, p, lambda qq, pp: _attention(qq, pp, beta, sigma_v2, gain_control),
                       lambda qq, pp: _mlp(qq, pp, sigma_w2, sigma_b2, activation),
                       alpha_sa**2, alpha_mlp**2, branch_sa**2, branch_mlp**2, norm)


def _prepare(q, p, beta, alpha_sa, alpha_mlp, sigma_w2, sigma_b2, sigma_v2, branch_sa, branch_mlp, norm, activation):
    qa, pa = check_overlaps(q, p, strict=False)
    args = [check_positive(beta, "beta")]
    for name, v in (("alpha_sa", alpha_sa), ("alpha_mlp", alpha_mlp), ("sigma_w2", sigma_w2),
                    ("sigma_b2", sigma_b2), ("sigma_v2", sigma_v2), ("branch_sa", branch_sa),
                    ("branch_mlp", branch_mlp)):
        args.append(check_positive(v, name, allow_zero=True))
    norm = check_option(norm, Norm, "norm").value
    activation = check_option(activation, Activation, "activation").value
    arrays = np.broadcast_arrays(qa, pa, *args)
    return [a.astype(float) for a in arrays], norm, activation


def block_map(q, p, *, beta, alpha_sa=1.0, alpha_mlp=1.0, sigma_w2=2.0, sigma_b2=0.0, sigma_v2=1.0,
              norm="post", gain_control=False, activation="relu", branch_sa=1.0, branch_mlp=1.0):
    """One transformer block's map ``(q, p) -> (q', p')`` at T -> infinity.

    Giorlandino & Goldt 2025, Algorithms 1 (``norm="post"``), 2 (``"pre"``) and 3
    (``gain_control=True``); ``norm="none"`` omits LN. ``branch_sa``, ``branch_mlp`` weight the
    residual branches as in Noci et al. 2022, Eq. (2) (``alpha_sa x + branch_sa SA(x)``; the
    branch's ``(q, p)`` contribution is multiplied by ``branch^2``). Every argument broadcasts
    (numpy arrays or scalars; torch tensors come back as float64 tensors). The average cosine
    is ``p'/q'`` (post-LN returns ``q' = 1``).
    """
    (qa, pa, b, a1, a2, w2, b2, v2, bs, bm), norm, activation = _prepare(
        q, p, beta, alpha_sa, alpha_mlp, sigma_w2, sigma_b2, sigma_v2, branch_sa, branch_mlp, norm, activation)
    qn, pn = _block(qa, pa, b, a1, a2, w2, b2, v2, bs, bm, norm, bool(gain_control), activation)
    return to_output(qn, q, p, beta), to_output(pn, q, p, beta)


def iterate_block_map(q0, p0, depth, **kwargs):
    """Iterate :func:`block_map` ``depth`` times; returns ``(q, p)`` of shape ``(depth + 1, *broadcast)``.

    Row 0 is the input. Keyword arguments as in :func:`block_map`, all broadcasting, so a whole
    ``(beta, alpha_sa)`` grid iterates at once (the trainability diagram).
    """
    depth = check_int(depth, "depth", minimum=0)
    names = ("beta", "alpha_sa", "alpha_mlp", "sigma_w2", "sigma_b2", "sigma_v2", "branch_sa", "branch_mlp")
    defaults = dict(alpha_sa=1.0, alpha_mlp=1.0, sigma_w2=2.0, sigma_b2=0.0, sigma_v2=1.0, branch_sa=1.0,
                    branch_mlp=1.0)
    unknown = set(kwargs) - set(names) - {"norm", "gain_control", "activation"}
    if unknown:
        raise TypeError(f"unexpected keyword arguments {sorted(unknown)}")
    if "beta" not in kwargs:
        raise TypeError("iterate_block_map needs beta=")
    vals = {**defaults, **kwargs}
    (qa, pa, *rest), norm, activation = _prepare(q0, p0, *(vals[n] for n in names),
                                                 vals.get("norm", "post"), vals.get("activation", "relu"))
    gain = bool(vals.get("gain_control", False))
    qs, ps = [qa], [pa]
    for _ in range(depth):
        qa, pa = _block(qa, pa, *rest, norm, gain, activation)
        qs.append(qa)
        ps.append(pa)
    like = (q0, p0, kwargs["beta"])
    return to_output(np.stack(qs), *like), to_output(np.stack(ps), *like)


def attention_map(q, p, *, beta, sigma_v2=1.0, gain_control=False):
    """Attention layer alone (no residual, no LN): ``(q, p) -> (sigma_v2 (p + (q-p) Y), sigma_v2 p)``.

    Giorlandino & Goldt 2025, Eq. (23) (``sigma_v2 = 1``), Algorithm 3 with ``gain_control``.
    """
    qa, pa = check_overlaps(q, p, strict=False)
    b = check_positive(beta, "beta")
    v = check_positive(sigma_v2, "sigma_v2", allow_zero=True)
    qn, pn = _attention(*np.broadcast_arrays(qa.astype(float), pa.astype(float), b, v)[:2], b, v, bool(gain_control))
    return to_output(qn, q, p, beta), to_output(np.broadcast_to(pn, np.shape(qn)), q, p, beta)


def mlp_map(q, p, *, sigma_w2=2.0, sigma_b2=0.0, activation="relu"):
    """Two-layer MLP map ``(q, p) -> (q_2, p_2)`` (App. B.6.2, Eqs. (35)-(37))."""
    qa, pa = check_overlaps(q, p, strict=False)
    w = check_positive(sigma_w2, "sigma_w2", allow_zero=True)
    bb = check_positive(sigma_b2, "sigma_b2", allow_zero=True)
    activation = check_option(activation, Activation, "activation").value
    qa, pa, w, bb = np.broadcast_arrays(qa.astype(float), pa.astype(float), w, bb)
    qn, pn = _mlp(qa, pa, w, bb, activation)
    return to_output(qn, q, p), to_output(pn, q, p)
