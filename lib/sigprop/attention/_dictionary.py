r"""A dictionary between the four documents' scalings of the attention logits.

Every document sets the size of the attention logits differently; what matters for the
phase of an attention row is the variance of the logits over keys *after* the part shared by
all keys cancels (Giorlandino & Goldt 2025, App. B.1). For logits
``a_ts = s (W_Q x_t).(W_K x_s)`` with ``W_Q, W_K`` of shape ``(d_k, d)`` and entry variance
``v``, and tokens with ``|x|^2/d = q``,

.. math::  \mathrm{Var}(a_{ts}) = s^2\, d_k\, (v\, d\, q)^2,

which Giorlandino & Goldt write as ``beta^2 log T q^2``. Hence every scaling has an
**equivalent beta**, ``beta = s sqrt(d_k) v d / sqrt(log T)``, to be compared with
``beta_c = sqrt(2/(q(q-p)))``:

* Giorlandino & Goldt: ``s = 1/sqrt(d)``, ``d_k = d``, ``v = beta sqrt(log T)/d`` (identity);
* Noci et al. 2022: Xavier ``v = 2/(d + d_k)``, ``s = tau / sqrt(d_k)`` (inverse temperature
  ``tau``, their Eq. 19) -> ``beta = 2 tau d / ((d + d_k) sqrt(log T))``;
* Bao et al. 2024: a joint ``W_QK`` with i.i.d.-like eigenvalues of mean ``mu`` and scale
  ``sigma`` and temperature ``lambda``: for i.i.d. Gaussian tokens the logits over *other*
  keys have variance ``q^2 d (mu^2 + sigma^2) / lambda^2``, and the key equal to the query gets
  an extra mean ``q d mu / lambda`` (the "self" bias that a non-zero eigenvalue mean creates);
* Aghajanyan 2025 (Sec. 8): weights of variance ``1/d`` and logits scaled by ``alpha``
  -> :func:`beta_equivalent` with ``sigma_qk2 = 1/d`` and the post's logit scale.

Residual strengths: Noci et al.'s branch weight ``alpha_1`` (``X + alpha_1 S(X)``) and
Giorlandino & Goldt's skip strength ``alpha_SA`` (``S(X) + alpha_SA X``) give the same post-LN
network when ``alpha_1 = 1/alpha_SA`` (LayerNorm removes the overall scale).
"""
from __future__ import annotations

import math

import numpy as np

from ..stats._validate import (check_int, check_positive, check_seq_len, theory_function, to_output)
__all__: list[str] = []
__theory__ = [
    "logit_variance",
    "beta_equivalent",
    "qk_variance_for_beta",
    "beta_xavier",
    "beta_bao",
    "bao_self_logit_mean",
    "branch_from_skip",
    "glorot_variance",
]


@theory_function
def logit_variance(*, logit_scale, d, d_k, sigma_qk2, q=1.0):
    """``Var(a_ts) = logit_scale^2 d_k (sigma_qk2 d q)^2`` for Gaussian ``W_Q, W_K`` (t != s, p = 0)."""
    s = check_positive(logit_scale, "logit_scale")
    d = check_positive(d, "d")
    dk = check_positive(d_k, "d_k")
    v = check_positive(sigma_qk2, "sigma_qk2")
    qa = check_positive(q, "q")
    return to_output(s**2 * dk * (v * d * qa) ** 2, logit_scale, sigma_qk2, q)


@theory_function
def beta_equivalent(*, logit_scale, d, d_k, sigma_qk2, T):
    """Giorlandino & Goldt's ``beta`` with the same logit variance: ``s sqrt(d_k) v d / sqrt(log T)``."""
    s = check_positive(logit_scale, "logit_scale")
    v = check_positive(sigma_qk2, "sigma_qk2")
    Ta = check_seq_len(T)
    d = check_positive(d, "d")
    dk = check_positive(d_k, "d_k")
    return to_output(s * np.sqrt(dk) * v * d / np.sqrt(np.log(Ta)), logit_scale, sigma_qk2, T)


@theory_function
def qk_variance_for_beta(beta, *, T, d, d_k=None, logit_scale=None):
    """Inverse of :func:`beta_equivalent`: the entry variance giving ``beta`` (defaults: ``d_k = d``,
    ``logit_scale = 1/sqrt(d_k)``, i.e. ``beta sqrt(log T)/d``, Result 1)."""
    b = check_positive(beta, "beta")
    Ta = check_seq_len(T)
    d = check_int(d, "d", minimum=1)
    dk = d if d_k is None else check_int(d_k, "d_k", minimum=1)
    s = 1.0 / math.sqrt(dk) if logit_scale is None else float(check_positive(logit_scale, "logit_scale"))
    return to_output(b * np.sqrt(np.log(Ta)) / (s * math.sqrt(dk) * d), beta, T)


@theory_function
def beta_xavier(*, d, d_k, T, tau=1.0):
    """Equivalent beta of Xavier-initialised queries/keys with logits ``tau (Qx).(Ky)/sqrt(d_k)``
    (Noci et al. 2022, Sec. 3 and Eq. (19)): ``2 tau d / ((d + d_k) sqrt(log T))``."""
    d = check_positive(d, "d")
    dk = check_positive(d_k, "d_k")
    Ta = check_seq_len(T)
    t = check_positive(tau, "tau")
    return to_output(2 * t * d / ((d + dk) * np.sqrt(np.log(Ta))), tau, T)


@theory_function
def beta_bao(*, mean, scale, d, lam, T, q=1.0):
    """Equivalent beta of Bao et al.'s joint ``W_QK`` (eigenvalues of mean ``mean``, scale ``scale``)
    with logits ``x_t^T W_QK x_s / lam``. For i.i.d. Gaussian tokens of norm ``q`` the logits over keys
    ``s != t`` have variance ``q^2 d (mean^2 + scale^2) / lam^2``, so
    ``beta = sqrt(d (mean^2 + scale^2)) / (lam sqrt(log T))`` (independent of ``q``)."""
    m = np.asarray(mean, dtype=float)
    sc = check_positive(scale, "scale", allow_zero=True)
    d = check_positive(d, "d")
    lm = check_positive(lam, "lam")
    Ta = check_seq_len(T)
    check_positive(q, "q")
    return to_output(np.sqrt(d * (m**2 + sc**2)) / (lm * np.sqrt(np.log(Ta))), mean, scale, T)


@theory_function
def bao_self_logit_mean(*, mean, d, lam, q=1.0):
    """Mean of the logit of a token with itself, ``E[x^T W_QK x]/lam = q tr(W_QK)/lam = q d mean/lam``."""
    d = check_positive(d, "d")
    lm = check_positive(lam, "lam")
    qa = check_positive(q, "q")
    return to_output(qa * d * np.asarray(mean, dtype=float) / lm, mean)


@theory_function
def branch_from_skip(alpha_sa):
    """Noci's branch weight equivalent to Giorlandino & Goldt's skip strength in a post-LN block: ``1/alpha``."""
    a = check_positive(alpha_sa, "alpha_sa")
    return to_output(1.0 / a, alpha_sa)


@theory_function
def glorot_variance(fan_in, fan_out):
    r"""Glorot/Xavier normal variance ``2 / (fan_in + fan_out)`` (Noci et al. 2022, Sec. 3 and Lemma A.7,
    :math:`\sigma_k^2 = 2/(d_v + d_k)`); the default query/key variance of :class:`sigprop.BlockConfig`."""
    a = check_positive(fan_in, "fan_in")
    b = check_positive(fan_out, "fan_out")
    return to_output(2.0 / (a + b), fan_in, fan_out)
