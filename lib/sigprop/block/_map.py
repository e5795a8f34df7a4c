r"""The analytic map of the random block: mean token norm ``q`` and overlap ``p`` through one block.

Giorlandino & Goldt 2025, Algorithms 1-3. The random block it describes is ``sigprop.block._network``: the
same :class:`~sigprop.BlockConfig` drives both (``block_map(q, p, config, T=T)``), and
:func:`sigprop.mc_cosine_vs_depth` is its Monte Carlo.

Attention with residual (App. B.2.3, B.6.1, Eqs. (23), (34)), values ``W_V`` of variance
``sigma_v2 / d``:

.. math::  q \leftarrow \sigma_v^2\,(p + (q-p) Y^{(2)}) + \alpha_{SA}^2 q, \qquad
           p \leftarrow \sigma_v^2 p + \alpha_{SA}^2 p,

with ``Y^(2) = max(0, 1 - beta_c(q, p)/beta)`` (Result 1). Gain control (values centred along
the sequence, Algorithm 3) drops the ``p`` carried by the values: ``q <- sigma_v2 (q-p) Y +
alpha^2 q``, ``p <- alpha^2 p``. LayerNorm (Eq. (5)) maps ``(q, p) -> (1, p/q)``.

**Off-the-shelf attention** (not in the documents' Algorithms): a value bias ``b_V`` (variance
``sigma_bv2``) is carried unchanged by every attention row (rows sum to one), so it adds ``sigma_bv2``
to both ``q`` and ``p`` (and nothing with gain control, which removes it); an output projection ``W_O``
(entries ``sigma_o2 / d``) multiplies both by ``sigma_o2`` and its bias adds ``sigma_bo2``:
``q_SA = sigma_o2 (sigma_v2 (p + (q-p) Y2) + sigma_bv2) + sigma_bo2`` and the same with ``Y_p`` for
``p_SA``. Heads do not enter: each head's ``Y2`` has the same mean. Algorithm 1 *as printed* has
``sigma_bv2 = 0``; the authors' code (``theory_update_relu.py`` of their repository) adds ``sigma_b2``
after attention, i.e. ``sigma_bv2 = sigma_b2``, matching the value bias of their networks, which have no
``W_O`` (``sigma_o2 = 1`` here).

MLP ``W_2 phi(W_1 x + b_1) + b_2`` (App. B.6.2, Eqs. (35)-(37), Poole et al. 2016):
``q_1 = sigma_w2 q + sigma_b2``, ``p_1 = sigma_w2 p + sigma_b2``, then
``q_2 = sigma_w2 E[phi(u)^2] + sigma_b2``, ``p_2 = sigma_w2 E[phi(u) phi(v)] + sigma_b2`` for
``(u, v)`` Gaussian with variances ``q_1`` and covariance ``p_1``. ReLU has the closed form
``E = q_1 f(rho_1) / 2`` with ``f(rho) = (sqrt(1-rho^2) + rho (pi - arccos rho)) / pi``
(Cho & Saul 2009); tanh uses 2-D Gauss-Hermite quadrature (tabulated in ``rho`` when few distinct
``q_1`` occur); linear is the identity. Off-the-shelf MLPs: the second layer may have its own
variances (``W_2``: ``sigma_w2_out / d_ff``, ``b_2``: ``sigma_b2_out``; default the first layer's), and
GELU ``phi(u) = u Phi(u)`` has the closed form (:func:`activation_kernel`; variances ``a, b``,
covariance ``c``, ``D = sqrt((1+a)(1+b) - c^2)``)

.. math::  E[\phi(u)\phi(v)] = c\Big(\frac14 + \frac{\arcsin(c/\sqrt{(1+a)(1+b)})}{2\pi}\Big)
           + \frac{ab(1+a)(1+b) + c^2(1-ab)}{2\pi (1+a)(1+b) D},

(two Gaussian integrations by parts with ``Phi(u) = P(g <= u)``); GPT-2's tanh approximation
``gelu_tanh`` is that plus a 64 x 64 Gauss-Hermite correction for the small difference of the two
functions (error ~1e-12 at ``q_1 ~ 1``, ~1e-6 relative at ``q_1 ~ 20``).

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

from scipy.special import ndtr

from ..attention import CrossOverlap, attention_map_kernel
from ._network import Activation, BlockConfig, Norm
from ..stats._validate import (broadcast, check_finite, check_flag, check_int, check_option, check_overlaps, check_positive,
                        check_range, check_seq_len, to_output)

__all__: list[str] = []
__theory__ = ["block_map", "iterate_block_map", "mlp_map", "relu_kernel", "activation_kernel"]

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
    if activation in ("gelu", "gelu_tanh"):
        return _kernel(q1, q1, q1, activation), _kernel(q1, q1, rho * q1, activation)
    return _tanh_moments(q1, rho)


def _gelu_kernel(a, b, c):
    """``E[u Phi(u) v Phi(v)]`` for ``(u, v)`` Gaussian with variances ``a, b`` and covariance ``c`` (closed form)."""
    ab1 = (1.0 + a) * (1.0 + b)
    r = np.clip(c / np.sqrt(ab1), -1.0, 1.0)
    D = np.sqrt(np.maximum(ab1 - c**2, 0.0))
    return c * (0.25 + np.arcsin(r) / (2.0 * np.pi)) + (a * b * ab1 + c**2 * (1.0 - a * b)) / (2.0 * np.pi * ab1 * D)


def _gelu(z):
    return z * ndtr(z)


def _gelu_tanh(z):
    return 0.5 * z * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (z + 0.044715 * z**3)))


_GH64 = np.polynomial.hermite_e.hermegauss(64)


def _pair_nodes(a, b, r, nodes):
    """Gauss-Hermite nodes for ``u = sqrt(a) z1``, ``v = sqrt(b) (r z1 + sqrt(1 - r^2) z2)`` and their weights."""
    x, w = nodes
    w = w / w.sum()
    z1, z2 = x[:, None], x[None, :]
    sa, sb, rr = (np.asarray(t)[..., None, None] for t in (np.sqrt(a), np.sqrt(b), r))
    return sa * z1, sb * (rr * z1 + np.sqrt(1.0 - rr**2) * z2), w[:, None] * w[None, :]


def _kernel_quad(a, b, r, activation):
    """Gauss-Hermite ``E[phi(u) phi(v)]`` (tanh, gelu_tanh) at variances ``a, b`` and correlation ``r`` (arrays)."""
    u, v, w = _pair_nodes(a, b, r, _GH64 if activation == "gelu_tanh" else (_gh_x, _gh_w))
    if activation == "gelu_tanh":  # exact GELU plus the quadrature of the (small, smooth) difference
        du, dv = _gelu_tanh(u) - _gelu(u), _gelu_tanh(v) - _gelu(v)
        return _gelu_kernel(a, b, r * np.sqrt(a * b)) + (w * (_gelu(u) * dv + du * _gelu(v) + du * dv)).sum((-1, -2))
    return (w * np.tanh(u) * np.tanh(v)).sum((-1, -2))


@functools.lru_cache(maxsize=256)
def _kernel_table(a: float, b: float, activation: str):
    """Chebyshev coefficients in ``r`` of :func:`_kernel_quad` at fixed variances, or None (tail too large)."""
    x = np.cos(np.pi * (np.arange(_CHEB_DEG + 1) + 0.5) / (_CHEB_DEG + 1))
    vals = _kernel_quad(np.full(x.shape, a), np.full(x.shape, b), x, activation)
    coef = np.polynomial.chebyshev.chebfit(x, vals, _CHEB_DEG)
    if activation == "tanh":
        coef[0::2] = 0.0  # odd phi: the moment is odd in r (as in _tanh_table)
    if np.abs(coef[-8:]).max() > _CHEB_TAIL * max(1.0, float(np.abs(vals).max())):
        return None
    return coef


def _kernel(a, b, c, activation):
    """``E[phi(u) phi(v)]``, variances ``a, b >= 0``, covariance ``c`` (broadcast float arrays, no validation).

    For tanh and gelu_tanh on many entries with few distinct variance pairs (the Gram map of LayerNorm'd
    tokens: one pair), the quadrature is tabulated in the correlation once per pair (Chebyshev, as for the
    ``(q, p)`` map's tanh table; ``tests/test_block_map.py`` compares it with the quadrature).
    """
    a, b, c = np.broadcast_arrays(*(np.asarray(t, dtype=float) for t in (a, b, c)))
    if activation == "linear":
        return c.copy()
    ab = np.sqrt(a * b)
    r = np.clip(np.divide(c, ab, out=np.zeros(ab.shape), where=ab > 0), -_RHO_CLIP, _RHO_CLIP)
    if activation == "relu":
        return ab * ((np.sqrt(1.0 - r**2) + r * (np.pi - np.arccos(r))) / np.pi) / 2.0
    if activation == "gelu":
        return _gelu_kernel(a, b, r * ab)
    if r.size >= 4 * _CHEB_DEG:
        pairs, inverse = np.unique(np.stack([a.ravel(), b.ravel()], 1), axis=0, return_inverse=True)
        tables = [_kernel_table(float(x), float(y), activation) for x, y in pairs] if len(pairs) <= 16 else [None]
        if all(t is not None for t in tables):
            out = np.empty(r.size)
            inverse = inverse.ravel()
            for k, coef in enumerate(tables):
                sel = inverse == k
                out[sel] = np.polynomial.chebyshev.chebval(r.ravel()[sel], coef)
            return out.reshape(r.shape)
    return _kernel_quad(a, b, r, activation)


def activation_kernel(q_a, q_b, c, *, activation="relu"):
    r"""``E[phi(u) phi(v)]`` for ``(u, v)`` Gaussian with variances ``q_a, q_b`` and covariance ``c``.

    The Gaussian moment of an MLP's activation (Poole et al. 2016; Giorlandino & Goldt 2025, Eqs. (35)-(37)):
    ``q_a = q_b = c`` gives ``E phi(u)^2``. ReLU: ``sqrt(q_a q_b) f(rho) / 2`` (:func:`relu_kernel`);
    GELU ``u Phi(u)`` (``"gelu"``): the closed form of the module docstring; ``"gelu_tanh"`` (GPT-2's
    ``gelu_new``): GELU plus a quadrature correction; tanh: 48 x 48 Gauss-Hermite; linear: ``c``.
    Broadcasts; ``|c| <= sqrt(q_a q_b)``. Used by :func:`sigprop.theory.iterate_gram_map` for tokens of
    different norms.
    """
    a = check_positive(q_a, "q_a", allow_zero=True)
    b = check_positive(q_b, "q_b", allow_zero=True)
    cc = check_finite(c, "c")
    act = check_option(activation, Activation, "activation").value
    a, b, cc = broadcast(q_a=a, q_b=b, c=cc)
    bound = np.sqrt(a * b)
    if np.any(np.abs(cc) > bound * (1 + 1e-12) + 1e-300):
        raise ValueError("c must satisfy |c| <= sqrt(q_a q_b) (a covariance)")
    return to_output(_kernel(a, b, cc, act), q_a, q_b, c)


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


def _mlp(q, p, sigma_w2, sigma_b2, activation, sigma_w2_out=None, sigma_b2_out=None):
    w2 = sigma_w2 if sigma_w2_out is None else sigma_w2_out
    b2 = sigma_b2 if sigma_b2_out is None else sigma_b2_out
    q1, p1 = sigma_w2 * q + sigma_b2, sigma_w2 * p + sigma_b2
    e_qq, e_pq = _phi_moments(q1, p1, activation)
    return w2 * e_qq + b2, w2 * e_pq + b2


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


_REALS = ("alpha_sa", "alpha_mlp", "sigma_w2", "sigma_b2", "sigma_v2", "branch_sa", "branch_mlp", "sigma_o2",
          "sigma_bv2", "sigma_bo2", "sigma_w2_out", "sigma_b2_out")
_DEFAULTS = dict(alpha_sa=1.0, alpha_mlp=1.0, sigma_w2=2.0, sigma_b2=0.0, sigma_v2=1.0, branch_sa=1.0, branch_mlp=1.0,
                 norm="post", gain_control=False, activation="relu", mlp=True, cross_overlap="rem", sigma_o2=1.0,
                 sigma_bv2=0.0, sigma_bo2=0.0, sigma_w2_out=None, sigma_b2_out=None)


def _parameters(config, T, params):
    """Validated map parameters from a :class:`BlockConfig` (at length ``T``) or from keywords."""
    if config is not None:
        if not isinstance(config, BlockConfig):
            raise TypeError(f"config must be a BlockConfig or None; got {type(config).__name__}")
        if config.causal:
            raise ValueError("the (q, p) block map describes unmasked attention; for a causal config use "
                             "sp.theory.iterate_gram_map, or dataclasses.replace(config, causal=False) to ignore the mask")
        cross = params.pop("cross_overlap", "rem")
        if params:
            raise TypeError(f"give a BlockConfig or keyword parameters, not both; got also {sorted(params)}")
        if T is None:
            raise ValueError("a BlockConfig's query/key variance is a beta only at a sequence length: pass T")
        params = dict(config.map_params(T), cross_overlap=cross)
    unknown = set(params) - set(_DEFAULTS) - {"beta"}
    if unknown:
        raise TypeError(f"unexpected keyword arguments {sorted(unknown)}; allowed: beta, {', '.join(_DEFAULTS)}")
    if "beta" not in params:
        raise TypeError("the block map needs beta= (or a BlockConfig and T)")
    vals = {**_DEFAULTS, **params}
    for name, first in (("sigma_w2_out", "sigma_w2"), ("sigma_b2_out", "sigma_b2")):  # unset: as the first layer
        if vals[name] is None:
            vals[name] = vals[first]
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
        qa, pa = attention_map_kernel(qq, pp, P["beta"], P["sigma_v2"], P["gain_control"], T, cross=P["cross_overlap"])
        bv = 0.0 if P["gain_control"] else P["sigma_bv2"]  # gain control removes the value bias
        return P["sigma_o2"] * (qa + bv) + P["sigma_bo2"], P["sigma_o2"] * (pa + bv) + P["sigma_bo2"]

    def mlp(qq, pp):
        return _mlp(qq, pp, P["sigma_w2"], P["sigma_b2"], P["activation"], P["sigma_w2_out"], P["sigma_b2_out"])

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
        raise ValueError(f"block map at block {layer}: {why} (q = {float(np.asarray(q)[bad].flat[0]):.3g}); "
                            f"use fewer blocks, norm='post' or 'pre', or smaller skip strengths")
    return q, p


def _setup(q, p, config, T, limit, params):
    P = _parameters(config, T, params)
    if limit is None:
        limit = T is None
    Tm = None if check_flag(limit, "limit") else check_seq_len(T)
    qa, pa = check_overlaps(q, p, strict=False)
    reals = ["beta", *_REALS]
    arrays = broadcast(q=qa, p=pa, **{k: P[k] for k in reals}, **({} if Tm is None else {"T": Tm}))
    P.update({k: a.astype(float) for k, a in zip(reals, arrays[2:])})
    return arrays[0].astype(float), arrays[1].astype(float), P, Tm


def block_map(q, p, config=None, *, T=None, limit=None, **params):
    """One transformer block's map ``(q, p) -> (q', p')``.

    Giorlandino & Goldt 2025, Algorithms 1 (``norm="post"``), 2 (``"pre"``) and 3 (``gain_control=True``);
    ``norm="none"`` omits LN; ``branch_sa``, ``branch_mlp`` weight the residual branches as in Noci et al.
    2022, Eq. (2); ``mlp=False`` drops the MLP sub-layer. Either a :class:`~sigprop.BlockConfig` and the
    sequence length ``T`` (the map of exactly the random block that config samples), or keywords
    ``beta, alpha_sa=1, alpha_mlp=1, sigma_w2=2, sigma_b2=0, sigma_v2=1, branch_sa=1, branch_mlp=1,
    norm="post", gain_control=False, activation="relu", mlp=True`` and the off-the-shelf pieces
    ``sigma_o2=1`` (``W_O``; 1 = none), ``sigma_bv2=0``, ``sigma_bo2=0``, ``sigma_w2_out=sigma_w2``,
    ``sigma_b2_out=sigma_b2`` (module docstring), all broadcasting (numpy arrays or scalars; torch tensors
    come back as float64 tensors).

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


def mlp_map(q, p, *, sigma_w2=2.0, sigma_b2=0.0, activation="relu", sigma_w2_out=None, sigma_b2_out=None):
    """Two-layer MLP map ``(q, p) -> (q_2, p_2)`` (App. B.6.2, Eqs. (35)-(37)); the second layer's variances
    ``sigma_w2_out``, ``sigma_b2_out`` default to the first's (the documents' MLP)."""
    qa, pa = check_overlaps(q, p, strict=False)
    w = check_positive(sigma_w2, "sigma_w2", allow_zero=True)
    bb = check_positive(sigma_b2, "sigma_b2", allow_zero=True)
    w2 = w if sigma_w2_out is None else check_positive(sigma_w2_out, "sigma_w2_out", allow_zero=True)
    b2 = bb if sigma_b2_out is None else check_positive(sigma_b2_out, "sigma_b2_out", allow_zero=True)
    activation = check_option(activation, Activation, "activation").value
    qa, pa, w, bb, w2, b2 = np.broadcast_arrays(qa.astype(float), pa.astype(float), w, bb, w2, b2)
    qn, pn = _mlp(qa, pa, w, bb, activation, w2, b2)
    return to_output(qn, q, p), to_output(pn, q, p)
