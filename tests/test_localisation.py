"""Tests for sigprop.attention._localisation (Bao, Hataya & Karakida 2024, Sec. 2-5, Lemma 1-2, Eqs. 5-10).

Monte Carlo checks: |MC - theory| <= Z * SE with fixed seeds. Z = 4 per entry; where a test
compares a whole profile of T positions at once it keeps Z = 4.5 so that the family-wise false
alarm rate stays below 1e-3 (T <= 40 correlated entries).
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch.overrides import TorchFunctionMode

import sigprop.attention._localisation
import sigprop.attention._locater
from sigprop.inputs._tokens import random_walk_tokens
from sigprop.attention._localisation import (anisotropic_sigma, gaussian_propagation_probability, qk_gradient_terms,
                                   last_query_logits, linearised_softmax_argument,
                                   min_entropy_bound, one_spike_entropy, piecewise_linear_softmax,
                                   propagation_indicator, qk_norms, qk_traces, rho_theta,
                                   rho_theta_limit, signal_propagation_moments,
                                   signal_propagation_moments_paper, spectral_qk_matrix,
                                   variance_profile, xi_eta, zhai_entropy_bound)
from sigprop.stats import _config
from sigprop.stats._montecarlo import monte_carlo
from sigprop.stats._validate import TOL
from conftest import Z

Z_PROFILE = 4.5
#: float32 rounding of a float64 computation (exact identities: the dtype tolerance table)
TOL32 = TOL[torch.float32]


def _z_stats(T, d, w_qk, sigma, lam):
    """sample_fn returning Z_i (T values) for random walks."""
    def sample(n, g):
        x = random_walk_tokens(n, T=T, d=d, sigma=sigma, generator=g, dtype=torch.float64)
        return linearised_softmax_argument(last_query_logits(x, w_qk, lam))
    return sample


# ------------------------------------------------------------------ Assumption 1 sampler


def test_random_walk_covariance_is_min_i_j_sigma():
    d, T = 3, 6
    sigma = anisotropic_sigma(d, generator=1)
    est = monte_carlo(lambda n, g: (lambda x: x[:, :, 0:1] * x[:, 4:5, 1:2])(
        random_walk_tokens(n, T=T, d=d, sigma=sigma, generator=g, dtype=torch.float64)).squeeze(-1),
        40_000, generator=2, chunk=10_000)
    # E[x_{i,0} x_{5,1}] = min(i, 5) Sigma_01 (1-based i)
    theory = torch.tensor([min(i, 5) for i in range(1, T + 1)], dtype=torch.float64) * sigma[0, 1]
    assert torch.all((est.mean - theory).abs() <= Z_PROFILE * est.stderr), est.zscore(theory)


# ------------------------------------------------------------------ Lemma 1


CASES = [
    # (T, d, mean, scale, anisotropic, symmetric)
    (8, 16, 0.3, 0.3, False, True),
    (20, 32, 0.0, 0.5, False, True),
    (30, 8, -0.4, 0.2, True, True),
    (12, 16, 0.2, 0.4, True, False),
]


@pytest.mark.parametrize("T,d,mean,scale,aniso,sym", CASES)
def test_exact_moments_match_monte_carlo(T, d, mean, scale, aniso, sym):
    g = torch.Generator().manual_seed(100 + T)
    sigma = anisotropic_sigma(d, generator=g) if aniso else None
    a = spectral_qk_matrix(d=d, mean=mean, scale=scale, generator=g)
    if not sym:
        a = a + 0.3 * torch.randn(d, d, generator=g, dtype=torch.float64)
    lam = math.sqrt(d)
    tr = qk_traces(a, sigma)
    i = np.arange(1, T + 1)
    mu, v = signal_propagation_moments(i, T, tr_w=float(tr["tr_w"]), tr_w2=float(tr["tr_w2"]), lam=lam,
                                       tr_wwt=float(tr["tr_wwt"]))
    mu_t, v_t = torch.as_tensor(mu), torch.as_tensor(v)
    sample = _z_stats(T, d, a, sigma, lam)
    est_mu = monte_carlo(sample, 40_000, generator=3, chunk=8_000)
    assert torch.all((est_mu.mean - mu_t).abs() <= Z_PROFILE * est_mu.stderr), est_mu.zscore(mu_t)
    # (Z - mu_exact)^2 has expectation v exactly
    est_v = monte_carlo(lambda n, gg: (sample(n, gg) - mu_t) ** 2, 40_000, generator=4, chunk=8_000)
    assert torch.all((est_v.mean - v_t).abs() <= Z_PROFILE * est_v.stderr), est_v.zscore(v_t)


def test_paper_lemma1_variance_is_wrong_and_correction_is_its_limit():
    T, d = 40, 16
    lam = math.sqrt(d)
    a = spectral_qk_matrix(d=d, mean=0.1, scale=0.5, generator=5)
    tr = qk_traces(a)
    i = np.arange(1, T + 1)
    theta = i / T
    _, v_paper = signal_propagation_moments_paper(theta, tr_w=float(tr["tr_w"]), tr_w2=float(tr["tr_w2"]), lam=lam)
    mu_ex, v_ex = signal_propagation_moments(i, T, tr_w=float(tr["tr_w"]), tr_w2=float(tr["tr_w2"]), lam=lam)
    sample = _z_stats(T, d, a, None, lam)
    est_v = monte_carlo(lambda n, g: (sample(n, g) - torch.as_tensor(mu_ex)) ** 2, 20_000, generator=6,
                        chunk=5_000)
    z_paper = est_v.zscore(torch.as_tensor(v_paper))
    assert abs(float(z_paper[-1])) > 20  # last token: paper 31/12, truth ~7/12 (times tr W^2/lam^2)
    # the corrected profile is the T -> infinity limit of the exact variance (error O(1/T))
    big_T = 4000
    ii = np.arange(1, big_T + 1)
    _, v_big = signal_propagation_moments(ii, big_T, tr_w=1.0, tr_w2=1.0, lam=1.0)
    assert np.max(np.abs(v_big - variance_profile(ii / big_T))) < 2.0 / big_T
    assert np.max(np.abs(v_big - variance_profile(ii / big_T, form="paper"))) > 1.9


def test_paper_lemma1_mean_is_leading_order():
    T = np.array([10, 100, 1000, 10000])
    i = T // 3
    mu_ex, _ = signal_propagation_moments(i, T, tr_w=2.0, tr_w2=1.0, lam=1.0)
    mu_p, _ = signal_propagation_moments_paper(i / T, tr_w=2.0, tr_w2=1.0, lam=1.0)
    err = np.abs(mu_ex - mu_p)
    assert np.allclose(err * T, np.abs(1 - 2.0 / 2), atol=1e-9)  # = |1/T - tr W/(2 lam T)|
    mu_ex3, _ = signal_propagation_moments(i, T, tr_w=3.0, tr_w2=1.0, lam=1.0)
    mu_p3, _ = signal_propagation_moments_paper(i / T, tr_w=3.0, tr_w2=1.0, lam=1.0)
    assert np.allclose(np.abs(mu_ex3 - mu_p3) * T, 0.5, atol=1e-9)


def test_variance_profile_forms():
    th = np.linspace(0, 1, 11)
    assert np.allclose(variance_profile(th), 2 * (th - 0.5) ** 2 + 1 / 12)
    assert np.allclose(variance_profile(th, form="paper"), 2 * th**2 + 7 / 12)
    with pytest.raises(ValueError, match="form"):
        variance_profile(0.3, form="exact")


# ------------------------------------------------------------------ Eq. (6), Lemma 2


def test_rho_theta_is_gaussian_probability_of_asymptotic_moments():
    th = np.linspace(0.01, 1, 50)
    tr_w, tr_w2, lam = 3.0, 2.0, 1.7
    xi, eta = xi_eta(tr_w, tr_w2, lam)
    for form in ("paper", "corrected"):
        mu = (th - 0.5) * tr_w / lam
        v = variance_profile(th, form=form) * tr_w2 / lam**2
        assert np.allclose(rho_theta(th, xi, eta, form=form), gaussian_propagation_probability(mu, v),
                           rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("r", [0.5, 1.5, 3.0, 6.0, -0.5, -3.0, -6.0])
@pytest.mark.parametrize("form", ["paper", "corrected"])
def test_lemma2_site_limits(r, form):
    th = np.linspace(0.0, 1.0, 201)
    limit = rho_theta_limit(th, r)
    xi = 1e7 * np.sign(r)
    val = rho_theta(th, xi, r / xi, form=form)
    edges = [0.5] + ([0.5 + 1 / r] if abs(r) > 2 else [])
    away = np.all(np.abs(th[:, None] - np.array(edges)[None, :]) > 0.02, axis=1)
    assert np.max(np.abs(val - limit)[away]) < 1e-6
    assert np.isclose(rho_theta(0.5, xi, r / xi, form=form), 0.5, atol=1e-6)  # not the indicator's 1


def test_lemma2_vanishing_signal():
    th = np.linspace(0, 1, 101)
    for xi in (-8.0, 0.3, 5.0):
        assert np.max(rho_theta(th, xi, 1e6)) < 1e-5


def test_lemma2_uniformity_fails_at_finite_eta():
    """Lemma 2(3) claims |rho'(theta)| -> 0 as xi -> 0 at fixed finite eta: false (rho(theta) at
    xi = 0 is erf(1/(eta sqrt(2 s(theta))))/2, which varies with theta)."""
    th = np.linspace(0, 1, 401)
    for form in ("paper", "corrected"):
        rho = rho_theta(th, 1e-9, 1.0, form=form)
        slope = np.max(np.abs(np.gradient(rho, th)))
        assert slope > 0.2
        exact0 = 0.5 * __import__("scipy.special", fromlist=["erf"]).erf(
            1.0 / np.sqrt(2 * variance_profile(th, form=form)))
        assert np.allclose(rho, exact0, atol=1e-8)


# ------------------------------------------------------------------ softmax approximation


def test_piecewise_linear_softmax_is_first_order():
    g = torch.Generator().manual_seed(7)
    omega = torch.randn(500, 10, generator=g, dtype=torch.float64)
    errs = []
    for eps in (1e-2, 5e-3):
        e = (torch.softmax(eps * omega, -1) - piecewise_linear_softmax(eps * omega)).abs().max()
        errs.append(float(e))
    assert 3.5 < errs[0] / errs[1] < 4.5  # second-order remainder
    z = linearised_softmax_argument(omega)
    assert torch.allclose(z.sum(-1), torch.ones(500, dtype=torch.float64))
    big = 50 * omega
    pl = piecewise_linear_softmax(big)
    assert pl.min() >= 0 and pl.max() <= 1
    assert torch.equal(propagation_indicator(big), ((linearised_softmax_argument(big) >= 0)
                                                    & (linearised_softmax_argument(big) <= 1)).double())


def test_last_query_logits_match_einsum():
    g = torch.Generator().manual_seed(8)
    x = torch.randn(4, 5, 6, generator=g, dtype=torch.float64)
    a = torch.randn(6, 6, generator=g, dtype=torch.float64)
    om = last_query_logits(x, a, 2.0)
    ref = torch.einsum("btd,de,be->bt", x, a, x[:, -1]) / 2.0
    assert torch.allclose(om, ref)
    with pytest.raises(ValueError, match="w_qk"):
        last_query_logits(x, torch.zeros(5, 5, dtype=torch.float64), 1.0)
    bad = x.clone()
    bad[0, 1, 2] = float("nan")
    with pytest.raises(ValueError, match="finite"):
        last_query_logits(bad, a, 2.0)
    with pytest.raises(TypeError, match="floating"):
        last_query_logits(torch.ones(2, 3, 6, dtype=torch.int64), a, 2.0)


# ------------------------------------------------------------------ samplers


def test_spectral_qk_matrix_eigenvalues():
    d = 64
    a = spectral_qk_matrix(200, d=d, mean=0.5, scale=0.2, generator=9)
    assert torch.allclose(a, a.transpose(-1, -2))
    ev = torch.linalg.eigvalsh(a).reshape(-1)
    m, se_m = ev.mean(), ev.std() / math.sqrt(ev.numel())
    assert abs(float(m) - 0.5) <= Z * float(se_m)
    assert abs(float(ev.var()) - 0.04) <= 0.05 * 0.04  # 12800 eigenvalues: rel. SE of variance ~1.3%
    with pytest.raises(ValueError, match="scale"):
        spectral_qk_matrix(d=4, mean=0.0, scale=-1.0)


def test_anisotropic_sigma_is_spd_with_expected_diagonal():
    s = anisotropic_sigma(300, generator=10)
    assert torch.allclose(s, s.T)
    assert torch.linalg.eigvalsh(s).min() > 0
    # E[Sigma_aa] = E[R^2] = 2.5^2/3; 300 diagonal entries, each a mean of 300 terms
    diag = torch.diagonal(s)
    assert abs(float(diag.mean()) - 2.5**2 / 3) <= Z * float(diag.std()) / math.sqrt(300)


# ------------------------------------------------------------------ Sec. 5 bounds


def _random_setups(n=200, d=12, seed=11):
    g = torch.Generator().manual_seed(seed)
    a = spectral_qk_matrix(n, d=d, mean=0.3, scale=0.5, generator=g)
    sig = anisotropic_sigma(d, generator=g)
    return a, sig


def test_bound5_and_identity8_hold():
    a, sig = _random_setups()
    q = qk_norms(a, sig)
    d = q["d"]
    assert torch.all(q["tr_w"].abs() <= torch.sqrt(d * q["tr_w2"]) * (1 + 1e-12))
    ev = q["eig_w"]
    assert torch.allclose(ev.sum(-1), q["tr_w"]) and torch.allclose((ev**2).sum(-1), q["tr_w2"])
    assert torch.allclose(d**2 * ev.var(-1, unbiased=False), d * q["tr_w2"] - q["tr_w"] ** 2)


def test_bound7_first_inequality_fails_and_frobenius_version_holds():
    d = 16
    q = qk_norms(torch.eye(d, dtype=torch.float64))
    lhs = q["tr_w"].abs() / (math.sqrt(d) * q["spec_sigma"])
    assert lhs > q["spec_qk"] * 3.9  # sqrt(16) = 4 > 1: the printed (7) fails
    assert q["fro_qk"] < q["l1_induced_qk"] * 4.1 and q["fro_qk"] > q["l1_induced_qk"]  # ||.||_F > induced l1
    a, sig = _random_setups()
    q = qk_norms(a, sig)
    lhs = q["tr_w"].abs() / (math.sqrt(q["d"]) * q["spec_sigma"])
    assert torch.all(lhs <= q["fro_qk"] * (1 + 1e-12))
    assert torch.all(q["spec_qk"] <= q["fro_qk"] * (1 + 1e-12))
    assert torch.all(q["fro_qk"] <= q["l1_entrywise_qk"])


def test_bound10_first_holds_second_needs_semidefinite():
    a, sig = _random_setups()
    q = qk_norms(a, sig)
    assert torch.all(q["fro_sigma_inv"] * q["tr_w2"].sqrt() >= q["tr_qk"].abs() * (1 - 1e-12))
    assert torch.any(q["tr_qk"].abs() < q["spec_qk"])  # indefinite W_QK violates |tr| >= ||.||_2
    psd = spectral_qk_matrix(50, d=12, mean=1.0, scale=0.0, generator=12) + 0.0
    b = psd @ psd  # PSD
    qb = qk_norms(b, sig)
    assert torch.all(qb["tr_qk"].abs() >= qb["spec_qk"] * (1 - 1e-12))


# ------------------------------------------------------------------ entropy bounds


def test_entropy_bounds():
    T = 50
    nu = np.linspace(0, 20, 401)
    printed = zhai_entropy_bound(nu, T)
    assert np.max(printed) > 1.5 * np.log(T)  # exceeds the maximal entropy ln T: not a lower bound
    g = torch.Generator().manual_seed(13)
    for delta in (0.5, 3.0, 8.0):
        om = delta * torch.rand(20_000, T, generator=g, dtype=torch.float64)
        om[:, 0] = delta  # make the range exactly <= delta with a spike
        p = torch.softmax(om, -1)
        ent = -(p * p.log()).sum(-1)
        assert float(ent.min()) >= min_entropy_bound(delta, T) - 1e-12
        spike = torch.zeros(T, dtype=torch.float64)
        spike[0] = delta
        ps = torch.softmax(spike, -1)
        assert math.isclose(float(-(ps * ps.log()).sum()), one_spike_entropy(delta, T), rel_tol=1e-12)
    # one spike is not the entropy minimiser at small range: k tied spikes do lower
    k_spikes = torch.zeros(T, dtype=torch.float64)
    k_spikes[:10] = 0.5
    pk = torch.softmax(k_spikes, -1)
    assert float(-(pk * pk.log()).sum()) < one_spike_entropy(0.5, T)
    assert float(-(pk * pk.log()).sum()) >= min_entropy_bound(0.5, T)


def test_validation_messages():
    with pytest.raises(ValueError, match="1 <= i <= T"):
        signal_propagation_moments(0, 5, tr_w=1.0, tr_w2=1.0, lam=1.0)
    with pytest.raises(ValueError, match="eta"):
        rho_theta(0.5, 1.0, 0.0)
    with pytest.raises(TypeError, match="omega"):
        linearised_softmax_argument([1.0, 2.0])
    assert isinstance(rho_theta(0.5, 1.0, 1.0), float)
    assert isinstance(rho_theta(np.array([0.5]), 1.0, 1.0), np.ndarray)


def test_last_query_logits_are_the_attention_layers_logits():
    import sigprop as sp

    g = torch.Generator().manual_seed(14)
    d, T = 16, 9
    x = random_walk_tokens(3, T=T, d=d, generator=g, dtype=torch.float64)
    a = spectral_qk_matrix(d=d, mean=0.1, scale=0.2, generator=g)
    _, A = sp.self_attention(x, w_qk=a, logit_scale=0.25)
    assert torch.allclose(A[..., -1, :], torch.softmax(last_query_logits(x, a, 4.0), -1), atol=1e-12)


def test_gaussian_probability_with_exact_moments_matches_counted_rho():
    """Eq. (6)'s Gaussian step with the exact moments at d = 128 (the Fig. 5 setting), one position:
    the counted rho_i agrees within 4 SE (the non-Gaussian error is below the MC resolution here)."""
    T, d, i = 40, 128, 28
    g = torch.Generator().manual_seed(9)
    a = spectral_qk_matrix(d=d, mean=0.05, scale=0.5, generator=g)
    lam = math.sqrt(d)
    tr = qk_traces(a)

    def sample(n, gg):
        x = random_walk_tokens(n, T=T, d=d, generator=gg, dtype=torch.float64)
        return propagation_indicator(last_query_logits(x, a, lam))[:, i - 1]

    est = monte_carlo(sample, 6_000, generator=10, chunk=2_000, progress=False)
    mu, v = signal_propagation_moments(i, T, tr_w=float(tr["tr_w"]), tr_w2=float(tr["tr_w2"]), lam=lam)
    assert est.agrees(gaussian_propagation_probability(mu, v), z=Z), est.zscore(gaussian_propagation_probability(mu, v))
    xi, eta = xi_eta(float(tr["tr_w"]), float(tr["tr_w2"]), lam)
    assert abs(float(est.zscore(rho_theta(i / T, xi, eta)))) > 20   # printed Eq. (6)


def test_exact_variance_with_negative_tr_w2():
    """A skew W_QK has tr((W_QK Sigma)^2) < 0; the exact formula (with tr_wwt) still holds."""
    a = torch.tensor([[0.0, 1.0], [-1.0, 0.0]], dtype=torch.float64)
    tr = qk_traces(a)
    assert float(tr["tr_w2"]) < 0
    T = 6
    i = np.arange(1, T + 1)
    mu, v = signal_propagation_moments(i, T, tr_w=0.0, tr_w2=float(tr["tr_w2"]), lam=1.0, tr_wwt=float(tr["tr_wwt"]))
    mu_t = torch.as_tensor(mu)
    est = monte_carlo(lambda n, g: (linearised_softmax_argument(last_query_logits(
        random_walk_tokens(n, T=T, d=2, generator=g, dtype=torch.float64), a, 1.0)) - mu_t) ** 2,
        100_000, generator=15, chunk=25_000, progress=False)
    assert est.agrees(v, z=Z_PROFILE), est.zscore(v)
    with pytest.raises(ValueError, match="tr_w2"):
        signal_propagation_moments(i, T, tr_w=0.0, tr_w2=-2.0, lam=1.0)


# ------------------------------------------------------------------ devices
#
# No accelerator is needed: the ``meta`` device stands in for one. ``DeviceAudit`` is a TorchFunctionMode
# that (a) lets a sampler "draw" on meta with a generator whose device reads ``meta`` (torch has no meta
# generator: the random factories are called without it), (b) answers ``bool()`` of a meta tensor (the
# finite checks at the public boundary) and (c) records every op that mixes a non-scalar CPU tensor with a
# meta one -- exactly the ops that raise "Expected all tensors to be on the same device" on CUDA -- and
# every tensor created on the CPU or in float64 on the stand-in device.


class MetaGenerator(torch.Generator):
    """A CPU generator that reports the ``meta`` device (what a CUDA generator is to the code under test)."""

    @property
    def device(self):
        return torch.device("meta")


def _tensors(obj):
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            yield from _tensors(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from _tensors(o)


#: what reading a value out of a meta tensor returns (finite checks, symmetry and sign checks pass)
_READOUTS = {torch.Tensor.__bool__: True, torch.Tensor.__float__: 1.0, torch.Tensor.item: 1.0, torch.allclose: True}


def _target(func, args, kwargs):
    """The device a ``Tensor.to``/``Tensor.cpu`` call moves to (the tensor's own when none is named)."""
    if func is torch.Tensor.cpu:
        return torch.device("cpu")
    for a in list(args[1:]) + [kwargs.get("device")]:
        if isinstance(a, (str, torch.device)):
            return torch.device(a)
        if isinstance(a, torch.Tensor):
            return a.device
    return args[0].device


class DeviceAudit(TorchFunctionMode):
    def __enter__(self):   # sigprop refuses meta tensors (issue 26, item 16) except where meta stands in, here
        self._devices = _config.COMPUTE_DEVICES
        _config.COMPUTE_DEVICES = self._devices + ("meta",)
        return super().__enter__()

    def __exit__(self, *exc):
        _config.COMPUTE_DEVICES = self._devices
        return super().__exit__(*exc)

    def __init__(self):
        super().__init__()
        self.mixed, self.cpu_created, self.float64_on_meta, self.to_cpu = [], [], [], []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        name = getattr(func, "__name__", str(func))
        meta_in = any(t.device.type == "meta" for t in _tensors(args))
        if meta_in and func in _READOUTS:                  # boundary checks read a value: meta has none
            return _READOUTS[func]
        if meta_in and func in (torch.Tensor.to, torch.Tensor.cpu) and _target(func, args, kwargs).type == "cpu":
            self.to_cpu.append(name)                       # a transfer off the device: emulate it
            src = args[0]
            dtype = next((a for a in list(args[1:]) + list(kwargs.values()) if isinstance(a, torch.dtype)), src.dtype)
            return torch.zeros(src.shape, dtype=dtype)
        if isinstance(kwargs.get("generator"), MetaGenerator):
            if torch.device(kwargs.get("device") or "cpu").type != "meta":
                self.cpu_created.append(f"{name} drawn off the generator's device")
            kwargs.pop("generator")
        inputs = [t for t in _tensors((args, kwargs)) if not (t.device.type == "cpu" and t.ndim == 0)]
        if len({t.device.type for t in inputs}) > 1:
            self.mixed.append(f"{name}: {sorted({str(t.device) for t in inputs})}")
        out = func(*args, **kwargs)
        for t in _tensors(out):
            if t.device.type == "cpu" and t.ndim > 0:
                self.cpu_created.append(f"{name} -> cpu {tuple(t.shape)}")
            if t.device.type == "meta" and t.dtype == torch.float64:
                self.float64_on_meta.append(name)
        return out


@pytest.fixture
def meta_is_mps(monkeypatch):
    """Make ``meta`` behave like Apple MPS for the float64 policy: float64 work goes to the CPU."""
    def float64_device(device=None):
        device = torch.device("meta") if device is None else torch.device(device)
        return torch.device("cpu") if device.type == "meta" else device
    monkeypatch.setattr(sigprop.attention._localisation, "float64_device", float64_device)
    monkeypatch.setattr(sigprop.attention._locater, "float64_device", float64_device)


def test_samplers_draw_on_the_generators_device():
    """The Bao 01 / ledger crash: W_QK drawn on the CPU while the walks of a Monte Carlo are drawn on CUDA."""
    with DeviceAudit() as audit:
        g = MetaGenerator()
        a = spectral_qk_matrix(2, d=4, mean=0.1, scale=0.3, generator=g)
        s = anisotropic_sigma(4, generator=g)
        x = random_walk_tokens(2, 3, T=5, d=4, generator=g, dtype=torch.float64)
        omega = last_query_logits(x, a[:, None], 2.0)
        ind = propagation_indicator(omega)
        tr = qk_traces(a, s)
        q = qk_norms(a, s)
    assert a.device.type == s.device.type == ind.device.type == "meta" and a.dtype == torch.float64
    assert ind.shape == (2, 3, 5)
    assert all(v.device.type == "meta" for v in tr.values())
    assert all(v.device.type == "meta" for v in q.values() if isinstance(v, torch.Tensor))
    assert not audit.mixed, audit.mixed
    assert not audit.cpu_created, audit.cpu_created
    assert not audit.to_cpu, audit.to_cpu


def test_logits_follow_the_tokens_device_and_dtype():
    """A W_QK drawn once with an int seed (CPU, float64) works with walks drawn on an accelerator in float32."""
    w_cpu = spectral_qk_matrix(d=4, mean=0.0, scale=1.0, generator=0)
    with DeviceAudit() as audit:
        x = random_walk_tokens(7, T=5, d=4, generator=MetaGenerator())          # float32 on "the accelerator"
        omega = last_query_logits(x, w_cpu, 2.0)
        z = piecewise_linear_softmax(omega)
    assert omega.device.type == z.device.type == "meta" and omega.dtype == torch.float32
    assert not audit.mixed, audit.mixed
    # on the CPU the result is the float64 computation rounded to float32
    xc = random_walk_tokens(7, T=5, d=4, generator=1)
    assert torch.allclose(last_query_logits(xc, w_cpu, 2.0), last_query_logits(xc.double(), w_cpu, 2.0).float(),
                          rtol=TOL32[0], atol=TOL32[1])


def test_monte_carlo_of_the_chapter_runs_on_the_default_device(monkeypatch):
    """sp.monte_carlo puts its child generators on its device (sp.default_device() unless given: CUDA when
    present); the chapter's sample function (walks from the child generator, W_QK fixed outside) must then stay
    on that device. Here the device is meta, and its child generators are MetaGenerators."""
    import sigprop.stats._montecarlo as mc

    monkeypatch.setattr(mc, "block_generator", lambda base, block, device: MetaGenerator())
    w_qk = spectral_qk_matrix(d=8, mean=0.1, scale=0.3, generator=1)                 # CPU, as in the chapter

    def sample(n, g):
        x = random_walk_tokens(n, T=6, d=8, generator=g, dtype=torch.float64)
        return propagation_indicator(last_query_logits(x, w_qk, math.sqrt(8)))

    with DeviceAudit() as audit:
        est = monte_carlo(sample, 20, generator=2, chunk=10, device=torch.device("meta"), progress=False)
    assert est.mean.device.type == "meta" and est.mean.shape == (6,)
    assert not audit.mixed, audit.mixed


def test_float64_work_leaves_a_device_without_float64(meta_is_mps):
    """On MPS (no float64) the samplers draw in float32 there, do the float64 work on the CPU and return
    float32 on the device; the traces and norms come back float64 on the CPU."""
    with DeviceAudit() as audit:
        g = MetaGenerator()
        a = spectral_qk_matrix(3, d=4, mean=0.1, scale=0.3, generator=g)
        s = anisotropic_sigma(4, generator=g)
        tr = qk_traces(a, s)
        q = qk_norms(a)
    assert a.device.type == s.device.type == "meta" and a.dtype == s.dtype == torch.float32
    assert tr["tr_w"].device.type == "cpu" and tr["tr_w"].dtype == torch.float64
    assert q["fro_qk"].device.type == "cpu"
    assert not audit.float64_on_meta, audit.float64_on_meta
    assert not audit.mixed, audit.mixed


def test_samplers_device_argument_and_seed_stream():
    """An int seed draws on the CPU by default (the numbers of the book do not change); ``device`` picks where
    a seed's generator lives; a generator on another device than ``device`` is refused."""
    a = spectral_qk_matrix(d=5, mean=0.2, scale=0.4, generator=3)
    b = spectral_qk_matrix(d=5, mean=0.2, scale=0.4, generator=3, device="cpu")
    assert a.device.type == "cpu" and a.dtype == torch.float64 and torch.equal(a, b)
    assert spectral_qk_matrix(d=5, mean=0.2, scale=0.4, generator=3, dtype=torch.float32).dtype == torch.float32
    with pytest.raises(ValueError, match="generator lives on"):
        spectral_qk_matrix(d=5, mean=0.0, scale=1.0, generator=MetaGenerator(), device="cpu")
    with DeviceAudit(), pytest.raises(ValueError, match="generator lives on"):   # meta: an accelerator here
        anisotropic_sigma(5, generator=torch.Generator(), device="meta")


# ------------------------------------------------------------------ the QK-gradient of Sec. 3 (App. B.1)


def test_qk_gradient_terms_sum_to_autograd():
    """The three terms (19)-(21) of Bao et al.'s QK-gradient (used by the ledger rows on Eq. (4)) add up to the
    autograd gradient of J = E||y - F||^2/2 for the one-layer model with the clipped linear softmax.
    Float64; tolerance: sp.TOL float64 relative, on sums of O(N T^2 d^2) products."""

    g = torch.Generator().manual_seed(21)
    N, T, d = 64, 12, 8
    lam = math.sqrt(d)
    w_qk = spectral_qk_matrix(d=d, mean=0.3, scale=1.0, generator=g)       # large enough that some Z_i clip
    w_v = torch.randn(d, d, generator=g, dtype=torch.float64) / math.sqrt(d)
    w_f = torch.randn(d, d, generator=g, dtype=torch.float64) / math.sqrt(d) + torch.eye(d, dtype=torch.float64)
    walk = random_walk_tokens(N, T=T + 1, d=d, generator=g, dtype=torch.float64)
    x, y = walk[:, :T], walk[:, T]
    z = linearised_softmax_argument(last_query_logits(x, w_qk, lam))
    assert 0 < float(((z < 0) | (z > 1)).double().mean()) < 1                  # both branches of the clipping
    w = w_qk.clone().requires_grad_(True)
    s = piecewise_linear_softmax(last_query_logits(x, w, lam))               # (N, T)
    f = ((x.transpose(-1, -2) @ s.unsqueeze(-1)).squeeze(-1) @ w_v.T + x[:, -1]) @ w_f.T
    (0.5 * (y - f).pow(2).sum(-1).mean()).backward()
    u19, u20, u21 = qk_gradient_terms(x, y, w_qk, w_v, w_f, lam)
    total = (u19 + u20 + u21).T @ x[:, -1] / N                              # sum of (19)-(21), (d, d)
    rtol, atol = TOL[torch.float64]
    assert torch.allclose(total, w.grad, rtol=rtol, atol=atol), float((total - w.grad).abs().max())


def test_samplers_and_logits_refuse_what_they_cannot_hold():
    """Issue 26 (fuzzer): Sigma's entries overflowing float64 and batch shapes that do not broadcast are refused
    with expected-vs-got ValueErrors, not returned as inf or raised from inside einsum."""
    assert torch.isfinite(anisotropic_sigma(4, high=1e150, generator=0)).all()
    with pytest.raises(ValueError, match=r"\|low\|, \|high\| must be at most 6.7e\+153"):
        anisotropic_sigma(4, high=1e300, generator=0)
    with pytest.raises(ValueError, match="batch shapes must broadcast"):
        last_query_logits(torch.randn(2, 5, 8), torch.randn(3, 8, 8), 2.0)
