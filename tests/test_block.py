import dataclasses
import math

import numpy as np
import pytest
import torch

import sigprop as sp
from conftest import Z
from reference_transformer import NaiveTransformer, naive_forward


def _cfg(**kw):
    base = dict(d=16, norm="post", sigma_qk2=0.05)
    base.update(kw)
    return sp.BlockConfig(**base)


def test_shapes_and_layer_zero_is_input():
    cfg = _cfg(heads=2)
    params = sp.sample_transformer(cfg, 3, inits=4, generator=0)
    assert params.w_q.shape == (4, 3, 2, 8, 16) and params.w_v.shape == (4, 3, 2, 8, 16)
    x = sp.gaussian_tokens(5, T=6, d=16, generator=1)
    out = sp.transformer_forward(x, params, cfg)
    assert out.shape == (4, 4, 5, 6, 16)
    assert torch.equal(out[0, 2], x)
    cos = sp.transformer_forward(x, params, cfg, measure=sp.mean_cosine)
    assert cos.shape == (4, 4, 5) and torch.allclose(cos[-1], sp.mean_cosine(out[-1]))


def test_forward_matches_self_attention_reference():
    # one block, no MLP, no LN: out = alpha x + branch * SA(x) with sp.self_attention
    cfg = _cfg(norm="none", mlp=False, alpha_sa=0.7, branch_sa=1.3)
    params = sp.sample_transformer(cfg, 1, inits=2, generator=0, dtype=torch.float64)
    x = sp.gaussian_tokens(2, 3, T=5, d=16, generator=1, dtype=torch.float64)
    out = sp.transformer_forward(x, params, cfg)[-1]
    sa, _ = sp.self_attention(x, params.w_q[:, 0, 0, None], params.w_k[:, 0, 0, None], params.w_v[:, 0, 0, None])
    assert torch.allclose(out, 0.7 * x + 1.3 * sa, atol=1e-12)


def test_post_ln_skip_and_branch_weights_are_equivalent():
    # S + alpha X and X + S/alpha give the same post-LN network (the notation page's claim)
    a = 1.7
    cfg1 = _cfg(alpha_sa=a, alpha_mlp=a)
    cfg2 = _cfg(branch_sa=1 / a, branch_mlp=1 / a)
    params = sp.sample_transformer(cfg1, 4, inits=2, generator=0, dtype=torch.float64)
    x = sp.gaussian_tokens(3, T=6, d=16, generator=1, dtype=torch.float64)
    assert torch.allclose(sp.transformer_forward(x, params, cfg1), sp.transformer_forward(x, params, cfg2), atol=1e-10)


def test_post_ln_tokens_have_unit_norm_and_weight_variances():
    cfg = _cfg(d=64, sigma_v2=2.0, sigma_w2=1.5, sigma_b2=0.3)
    params = sp.sample_transformer(cfg, 1, inits=200, generator=0, dtype=torch.float64)
    assert sp.estimate(params.w_v.pow(2).mean((1, 2, 3, 4))).agrees(2.0 / 64, z=Z)
    assert sp.estimate(params.w1.pow(2).mean((1, 2, 3))).agrees(1.5 / 64, z=Z)
    assert sp.estimate(params.b1.pow(2).mean((1, 2))).agrees(0.3, z=Z)
    assert sp.estimate(params.w_q.pow(2).mean((1, 2, 3, 4))).agrees(0.05, z=Z)
    out = sp.transformer_forward(sp.gaussian_tokens(2, T=4, d=64, generator=1, dtype=torch.float64), params, cfg)
    q, _ = sp.token_overlaps(out[-1])
    assert torch.allclose(q, torch.ones_like(q))


def test_gg_variance_gives_logit_variance_beta2_logT():
    # App. B.1: Var(a_ts) = beta^2 log T q^2 with the 1/sqrt(d) logit scale
    beta, T, d = 0.8, 50, 64
    cfg = sp.BlockConfig.from_beta(beta, T=T, d=d, logit_scale=1 / math.sqrt(d))
    params = sp.sample_transformer(cfg, 1, inits=400, generator=0, dtype=torch.float64)
    x = sp.gaussian_tokens(400, 1, T=2, d=d, generator=1, dtype=torch.float64)
    qv = torch.einsum("nbtd,nkd->nbtk", x, params.w_q[:, 0, 0])
    kv = torch.einsum("nbtd,nkd->nbtk", x, params.w_k[:, 0, 0])
    a = cfg.scale * (qv[:, 0, 0] * kv[:, 0, 1]).sum(-1)
    assert sp.estimate(a**2).agrees(beta**2 * math.log(T), z=Z)


@pytest.mark.parametrize("kwargs, err, match", [
    (dict(d=0), ValueError, "d must be >= 1"),
    (dict(d=10, heads=3), ValueError, "divisible by heads"),
    (dict(d=8, norm="sandwich"), ValueError, "norm must be one of"),
    (dict(d=8, activation="swish"), ValueError, "activation must be one of"),
    (dict(d=8, sigma_o2=-0.1), ValueError, "sigma_o2 must be >= 0"),
    (dict(d=8, sigma_bv2=float("inf")), ValueError, "sigma_bv2 must be finite"),
    (dict(d=8, alpha_sa=-1.0), ValueError, "alpha_sa must be >= 0"),
    (dict(d=8, sigma_qk2=float("nan")), ValueError, "sigma_qk2 must be finite"),
    (dict(d=8.0), TypeError, "d must be an int"),
])
def test_config_validation(kwargs, err, match):
    with pytest.raises(err, match=match):
        sp.BlockConfig(**kwargs)


def test_forward_validation():
    cfg = _cfg()
    params = sp.sample_transformer(cfg, 1, inits=2, generator=0)
    with pytest.raises(ValueError, match="last dimension d=16"):
        sp.transformer_forward(torch.zeros(2, 3, 5, 8), params, cfg)
    with pytest.raises(ValueError, match="inits=2"):
        sp.transformer_forward(torch.zeros(3, 3, 5, 16), params, cfg)
    with pytest.raises(ValueError, match="share device and dtype"):
        sp.transformer_forward(torch.zeros(3, 5, 16, dtype=torch.float64), params, cfg)
    with pytest.raises(TypeError, match="BlockConfig"):
        sp.sample_transformer({"d": 16}, 1)


def test_from_beta_and_back():
    # Result 1: sigma_qk^2 = beta sqrt(log T) / d for the default logit scale 1/sqrt(d_k), any number of heads
    cfg = sp.BlockConfig.from_beta(1.0, T=math.e, d=4)
    assert cfg.sigma_qk2 == pytest.approx(0.25)
    for heads in (1, 2, 4):
        c = sp.BlockConfig.from_beta(0.7, T=64, d=32, heads=heads)
        assert c.sigma_qk2 == pytest.approx(0.7 * math.sqrt(math.log(64)) / 32)
        assert c.beta(64) == pytest.approx(0.7)
    # the default (Xavier) initialisation has an equivalent beta too (Noci et al. 2022)
    assert sp.BlockConfig(d=10, d_k=30).qk_variance == pytest.approx(0.05)
    with pytest.raises(ValueError, match="T"):
        sp.BlockConfig.from_beta(1.0, T=1, d=4)


def test_config_stores_validated_types():
    # numbers stored as float/int, flags as bool: a numpy integer or a string never reaches the forward pass
    cfg = sp.BlockConfig(d=np.int64(16), alpha_sa=np.float32(1.5), sigma_qk2=torch.tensor(0.1), gain_control=np.bool_(True))
    assert type(cfg.d) is int and type(cfg.alpha_sa) is float and type(cfg.sigma_qk2) is float
    assert cfg.gain_control is True
    import json
    json.dumps(dataclasses.asdict(cfg))
    for bad, err in [(dict(alpha_sa="0.5"), TypeError), (dict(gain_control="no"), TypeError),
                     (dict(alpha_sa=np.ones(2)), TypeError), (dict(sigma_v2=-1.0), ValueError)]:
        with pytest.raises(err):
            sp.BlockConfig(d=16, **bad)


def test_mc_cosine_vs_depth_shapes_and_samples():
    cfg = sp.BlockConfig.from_beta(0.5, T=8, d=16)
    est = sp.mc_cosine_vs_depth(cfg, 3, T=8, inits=5, seqs=2, rho0=0.2, generator=0)
    assert est.mean.shape == (4,) and est.samples.shape == (5, 4) and est.n == 5
    assert torch.allclose(est.samples.mean(0), est.mean)
    again = sp.mc_cosine_vs_depth(cfg, 3, T=8, inits=5, seqs=2, rho0=0.2, generator=0)
    assert torch.equal(est.mean, again.mean)
    with pytest.raises(TypeError, match="BlockConfig"):
        sp.mc_cosine_vs_depth({"d": 16}, 3, T=8)


def test_forward_rejects_params_of_another_architecture():
    params = sp.sample_transformer(sp.BlockConfig(d=16, d_k=4), 2, generator=0)
    x = sp.gaussian_tokens(2, T=5, d=16, generator=1)
    with pytest.raises(ValueError, match="params do not match config: w_q"):
        sp.transformer_forward(x, params, sp.BlockConfig(d=16))
    params = sp.sample_transformer(sp.BlockConfig(d=16, d_ff=32), 2, generator=0)
    with pytest.raises(ValueError, match="params do not match config: w1"):
        sp.transformer_forward(x, params, sp.BlockConfig(d=16))


# ---------------------------------------------------------------- off-the-shelf pieces


OFF_THE_SHELF = [
    dict(sigma_o2=0.7, sigma_bv2=0.1, sigma_bo2=0.2, activation="gelu", heads=2, d_ff=12, sigma_w2_out=1.3,
         sigma_b2_out=0.05),
    dict(sigma_bv2=0.1, sigma_bo2=0.2, activation="gelu_tanh", norm="pre", causal=True),
    dict(sigma_o2=1.1, sigma_bv2=0.3, gain_control=True, norm="none", activation="gelu", branch_sa=0.6),
    dict(sigma_o2=0.5, heads=4, norm="pre", activation="relu", causal=True, alpha_sa=0.8),
    # today's parts: grouped-query heads, RoPE (full and partial), q/k biases, SwiGLU / GeGLU, LayerNorm, parallel
    dict(heads=4, kv_heads=2, positions="rope", norm="pre", activation="silu", gated=True, d_ff=12, sigma_o2=0.9,
         causal=True),
    dict(heads=2, kv_heads=1, positions="rope", rope_fraction=0.5, rope_theta=100.0, sigma_bqk2=0.3, sigma_bv2=0.1,
         norm="pre", parallel=True, ln_center=True, activation="gelu_tanh", alpha_sa=0.7, alpha_mlp=1.2),
    dict(heads=2, sigma_bqk2=0.2, activation="gelu", gated=True, norm="post", ln_center=True, sigma_bo2=0.3),
    dict(heads=4, kv_heads=1, norm="none", activation="silu", mlp=False, parallel=False, gain_control=True),
]


@pytest.mark.parametrize("kw", OFF_THE_SHELF)
def test_off_the_shelf_pieces_match_the_independent_reference(kw):
    # W_O, value and output biases, GELU (both forms), separate second-layer variances: both kernels against
    # tests/reference_transformer.py (written from the definitions, no shared code); float64 rounding only
    cfg = sp.BlockConfig(d=8, sigma_qk2=0.2, sigma_b2=0.1, **kw)
    params = sp.sample_transformer(cfg, 2, inits=2, generator=0, dtype=torch.float64)
    x = sp.gaussian_tokens(2, 3, T=4, d=8, generator=1, dtype=torch.float64)
    models = [NaiveTransformer(cfg, 2).double().load(params, i) for i in range(2)]
    from sigprop.block import forward_reference as _forward_reference
    with torch.no_grad():
        ref = naive_forward(models, x)
        fast = sp.transformer_forward(x, params, cfg)
        loop = _forward_reference(x, params, cfg, lambda y: y)
    scale = float(ref.abs().max())
    assert torch.allclose(fast, ref, rtol=0, atol=1e-12 * scale) and torch.allclose(loop, ref, rtol=0, atol=1e-12 * scale)


def test_documents_block_draws_do_not_move():
    # the optional weights are drawn after the documents' ones, and only when present: the same seed gives the
    # same W_Q ... b_2 with or without them (the ledger's and the chapters' numbers stay put)
    base = sp.BlockConfig(d=16, heads=2, sigma_qk2=0.1, sigma_b2=0.05)
    more = dataclasses.replace(base, sigma_o2=0.5, sigma_bv2=0.2, sigma_bo2=0.1)
    a = sp.sample_transformer(base, 3, inits=2, generator=7)
    b = sp.sample_transformer(more, 3, inits=2, generator=7)
    for name in ("w_q", "w_k", "w_v", "w1", "b1", "w2", "b2"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    assert a.w_o.shape == (2, 3, 0, 0) and not a.has_out_proj and b.has_out_proj
    assert not a.b_v.any() and not a.b_o.any() and b.b_v.any() and b.b_o.any()


def test_off_the_shelf_weight_variances():
    d, f = 64, 96
    cfg = sp.BlockConfig(d=d, d_ff=f, heads=4, sigma_o2=0.6, sigma_bv2=0.3, sigma_bo2=0.2, sigma_w2=1.5,
                         sigma_w2_out=0.7, sigma_b2=0.1, sigma_b2_out=0.4, sigma_qk2=0.05)
    p = sp.sample_transformer(cfg, 1, inits=200, generator=0, dtype=torch.float64)
    # per init the mean square of many i.i.d. entries; over 200 inits |mean - variance| <= Z SE
    for t, want in ((p.w_o, 0.6 / d), (p.b_v, 0.3), (p.b_o, 0.2), (p.w1, 1.5 / d), (p.w2, 0.7 / f),
                    (p.b1, 0.1), (p.b2, 0.4)):
        assert sp.estimate(t.pow(2).flatten(1).mean(1)).agrees(want, z=Z)
    assert cfg.map_params(16)["sigma_w2_out"] == 0.7 and sp.BlockConfig(d=8).map_params(16)["sigma_o2"] == 1.0


def test_forward_checks_the_output_projection():
    cfg = sp.BlockConfig(d=16, sigma_o2=0.5)
    params = sp.sample_transformer(sp.BlockConfig(d=16), 1, inits=2, generator=0)
    with pytest.raises(ValueError, match="w_o has shape"):
        sp.transformer_forward(sp.gaussian_tokens(2, T=5, d=16, generator=1), params, cfg)


# ---------------------------------------------------------------- configuration edges (issue 26, item 13)


def test_from_beta_edges():
    with pytest.raises(TypeError, match="not both"):
        sp.BlockConfig.from_beta(2, T=10, d=8, sigma_qk2=0.1)          # was silently ignored
    zero = sp.BlockConfig.from_beta(0.0, T=10, d=8)                      # beta = 0 is valid: uniform attention
    assert zero.sigma_qk2 == 0.0 and zero.beta(10) == 0.0
    assert sp.BlockConfig(d=8, logit_scale=0.0).beta(16) == 0.0         # built, and .beta() answers
    with pytest.raises(ValueError, match="logit_scale = 0"):
        sp.BlockConfig.from_beta(1.0, T=10, d=8, logit_scale=0.0)
    with pytest.raises(ValueError, match="T"):
        sp.BlockConfig.from_beta(0.0, T=1, d=8)


@pytest.mark.parametrize("kwargs, err, match", [
    (dict(d=8, heads=4, kv_heads=3), ValueError, "kv_heads must divide heads"),
    (dict(d=8, parallel=True), ValueError, "parallel residuals"),
    (dict(d=8, positions="alibi"), ValueError, "positions must be one of"),
    (dict(d=8, heads=2, positions="rope", rope_fraction=0.3), ValueError, "even"),
    (dict(d=8, rope_theta=0.0), ValueError, "rope_theta must be > 0"),
    (dict(d=8, gated="yes"), TypeError, "gated must be True or False"),
    (dict(d=8, sigma_bqk2=-1.0), ValueError, "sigma_bqk2 must be >= 0"),
])
def test_new_config_fields_are_validated(kwargs, err, match):
    with pytest.raises(err, match=match):
        sp.BlockConfig(**kwargs)


def test_new_parts_do_not_move_existing_draws():
    # W_3, b_3, b_Q, b_K are drawn after the documents' weights and only when present; GQA shrinks W_K, W_V
    base = sp.BlockConfig(d=16, heads=4, sigma_qk2=0.1, sigma_b2=0.05)
    more = dataclasses.replace(base, gated=True, sigma_bqk2=0.2, positions="rope", parallel=False)
    a, b = sp.sample_transformer(base, 2, inits=2, generator=3), sp.sample_transformer(more, 2, inits=2, generator=3)
    for name in ("w_q", "w_k", "w_v", "w1", "b1", "w2", "b2"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    assert a.w3.shape == (2, 2, 0, 0) and b.w3.shape == (2, 2, 16, 16) and b.b_q.any() and b.b_k.any()
    gqa = sp.sample_transformer(dataclasses.replace(base, kv_heads=1), 1, generator=0)
    assert gqa.w_k.shape == (1, 1, 1, 4, 16) and gqa.w_v.shape == (1, 1, 1, 4, 16) and gqa.w_q.shape == (1, 1, 4, 4, 16)


def test_multi_query_equals_multi_head_with_repeated_keys_and_values():
    # kv_heads = 1 is the multi-head network whose heads all read the same W_K, W_V
    cfg = sp.BlockConfig(d=16, heads=4, kv_heads=1, sigma_qk2=0.3, norm="pre", causal=True, positions="rope")
    p = sp.sample_transformer(cfg, 2, inits=2, generator=0, dtype=torch.float64)
    full = dataclasses.replace(p, w_k=p.w_k.expand(-1, -1, 4, -1, -1), w_v=p.w_v.expand(-1, -1, 4, -1, -1),
                               b_k=p.b_k.expand(-1, -1, 4, -1), b_v=p.b_v.expand(-1, -1, 4, -1))
    x = sp.gaussian_tokens(3, T=6, d=16, generator=1, dtype=torch.float64)
    got = sp.transformer_forward(x, p, cfg)
    want = sp.transformer_forward(x, full, dataclasses.replace(cfg, kv_heads=None))
    assert torch.allclose(got, want, rtol=0, atol=1e-12)
