"""ModelInit.predict with RoPE: the Gram-matrix map with the model's own rotary embeddings (base, rotated share of
each head, head width d_k, grouped key/value heads) against Monte Carlo of HF models built from their configs.

Setting: d = 64, 2 query heads of d_k = 32 (one key/value head for Llama: grouped-query attention), T = 32, 8 blocks,
re-drawn 16 times with sp.reinitialise at beta = 2 with a strong attention branch (sigma_v2 = sigma_o2 = 2,
sigma_w2 = sigma_w2_out = 1), probed on 2 sequences of equicorrelated tokens of cosine 0.5 (sp.mc_model_cosine):
on the way to rank collapse, where RoPE is resolved (the chapter's page on positions). Tolerance: the curve-level
test over blocks 1..8 at the book's level 0.001 (9999 sign-flip resamples over the 16 >= 13 initialisations;
sp.curve_agreement; measured p = 0.34 Llama, 0.32 GPT-NeoX). Power: for Llama the same block without positions
(ignore_rope=True) is off by more than 4 SE at the last block (measured z = -7.4), so the test can fail; GPT-NeoX
rotates half of each head (rotary_pct = 0.5), which halves the effect (measured z = -2.8, not resolved at these
sizes): that case checks that the rotated share is read and carried, not the test's power. About 15 CPU-seconds per
case on the 2-core machine (the Gram map's gated-SiLU kernel table is built once per process).
"""
import dataclasses

import numpy as np
import pytest
import torch

import sigprop as sp

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

pytestmark = pytest.mark.usefixtures("one_thread")

D, HEADS, T, DEPTH, INITS, SEQS, RHO0 = 64, 2, 32, 8, 16, 2, 0.5
STRONG = dict(sigma_v2=2.0, sigma_o2=2.0, sigma_w2=1.0, sigma_w2_out=1.0)


def build(name, **kw):
    tf = transformers
    common = dict(hidden_size=D, intermediate_size=2 * D, num_hidden_layers=DEPTH, num_attention_heads=HEADS,
                  vocab_size=2, max_position_embeddings=128)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        if name == "llama":
            return tf.LlamaModel(tf.LlamaConfig(**common, num_key_value_heads=1, **kw)).eval()
        return tf.GPTNeoXModel(tf.GPTNeoXConfig(**common, rotary_pct=0.5, use_parallel_residual=False, **kw)).eval()


def in_phase(base, beta=2.0):
    fields = {k: x for k, x in dataclasses.asdict(base).items() if k not in ("d", "sigma_qk2", "logit_scale")}
    fields.update(sigma_b2=0.0, sigma_b2_out=0.0, sigma_bv2=0.0, sigma_bo2=0.0, sigma_bqk2=0.0, **STRONG)
    return sp.BlockConfig.from_beta(beta, T=T, d=base.d, **fields)


@pytest.mark.parametrize("name", ["llama", "neox"])
def test_predict_with_rope_agrees_with_monte_carlo_of_the_model(name):
    model = build(name)
    read = sp.read_init(model)
    assert read.config.positions == "rope" and read.rope_exact
    assert read.config.rope_fraction == (1.0 if name == "llama" else 0.5)
    est = sp.mc_model_cosine(model, in_phase(read.config), T=T, inits=INITS, seqs=SEQS, rho0=RHO0, generator=1)
    read = sp.read_init(model)                          # the last draw, read back
    rho = float(est.mean[0])
    rope = read.predict(rho, T=T, samples=512)
    none = read.predict(rho, T=T, samples=512, ignore_rope=True)
    check = sp.curve_agreement(est.samples[:, 1:], rope[1:], level=1e-3, n_resamples=9999)
    z_none = float(est[-1].zscore(none[-1]))
    print(name, "curve p =", check.p, "last block", float(est.mean[-1]), "+-", float(est.stderr[-1]),
          "RoPE map", rope[-1], "no-RoPE map", none[-1], "z", z_none)
    assert check.passed, (name, check)
    if name == "llama":
        assert abs(z_none) > 4, z_none                  # the test has power: without RoPE the map is off


def test_scaled_rope_is_read_with_its_frequencies_or_refused_by_name():
    # linear scaling (and Llama 3's) only changes the rotation frequencies: read from inv_freq, proved by the replay
    model = build("llama", rope_scaling={"rope_type": "linear", "factor": 2.0})
    read = sp.read_init(model)
    inv = next(b for n, b in model.named_buffers() if n.endswith("inv_freq"))
    assert read.config.rope_freqs == tuple(inv.tolist()) and read.proof.proved and read.rope_exact
    assert read.predict(0.1, T=8, samples=64).shape == (DEPTH + 1,)
    # tables recomputed per sequence length are not rotations by fixed angles: refused, named
    with pytest.raises(ValueError, match="rope_type 'dynamic'.*not rotations by fixed angles"):
        sp.read_init(build("llama", rope_scaling={"rope_type": "dynamic", "factor": 2.0}))
    plain = sp.read_init(build("llama"))
    a, b = plain.predict(0.1, T=8, samples=64), plain.predict(0.1, T=8, samples=64, generator=0)
    assert a.shape == (DEPTH + 1,) and np.array_equal(a, b)           # the seed fixes the map's draws


def test_predict_carries_the_models_rope_into_the_gram_map():
    # the exact wiring: a Llama of base 500 with grouped heads is predicted by iterate_gram_map on the config read
    # from it (base, share, d_k, key/value heads), and the base matters (base 10^4 moves the curve by 0.0038 with the
    # same logit draws)
    model = build("llama", rope_theta=500.0)
    read = sp.read_init(sp.reinitialise(model, in_phase(sp.read_init(model).config), generator=0))
    c = read.config
    assert (c.positions, c.rope_theta, c.rope_fraction, c.head_dim, c.group_count) == ("rope", 500.0, 1.0, 32, 1)
    G0 = 0.4 * np.eye(8) + 0.6
    got = read.predict(0.6, T=8, samples=64)
    want = sp.theory.iterate_gram_map(G0, DEPTH, c, samples=64, generator=0).mean_cosine()
    np.testing.assert_allclose(got, want, rtol=1e-12)
    other = sp.theory.iterate_gram_map(G0, DEPTH, dataclasses.replace(c, rope_theta=1e4), samples=64,
                                       generator=0).mean_cosine()
    assert np.abs(other - got).max() > 1e-3
