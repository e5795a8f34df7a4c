"""Tests for sigprop.attention._gradients: Noci et al. (2022) Lemma 3.1, Theorem 3.2, Eqs. (17)-(18).

Monte Carlo checks are single points, each from its own draws, with |MC - theory| <= 4 SE at fixed seeds
(conftest.Z: two-sided 6e-5 per check); exact identities use the float64 row of sp.TOL, times a stated
factor where a result sums many rounded terms.
"""
import math

import numpy as np
import pytest
import torch

import sigprop as sp
from conftest import Z
from sigprop.attention._gradients import (
    attention_jacobian_sq_norms,
    input_grad_bound,
    input_grad_sq_norm,
    loss_grad_sq_norms,
    query_grad_sq_norm,
    query_grad_sq_norm_equicorrelated,
    query_value_log_ratio,
    softmax_param_grad_sq_norms,
    value_grad_sq_norm,
    value_grad_sq_norm_equicorrelated,
)

RTOL, ATOL = sp.TOL[torch.float64]


def _weights(B, d, *, d_k=None, generator, dtype=torch.float64):
    d_k = d if d_k is None else d_k
    g = generator
    wq = torch.randn(B, d_k, d, generator=g, dtype=dtype) / math.sqrt(d)
    wk = torch.randn(B, d_k, d, generator=g, dtype=dtype) / math.sqrt(d)
    wv = torch.randn(B, d, d, generator=g, dtype=dtype) / math.sqrt(d)
    return wq, wk, wv


def _equicorrelated(B, n, d, rho, sigma_x2, *, generator):
    common = torch.randn(B, 1, d, generator=generator, dtype=torch.float64)
    own = torch.randn(B, n, d, generator=generator, dtype=torch.float64)
    return math.sqrt(sigma_x2) * (math.sqrt(rho) * common + math.sqrt(1 - rho) * own)


def _agree(samples, theory):
    est = sp.estimate(samples)
    z = float(est.zscore(float(theory)))
    assert abs(z) <= Z, f"MC {est} vs theory {float(theory):.6g}: z = {z:.2f}"
    return est


# ----------------------------------------------------------------------------- closed forms vs autograd

@pytest.mark.parametrize("n,d,d_k", [(5, 4, 4), (3, 6, 2), (7, 3, 5)])
def test_closed_form_matches_autograd(n, d, d_k):
    g = torch.Generator().manual_seed(n * 100 + d)
    x = 1.5 * torch.randn(4, n, d, generator=g, dtype=torch.float64)
    wq, wk, wv = _weights(4, d, d_k=d_k, generator=g)
    auto = attention_jacobian_sq_norms(x, wq, wk, wv, wrt=("v", "q", "k"))
    closed = softmax_param_grad_sq_norms(x, wq, wk, wv)
    for name in "vqk":
        # the closed form and autograd sum the same O(n^2 d) products in different orders: 100 x float64 rtol
        torch.testing.assert_close(closed[name], auto[name], rtol=RTOL * 100, atol=ATOL)


def test_uniform_surrogate_value_is_uniform():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 5, 4, generator=g, dtype=torch.float64)
    wq, wk, wv = _weights(2, 4, generator=g)
    s, a = sp.uniform_self_attention(x, wq, wk, wv)
    torch.testing.assert_close(a, torch.full_like(a, 0.2), rtol=RTOL, atol=ATOL)
    torch.testing.assert_close(s, x.mean(-2, keepdim=True).expand_as(x) @ wv.transpose(-1, -2), rtol=RTOL, atol=ATOL)


# ----------------------------------------------------------------------------- Lemma 3.1 (conditional on X)

def test_eq6_value_gradient_is_exact_under_uniform_attention():
    g = torch.Generator().manual_seed(4)
    x = torch.randn(8, 5, 4, generator=g, dtype=torch.float64)
    wq, wk, wv = _weights(8, 4, generator=g)
    got = attention_jacobian_sq_norms(x, wq, wk, wv, attention="uniform", wrt=("v",))["v"]
    # Eq. (6) involves no weight: an identity, up to summing n d^2 rounded squares (10 x float64 rtol)
    torch.testing.assert_close(got, value_grad_sq_norm(x), rtol=RTOL * 10, atol=ATOL)


def _fixed_x_mc(x1, B, seed, attention="uniform", wrt=("q", "k", "x")):
    g = torch.Generator().manual_seed(seed)
    n, d = x1.shape
    wq, wk, wv = _weights(B, d, generator=g)
    return attention_jacobian_sq_norms(x1.expand(B, n, d), wq, wk, wv, attention=attention, wrt=wrt)


def test_eq7_query_and_key_gradient():
    g = torch.Generator().manual_seed(5)
    x1 = torch.randn(5, 4, generator=g, dtype=torch.float64)
    out = _fixed_x_mc(x1, 4000, seed=6)
    theory = query_grad_sq_norm(x1)
    _agree(out["q"], theory)
    _agree(out["k"], theory)


def test_eq8_exact_value_generic_input():
    g = torch.Generator().manual_seed(7)
    x1 = torch.randn(5, 4, generator=g, dtype=torch.float64)
    out = _fixed_x_mc(x1, 4000, seed=8, wrt=("x",))
    est = _agree(out["x"], input_grad_sq_norm(x1))
    # here the printed bound holds
    assert float(est.mean) < float(input_grad_bound(x1))


def _near_collapse(n, d, scale, eps, seed):
    g = torch.Generator().manual_seed(seed)
    u = torch.randn(1, d, generator=g, dtype=torch.float64)
    u = u / u.norm() * math.sqrt(d)
    return scale * u.expand(n, d) + eps * torch.randn(n, d, generator=g, dtype=torch.float64)


def test_eq8_bound_fails_near_rank_collapse():
    """Erratum: near collapse with a large mean token the key-side term breaks Eq. (8)."""
    x1 = _near_collapse(6, 6, 10.0, 0.3, seed=9)
    out = _fixed_x_mc(x1, 4000, seed=10, wrt=("x",))
    est = _agree(out["x"], input_grad_sq_norm(x1))
    bound = float(input_grad_bound(x1))
    assert float(est.mean) - Z * float(est.stderr) > bound, (str(est), bound)


# ----------------------------------------------------------------------------- Theorem 3.2

def test_theorem32_collapsed_input_kills_query_key_gradients_only():
    g = torch.Generator().manual_seed(11)
    d, n = 5, 6
    x = torch.randn(16, 1, d, generator=g, dtype=torch.float64).expand(16, n, d)
    wq, wk, wv = _weights(16, d, generator=g)
    for attention in ("softmax", "uniform"):
        out = attention_jacobian_sq_norms(x, wq, wk, wv, attention=attention, wrt=("v", "q", "k"))
        scale = out["v"].max()
        assert float(out["q"].max()) <= RTOL * float(scale)
        assert float(out["k"].max()) <= RTOL * float(scale)
        assert float(out["v"].min()) > 0.1 * float(scale)
    # a rank-one input with unequal token scales is not enough (Theorem 3.2 needs X = 1 x^T)
    a = torch.linspace(0.5, 1.5, n, dtype=torch.float64).view(1, n, 1)
    out = attention_jacobian_sq_norms(a * x, wq, wk, wv, attention="uniform", wrt=("q",))
    assert float(out["q"].min()) > 1e-6      # B = ||La||^2 x x^T != 0: far above float64 rounding


# ----------------------------------------------------------------------------- Section 3.3

@pytest.mark.parametrize("rho", [0.0, 0.6])
def test_eq17_values_equicorrelated(rho):
    g = torch.Generator().manual_seed(12)
    n, d, B = 6, 5, 4000
    x = _equicorrelated(B, n, d, rho, 0.7, generator=g)
    _agree(value_grad_sq_norm(x), value_grad_sq_norm_equicorrelated(n, d, rho, 0.7))


@pytest.mark.parametrize("rho", [0.0, 0.5])
def test_eq18_exact_and_independence_bias(rho):
    """Eq. (18) is off by 1 + 4(1-rho)/(nd); the exact form matches Monte Carlo."""
    g = torch.Generator().manual_seed(13)
    n, d, B = 3, 3, 40000
    x = _equicorrelated(B, n, d, rho, 0.8, generator=g)
    wq, wk, wv = _weights(B, d, generator=g)
    out = attention_jacobian_sq_norms(x, wq, wk, wv, attention="uniform", wrt=("q",))["q"]
    est = _agree(out, query_grad_sq_norm_equicorrelated(n, d, rho, 0.8, exact=True))
    z_paper = float(est.zscore(query_grad_sq_norm_equicorrelated(n, d, rho, 0.8)))
    assert z_paper > Z, f"Eq. (18) as printed should be resolvably low here; z = {z_paper:.2f}"
    # conditional Eq. (7) averaged over X gives the same
    _agree(query_grad_sq_norm(x), query_grad_sq_norm_equicorrelated(n, d, rho, 0.8, exact=True))


def test_eq18_independence_bias_formula_is_small_at_large_width():
    r = query_grad_sq_norm_equicorrelated(64, 64, 0.0, exact=True) / query_grad_sq_norm_equicorrelated(64, 64, 0.0)
    assert math.isclose(r, 1 + 4 / 64**2, rel_tol=1e-12)


def test_log_ratio_and_limits():
    assert query_value_log_ratio(10, 10, 1.0) == -math.inf
    val = query_value_log_ratio(8, 16, 0.3, 0.5)
    ref = math.log(0.5**3 * 7 / 8 * 0.49 * 16 * 24) - math.log(0.5 * 256 * (1 + 0.3 * 7))
    assert math.isclose(val, ref, rel_tol=1e-12)
    arr = query_value_log_ratio(np.array([4, 8]), 16, 0.0)
    assert isinstance(arr, np.ndarray) and arr.shape == (2,)


def test_softmax_small_logits_approach_uniform_theory():
    """Real softmax with small inputs: Eq. (7) within 4 SE (Assumption 3.1 is good at sigma_x^2 = 0.05)."""
    g = torch.Generator().manual_seed(14)
    n, d, B = 6, 8, 3000
    x = _equicorrelated(B, n, d, 0.2, 0.05, generator=g)
    wq, wk, wv = _weights(B, d, generator=g)
    out = softmax_param_grad_sq_norms(x, wq, wk, wv)
    _agree(out["q"] / query_grad_sq_norm(x), 1.0)


# ----------------------------------------------------------------------------- vmap(grad)

def test_loss_grad_sq_norms_matches_manual_loop():
    g = torch.Generator().manual_seed(15)
    B, n, d = 3, 4, 3
    params = {"w": torch.randn(B, d, d, generator=g, dtype=torch.float64)}
    x = torch.randn(B, n, d, generator=g, dtype=torch.float64)

    def loss(p, xb):
        return (xb @ p["w"]).sin().sum()

    got = loss_grad_sq_norms(loss, params, x)["w"]  # (B,)
    for b in range(B):
        w = params["w"][b].clone().requires_grad_(True)
        (gw,) = torch.autograd.grad((x[b] @ w).sin().sum(), w)
        assert math.isclose(float(got[b]), float(gw.pow(2).sum()), rel_tol=1e-12)


# ----------------------------------------------------------------------------- validation

def test_validation_messages():
    with pytest.raises(ValueError, match="rho"):
        value_grad_sq_norm_equicorrelated(4, 4, 1.5)
    with pytest.raises(ValueError, match="n"):
        query_grad_sq_norm_equicorrelated(1, 4, 0.1)
    with pytest.raises(ValueError, match="attention must be one of"):
        x = torch.zeros(1, 3, 2, dtype=torch.float64)
        w = torch.zeros(1, 2, 2, dtype=torch.float64)
        attention_jacobian_sq_norms(x, w, w, w, attention="cosine")
    with pytest.raises(ValueError, match="last dimension"):
        softmax_param_grad_sq_norms(torch.zeros(3, 2), torch.zeros(2, 3), torch.zeros(2, 2), torch.zeros(2, 2))
    with pytest.raises(TypeError, match="torch.Tensor"):
        value_grad_sq_norm(np.zeros((3, 2)))


def test_eq8_exact_value_with_dk_different_from_dv():
    """The query-side coefficient is d_v^2 (the paper's d_k d_v agrees only when d_k = d_v)."""
    g = torch.Generator().manual_seed(16)
    n, d, d_k, B = 4, 3, 7, 4000
    x1 = torch.randn(n, d, generator=g, dtype=torch.float64)
    wq, wk, wv = _weights(B, d, d_k=d_k, generator=g)  # every entry variance 1/d
    out = attention_jacobian_sq_norms(x1.expand(B, n, d), wq, wk, wv, attention="uniform", wrt=("x", "q"))
    _agree(out["x"], input_grad_sq_norm(x1, d_k=d_k))
    _agree(out["q"], query_grad_sq_norm(x1))


def test_transformer_layer_grad_sq_norms_matches_autograd():
    """vmap(grad) per network and layer equals plain autograd of the summed loss (networks are independent)."""
    cfg = sp.BlockConfig(d=8, norm="post", activation="relu", d_ff=8)
    p = sp.sample_transformer(cfg, 3, inits=4, generator=21, dtype=torch.float64)
    g = torch.Generator().manual_seed(22)
    x = torch.randn(4, 2, 5, 8, generator=g, dtype=torch.float64)
    G = torch.randn(4, 2, 5, 8, generator=g, dtype=torch.float64)
    got = sp.transformer_layer_grad_sq_norms(x, p, cfg, G, names=("w_q", "w_v", "w1"))
    leaves = {k: getattr(p, k).clone().requires_grad_(True) for k in ("w_q", "w_k", "w_v", "w1", "b1", "w2", "b2")}
    q = sp.TransformerParams(**leaves)
    out = sp.transformer_forward(x, q, cfg)[-1]
    grads = torch.autograd.grad((out * G).sum(), [leaves["w_q"], leaves["w_v"], leaves["w1"]])
    for name, gr in zip(("w_q", "w_v", "w1"), grads):
        want = gr.pow(2).flatten(2).sum(-1)  # (inits, depth)
        torch.testing.assert_close(got[name], want, rtol=1e-10, atol=1e-14)
    with pytest.raises(ValueError, match="names"):
        sp.transformer_layer_grad_sq_norms(x, p, cfg, G, names=("w_x",))


@pytest.mark.parametrize("wrt, error", [(("q", "q"), ValueError), ((), ValueError), ("q", TypeError),
                                        (("z",), ValueError)])
def test_wrt_names_each_part_once(wrt, error):
    # issue 26, item 16: ("q", "q") and () reached torch.func
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(2, 3, 4, generator=g), torch.randn(2, 4, 4, generator=g)
    with pytest.raises(error, match="wrt must"):
        sp.attention_jacobian_sq_norms(x, w, w, w, wrt=wrt)
