r"""The analytic map of the random block: mean token norm ``q`` and overlap ``p`` through one block.

Giorlandino & Goldt 2025, Algorithms 1-3. The random block it describes is ``sigprop._block``: the
same :class:`~sigprop.BlockConfig` drives both (``block_map(q, p, config, T=T)``), and
:func:`sigprop.mc_cosine_vs_depth` is its Monte Carlo.

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
``norm="post"|"pre"`` with ``gain_control=False|True``; ``norm="none"`` applies no LN; branch weights
(Noci et al. 2022, Eq. (2)) multiply a branch's ``(q, p)`` contribution by ``branch^2``.

**Finite T.** With ``T`` given, each attention layer uses the exact finite-``T`` ``E Y^(2)`` of its
input (the REM quadrature) and ``Y_p = 1/T`` instead of the T -> infinity values (see
:func:`sigprop.theory.attention_map`); the MLP, residuals and LN are the same.
Algorithms 2 and 3 as printed write ``q_1 = sigma_w2 q / 2 + sigma_b2``; the factor 1/2 is a
typo (see the errata page): the MLP's first layer is linear, as in Algorithm 1.
"""
from __future__ import annotations

import functools

import numpy as np

from ._attention import CrossOverlap, _attention_map
from ._block import Activation, BlockConfig, Norm
from ._validate import (check_flag, check_int, check_option, check_overlaps, check_positive, check_range,
                        check_seq_len, to_output)

__all__: list[str] = []
__theory__ = ["block_map", "iterate_block_map", "mlp_map", "relu_kernel"]

#: Cosines are clipped to [-1, 1] before arccos: rounding can push p/q a few ulp past 1.
_RHO_CLIP = 1.0

_GH_NODES = 48
_gh_x, _gh_w = np.polynomial.hermite_e.hermegauss(_GH_NODES)
_gh_w = _gh_w / _gh_w.sum()


def relu_kernel(rho):
    """``f(rho) = (sqrt(1 - rho^2) + rho (pi - arccos rho)) / pi``, so E[relu(u) relu(v)] = q f(rho)/2.

    Cho & Saul 2009; Giorlandino & Goldt 2025, App. B.6.2. ``f(1) = 1``, ``f(0) = 1/pi``.
    """
    r = check_range(rho, "rho (a cosine)", -1.0 - 1e-12, 1.0 + 1e-12)
    r = np.clip(r, -_RHO_CLIP, _RHO_CLIP)  # rounding can push a cosine a few ulp past 1
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


def _block_with(q, p, attention, mlp, a2, m2, ba2, bm2, norm):
    """One block given its attention and MLP maps ``(q, p) -> (q', p')``: residuals and LN.

    ``mlp=None`` omits the MLP sub-layer (``BlockConfig(mlp=False)``).
    """
    if norm == "pre":
        qa, pa = attention(np.ones_like(q), p / q)
        q, p = ba2 * qa + a2 * q, ba2 * pa + a2 * p
        if mlp is not None:
            qm, pm = mlp(np.ones_like(q), p / q)
            q, p = bm2 * qm + m2 * q, bm2 * pm + m2 * p
        return q, p
    qa, pa = attention(q, p)
    q, p = ba2 * qa + a2 * q, ba2 * pa + a2 * p
    if norm == "post":
        q, p = np.ones_like(q), p / q
    if mlp is not None:
        qm, pm = mlp(q, p)
        q, p = bm2 * qm + m2 * q, bm2 * pm + m2 * p
        if norm == "post":
            q, p = np.ones_like(q), p / q
    return q, p


_REALS = ("alpha_sa", "alpha_mlp", "sigma_w2", "sigma_b2", "sigma_v2", "branch_sa", "branch_mlp")
_DEFAULTS = dict(alpha_sa=1.0, alpha_mlp=1.0, sigma_w2=2.0, sigma_b2=0.0, sigma_v2=1.0, branch_sa=1.0, branch_mlp=1.0,
                 norm="post", gain_control=False, activation="relu", mlp=True, cross_overlap="rem")


def _parameters(config, T, params):
    """Validated map parameters from a :class:`BlockConfig` (at length ``T``) or from keywords."""
    if config is not None:
        if not isinstance(config, BlockConfig):
            raise TypeError(f"config must be a BlockConfig or None; got {type(config).__name__}")
        cross = params.pop("cross_overlap", "rem")
        if params:
            raise TypeError(f"give a BlockConfig or keyword parameters, not both; got also {sorted(params)}")
        params = dict(config.map_params(T), cross_overlap=cross)
        if T is None:
            raise ValueError("a BlockConfig's query/key variance is a beta only at a sequence length: pass T")
    unknown = set(params) - set(_DEFAULTS) - {"beta"}
    if unknown:
        raise TypeError(f"unexpected keyword arguments {sorted(unknown)}; allowed: beta, {', '.join(_DEFAULTS)}")
    if "beta" not in params:
        raise TypeError("the block map needs beta= (or a BlockConfig and T)")
    vals = {**_DEFAULTS, **params}
    out = {"beta": check_positive(vals["beta"], "beta", allow_zero=True)}
    out.update({name: check_positive(vals[name], name, allow_zero=True) for name in _REALS})
    out["norm"] = check_option(vals["norm"], Norm, "norm").value
    out["activation"] = check_option(vals["activation"], Activation, "activation").value
    out["gain_control"] = check_flag(vals["gain_control"], "gain_control")
    out["mlp"] = check_flag(vals["mlp"], "mlp")
    out["cross_overlap"] = check_option(vals["cross_overlap"], CrossOverlap, "cross_overlap")
    return out


def _one_block(q, p, P, T):
    """One block on broadcast float arrays, parameters ``P`` from :func:`_parameters`."""
    def attention(qq, pp):
        return _attention_map(qq, pp, P["beta"], P["sigma_v2"], P["gain_control"], T, cross=P["cross_overlap"])

    def mlp(qq, pp):
        return _mlp(qq, pp, P["sigma_w2"], P["sigma_b2"], P["activation"])

    return _block_with(q, p, attention, mlp if P["mlp"] else None, P["alpha_sa"] ** 2, P["alpha_mlp"] ** 2,
                       P["branch_sa"] ** 2, P["branch_mlp"] ** 2, P["norm"])


def _checked(qp, layer, norm):
    """The block's output, or a clear error where float64 overflowed (no LayerNorm: q grows geometrically)."""
    q, p = qp
    with np.errstate(invalid="ignore"):
        bad = ~(np.isfinite(q) & np.isfinite(p) & (q > 0))
    if np.any(bad):
        why = ("without LayerNorm the token norm q changes by a roughly constant factor per block and left the "
               "float64 range" if norm == "none" else "the map left the float64 range")
        raise OverflowError(f"block map at block {layer}: {why} (q = {float(np.asarray(q)[bad].flat[0]):.3g}); "
                            f"use fewer blocks, norm='post' or 'pre', or smaller skip strengths")
    return q, p


def _setup(q, p, config, T, limit, params):
    P = _parameters(config, T, params)
    if limit is None:
        limit = T is None
    Tm = None if check_flag(limit, "limit") else check_seq_len(T)
    qa, pa = check_overlaps(q, p, strict=False)
    reals = ["beta", *_REALS]
    arrays = np.broadcast_arrays(qa, pa, *(P[k] for k in reals))
    P.update({k: a.astype(float) for k, a in zip(reals, arrays[2:])})
    return arrays[0].astype(float), arrays[1].astype(float), P, Tm


def block_map(q, p, config=None, *, T=None, limit=None, **params):
    """One transformer block's map ``(q, p) -> (q', p')``.

    Giorlandino & Goldt 2025, Algorithms 1 (``norm="post"``), 2 (``"pre"``) and 3 (``gain_control=True``);
    ``norm="none"`` omits LN; ``branch_sa``, ``branch_mlp`` weight the residual branches as in Noci et al.
    2022, Eq. (2); ``mlp=False`` drops the MLP sub-layer. Either a :class:`~sigprop.BlockConfig` and the
    sequence length ``T`` (the map of exactly the random block that config samples), or keywords
    ``beta, alpha_sa=1, alpha_mlp=1, sigma_w2=2, sigma_b2=0, sigma_v2=1, branch_sa=1, branch_mlp=1,
    norm="post", gain_control=False, activation="relu", mlp=True``, all broadcasting (numpy arrays or
    scalars; torch tensors come back as float64 tensors).

    ``T=None`` (keywords only) or ``limit=True``: the T -> infinity map printed in the paper. ``T`` given:
    the finite-``T`` map: exact ``E Y^(2)`` and, with ``cross_overlap="rem"`` (default), the exact ``Y_p`` of
    two correlated REM rows (``"1/T"``: independent rows; see :func:`sigprop.theory.attention_map`); two
    quadratures per point and layer (~1-200 ms). The average cosine is ``p'/q'`` (post-LN returns ``q' = 1``).
    """
    qa, pa, P, Tm = _setup(q, p, config, T, limit, params)
    qn, pn = _one_block(qa, pa, P, Tm)
    like = (q, p, params.get("beta"))
    return to_output(qn, *like), to_output(pn, *like)


def iterate_block_map(q0, p0, depth, config=None, *, T=None, limit=None, **params):
    """Iterate :func:`block_map` ``depth`` times; returns ``(q, p)`` of shape ``(depth + 1, *broadcast)``.

    Row 0 is the input. Arguments as in :func:`block_map`, all broadcasting, so a whole
    ``(beta, alpha_sa)`` grid iterates at once (the trainability diagram).
    """
    depth = check_int(depth, "depth", minimum=0)
    qa, pa, P, Tm = _setup(q0, p0, config, T, limit, params)
    qs, ps = [qa], [pa]
    for layer in range(1, depth + 1):
        qa, pa = _checked(_one_block(qa, pa, P, Tm), layer, P["norm"])
        qs.append(qa)
        ps.append(pa)
    like = (q0, p0, params.get("beta"))
    return to_output(np.stack(qs), *like), to_output(np.stack(ps), *like)


def mlp_map(q, p, *, sigma_w2=2.0, sigma_b2=0.0, activation="relu"):
    """Two-layer MLP map ``(q, p) -> (q_2, p_2)`` (App. B.6.2, Eqs. (35)-(37))."""
    qa, pa = check_overlaps(q, p, strict=False)
    w = check_positive(sigma_w2, "sigma_w2", allow_zero=True)
    bb = check_positive(sigma_b2, "sigma_b2", allow_zero=True)
    activation = check_option(activation, Activation, "activation").value
    qa, pa, w, bb = np.broadcast_arrays(qa.astype(float), pa.astype(float), w, bb)
    qn, pn = _mlp(qa, pa, w, bb, activation)
    return to_output(qn, q, p), to_output(pn, q, p)
