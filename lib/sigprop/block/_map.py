r"""The analytic map of the random block: mean token norm ``q`` and overlap ``p`` through one block.

Giorlandino & Goldt 2025, Algorithms 1-3. The random block it describes is ``sigprop.block._network``: the
same :class:`~sigprop.BlockConfig` drives both (``block_map(q, p, config, T=T)``), both are compositions of
the components of ``sigprop.block._components`` and ``_attention`` (each with its forward and its map), and
:func:`sigprop.mc_cosine_vs_depth` is the Monte Carlo.

Attention with residual (App. B.2.3, B.6.1, Eqs. (23), (34)), values ``W_V`` of variance ``sigma_v2 / d``:

.. math::  q \leftarrow \sigma_v^2\,(p + (q-p) Y^{(2)}) + \alpha_{SA}^2 q, \qquad
           p \leftarrow \sigma_v^2 p + \alpha_{SA}^2 p,

with ``Y^(2) = max(0, 1 - beta_c(q, p)/beta)`` (Result 1). Gain control (values centred along the sequence,
Algorithm 3) drops the ``p`` carried by the values. LayerNorm (Eq. (5)) maps ``(q, p) -> (1, p/q)``, RMS or
centred alike (``_components``). Off-the-shelf attention (``W_O``, value/output biases, query/key biases,
grouped-query heads): ``sigprop.block._attention``. Algorithm 1 *as printed* has ``sigma_bv2 = 0``; the
authors' code (``theory_update_relu.py``) adds ``sigma_b2`` after attention, i.e. ``sigma_bv2 = sigma_b2``.

MLP ``W_2 phi(W_1 x + b_1) + b_2`` (App. B.6.2, Eqs. (35)-(37), Poole et al. 2016): ``q_1 = sigma_w2 q +
sigma_b2``, ``p_1 = sigma_w2 p + sigma_b2``, then ``q_2 = sigma_w2_out K(q_1, q_1, q_1) + sigma_b2_out``,
``p_2 = sigma_w2_out K(q_1, q_1, p_1) + sigma_b2_out`` with the activation's Gaussian kernel ``K``
(:func:`activation_kernel`; gated units: ``c K``). Algorithms 2 and 3 as printed write ``q_1 = sigma_w2 q / 2
+ sigma_b2``; the factor 1/2 is a typo (errata page). Layouts (post, pre, none, parallel) and branch weights
(Noci et al. 2022, Eq. (2)) are ``_components.compose``.

**Domain.** ``q > 0`` and ``|p| <= q``. ``T`` equicorrelated tokens have the Gram matrix ``q((1 - rho) I +
rho 1 1^T)``, positive semi-definite only for ``rho >= -1/(T-1)``: the finite-``T`` map accepts ``p >=
-q/(T-1)``, and the T -> infinity map of the paper ``p >= 0`` (its spread phase sends every token to the mean
token, of squared norm ``p + (q - p)/T -> p``, which would be negative; issue 26).

**Finite T.** With ``T`` given, each attention layer uses the exact finite-``T`` ``E Y^(2)`` and, with
``cross_overlap="rem"``, the exact ``Y_p`` of two correlated REM rows (:func:`sigprop.theory.attention_map`).
RoPE (``positions="rope"``) has no ``(q, p)`` map: these maps refuse it; :func:`sigprop.theory.iterate_gram_map`
handles it (``sigprop.block._attention``).
"""
from __future__ import annotations

import types
from typing import NamedTuple

import numpy as np

from ..attention import CrossOverlap
from ..stats._validate import (broadcast, check_finite, check_flag, check_int, check_option, check_overlaps,
                               check_gram_bound, check_positive, check_range, check_seq_len, theory_function,
                               to_output)
from ._attention import attention_overlaps
from ._components import RMS_NORM, combine_moments, compose, mlp_overlaps, unit_kernel
from ._config import Activation, BlockConfig, Norm

__all__ = ["Overlaps", "BlockTrajectory"]
__theory__ = ["block_map", "iterate_block_map", "mlp_map", "relu_kernel", "activation_kernel"]


class Overlaps(NamedTuple):
    """``(q, p)`` after a map: mean squared token norm and mean overlap (both ``/ d``); ``.cosine = p / q``."""

    q: object
    p: object

    @property
    def cosine(self):
        return self.p / self.q


class BlockTrajectory(NamedTuple):
    """:func:`sigprop.theory.iterate_block_map`'s result: ``q, p`` of shape ``(depth + 1, ...)`` (row 0: the
    input); ``.cosine = p / q``, the mean token cosine after each block."""

    q: object
    p: object

    @property
    def cosine(self):
        return self.p / self.q


_REALS = ("alpha_sa", "alpha_mlp", "sigma_w2", "sigma_b2", "sigma_v2", "branch_sa", "branch_mlp", "sigma_o2",
          "sigma_bv2", "sigma_bo2", "sigma_w2_out", "sigma_b2_out", "qk_bias")
_DEFAULTS = dict(alpha_sa=1.0, alpha_mlp=1.0, sigma_w2=2.0, sigma_b2=0.0, sigma_v2=1.0, branch_sa=1.0, branch_mlp=1.0,
                 norm="post", gain_control=False, activation="relu", mlp=True, cross_overlap="rem", sigma_o2=1.0,
                 sigma_bv2=0.0, sigma_bo2=0.0, sigma_w2_out=None, sigma_b2_out=None, gated=False, parallel=False,
                 qk_bias=0.0, qk_norm=False, branch_norm=False, moe=None)


def _from_config(config, T, params):
    if not isinstance(config, BlockConfig):
        raise TypeError(f"config must be a BlockConfig or None; got {type(config).__name__}")
    if config.causal:
        raise ValueError("the (q, p) block map describes unmasked attention; for a causal config use "
                         "sp.theory.iterate_gram_map, or dataclasses.replace(config, causal=False) to ignore the mask")
    refuse_rope(config)
    if config.logit_cap is not None or config.window is not None or config.alibi_slopes is not None:
        raise ValueError("the (q, p) maps do not model soft-capped logits, sliding windows or ALiBi (as T -> infinity any "
                         "cap gives the spread phase: bounded energies cannot condense; ALiBi makes rows differ by "
                         "position); sp.theory.iterate_gram_map models them exactly")
    cross = params.pop("cross_overlap", "rem")
    if params:
        raise TypeError(f"give a BlockConfig or keyword parameters, not both; got also {sorted(params)}")
    if T is None:
        raise ValueError("a BlockConfig's query/key variance is a beta only at a sequence length: pass T")
    return dict(config.map_params(T), cross_overlap=cross)


def refuse_rope(config, where="the (q, p) maps"):
    if config.positions == "rope":
        raise ValueError(f"{where} do not model rotary position embeddings (positions='rope'): with RoPE the logits "
                         "of one query against the keys are not exchangeable (the shared component is rotated by "
                         "position-dependent angles), the Gram matrix becomes Toeplitz after one layer, and no closed "
                         "form of the REM quantities is known (issue 25). Use sp.theory.iterate_gram_map, which samples "
                         "the logits' exact law with RoPE, or dataclasses.replace(config, positions='none') for the "
                         "same block without positions")


def _parameters(config, T, params):
    """Validated map parameters from a :class:`BlockConfig` (at length ``T``) or from keywords."""
    if config is not None:
        params = _from_config(config, T, params)
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
    for name in ("gain_control", "mlp", "gated", "parallel", "qk_norm", "branch_norm"):
        out[name] = check_flag(vals[name], name)
    if out["parallel"] and out["norm"] != "pre":
        raise ValueError(f"parallel residuals need norm='pre'; got norm={out['norm']!r}")
    if out["branch_norm"] and (out["norm"] == "post" or out["parallel"]):
        raise ValueError(f"branch_norm needs norm='pre' or 'none' and sequential branches; got norm={out['norm']!r}")
    out["cross_overlap"] = check_option(vals["cross_overlap"], CrossOverlap, "cross_overlap")
    out["moe"] = vals["moe"]   # (experts, top_k, router_sigma2, norm_topk) from a BlockConfig, or None
    return out


def one_block(q, p, P, T):
    """One block on broadcast float arrays, parameters ``P`` from :func:`_parameters` (the same ``compose`` as
    the random block's forward)."""
    return compose((q, p), types.SimpleNamespace(**P), attention=lambda s: attention_overlaps(*s, P, T),
                   mlp=lambda s: mlp_overlaps(*s, P), norm=lambda s, k: RMS_NORM.overlaps(*s), combine=combine_moments)



def checked(qp, layer, norm):
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


def check_domain(q, p, T):
    """``p >= 0`` for the T -> infinity map, ``p >= -q/(T-1)`` at finite ``T`` (module docstring, "Domain"): the one
    check of every map on equicorrelated tokens, ``sigprop.stats._validate.check_gram_bound``."""
    check_gram_bound(q, p, T)


def setup(q, p, config, T, limit, params):
    P = _parameters(config, T, params)
    if limit is None:
        limit = T is None
    Tm = None if check_flag(limit, "limit") else check_seq_len(T)
    qa, pa = check_overlaps(q, p, strict=False)
    reals = ["beta", *_REALS]
    arrays = broadcast(q=qa, p=pa, **{k: P[k] for k in reals}, **({} if Tm is None else {"T": Tm}))
    P.update({k: a.astype(float) for k, a in zip(reals, arrays[2:])})
    qa, pa = arrays[0].astype(float), arrays[1].astype(float)
    check_domain(qa, pa, Tm)
    return qa, pa, P, Tm


@theory_function
def block_map(q, p, config=None, *, T=None, limit=None, **params) -> Overlaps:
    """One transformer block's map ``(q, p) -> (q', p')``, returned as :class:`Overlaps` (``q, p = ...`` unpacks).

    Giorlandino & Goldt 2025, Algorithms 1 (``norm="post"``), 2 (``"pre"``) and 3 (``gain_control=True``);
    ``norm="none"`` omits LN; ``branch_sa``, ``branch_mlp`` weight the residual branches as in Noci et al.
    2022, Eq. (2); ``mlp=False`` drops the MLP sub-layer. Either a :class:`~sigprop.BlockConfig` and the
    sequence length ``T`` (the map of exactly the random block that config samples), or keywords
    ``beta, alpha_sa=1, alpha_mlp=1, sigma_w2=2, sigma_b2=0, sigma_v2=1, branch_sa=1, branch_mlp=1,
    norm="post", gain_control=False, activation="relu", mlp=True`` and the off-the-shelf pieces
    ``sigma_o2=1`` (``W_O``; 1 = none), ``sigma_bv2=0``, ``sigma_bo2=0``, ``sigma_w2_out=sigma_w2``,
    ``sigma_b2_out=sigma_b2``, ``gated=False``, ``parallel=False`` (pre-LN only), ``qk_bias=0`` (the query
    bias's share ``sigma_bqk2 / (sigma_qk2 d)``), all broadcasting (numpy arrays or scalars; torch tensors
    come back as float64 tensors).

    ``T=None`` (keywords only) or ``limit=True``: the T -> infinity map printed in the paper (``p >= 0``). ``T``
    given: the finite-``T`` map: exact ``E Y^(2)`` and, with ``cross_overlap="rem"`` (default), the exact
    ``Y_p`` of two correlated REM rows (``"1/T"``: independent rows; see :func:`sigprop.theory.attention_map`);
    two quadratures per point and layer (~1-200 ms). Post-LN returns ``q' = 1``.
    """
    qa, pa, P, Tm = setup(q, p, config, T, limit, params)
    qn, pn = one_block(qa, pa, P, Tm)
    like = (q, p, params.get("beta"))
    return Overlaps(to_output(qn, *like), to_output(pn, *like))


@theory_function
def iterate_block_map(q0, p0, depth, config=None, *, T=None, limit=None, **params) -> BlockTrajectory:
    """Iterate :func:`block_map` ``depth`` times: :class:`BlockTrajectory` ``(q, p)`` of shape ``(depth + 1,
    *broadcast)`` (row 0: the input; ``.cosine`` the mean cosine). Arguments as in :func:`block_map`, all
    broadcasting, so a whole ``(beta, alpha_sa)`` grid iterates at once (the trainability diagram)."""
    depth = check_int(depth, "depth", minimum=0)
    qa, pa, P, Tm = setup(q0, p0, config, T, limit, params)
    qs, ps = [qa], [pa]
    for layer in range(1, depth + 1):
        qa, pa = checked(one_block(qa, pa, P, Tm), layer, P["norm"])
        qs.append(qa)
        ps.append(pa)
    like = (q0, p0, params.get("beta"))
    return BlockTrajectory(to_output(np.stack(qs), *like), to_output(np.stack(ps), *like))


@theory_function
def mlp_map(q, p, *, sigma_w2=2.0, sigma_b2=0.0, activation="relu", sigma_w2_out=None, sigma_b2_out=None,
            gated=False) -> Overlaps:
    """Two-layer MLP map ``(q, p) -> (q_2, p_2)`` (App. B.6.2, Eqs. (35)-(37)); the second layer's variances
    ``sigma_w2_out``, ``sigma_b2_out`` default to the first's (the documents' MLP); ``gated``: the gated MLP
    ``W_2 (phi(W_1 x + b_1) * (W_3 x + b_3)) + b_2`` (``W_3, b_3`` as ``W_1, b_1``)."""
    qa, pa = check_overlaps(q, p, strict=False)
    w = check_positive(sigma_w2, "sigma_w2", allow_zero=True)
    bb = check_positive(sigma_b2, "sigma_b2", allow_zero=True)
    w2 = w if sigma_w2_out is None else check_positive(sigma_w2_out, "sigma_w2_out", allow_zero=True)
    b2 = bb if sigma_b2_out is None else check_positive(sigma_b2_out, "sigma_b2_out", allow_zero=True)
    act = check_option(activation, Activation, "activation").value
    qa, pa, w, bb, w2, b2 = np.broadcast_arrays(qa.astype(float), pa.astype(float), w, bb, w2, b2)
    P = dict(sigma_w2=w, sigma_b2=bb, sigma_w2_out=w2, sigma_b2_out=b2, activation=act,
             gated=check_flag(gated, "gated"))
    qn, pn = mlp_overlaps(qa, pa, P)
    return Overlaps(to_output(qn, q, p), to_output(pn, q, p))


@theory_function
def relu_kernel(rho):
    """``f(rho) = (sqrt(1 - rho^2) + rho (pi - arccos rho)) / pi``, so E[relu(u) relu(v)] = q f(rho)/2.

    Cho & Saul 2009; Giorlandino & Goldt 2025, App. B.6.2. ``f(1) = 1``, ``f(0) = 1/pi``.
    """
    r = check_range(rho, "rho (a cosine)", -1.0 - 1e-12, 1.0 + 1e-12)
    return to_output(2.0 * unit_kernel("relu", False, 1.0, 1.0, np.clip(r, -1.0, 1.0)), rho)


@theory_function
def activation_kernel(q_a, q_b, c, *, activation="relu", gated=False):
    r"""``E[phi(u) phi(v)]`` for ``(u, v)`` Gaussian with variances ``q_a, q_b`` and covariance ``c``.

    The Gaussian moment of an MLP's activation (Poole et al. 2016; Giorlandino & Goldt 2025, Eqs. (35)-(37)):
    ``q_a = q_b = c`` gives ``E phi(u)^2``. Closed forms for ReLU (:func:`relu_kernel`), GELU ``u Phi(u)`` and
    the identity; tanh, tanh-GELU (GPT-2's ``gelu_new``) and SiLU by one quadrature, accurate to ~1e-13 of
    ``sqrt(K(q_a, q_a, q_a) K(q_b, q_b, q_b))`` over variances 1e-3 ... 1e4 and every correlation
    (``sigprop.block._kernels``). ``gated``: the gated unit ``phi(u) u'`` (``u'`` an independent copy of ``u``,
    SwiGLU/GeGLU), kernel ``c E[phi(u) phi(v)]``. Broadcasts; ``|c| <= sqrt(q_a q_b)``. Used by the block
    maps and :func:`sigprop.theory.iterate_gram_map` (tokens of different norms).
    """
    a = check_positive(q_a, "q_a", allow_zero=True)
    b = check_positive(q_b, "q_b", allow_zero=True)
    cc = check_finite(c, "c")
    act = check_option(activation, Activation, "activation").value
    a, b, cc = broadcast(q_a=a, q_b=b, c=cc)
    if np.any(np.abs(cc) > np.sqrt(a) * np.sqrt(b) * (1 + 1e-12) + 1e-300):
        raise ValueError("c must satisfy |c| <= sqrt(q_a q_b) (a covariance)")
    return to_output(unit_kernel(act, check_flag(gated, "gated"), a, b, cc), q_a, q_b, c)
