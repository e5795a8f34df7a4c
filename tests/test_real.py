"""sp.read_init / sp.reinitialise on off-the-shelf models, and the block map against them.

Tolerance bases: a variance read from ``n`` i.i.d. entries has relative standard error ``sqrt(k / n)``, with
``k = 2`` for Gaussian entries and ``k = 4/5`` for uniform ones (``E x^4 / (E x^2)^2 - 1``); checks use z = 4.
The model-vs-``transformer_forward`` identity runs in float64 with LayerNorm eps 0, so the two routes differ only
in the order of floating-point operations (``TOL[float64]``). Curves over depth share initialisations and are
tested with ``sp.curve_agreement`` at level 1e-3 (16 >= 13 initialisations, 9999 resamples).
"""
import dataclasses
import math

import numpy as np
import pytest
import torch

import sigprop as sp
from conftest import Z
from sigprop.stats._validate import TOL

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()
import hf_models as M  # noqa: E402


# the tensors here are tiny: one thread avoids waiting on a busy second core at every op
pytestmark = pytest.mark.usefixtures("one_thread")


def bert(depth=3, d=64, heads=4, f=96, eps=1e-12, act="gelu", **kw):
    cfg = transformers.BertConfig(hidden_size=d, num_hidden_layers=depth, num_attention_heads=heads,
                                  intermediate_size=f, layer_norm_eps=eps, hidden_act=act, vocab_size=2,
                                  max_position_embeddings=64, attn_implementation="eager", **kw)
    return transformers.BertModel(cfg, add_pooling_layer=False).eval()


def gpt2(depth=3, d=64, heads=4, eps=1e-5):
    cfg = transformers.GPT2Config(n_embd=d, n_layer=depth, n_head=heads, layer_norm_epsilon=eps, vocab_size=2,
                                  n_positions=64, attn_implementation="eager")
    return transformers.GPT2Model(cfg).eval()


def encoder(depth=3, d=64, heads=4, f=96, eps=1e-5, norm_first=False):
    layer = torch.nn.TransformerEncoderLayer(d, heads, dim_feedforward=f, layer_norm_eps=eps, batch_first=True,
                                             norm_first=norm_first)
    return torch.nn.TransformerEncoder(layer, depth, enable_nested_tensor=False).eval()


def _within(read, want, entries, k=2.0):
    """|read - want| <= Z relative SE of a mean square of `entries` i.i.d. entries."""
    return abs(read / want - 1) <= Z * math.sqrt(k / entries)


def test_read_init_of_the_default_initialisations():
    torch.manual_seed(0)
    L, d, f = 3, 64, 96
    c = sp.read_init(bert(L, d, 4, f)).config           # every nn.Linear N(0, 0.02^2)
    assert (c.norm, c.activation, c.heads, c.d_ff, c.causal) == ("post", "gelu", 4, f, False)
    for field, want, n in (("sigma_qk2", 4e-4, d * d), ("sigma_v2", 4e-4 * d, d * d), ("sigma_o2", 4e-4 * d, d * d),
                           ("sigma_w2", 4e-4 * d, d * f), ("sigma_w2_out", 4e-4 * f, d * f)):
        assert _within(getattr(c, field), want, n * L), field
    assert c.sigma_bv2 == c.sigma_bo2 == c.sigma_b2 == c.sigma_b2_out == 0.0
    g = sp.read_init(gpt2(L, d, 4)).config               # c_proj scaled by 1 / sqrt(2 n_layer)
    assert (g.norm, g.activation, g.causal, g.d_ff) == ("pre", "gelu_tanh", True, 4 * d)
    assert _within(g.sigma_o2, 4e-4 * d / (2 * L), d * d * L)
    assert _within(g.w2_variance, 4e-4 * 4 * d / (2 * L), 4 * d * d * L) and _within(g.sigma_w2, 4e-4 * d, 4 * d * d * L)
    t = sp.read_init(encoder(L, d, 4, f)).config         # Xavier-uniform (3d x d): 1/(2d); nn.Linear: 1/(3 fan_in)
    assert (t.norm, t.activation) == ("post", "relu")
    # the encoder's blocks are deep copies of one: the entries are those of one layer
    assert _within(t.sigma_qk2, 1 / (2 * d), d * d, 0.8) and _within(t.sigma_v2, 0.5, d * d, 0.8)
    assert _within(t.sigma_o2, 1 / 3, d * d, 0.8) and _within(t.sigma_w2, 1 / 3, d * f, 0.8)
    assert _within(t.w2_variance, 1 / 3, d * f, 0.8) and _within(t.sigma_b2, 1 / (3 * d), f, 0.8)
    assert t.sigma_bv2 == t.sigma_bo2 == 0.0


def test_identical_blocks_are_reported_and_reinitialise_separates_them():
    torch.manual_seed(1)
    model = encoder()
    read = sp.read_init(model)
    assert read.identical_blocks and any("identical" in n for n in read.notes)
    cfg = dataclasses.replace(read.config, logit_scale=None, ln_center=False)
    sp.reinitialise(model, cfg, generator=0)
    again = sp.read_init(model)
    assert not again.identical_blocks and again.notes == ()


def _first(out):
    return out[0] if isinstance(out, (tuple, list)) else out


@pytest.mark.parametrize("make", [lambda: encoder(eps=0.0), lambda: encoder(eps=0.0, norm_first=True)])
def test_read_params_reproduce_the_torch_encoder(make):
    # the model's own layers and transformer_forward on the read weights compute the same function
    torch.manual_seed(2)
    model = make().double()
    sp.reinitialise(model, dataclasses.replace(sp.read_init(model).config, sigma_bv2=0.01, sigma_bo2=0.02,
                                               sigma_b2=0.03), generator=3)
    read = sp.read_init(model)
    x = sp.gaussian_tokens(2, T=7, d=64, generator=4, dtype=torch.float64)
    h, hs = x, [x]
    with torch.no_grad():
        for layer in model.layers:
            h = layer(h)
            hs.append(h)
        ours = sp.transformer_forward(x, read.params, read.config)[:, 0]
    rtol, atol = TOL[torch.float64]
    torch.testing.assert_close(ours, torch.stack(hs), rtol=rtol * 100, atol=atol * 100)


EPS0 = {"llama": dict(rms_norm_eps=0.0), "llama_lm": dict(rms_norm_eps=0.0), "qwen2": dict(rms_norm_eps=0.0),
        "mistral": dict(rms_norm_eps=0.0), "neox": dict(layer_norm_eps=0.0), "neox_seq": dict(layer_norm_eps=0.0),
        "vit": dict(layer_norm_eps=0.0), "roberta": dict(layer_norm_eps=0.0), "bert": dict(layer_norm_eps=0.0),
        "gpt2": dict(layer_norm_epsilon=0.0)}


@pytest.mark.parametrize("name", [n for n in M.FAMILIES if n != "mistral"])
def test_read_params_reproduce_every_family(name):
    # every parameter scrambled (norm gains and biases included): transformer_forward on read_init's params is the
    # model's block function (the independent float64 forward of tests/hf_models.py; eps 0: sigprop's norms have none)
    model = M.scramble(M.build(name, **EPS0[name]), seed=2).double()
    read = sp.read_init(model)
    x = sp.gaussian_tokens(2, T=M.T, d=M.D, generator=4, dtype=torch.float64)
    states, _ = M.hand_run(name, model, x)
    with torch.no_grad():
        ours = sp.transformer_forward(x, read.params, read.config)[:, 0]
    err = float((ours - torch.stack(states)).abs().max() / torch.stack(states).pow(2).mean().sqrt())
    # float64: only the order of operations differs, except that sigprop computes RoPE's angles in float32 as
    # transformers does (relative rounding 6e-8 of angles up to T = 8 radians: <= 7e-7 measured; here 1e-6)
    assert err < (1e-6 if read.config.positions == "rope" else 1e-10), err
    assert any("gains" in n for n in read.notes)


def test_reinitialise_round_trip_and_skip_strengths():
    torch.manual_seed(3)
    model = bert(depth=6, d=96, heads=3, f=96, act="relu")
    cfg = sp.BlockConfig.from_beta(0.8, T=64, d=96, heads=3, d_ff=96, alpha_sa=2.0, sigma_bv2=4e-4,
                                   **sp.presets.GG_APP_C1)
    sp.reinitialise(model, cfg, generator=0)
    read = sp.read_init(model)
    # no W_O in the config: written as W_O = I / alpha, read back as no W_O with branch weight 1 / alpha
    assert read.config.sigma_o2 is None and read.config.branch_sa == pytest.approx(0.5)
    assert _within(read.config.sigma_v2, 0.2, 96 * 96 * 6) and _within(read.config.sigma_bv2, 4e-4, 96 * 6)
    assert _within(read.config.qk_variance, cfg.qk_variance, 96 * 96 * 6)
    # post-LN: LN(alpha x + S) = LN(x + S / alpha), so both descriptions give the same map
    m1 = sp.theory.iterate_block_map(1.0, 0.1, 5, beta=0.8, alpha_sa=2.0, **sp.presets.GG_APP_C1)
    m2 = sp.theory.iterate_block_map(1.0, 0.1, 5, beta=0.8, branch_sa=0.5, **sp.presets.GG_APP_C1)
    np.testing.assert_allclose(m1[1] / m1[0], m2[1] / m2[0], rtol=1e-12)


def test_reinitialise_validation():
    model = bert()
    with pytest.raises(ValueError, match="model block"):
        sp.reinitialise(model, sp.BlockConfig(d=64, heads=2, d_ff=96, activation="gelu"))
    with pytest.raises(ValueError, match="gain control"):
        sp.reinitialise(model, sp.BlockConfig(d=64, heads=4, d_ff=96, activation="gelu", gain_control=True))
    with pytest.raises(TypeError, match="Module"):
        sp.read_init("bert")


def test_hf_bert_follows_the_block_map():
    # a BertModel with W_O, value and output biases and GELU, at Giorlandino & Goldt's variances: the generalised
    # finite-T map against 16 re-initialisations (curve-level, level 1e-3)
    T, d, depth = 32, 96, 6
    model = bert(depth=depth, d=d, heads=2, f=2 * d)
    cfg = sp.BlockConfig.from_beta(0.6, T=T, d=d, heads=2, d_ff=2 * d, activation="gelu", sigma_o2=0.5,
                                   sigma_bv2=0.01, sigma_bo2=0.01, **sp.presets.GG_APP_C1)
    rows = []
    for i in range(16):
        sp.reinitialise(model, cfg, generator=i)
        rows.append(sp.probe(model, sp.equicorrelated_tokens(2, T=T, d=d, rho=0.2, generator=100 + i)).cosine.mean(-1))
    est = sp.estimate(torch.stack(rows))
    q, p = sp.theory.iterate_block_map(1.0, float(est.mean[0]), depth, cfg, T=T)
    assert sp.curve_agreement(est.samples[:, 1:], (p / q)[1:], level=1e-3, n_resamples=9999).passed
    # Algorithm 1 as printed (no W_O) is rejected on the same runs
    qa, pa = sp.theory.iterate_block_map(1.0, float(est.mean[0]), depth, beta=0.6, **sp.presets.GG_APP_C1)
    assert not sp.curve_agreement(est.samples[:, 1:], (pa / qa)[1:], level=1e-3, n_resamples=9999).passed


def test_predict_uses_the_causal_map_for_a_causal_model():
    torch.manual_seed(4)
    read = sp.read_init(gpt2(depth=2))
    causal = read.predict(0.1, T=16, samples=256)
    traj = sp.theory.iterate_gram_map(0.9 * np.eye(16) + 0.1, 2, read.config, samples=256, generator=0)
    np.testing.assert_allclose(causal, traj.mean_cosine(), rtol=1e-12)
    read_b = sp.read_init(bert(depth=2))
    q, p = sp.theory.iterate_block_map(1.0, 0.1, 2, read_b.config, T=16)
    np.testing.assert_allclose(read_b.predict(0.1, T=16), p / q, rtol=1e-12)
