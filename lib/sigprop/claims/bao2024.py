"""Claims registered by the bao2024 chapter (Bao, Hataya & Karakida 2024).

Each claim runs in a few seconds at quick-profile sizes; Monte Carlo tolerances are 4 standard
errors, deterministic checks use float64 rounding tolerances (said in each note).
"""
from __future__ import annotations

import math

import numpy as np
import torch

from scipy.special import erf

import sigprop as sp
from sigprop.claims import Measured, claim



DOC = "bao2024"
Z = 4.0


def _z_samples(n, T, d, w_qk, sigma, lam, generator):

    x = sp.random_walk_tokens(n, T=T, d=d, sigma=sigma, generator=generator, dtype=torch.float64)
    return sp.linearised_softmax_argument(sp.last_query_logits(x, w_qk, lam))


def _setup(T, d, mean, scale, aniso, seed):

    g = torch.Generator().manual_seed(seed)
    sigma = sp.anisotropic_sigma(d, generator=g) if aniso else None
    a = sp.spectral_qk_matrix(d=d, mean=mean, scale=scale, generator=g)
    tr = {k: float(v) for k, v in sp.qk_traces(a, sigma).items()}
    return a, sigma, tr


@claim(id="bao2024-sec2-taylor-coefficients", document=DOC, source="Sec. 2 (gamma^i, gamma_0^i)",
       claim="The softmax Jacobian at the origin is gamma^i = e^i/T - 1/T^2 and S(0)_i = 1/T.")
def _taylor():

    T = 7
    jac = torch.autograd.functional.jacobian(lambda w: torch.softmax(w, -1),
                                             torch.zeros(T, dtype=torch.float64))
    gamma = torch.eye(T, dtype=torch.float64) / T - 1.0 / T**2
    e = torch.randn(T, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    lin = sp.linearised_softmax_argument(e)
    err = max(float((jac - gamma).abs().max()), float((lin - (gamma @ e + 1.0 / T)).abs().max()))
    return Measured(stated=0.0, measured=err, stderr=0.0, tolerance=1e-12,
                    note="max |autograd Jacobian - gamma| and |Z - (Gamma omega + gamma_0)|; float64 tolerance")


@claim(id="bao2024-lemma4-eq15", document=DOC, source="Appendix A, Lemma 4, Eq. (15)",
       claim="E[x_1^T W x_1] = (i - 1) tr(W Sigma) = 0 for the first token of the random walk.",
       expected="erratum")
def _eq15():

    d = 8
    a, sigma, _ = _setup(4, d, 0.5, 0.3, True, 1)
    trws = float(torch.trace(a @ sigma))

    def sample(n, g):
        x = sp.random_walk_tokens(n, T=1, d=d, sigma=sigma, generator=g, dtype=torch.float64)[:, 0]
        return torch.einsum("na,ab,nb->n", x, a, x)

    est = sp.monte_carlo(sample, 40_000, generator=2, chunk=10_000, progress=False)
    return Measured(stated=0.0, measured=est.mean, stderr=est.stderr, tolerance=Z * est.stderr,
                    corrected=trws, note="i = 1; the walk starts at x_1 ~ N(0, Sigma), so E = i tr(W Sigma)")


@claim(id="bao2024-lemma1-mean", document=DOC, source="Lemma 1 (mu^i)",
       claim="mu^i = (i/T - 1/2) tr(W)/lambda + o(1) under Assumption 1.")
def _mean():

    T, d, i = 200, 16, 150
    a, sigma, tr = _setup(T, d, 0.3, 0.3, False, 3)
    lam = math.sqrt(d)
    est = sp.monte_carlo(lambda n, g: _z_samples(n, T, d, a, sigma, lam, g)[:, i - 1], 20_000, generator=4,
                      chunk=2_000, progress=False)
    stated = (i / T - 0.5) * tr["tr_w"] / lam
    return Measured(stated=stated, measured=est.mean, stderr=est.stderr, tolerance=Z * est.stderr,
                    note=f"T={T}, d={d}, theta={i / T}; the o(1) is exactly 1/T - tr W/(2 lambda T)")


@claim(id="bao2024-lemma1-variance-late", document=DOC, source="Lemma 1 (v^i)",
       claim="v^i = (2 i^2/T^2 + 7/12) tr(W^2)/lambda^2 + o(1); at the last token 31/12 tr(W^2)/lambda^2.",
       expected="erratum")
def _var_late():

    T, d = 40, 16
    a, sigma, tr = _setup(T, d, 0.1, 0.5, False, 5)
    lam = math.sqrt(d)
    mu, v = sp.theory.signal_propagation_moments(T, T, tr_w=tr["tr_w"], tr_w2=tr["tr_w2"], lam=lam)
    est = sp.monte_carlo(lambda n, g: (_z_samples(n, T, d, a, sigma, lam, g)[:, -1] - mu) ** 2, 20_000,
                      generator=6, chunk=5_000, progress=False)
    return Measured(stated=(2 + 7 / 12) * tr["tr_w2"] / lam**2, measured=est.mean, stderr=est.stderr,
                    tolerance=Z * est.stderr, corrected=v,
                    note="isotropic Sigma, T=40, d=16; corrected = exact finite-T variance (limit 7/12)")


@claim(id="bao2024-lemma1-variance-middle-anisotropic", document=DOC, source="Lemma 1 (v^i)",
       claim="At the middle token (theta = 1/2) v = 13/12 tr(W^2)/lambda^2 (anisotropic Sigma).",
       expected="erratum")
def _var_mid():

    T, d = 40, 16
    a, sigma, tr = _setup(T, d, -0.2, 0.4, True, 7)
    lam = math.sqrt(d)
    i = T // 2
    mu, v = sp.theory.signal_propagation_moments(i, T, tr_w=tr["tr_w"], tr_w2=tr["tr_w2"], lam=lam)
    est = sp.monte_carlo(lambda n, g: (_z_samples(n, T, d, a, sigma, lam, g)[:, i - 1] - mu) ** 2, 20_000,
                      generator=8, chunk=5_000, progress=False)
    return Measured(stated=(2 * 0.25 + 7 / 12) * tr["tr_w2"] / lam**2, measured=est.mean, stderr=est.stderr,
                    tolerance=Z * est.stderr, corrected=v,
                    note="Sigma = R^T R/d; corrected = exact finite-T variance (limit 1/12, thirteen times smaller)")


@claim(id="bao2024-eq6-rho-fig5-setting", document=DOC, source="Sec. 4, Eq. (6); Fig. 5 setting",
       claim="rho_i of Eq. (6) predicts the counted signal propagation probability (theta = 0.7).",
       expected="erratum")
def _rho():

    T, d, i = 40, 128, 28
    a, sigma, tr = _setup(T, d, 0.05, 0.5, False, 9)
    lam = math.sqrt(d)
    xi, eta = sp.theory.xi_eta(tr["tr_w"], tr["tr_w2"], lam)

    def sample(n, g):
        x = sp.random_walk_tokens(n, T=T, d=d, sigma=sigma, generator=g, dtype=torch.float64)
        return sp.propagation_indicator(sp.last_query_logits(x, a, lam))[:, i - 1]

    est = sp.monte_carlo(sample, 6_000, generator=10, chunk=2_000, progress=False)
    mu, v = sp.theory.signal_propagation_moments(i, T, tr_w=tr["tr_w"], tr_w2=tr["tr_w2"], lam=lam)
    return Measured(stated=sp.theory.rho_theta(i / T, xi, eta), measured=est.mean, stderr=est.stderr,
                    tolerance=Z * est.stderr, corrected=sp.theory.gaussian_propagation_probability(mu, v),
                    note="d=128, T=40, eigenvalues N(0.05, 0.5^2); corrected = Gaussian probability with the "
                         "exact moments")


@claim(id="bao2024-lemma2-late-site", document=DOC, source="Lemma 2, item 1",
       claim="As xi -> inf, eta -> 0 with xi eta -> r = 5, rho(theta) -> 1{1/2 <= theta <= 1/2 + 1/r}.")
def _late():

    th = np.linspace(0, 1, 401)
    away = (np.abs(th - 0.5) > 0.01) & (np.abs(th - 0.7) > 0.01)
    err = float(np.max(np.abs(sp.theory.rho_theta(th, 1e7, 5e-7) - sp.theory.rho_theta_limit(th, 5.0))[away]))
    return Measured(stated=0.0, measured=err, stderr=0.0, tolerance=1e-6,
                    note="sup over theta at distance > 0.01 from the jumps, xi = 1e7")


@claim(id="bao2024-lemma2-early-site", document=DOC, source="Lemma 2, item 2",
       claim="As xi -> -inf, eta -> 0 with xi eta -> r = -4, rho(theta) -> 1{1/2 + 1/r <= theta <= 1/2}.")
def _early():

    th = np.linspace(0, 1, 401)
    away = (np.abs(th - 0.5) > 0.01) & (np.abs(th - 0.25) > 0.01)
    err = float(np.max(np.abs(sp.theory.rho_theta(th, -1e7, 4e-7, form="corrected") - sp.theory.rho_theta_limit(th, -4.0))[away]))
    return Measured(stated=0.0, measured=err, stderr=0.0, tolerance=1e-6,
                    note="corrected variance profile (the limit does not depend on it), xi = -1e7")


@claim(id="bao2024-lemma2-vanishing", document=DOC, source="Lemma 2, item 4",
       claim="For fixed xi, rho(theta) -> 0 for every theta as eta -> infinity (xi = 5, eta = 1e6).")
def _vanish():

    th = np.linspace(0, 1, 401)
    return Measured(stated=0.0, measured=float(np.max(sp.theory.rho_theta(th, 5.0, 1e6))), stderr=0.0, tolerance=1e-5,
                    note="sup over theta; rho = O(1/eta)")


@claim(id="bao2024-lemma2-uniformity", document=DOC, source="Lemma 2, item 3",
       claim="At fixed finite eta, |rho'(theta)| -> 0 for every theta as xi -> 0 (eta = 1: max slope 0).",
       expected="erratum")
def _uniform():


    th = np.linspace(0, 1, 2001)
    slope = np.max(np.abs(np.gradient(sp.theory.rho_theta(th, 1e-9, 1.0), th)))
    exact = np.max(np.abs(np.gradient(0.5 * erf(1.0 / np.sqrt(2 * sp.theory.variance_profile(th, form="paper"))), th)))
    return Measured(stated=0.0, measured=slope, stderr=0.0, tolerance=1e-6, corrected=exact,
                    note="at xi = 0, rho(theta) = erf(1/(eta sqrt(2 s(theta))))/2, not flat; the proof drops the "
                         "theta-derivative of the 1/eta term")


def _draw_norms(*, n=300, d=16, mean=0.3, scale=0.5, seed=11, aniso=True):

    g = torch.Generator().manual_seed(seed)
    a = sp.spectral_qk_matrix(n, d=d, mean=mean, scale=scale, generator=g)
    sig = sp.anisotropic_sigma(d, generator=g) if aniso else None
    return sp.qk_norms(a, sig)


@claim(id="bao2024-eq5", document=DOC, source="Eq. (5)",
       claim="|tr W| <= sqrt(d tr W^2) for symmetric W_QK (fraction of random draws violating: 0).")
def _eq5():
    q = _draw_norms()
    frac = float((q["tr_w"].abs() > torch.sqrt(q["d"] * q["tr_w2"]) * (1 + 1e-12)).double().mean())
    return Measured(stated=0.0, measured=frac, stderr=0.0, tolerance=0.0,
                    note="300 draws, d=16, eigenvalues N(0.3, 0.5^2), anisotropic Sigma")


@claim(id="bao2024-eq7-first", document=DOC, source="Eq. (7), first inequality",
       claim="|tr W| / (sqrt(d) ||Sigma||_2) <= ||W_QK||_2 (fraction of random draws violating: 0).",
       expected="deviates")
def _eq7():
    q = _draw_norms(mean=1.0, scale=0.2, aniso=False)
    lhs = q["tr_w"].abs() / (math.sqrt(q["d"]) * q["spec_sigma"])
    frac = float((lhs > q["spec_qk"] * (1 + 1e-12)).double().mean())
    ok = float((lhs > q["fro_qk"] * (1 + 1e-12)).double().mean())
    return Measured(stated=0.0, measured=frac, stderr=0.0, tolerance=0.0,
                    note=f"eigenvalues N(1, 0.2^2), Sigma = I, d=16; with ||W_QK||_F instead the violation "
                         f"fraction is {ok:g} (Cauchy-Schwarz gives the Frobenius norm, not the spectral one)")


@claim(id="bao2024-eq8", document=DOC, source="Eq. (8)",
       claim="d^2 Var[w_i] = d tr(W^2) - tr(W)^2 (max relative error over random draws: 0).")
def _eq8():
    q = _draw_norms()
    ev = q["eig_w"]
    lhs = q["d"] ** 2 * ev.var(-1, unbiased=False)
    rhs = q["d"] * q["tr_w2"] - q["tr_w"] ** 2
    return Measured(stated=0.0, measured=float(((lhs - rhs).abs() / rhs.abs()).max()), stderr=0.0,
                    tolerance=1e-9, note="float64 eigendecomposition rounding")


@claim(id="bao2024-eq10-second", document=DOC, source="Eq. (10), second inequality",
       claim="|tr W_QK| >= ||W_QK||_2 (fraction of random draws violating: 0).", expected="deviates")
def _eq10():
    q = _draw_norms()
    frac = float((q["tr_qk"].abs() < q["spec_qk"] * (1 - 1e-12)).double().mean())
    first = float((q["fro_sigma_inv"] * q["tr_w2"].sqrt() < q["tr_qk"].abs() * (1 - 1e-12)).double().mean())
    return Measured(stated=0.0, measured=frac, stderr=0.0, tolerance=0.0,
                    note=f"eigenvalues N(0.3, 0.5^2): indefinite W_QK; holds for semi-definite W_QK only. "
                         f"The first inequality of (10) is violated by a fraction {first:g}")


@claim(id="bao2024-eq9-bound-below-max-entropy", document=DOC, source="Eq. (9) (after Zhai et al. Thm 3.1)",
       claim="(9) lower-bounds attention entropy, so it never exceeds ln T (T = 40: max over nu of (9) - ln T <= 0).",
       expected="deviates")
def _eq9():

    T = 40
    nu = np.linspace(0, 30, 30001)
    excess = float(np.max(sp.theory.zhai_entropy_bound(nu, T)) - math.log(T))
    return Measured(stated=0.0, measured=max(excess, 0.0), stderr=0.0, tolerance=1e-12,
                    note="max_nu of the printed (9) exceeds the largest possible entropy ln T; "
                         "ln(1 + (T-1) e^-delta) is a valid bound for logit range delta")


@claim(id="bao2024-sec6-locater-scale-gradient", document=DOC, source="Sec. 6, LocATER gradient formulae 1-2",
       claim="grad_{W_Q} tr(W_QK^T W_QK) = 2 W_K W_K^T W_Q (and symmetric for W_K).")
def _loc_scale():

    g = torch.Generator().manual_seed(12)
    wq = torch.randn(6, 10, generator=g, dtype=torch.float64).requires_grad_(True)
    wk = torch.randn(6, 10, generator=g, dtype=torch.float64).requires_grad_(True)
    sp.locater_penalty(wq, wk, kappa1=1.0, kappa2=0.0).backward()
    f = sp.locater_gradients(wq.detach(), wk.detach(), form="paper")
    err = max(float((f["scale_q"] - wq.grad).abs().max() / wq.grad.abs().max()),
              float((f["scale_k"] - wk.grad).abs().max() / wk.grad.abs().max()))
    return Measured(stated=0.0, measured=err, stderr=0.0, tolerance=1e-12, note="relative to autograd, float64")


@claim(id="bao2024-sec6-locater-mean-gradient", document=DOC, source="Sec. 6, LocATER gradient formulae 3-4",
       claim="grad_{W_Q} (tr W_QK - 1)^2 = (tr W_QK - 1) tr(W_QK) W_K: ratio to autograd is 1.",
       expected="erratum")
def _loc_mean():

    g = torch.Generator().manual_seed(13)
    wq = torch.randn(6, 10, generator=g, dtype=torch.float64).requires_grad_(True)
    wk = torch.randn(6, 10, generator=g, dtype=torch.float64).requires_grad_(True)
    sp.locater_penalty(wq, wk, kappa1=0.0, kappa2=1.0).backward()
    f = sp.locater_gradients(wq.detach(), wk.detach(), form="paper")
    ratio = float((f["mean_q"] * wq.grad).sum() / (wq.grad * wq.grad).sum())
    tr = float(torch.trace(wq.detach().T @ wk.detach()))
    return Measured(stated=1.0, measured=ratio, stderr=0.0, tolerance=1e-10, corrected=tr / 2,
                    note="printed formula = autograd x tr(W_QK)/2; the right gradient is 2 (tr W_QK - 1) W_K")
