"""Core claims of Giorlandino & Goldt 2025: Result 1 (REM participation ratio), Algorithms 1-3, B.3.

Registered by the foundation; the chapter adds its own in ``_giorlandino_goldt2025.py``.
"""
from __future__ import annotations

import math

import numpy as np
import torch

import sigprop as sp
from sigprop.claims import Measured, claim

DOC = "giorlandino-goldt2025"


@claim(id="gg2025-result1-ipr-limit", document=DOC, source="Result 1, Eq. (4)",
       claim="The mean IPR of an attention row tends to 1 - beta_c/beta (beta = 3, q = 1, p = 0) as T -> infinity.")
def _ipr_limit():
    # The exact finite-T REM value (quadrature), extrapolated in 1/log T from T = 1e8 ... 1e24;
    # the tolerance is the spread between linear and quadratic extrapolations.
    beta = 3.0
    logT = np.log(np.logspace(8, 24, 9))
    y = np.array([sp.theory.ipr_finite(beta, float(np.exp(lt))) for lt in logT])
    u = 1.0 / logT
    lin, quad = np.polyfit(u, y, 1)[-1], np.polyfit(u, y, 2)[-1]
    return Measured(stated=sp.theory.ipr(beta), measured=quad, stderr=abs(quad - lin), tolerance=max(4 * abs(quad - lin), 1e-3),
                    note="exact finite-T REM (quadrature) extrapolated in 1/log T; not Monte Carlo")


@claim(id="gg2025-b1-attention-is-rem", document=DOC, source="App. B.1-B.2, Eq. (9)",
       claim="The IPR of random softmax attention rows equals that of a REM with the scores' variance (beta = 2, finite T).")
def _attention_is_rem():
    T, d = sp.pick(quick=2000, full=100_000), sp.pick(quick=128, full=256)
    mc = sp.mc_attention_ipr([2.0], T=T, d=d, inits=sp.pick(quick=48, full=64), queries=16, generator=11)
    rem = sp.ipr_finite_width([2.0], T=T, d=d, samples=256, generator=12)
    se = math.hypot(float(mc.stderr[0, 0]), float(rem.stderr[0]))
    return Measured(stated=float(rem.mean[0]), measured=float(mc.mean[0, 0]), stderr=se, tolerance=4 * se,
                    note=f"T={T}, d={d}; stated = finite-T REM with the finite-width spread of the score variance")


@claim(id="gg2025-b3-finite-size-exponent", document=DOC, source="App. B.3",
       claim="Below beta_c/2 the IPR decays like T^(-1 + beta^2/beta_c^2) (beta = 0.5, q = 1, p = 0).",
       expected="erratum")
def _finite_size_exponent():
    beta, bc = 0.5, math.sqrt(2)
    Ts = sp.pick(quick=[256, 1024, 4096], full=[256, 1024, 4096, 16384, 65536])
    means, ses = [], []
    for T in Ts:
        e = sp.mc_attention_ipr([beta], T=T, d=256, inits=16, queries=16, generator=T)
        means.append(float(e.mean[0, 0]))
        ses.append(float(e.stderr[0, 0]))
    x, y, sy = np.log(Ts), np.log(means), np.array(ses) / np.array(means)
    A = np.vstack([np.ones_like(x), x]).T
    cov = np.linalg.inv(A.T @ (A / sy[:, None] ** 2))
    slope = (cov @ A.T @ (y / sy**2))[1]
    se = math.sqrt(cov[1, 1])
    return Measured(stated=-1 + beta**2 / bc**2, measured=slope, stderr=se, tolerance=4 * se,
                    corrected=-1 + 2 * beta**2 / bc**2,
                    note="weighted log-log fit of Monte Carlo IPR (d = 256); annealed bound E Y ~ e^{sigma^2}/T")


def _mc_cosine(cfg, depth, *, T, inits, samples, generator, tokens="gaussian", rho=0.0):
    def sample(n, g):
        params = sp.sample_transformer(cfg, depth, inits=n, generator=g)
        if tokens == "gaussian":
            x = sp.gaussian_tokens(n, samples, T=T, d=cfg.d, generator=g)
        else:
            x = sp.equicorrelated_tokens(n, samples, T=T, d=cfg.d, rho=rho, generator=g)
        return sp.transformer_forward(x, params, cfg, measure=lambda y: sp.mean_cosine(y).mean(-1)).T

    return sp.monte_carlo(sample, inits, generator=generator, chunk=8)


@claim(id="gg2025-alg1-post-ln-depth", document=DOC, source="Algorithm 1; Fig. 1(d)",
       claim="Algorithm 1 predicts the mean cosine after 8 post-LN blocks (beta = 0.1, alpha_SA = 1.5, ReLU).")
def _alg1():
    T, d, depth, beta, alpha = 64, 128, 8, 0.1, 1.5
    cfg = sp.BlockConfig(d=d, norm="post", alpha_sa=alpha, sigma_qk2=sp.gg_qk_variance(beta, T, d),
                         logit_scale=1 / math.sqrt(d))
    est = _mc_cosine(cfg, depth, T=T, inits=sp.pick(quick=24, full=100), samples=4, generator=21)
    q, p = sp.theory.iterate_block_map(1.0, 0.0, depth, beta=beta, alpha_sa=alpha, norm="post")
    return Measured(stated=p[-1] / q[-1], measured=float(est.mean[-1]), stderr=float(est.stderr[-1]),
                    tolerance=4 * float(est.stderr[-1]), note=f"T={T}, d={d}; Monte Carlo over inits x 4 sequences")


def _printed_mlp_first_layer_halved(q, p, sigma_w2, sigma_b2):
    """Algorithms 2 and 3 as printed: q1 = sigma_w2 q / 2 + sigma_b2 (p1 without the 1/2)."""
    q1, p1 = sigma_w2 * q / 2 + sigma_b2, sigma_w2 * p + sigma_b2
    rho1 = np.clip(p1 / q1, -1, 1)
    f = (np.sqrt(1 - rho1**2) + rho1 * (np.pi - np.arccos(rho1))) / np.pi
    return sigma_w2 * q1 / 2 + sigma_b2, sigma_w2 * q1 * f / 2 + sigma_b2


def _printed_alg2_cosine(rho0, *, beta, alpha_sa, alpha_mlp, sigma_w2, sigma_b2, sigma_v2):
    q, p = 1.0, rho0
    y = sp.theory.ipr(beta, 1.0, p / q)
    pl = p / q
    q, p = sigma_v2 * (pl + (1 - pl) * y) + alpha_sa**2 * q, sigma_v2 * pl + alpha_sa**2 * p
    q2, p2 = _printed_mlp_first_layer_halved(1.0, p / q, sigma_w2, sigma_b2)
    return (p2 + alpha_mlp**2 * p) / (q2 + alpha_mlp**2 * q)


@claim(id="gg2025-alg2-mlp-factor", document=DOC, source="Algorithm 2, line 12 (also Algorithm 3, line 10)",
       claim="Algorithm 2's MLP step q1 <- sigma_w^2 q/2 + sigma_b^2 predicts one pre-LN block's cosine.",
       expected="erratum")
def _alg2_typo():
    T, d, beta, rho0, sw = 64, 128, 0.1, 0.3, 1.0
    kw = dict(beta=beta, alpha_sa=1.0, alpha_mlp=1.0, sigma_w2=sw, sigma_b2=0.0, sigma_v2=1.0)
    cfg = sp.BlockConfig(d=d, norm="pre", alpha_sa=1.0, sigma_qk2=sp.gg_qk_variance(beta, T, d),
                         logit_scale=1 / math.sqrt(d), sigma_w2=sw)
    est = _mc_cosine(cfg, 1, T=T, inits=sp.pick(quick=48, full=200), samples=4, generator=31,
                     tokens="equicorrelated", rho=rho0)
    q, p = sp.theory.block_map(1.0, rho0, norm="pre", **kw)
    se = float(est.stderr[-1])
    return Measured(stated=_printed_alg2_cosine(rho0, **kw), measured=float(est.mean[-1]), stderr=se,
                    tolerance=4 * se, corrected=p / q,
                    note="mean cosine after one pre-LN block from equicorrelated tokens (rho = 0.3), sigma_w^2 = 1")
