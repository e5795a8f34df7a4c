"""Regression tests for the edges of probe / read_init / reinitialise / ModelInit.predict that issue 26 found
(items 6, 7, 8, 10, 11 and the read_init part of 13), one test per item, each failing on the code before the fix."""
import copy

import numpy as np
import pytest
import torch
from torch import nn

import sigprop as sp
from sigprop.stats._validate import TOL

transformers = pytest.importorskip("transformers")
import hf_models as M  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


def bert(**kw):
    return M.build("bert", **kw)


def x32(T=M.T, d=M.D, seed=0):
    return torch.randn(M.B, T, d, generator=torch.Generator().manual_seed(seed))


def test_item6_zero_output_projection_is_read_as_zero_variance():
    for name, zero in (("bert", lambda b: b.attention.output.dense.weight), ("gpt2", lambda b: b.attn.c_proj.weight)):
        model = M.build(name)
        with torch.no_grad():
            for b in M.blocks_of(name, model):
                zero(b).zero_()
        read = sp.read_init(model)             # was ZeroDivisionError (0 x identity taken for "no W_O")
        assert read.config.sigma_o2 == 0.0 and read.config.branch_sa == 1.0


@pytest.mark.parametrize("name", ["bert", "gpt2"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_item7_half_precision_models_are_probed_in_float32(name, dtype):
    half = M.scramble(M.build(name, dtype=dtype))
    exact = M.build(name)                        # the same (rounded) weights in float32
    exact.load_state_dict({k: v.float() for k, v in half.state_dict().items()})
    x = x32().to(dtype)
    got, want = sp.probe(half, x), sp.probe(exact, x.float())   # was "A must have rows that sum to 1 ... 0.000122"
    rtol, atol = TOL[torch.float32]
    for field in ("cosine", "q", "p", "ipr", "entropy"):
        torch.testing.assert_close(getattr(got, field), getattr(want, field), rtol=rtol, atol=atol)


def test_item7_huge_inputs_are_named_by_block_not_by_an_internal_variable():
    with pytest.raises(ValueError, match=r"block encoder\.layer\.0 .*(not finite|NaN or inf)"):
        sp.probe(M.scramble(bert()), x32() * 1e30)


def test_item8_reinitialise_refuses_what_the_model_cannot_hold():
    llama = M.build("llama")                     # no MLP or attention biases
    cfg = sp.read_init(llama).config
    with pytest.raises(ValueError, match="biases b1 a variance, but the model has none"):
        sp.reinitialise(llama, sp.BlockConfig(**{**cfg.__dict__, "sigma_b2": 0.1}))
    half = M.build("bert", dtype=torch.float16)
    big = sp.BlockConfig(**{**sp.read_init(half).config.__dict__, "sigma_v2": 1e12})
    with pytest.raises(ValueError, match="beyond the largest torch.float16"):
        sp.reinitialise(half, big)               # was: inf weights written silently


def test_item10_probe_edges():
    gpt2 = M.build("gpt2", n_positions=8)       # the model's own forward builds position embeddings for T tokens
    with pytest.raises(ValueError, match="T = 9 .*exceeds? (its|the) 8 positions"):   # 5.x: its table; 4.x: buffer
        sp.probe(gpt2, x32(T=9))
    assert sp.probe(gpt2, x32(T=8)).cosine.shape == (M.L + 1, M.B)
    with torch.device("meta"):
        meta = transformers.BertModel(M.config("bert"))
    with pytest.raises(ValueError, match="meta device"):
        sp.probe(meta, x32())
    with pytest.raises(ValueError, match="meta device"):
        sp.read_init(meta)
    model = M.scramble(bert())
    with pytest.raises(TypeError, match="grads must be True or False"):
        sp.probe(model, x32(), grads="yes")
    r = sp.probe(model, x32(), pairs=np.bool_(True))      # numpy flags are flags
    assert r.cosine_pairs is not None
    with pytest.raises(TypeError, match="single BertLayer: pass \\[block\\]"):
        sp.probe(model, x32(), blocks=model.encoder.layer[0])
    layer = model.encoder.layer[0]
    shared = sp.probe(model, x32(), blocks=[layer, layer])  # one hook per call: weights read for both
    assert shared.ipr is not None and shared.ipr.shape == (2, M.B)
    with pytest.raises(ValueError, match="overflowed"):
        sp.probe(model, x32(), grads=True, loss=lambda h: (h * 1e30).pow(2).sum())


def test_item11_predict_validates_its_arguments():
    read = sp.read_init(M.build("gpt2"))
    with pytest.raises(TypeError, match="T must be an integer"):
        read.predict(0.1, T=2.5)
    with pytest.raises(ValueError, match="GiB"):
        read.predict(0.1, T=10**7)               # was a request for 728 TiB
    with pytest.raises(TypeError, match="rho0 must be a real number"):
        read.predict("0.1", T=8)
    with pytest.raises(TypeError, match="rho0 must be a real number"):
        read.predict(np.array([0.1, 0.2]), T=8)
    with pytest.raises(ValueError, match=r"rho0 must lie in \[-0.1428"):
        read.predict(-0.5, T=8)                  # T = 8 equicorrelated tokens need rho0 >= -1/7
    assert read.predict(0.1, T=8, samples=64).shape == (M.L + 1,)


def test_item13_read_init_reads_or_names_what_it_cannot_model():
    llama = sp.read_init(M.build("llama"))        # RMSNorm is read as such, no silent LayerNorm
    assert llama.config.ln_center is False and llama.config.gated and llama.config.activation == "silu"
    wide_eps = sp.read_init(bert(layer_norm_eps=0.1))
    assert any("eps = 0.1" in n for n in wide_eps.notes)
    if M.V < (5, 0):                              # BERT's relative-position logits (removed in transformers 5)
        with pytest.raises(ValueError, match="relative-position logits"):   # a note once: now refused by name
            sp.read_init(bert(position_embedding_type="relative_key"))
    narrow, wide = bert(), M.build("bert", hidden_size=64)
    with pytest.raises(ValueError, match="not all in one nn.ModuleList of BertModel"):   # another model's block
        sp.read_init(narrow, blocks=[narrow.encoder.layer[0], wide.encoder.layer[0]])
    mistral = sp.read_init(M.build("mistral"))
    assert mistral.config.window == 3 and any("sliding window of 3 keys" in n for n in mistral.notes)
    assert llama.rope_exact                       # plain RoPE: predicted through the Gram map with it
    assert llama.predict(0.1, T=8, samples=64).shape == (M.L + 1,)
    assert llama.predict(0.1, T=8, ignore_rope=True, samples=64).shape == (M.L + 1,)


def test_torch_encoder_without_biases():
    layer = nn.TransformerEncoderLayer(M.D, M.H, 2 * M.D, batch_first=True, bias=False)
    enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
    read = sp.read_init(enc)
    assert read.config.sigma_b2 == read.config.sigma_bv2 == 0.0
    with pytest.raises(ValueError, match="but the model has none"):
        sp.reinitialise(enc, sp.BlockConfig(**{**read.config.__dict__, "sigma_bv2": 0.01, "logit_scale": None}))


def _own_cosines(model, x):
    """The mean cosine of each hidden state of the model's own forward from inputs_embeds = x (no position table)."""
    with torch.no_grad():
        states = model(inputs_embeds=x, output_hidden_states=True).hidden_states
    return torch.stack([sp.mean_cosine(h.double()) for h in states])


@pytest.mark.parametrize("family", ["phi3", "t5"])
def test_issue32_probe_runs_the_models_own_forward(family):
    # Phi3 applies its sliding window through the mask its model builds; T5's encoder computes a relative-position
    # bias in block 0 and passes it on. probe used to rebuild both by hand (wrong from block 2 for T5, max |delta cos|
    # 0.074 for Phi3); it now runs the model's own forward, so its cosines are the model's own hidden states'
    tf = transformers
    torch.manual_seed(0)
    if family == "phi3":
        model = tf.Phi3Model(tf.Phi3Config(hidden_size=M.D, intermediate_size=48, num_hidden_layers=M.L,
                                           num_attention_heads=M.H, num_key_value_heads=M.H, vocab_size=16,
                                           max_position_embeddings=64, sliding_window=3, pad_token_id=0)).eval()
    else:
        model = tf.T5EncoderModel(tf.T5Config(d_model=M.D, d_kv=8, d_ff=48, num_layers=M.L, num_heads=M.H,
                                              vocab_size=16)).eval()
    M.scramble(model)
    x = torch.randn(M.B, 12, M.D, generator=torch.Generator().manual_seed(1))
    got = sp.probe(model, x).cosine
    want = _own_cosines(model, x)        # HF's last hidden state is after the final norm: blocks 0..L-1 compared
    close = dict(rtol=1e-5, atol=1e-6)   # float32 model against its own float32 states measured in float64
    torch.testing.assert_close(got[: M.L], want[: M.L], **close)
    if family == "t5":                   # the encoder-decoder advice works: probe the encoder as a model
        full = tf.T5Model(tf.T5Config(d_model=M.D, d_kv=8, d_ff=48, num_layers=M.L, num_heads=M.H, vocab_size=16))
        with pytest.raises(ValueError, match=r"sp.probe\(model.get_encoder\(\), x\)"):
            sp.probe(full, x)
        assert sp.probe(full.get_encoder(), x).cosine.shape == (M.L + 1, M.B)


def test_a_copy_runs_its_own_weights_when_forward_was_left_on_the_instance():
    """transformers 4.57's output capture leaves ``forward`` as an instance attribute closing over the original module
    (GPT-NeoX after ``sp.probe``); sigprop's float64 and float32 copies must run their own weights."""
    from sigprop.models._parts import own_copy

    lin = torch.nn.Linear(3, 2)
    original = type(lin).forward
    lin.forward = lambda x: original(lin, x)          # what the capture wrapper leaves behind
    x = torch.ones(1, 3, dtype=torch.float64)
    with pytest.raises(RuntimeError, match="dtype"):
        copy.deepcopy(lin).double()(x)                # a plain deep copy runs the float32 original
    c = own_copy(lin).double()
    c.weight.data.fill_(1.0)
    assert torch.equal(c(x), 3.0 + c.bias.data[None])
    bound = torch.nn.Linear(3, 2)
    bound.forward = bound.forward                     # bound to the module itself: kept, rebound to the copy
    b = own_copy(bound)
    assert b.__dict__["forward"].__self__ is b
