"""The block's parts, each defined once with its forward and its Gaussian map (sigprop.block._components,
_attention, _kernels), checked against independent references and Monte Carlo.

Tolerance bases: kernels against closed forms and SciPy's adaptive quadrature (QUADPACK, relative 1e-12) to
1e-12 of the kernel's scale ``sqrt(K(a,a,a) K(b,b,b))`` (the quadrature's measured error is ~1e-14); Monte Carlo
points |MC - theory| <= Z SE (conftest.Z = 4); depth curves (layers share initialisations) with
``sp.curve_agreement`` at level 1e-3 (16 >= 13 initialisations, 9999 sign-flip resamples).
"""
import dataclasses
import math

import numpy as np
import pytest
import torch
from scipy import integrate
from scipy.special import expit

import sigprop as sp
from conftest import Z
from sigprop.block import ACTIVATIONS, activation_from_hf

th = sp.theory
SMOOTH = ("tanh", "silu", "gelu_tanh")


# ---------------------------------------------------------------- kernels: accuracy over the whole domain


def _grid():
    v = [1e-3, 0.1, 1.0, 30.0, 1e4]
    r = [-1.0, -0.99999, -0.5, 0.0, 0.3, 0.9, 0.999999, 1.0]
    a, b, rr = (x.ravel() for x in np.meshgrid(v, v, r, indexing="ij"))
    return a, b, rr * np.sqrt(a * b)


@pytest.mark.parametrize("name", ["relu", "gelu"])
def test_quadrature_reproduces_the_closed_forms_over_the_domain(name):
    # the one quadrature (used for tanh, tanh-GELU, SiLU) against ReLU's and GELU's closed forms on a grid reaching
    # the domain's edges: variances 1e-3 ... 1e4, correlations -1 ... 1 (ReLU: the kinked case)
    act = ACTIVATIONS[name]
    a, b, c = _grid()
    scale = np.sqrt(act.kernel(a, a, a) * act.kernel(b, b, b))
    err = np.abs(act.kernel_quadrature(a, b, c) - act.kernel(a, b, c)) / scale
    assert err.max() < 1e-12, (err.max(), a[err.argmax()], b[err.argmax()], c[err.argmax()])


def _scipy_kernel(phi, a, b, c):
    """E[phi(u) phi(v)] by nested adaptive quadrature in (u, v) (scipy.integrate.quad, breakpoint at 0)."""
    sa, r = math.sqrt(a), c / math.sqrt(a * b)
    s2 = b * (1 - r * r)

    def inner(u):
        m = c / a * u
        if s2 <= 1e-24 * b:
            return phi(m)
        sd = math.sqrt(s2)
        lo, hi = m - 12 * sd, m + 12 * sd
        f = lambda v: phi(v) * math.exp(-(v - m) ** 2 / (2 * s2)) / (math.sqrt(2 * math.pi) * sd)  # noqa: E731
        return integrate.quad(f, lo, hi, points=[0.0] if lo < 0 < hi else None, epsabs=0, epsrel=1e-13, limit=400)[0]

    g = lambda u: phi(u) * inner(u) * math.exp(-u * u / (2 * a)) / math.sqrt(2 * math.pi * a)  # noqa: E731
    return integrate.quad(g, -12 * sa, 12 * sa, points=[0.0], epsabs=0, epsrel=1e-12, limit=400)[0]


_PHI = {"tanh": math.tanh, "silu": lambda x: x * expit(x),
        "gelu_tanh": lambda z: 0.5 * z * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (z + 0.044715 * z**3)))}


@pytest.mark.filterwarnings("ignore::scipy.integrate.IntegrationWarning")
@pytest.mark.parametrize("name", SMOOTH)
@pytest.mark.parametrize("a, b, r", [(1e-3, 1e4, 0.9), (30.0, 30.0, 0.999), (1e4, 1e4, 0.5), (6.0, 1.0, -0.2)])
def test_quadrature_against_scipy(name, a, b, r):
    # an independent algorithm (QUADPACK, adaptive) at the domain's corners; measured agreement ~1e-14
    act, c = ACTIVATIONS[name], r * math.sqrt(a * b)
    scale = math.sqrt(float(act.kernel(a, a, a) * act.kernel(b, b, b)))
    assert abs(float(act.kernel(a, b, c)) - _scipy_kernel(_PHI[name], a, b, c)) <= 1e-12 * scale


def test_tanh_kernel_regressions_and_sign_limit():
    # issue 26, item 1: the 48-point Gauss-Hermite rule gave 0.898 (q = 30), 0.985 (q = 100), 0.291 (q = 1e4, rho = 0.5)
    k = lambda q, r: th.activation_kernel(q, q, r * q, activation="tanh")  # noqa: E731
    assert k(30, 1.0) == pytest.approx(0.856268605116101, abs=1e-12)       # scipy, test_quadrature_against_scipy
    assert k(100, 1.0) == pytest.approx(0.9205368634305, abs=1e-11)
    # large variance: tanh -> sign, E = (2/pi) arcsin(r) + O(1/q) for |r| < 1; E tanh^2 = 1 - sqrt(2/(pi q)) (1 + O(1/q))
    for r in (-0.9, -0.3, 0.0, 0.5, 0.9):
        assert k(1e8, r) == pytest.approx(2 / math.pi * math.asin(r), abs=1e-7)
    assert k(1e8, 1.0) == pytest.approx(1 - math.sqrt(2 / (math.pi * 1e8)), abs=1e-10)
    # small variance: tanh u ~ u - u^3/3: E = c (1 - a - b) + O(c^3)
    assert k(1e-4, 0.5) == pytest.approx(0.5e-4 * (1 - 2e-4), rel=1e-7)


def test_kernels_stay_finite_at_huge_variances():
    # issue 26: gelu's closed form overflowed an intermediate at 1e100; every kernel tends to its limit's (ReLU or sign)
    for a in (1e100, 1e300):
        for name in ("gelu", "silu", "gelu_tanh"):
            got = th.activation_kernel(a, a, 0.5 * a, activation=name)
            assert got == pytest.approx(th.activation_kernel(a, a, 0.5 * a, activation="relu"), rel=1e-12)
        assert th.activation_kernel(a, a, 0.5 * a, activation="tanh") == pytest.approx(1 / 3, abs=1e-12)


def test_gelu_tanh_accuracy_at_variance_20():
    # the docstring's old promise (1e-6) was missed by 40x; now ~1e-14 against QUADPACK
    got = th.activation_kernel(20.0, 20.0, 6.0, activation="gelu_tanh")
    assert got == pytest.approx(_scipy_kernel(_PHI["gelu_tanh"], 20.0, 20.0, 6.0), rel=1e-12)


@pytest.mark.parametrize("name", ["silu", "gelu", "relu"])
def test_gated_kernel_against_monte_carlo(name):
    # a gated unit phi(u) u' with (u', v') an independent copy of (u, v): E = c K(a, b, c); 400,000 quadruples
    a, b, c = 0.8, 1.7, 0.6
    g = torch.Generator().manual_seed(11)
    z = torch.randn(400_000, 4, generator=g, dtype=torch.float64)
    r = c / math.sqrt(a * b)

    def pair(z1, z2):
        return math.sqrt(a) * z1, math.sqrt(b) * (r * z1 + math.sqrt(1 - r * r) * z2)

    (u, v), (u3, v3) = pair(z[:, 0], z[:, 1]), pair(z[:, 2], z[:, 3])
    phi = ACTIVATIONS[name].forward
    assert sp.estimate(phi(u) * u3 * phi(v) * v3).agrees(th.activation_kernel(a, b, c, activation=name, gated=True), z=Z)


def test_forward_and_kernel_describe_the_same_function():
    # one registry: each activation's torch forward, in-place forward and float64 numpy form agree
    x = torch.linspace(-30, 30, 2001, dtype=torch.float64)
    for act in ACTIVATIONS.values():
        ref = act.forward(x)
        assert torch.allclose(act.forward_(x.clone()), ref, rtol=0, atol=1e-15)
        assert np.allclose(act.numpy(x.numpy()), ref.numpy(), rtol=1e-13, atol=1e-15)   # torch's GELU underflows first


def test_activation_lookup_by_huggingface_name():
    assert activation_from_hf("gelu_new").name == "gelu_tanh" and activation_from_hf("silu").name == "silu"
    assert activation_from_hf("swish").name == "silu" and activation_from_hf("gelu").name == "gelu"
    assert activation_from_hf(torch.nn.GELU(approximate="tanh")).name == "gelu_tanh"
    assert activation_from_hf(torch.nn.SiLU()).name == "silu" and activation_from_hf(torch.nn.ReLU()).name == "relu"
    with pytest.raises(ValueError, match="quick_gelu"):
        activation_from_hf("quick_gelu")


# ---------------------------------------------------------------- the forward against HuggingFace's Llama / Qwen2


def _hf_layer(family, c):
    transformers = pytest.importorskip("transformers")
    kw = dict(hidden_size=c.d, num_attention_heads=c.heads, num_key_value_heads=c.group_count,
              intermediate_size=c.hidden, rms_norm_eps=1e-300, rope_theta=c.rope_theta, num_hidden_layers=1,
              vocab_size=8, max_position_embeddings=64)
    cls = {"llama": (transformers.LlamaConfig, transformers.LlamaModel),
           "qwen2": (transformers.Qwen2Config, transformers.Qwen2Model)}[family]
    cfg = cls[0](**kw)
    cfg._attn_implementation = "eager"
    return cls[1](cfg).double().eval()


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_block_equals_huggingface_decoder_layer(family, monkeypatch):
    # pre-RMSNorm, RoPE (HF's rotate_half), grouped-query heads, SwiGLU, W_O; Qwen2's q/k/v biases. The same weights in
    # both, float64. HF's RMSNorm and eager softmax compute in float32 whatever the model's dtype (a 3e-7 difference):
    # the norms are replaced by torch's float64 RMSNorm without gain and the softmax keeps float64, so what remains
    # is rounding
    c = sp.BlockConfig(d=16, heads=4, kv_heads=2, d_ff=24, norm="pre", activation="silu", gated=True, causal=True,
                       positions="rope", sigma_o2=1.0, sigma_qk2=0.2, sigma_bqk2=0.1 if family == "qwen2" else 0.0,
                       sigma_bv2=0.1 if family == "qwen2" else 0.0)
    p = sp.sample_transformer(c, 1, inits=1, generator=0, dtype=torch.float64)
    model = _hf_layer(family, c)
    softmax = torch.nn.functional.softmax
    monkeypatch.setattr(torch.nn.functional, "softmax", lambda x, dim=None, dtype=None, **kw: softmax(x, dim=dim))
    layer = model.layers[0]
    a, m = layer.self_attn, layer.mlp
    for name in ("input_layernorm", "post_attention_layernorm"):
        setattr(layer, name, torch.nn.RMSNorm(c.d, eps=1e-300, elementwise_affine=False))
    with torch.no_grad():
        for lin, w, b in ((a.q_proj, p.w_q, p.b_q), (a.k_proj, p.w_k, p.b_k), (a.v_proj, p.w_v, p.b_v)):
            lin.weight.copy_(w[0, 0].reshape(-1, c.d))
            if lin.bias is not None:
                lin.bias.copy_(b[0, 0].reshape(-1))
        a.o_proj.weight.copy_(p.w_o[0, 0])
        m.gate_proj.weight.copy_(p.w1[0, 0])
        m.up_proj.weight.copy_(p.w3[0, 0])
        m.down_proj.weight.copy_(p.w2[0, 0])
        x = sp.gaussian_tokens(2, T=12, d=c.d, generator=1, dtype=torch.float64)
        seen = []
        hook = layer.register_forward_hook(lambda mod, args, out: seen.append(out[0] if isinstance(out, tuple) else out))
        model(inputs_embeds=x)
        hook.remove()
        ours = sp.transformer_forward(x, p, c)[1, 0]
    assert torch.allclose(ours, seen[0], rtol=0, atol=1e-10)


# ---------------------------------------------------------------- maps of the new parts against Monte Carlo


def _curve(cfg, depth=6, T=32, seed=0, inits=16, rho0=0.2):
    est = sp.mc_cosine_vs_depth(cfg, depth, T=T, inits=inits, seqs=2, rho0=rho0, generator=seed)
    traj = th.iterate_block_map(1.0, float(est.mean[0]), depth, cfg, T=T)
    return est, traj


def _agrees(est, theory):
    res = sp.curve_agreement(est.samples[:, 1:], np.asarray(theory)[1:], level=1e-3, n_resamples=9999)
    print("curve p =", round(float(res.p), 4), "z max =", np.round(est[1:].zscore(np.asarray(theory)[1:]), 2))
    return res.passed


def test_gated_mlp_map_against_random_gated_mlps():
    # W_2 (phi(W_1 x + b_1) * (W_3 x + b_3)) + b_2, SiLU (SwiGLU), d_ff != d; 3000 random MLPs on two tokens with
    # exact overlaps q, p (given the tokens the pre-activations are exactly Gaussian: the map is exact at any width;
    # random tokens would add a Jensen bias ~2/d, +5% here, from the spread of their norms)
    q, p, sw, sb, sw_out = 1.0, 0.35, 0.8, 0.05, 1.7
    g = torch.Generator().manual_seed(5)
    n, d, f = 3000, 48, 96
    x = math.sqrt(q) * sp.exact_equicorrelated_tokens(n, T=2, d=d, rho=p / q, generator=g, dtype=torch.float64)

    def normal(var, *shape):
        return math.sqrt(var) * torch.randn(n, *shape, generator=g, dtype=torch.float64)

    w1, b1, w3, b3 = normal(sw / d, f, d), normal(sb, 1, f), normal(sw / d, f, d), normal(sb, 1, f)
    w2 = normal(sw_out / f, d, f)
    h = torch.nn.functional.silu(x @ w1.transpose(-1, -2) + b1) * (x @ w3.transpose(-1, -2) + b3)
    y = h @ w2.transpose(-1, -2)
    tq, tp = th.mlp_map(q, p, sigma_w2=sw, sigma_b2=sb, activation="silu", sigma_w2_out=sw_out, sigma_b2_out=0.0,
                        gated=True)
    assert sp.estimate((y[:, 0] ** 2).mean(-1)).agrees(tq, z=Z) and sp.estimate((y[:, 0] * y[:, 1]).mean(-1)).agrees(tp, z=Z)


def test_swiglu_gqa_block_map_against_random_transformers():
    # a Llama-style block without RoPE: pre-LN, SwiGLU, grouped-query heads, W_O; finite-T map vs Monte Carlo
    cfg = sp.BlockConfig.from_beta(1.2, T=32, d=128, heads=4, kv_heads=2, norm="pre", activation="silu", gated=True,
                                   d_ff=192, sigma_o2=1.0, sigma_v2=1.0, sigma_w2=1.0, sigma_w2_out=0.5)
    est, traj = _curve(cfg)
    assert _agrees(est, traj.cosine)


def test_parallel_block_map_against_random_transformers():
    # GPT-NeoX / GPT-J layout: x <- alpha_mlp (alpha_sa x + SA(LN x)) + MLP(LN x)
    cfg = sp.BlockConfig.from_beta(1.6, T=32, d=128, heads=2, norm="pre", parallel=True, activation="gelu",
                                   sigma_o2=0.8, sigma_v2=1.0, sigma_w2=1.0, alpha_sa=1.0, alpha_mlp=1.0)
    est, traj = _curve(cfg, seed=1)
    assert _agrees(est, traj.cosine)
    # the sequential block is a different map here: the test can fail
    seq = th.iterate_block_map(1.0, float(est.mean[0]), 6, dataclasses.replace(cfg, parallel=False), T=32)
    assert not sp.curve_agreement(est.samples[:, 1:], seq.cosine[1:], level=1e-3, n_resamples=9999).passed


def test_query_bias_map_against_random_transformers():
    # the query bias adds e = sigma_bqk2 / (sigma_qk2 d) = 4 to the logits' token overlaps: beta_eff = beta sqrt(5)
    cfg = sp.BlockConfig.from_beta(1.2, T=32, d=128, heads=2, norm="post", sigma_v2=1.0, sigma_w2=1.0)
    cfg = dataclasses.replace(cfg, sigma_bqk2=4.0 * cfg.qk_variance * cfg.d)
    assert cfg.qk_bias == pytest.approx(4.0)
    est, traj = _curve(cfg, seed=2)
    assert _agrees(est, traj.cosine)
    unbiased = th.iterate_block_map(1.0, float(est.mean[0]), 6, dataclasses.replace(cfg, sigma_bqk2=0.0), T=32)
    assert not sp.curve_agreement(est.samples[:, 1:], unbiased.cosine[1:], level=1e-3, n_resamples=9999).passed


def test_key_bias_drops_out_of_the_softmax_without_rope():
    # b_K adds q_t . b_K to a whole row of logits: the network is the same with or without it (exact identity); with
    # RoPE the key bias is turned by the key's position, q_t . R_(s-t) b_K varies along the row, and it matters
    cfg = sp.BlockConfig(d=16, heads=2, sigma_qk2=0.3, sigma_bqk2=0.5, norm="pre", causal=True)
    p = sp.sample_transformer(cfg, 2, inits=2, generator=0, dtype=torch.float64)
    x = sp.gaussian_tokens(3, T=7, d=16, generator=1, dtype=torch.float64)
    no_key_bias = dataclasses.replace(p, b_k=torch.zeros_like(p.b_k))
    assert torch.allclose(sp.transformer_forward(x, p, cfg), sp.transformer_forward(x, no_key_bias, cfg), atol=1e-12)
    rope = dataclasses.replace(cfg, positions="rope")
    assert not torch.allclose(sp.transformer_forward(x, p, rope), sp.transformer_forward(x, no_key_bias, rope), atol=1e-6)


def _one_attention_layer(cfg, n, seed):
    """Per-network (q', p') of one attention layer (no residual, LN or MLP) on exactly equicorrelated tokens."""
    params = sp.sample_transformer(cfg, 1, inits=n, generator=seed)
    x = sp.exact_equicorrelated_tokens(n, 1, T=32, d=cfg.d, rho=0.2, generator=seed + 1)
    q, p = sp.token_overlaps(sp.transformer_forward(x, params, cfg)[-1].double())
    return sp.estimate(q[:, 0]), sp.estimate(p[:, 0])


def test_grouped_query_heads_keep_the_mean_map_and_widen_fluctuations():
    # sharing keys and values between heads does not change E q', E p' (logits of different heads are uncorrelated,
    # and |concat_h A_h V x|^2 has no cross-head terms): the means of multi-query (kv_heads = 1) and multi-head
    # attention agree (independent networks: the SE of a difference); sharing correlates the heads' outputs, so q', p'
    # fluctuate more between networks. One attention layer, 4 heads of width 32, T = 32, beta = 1.6, 400 networks.
    base = sp.BlockConfig.from_beta(1.6, T=32, d=128, heads=4, norm="none", mlp=False, alpha_sa=0.0)
    got = {kv: _one_attention_layer(dataclasses.replace(base, kv_heads=kv), 400, seed=10 + kv) for kv in (4, 2, 1)}
    tq, tp = th.block_map(1.0, 0.2, base, T=32)
    for kv, (eq, ep) in got.items():
        sd = [float(e.stderr) * math.sqrt(e.n) for e in (eq, ep)]
        print(f"kv_heads={kv}: q' = {float(eq.mean):.4f} +- {float(eq.stderr):.4f} (map {tq:.4f}), p' = "
              f"{float(ep.mean):.4f} +- {float(ep.stderr):.4f} (map {tp:.4f}); sd over networks {sd[0]:.4f}, {sd[1]:.4f}")
    for i in (0, 1):   # q', then p'
        a, b = got[1][i], got[4][i]
        assert abs(float(a.mean - b.mean)) <= Z * math.hypot(float(a.stderr), float(b.stderr))
    # 399 degrees of freedom each: a variance ratio above 1.4 has p < 1e-3 under equal variances
    assert float(got[1][0].stderr / got[4][0].stderr) ** 2 > 1.4


def test_rms_and_layer_norm_differ_by_order_one_over_d():
    # the map is the same for both normalisations; the measured difference of the cosine after 6 blocks (the same
    # weights and tokens: a paired difference) is O(1/d): its mean times d stays bounded from d = 32 to 128
    diffs = {}
    for d in (32, 128):
        rms = sp.BlockConfig.from_beta(0.8, T=16, d=d, norm="post", sigma_v2=1.0, sigma_w2=1.0, sigma_b2=0.3)
        ln = dataclasses.replace(rms, ln_center=True)
        a = sp.mc_cosine_vs_depth(rms, 6, T=16, inits=48, seqs=2, rho0=0.2, generator=7, dtype=torch.float64)
        b = sp.mc_cosine_vs_depth(ln, 6, T=16, inits=48, seqs=2, rho0=0.2, generator=7, dtype=torch.float64)
        diffs[d] = sp.estimate(b.samples[:, -1] - a.samples[:, -1])
        print(f"d={d}: LN - RMS = {float(diffs[d].mean):+.5f} +- {float(diffs[d].stderr):.5f}")
    for d, est in diffs.items():
        assert abs(float(est.mean)) <= 2.0 / d + Z * float(est.stderr)


def test_qp_maps_refuse_rope():
    cfg = sp.BlockConfig.from_beta(1.0, T=16, d=32, norm="pre", positions="rope")
    for call in (lambda: th.block_map(1.0, 0.2, cfg, T=16), lambda: th.cosine_vs_depth(cfg, 3, T=16),
                 lambda: th.causal_ipr(1.0, 0.2, cfg, T=8)):
        with pytest.raises(ValueError, match="rotary position embeddings.*iterate_gram_map"):
            call()


def test_rope_logit_covariance():
    # the Gram map's RoPE logits against the r2-theory report's Eq. (R1), derived independently:
    # Cov(l_ts, l_t's') = sigma_a^2 G_tt' G_ss' c((s - t) - (s' - t')), c(D) = (2/d_k) sum_k cos(D theta_k);
    # 40,000 draws (20,000 antithetic pairs: means are exactly 0), |MC - formula| <= Z SE per entry
    from sigprop.block._attention import _logit_sampler
    T, dk, theta = 8, 16, 100.0
    cfg = sp.BlockConfig(d=32, heads=2, sigma_qk2=0.05, positions="rope", rope_theta=theta)
    G = 0.4 * np.eye(T) + 0.6
    a = _logit_sampler(G, cfg)(40_000, torch.Generator().manual_seed(0))
    freqs = theta ** (-np.arange(0, dk, 2) / dk)
    c = lambda D: 2 / dk * np.cos(D * freqs).sum()  # noqa: E731
    for t, s, t2, s2 in ((3, 3, 3, 3), (3, 5, 3, 1), (6, 2, 1, 4), (0, 7, 7, 0)):
        prod = (a[:20_000, t, s] * a[:20_000, t2, s2]).numpy()       # one of each antithetic pair
        want = cfg.logit_var * G[t, t2] * G[s, s2] * c((s - t) - (s2 - t2))
        assert sp.estimate(torch.from_numpy(prod)).agrees(want, z=Z), (t, s, t2, s2)


@pytest.mark.parametrize("kw", [dict(norm="post", alpha_sa=0.0, mlp=False), dict(norm="pre", sigma_v2=1.0, sigma_w2=1.0)])
def test_rope_gram_map_against_random_transformers(kw):
    # attention-only blocks x <- LN(SA(x)) (rank collapse) and pre-LN blocks with an MLP, beta = 2, two heads of
    # d_k = 64, T = 32, d = 128: the Gram map with RoPE agrees with random RoPE transformers (curve test), the map
    # without positions does not (measured p = 1e-4 and 2e-4)
    T, depth = 32, 5
    cfg = sp.BlockConfig.from_beta(2.0, T=T, d=128, heads=2, positions="rope", **kw)
    est = sp.mc_cosine_vs_depth(cfg, depth, T=T, inits=16, seqs=2, rho0=0.5, generator=0)
    G0 = (1 - float(est.mean[0])) * np.eye(T) + float(est.mean[0])
    rope = th.iterate_gram_map(G0, depth, cfg, generator=0).mean_cosine()
    none = th.iterate_gram_map(G0, depth, dataclasses.replace(cfg, positions="none"), generator=0).mean_cosine()
    assert _agrees(est, rope)
    assert not sp.curve_agreement(est.samples[:, 1:], none[1:], level=1e-3, n_resamples=9999).passed
