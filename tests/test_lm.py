"""Tests for sigprop.models._lm: the small trainable language model and its training loop."""
import math

import numpy as np
import pytest
import torch

import sigprop as sp


def _config(**kw):
    return sp.LMConfig(**{**dict(vocab=7, T=6, d=8, depth=2, heads=2), **kw})


def test_shapes_records_and_determinism():
    x = torch.randint(0, 7, (3, 6), generator=torch.Generator().manual_seed(0))
    a, b = sp.TinyLM(_config(), generator=1), sp.TinyLM(_config(), generator=1)
    logits, rec = a(x, record=True)
    assert logits.shape == (3, 6, 7) and len(rec) == 2
    assert rec[0]["attention"].shape == (3, 2, 6, 6) and rec[0]["values"].shape == (3, 2, 6, 4)
    assert torch.allclose(rec[0]["attention"].sum(-1), torch.ones(3, 2, 6))
    assert torch.equal(logits, b(x))                           # same generator, same network
    assert not torch.equal(logits, sp.TinyLM(_config(), generator=2)(x))


def test_initialisation_variances():
    # every weight N(0, gain^2 / fan_in): the empirical variance of a large layer matches
    m = sp.TinyLM(sp.LMConfig(vocab=5, T=4, d=256, d_ff=512, gain=0.5), generator=0)
    assert float(m.w1.detach().var()) == pytest.approx(0.25 / 256, rel=0.02)     # 131k entries: rel. SE 0.4 %
    assert float(m.w2.detach().var()) == pytest.approx(0.25 / 512, rel=0.02)


@pytest.mark.parametrize("norm", ["post", "pre", "none"])
def test_causal_mask_hides_the_future(norm):
    m = sp.TinyLM(_config(causal=True, norm=norm, out_proj=True, ln_affine=True, final_norm=True), generator=0)
    x = torch.randint(0, 7, (2, 6), generator=torch.Generator().manual_seed(3))
    y = x.clone()
    y[:, 4:] = (y[:, 4:] + 1) % 7                               # change the last two tokens only
    assert torch.allclose(m(x)[:, :4], m(y)[:, :4], atol=1e-6)
    assert not torch.allclose(m(x)[:, 4:], m(y)[:, 4:])


@torch.no_grad()
def test_post_ln_block_matches_the_formula():
    # one post-LN block, branch weight alpha: x <- LN(x + alpha SA(x)); x <- LN(x + alpha MLP(x))
    c = _config(depth=1, heads=1, branch=0.7, positions="sinusoidal", ln_center=True)
    m = sp.TinyLM(c, generator=0)
    tok = torch.randint(0, 7, (2, 6), generator=torch.Generator().manual_seed(1))
    x = m.emb[tok] + m.pos
    ln = lambda z: torch.nn.functional.layer_norm(z, z.shape[-1:], eps=0.0)
    out, A = sp.self_attention(x, m.w_q[0], m.w_k[0], m.w_v[0])
    x = ln(x + 0.7 * out)                                       # one head: (2, 6, 8)
    x = ln(x + 0.7 * (torch.relu(x @ m.w1[0].T + m.b1[0]) @ m.w2[0].T + m.b2[0]))
    assert torch.allclose(m(tok), x @ m.head.T + m.head_b, atol=1e-5)


@pytest.fixture
def two_threads():
    """torch on 2 threads for the test, the suite's count restored after it (tests/conftest.py checks)."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def test_fit_learns_and_restores_threads(two_threads):
    m = sp.TinyLM(_config(vocab=4, T=5, d=16, depth=1), generator=0)
    g = torch.Generator().manual_seed(0)

    def batch(step):                                            # copy task: predict the input token
        x = torch.randint(0, 4, (32, 5), generator=g)
        return x, x

    opt = torch.optim.Adam(m.parameters(), lr=0.02)
    log = sp.fit(m, batch, steps=60, optimizer=opt, every=20, evaluate=lambda s, mod: {})
    assert [r["step"] for r in log] == [0, 20, 40, 60] and math.isnan(log[0]["loss"])
    assert log[-1]["loss"] < 0.2 < math.log(4)                 # chance is log 4 = 1.39 nats
    assert torch.get_num_threads() == 2


def test_fit_penalty_and_divergence():
    m = sp.TinyLM(_config(), generator=0)
    x = torch.randint(0, 7, (4, 6), generator=torch.Generator().manual_seed(0))
    opt = torch.optim.SGD(m.parameters(), lr=0.0)
    log = sp.fit(m, lambda s: (x, x), steps=1, optimizer=opt, evaluate=lambda s, mod: {},
                 penalty=lambda mod: torch.tensor(100.0))
    with torch.no_grad():
        base = float(torch.nn.functional.cross_entropy(m(x).reshape(-1, 7), x.reshape(-1)))
    assert log[-1]["loss"] == pytest.approx(base + 100.0, rel=1e-5)
    with pytest.raises(FloatingPointError, match="diverged"):
        sp.fit(m, lambda s: (x, x), steps=2, optimizer=opt, penalty=lambda mod: torch.tensor(float("inf")))


def test_config_validation():
    with pytest.raises(ValueError, match="divisible"):
        sp.LMConfig(vocab=4, T=4, d=6, heads=4)
    with pytest.raises(ValueError, match="norm must be one of"):
        sp.LMConfig(vocab=4, T=4, d=8, norm="middle")
    with pytest.raises(TypeError, match="causal must be True or False"):
        sp.LMConfig(vocab=4, T=4, d=8, causal="no")
    with pytest.raises(ValueError, match="T' <= T"):
        sp.TinyLM(_config(), generator=0)(torch.zeros(1, 9, dtype=torch.long))


def test_threads_for_small_work_only(two_threads):
    with sp.threads_for(1000):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2
    with sp.threads_for(1e12):
        assert torch.get_num_threads() == 2


def test_tiny_lm_runs_the_block_network():
    # one transformer implementation: TinyLM's blocks are sp.transformer_forward on its parameters (LMConfig.block)
    c = _config(norm="pre", causal=True, out_proj=True, d_ff=12)
    m = sp.TinyLM(c, generator=4).double()
    tok = torch.randint(0, 7, (3, 6), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        x = (m.emb[tok] + m.pos)[None]
        h = sp.transformer_forward(x, m.blocks(), c.block)[-1, 0]
        assert torch.allclose(m(tok), h @ m.head.T + m.head_b, rtol=0, atol=1e-12)
    assert c.block == sp.BlockConfig(d=8, heads=2, d_ff=12, norm="pre", causal=True, sigma_qk2=1 / 8, sigma_v2=1.0,
                                     sigma_w2=1.0, sigma_w2_out=1.0, sigma_o2=1.0)


def test_tiny_lm_draws_are_unchanged():
    # the chapters' records depend on TinyLM's draw order: emb, pos, w_q, w_k, w_v, w_o, w1, w2, head from one generator
    c = _config(out_proj=True, gain=0.5)
    m = sp.TinyLM(c, generator=5)
    g = torch.Generator().manual_seed(5)
    want = {"emb": torch.randn(7, 8, generator=g), "pos": 0.02 * torch.randn(6, 8, generator=g)}
    for name, shape in (("w_q", (2, 2, 4, 8)), ("w_k", (2, 2, 4, 8)), ("w_v", (2, 2, 4, 8)), ("w_o", (2, 8, 8)),
                        ("w1", (2, 8, 8)), ("w2", (2, 8, 8)), ("head", (7, 8))):
        want[name] = 0.5 / math.sqrt(shape[-1]) * torch.randn(*shape, generator=g)
    for name, value in want.items():
        assert torch.equal(getattr(m, name).detach(), value), name


def test_lm_config_validates_block_fields_through_block_config():
    # the block fields are checked once, by BlockConfig (same messages), and stored as validated
    c = sp.LMConfig(vocab=4, T=4, d=np.int64(8), heads=2)
    assert type(c.d) is int and c.block.d == 8
    with pytest.raises(ValueError, match="d must be divisible by heads"):
        sp.LMConfig(vocab=4, T=4, d=6, heads=4)
    with pytest.raises(TypeError, match="ln_center must be True or False"):
        sp.LMConfig(vocab=4, T=4, d=8, ln_center="yes")


# ----------------------------------------------------------------------------- issue 37, items 5, 7, 8
def test_causal_attention_at_zero_or_negative_temperature_is_finite():
    # tau <= 0 multiplied the causal mask's -inf: NaN (tau = 0) or +inf (tau < 0). Now tau = 0 gives uniform weights
    # over the visible keys (the prefix mean) and tau < 0 the softmax of the negated logits
    model = sp.TinyLM(sp.LMConfig(vocab=11, T=6, d=8, causal=True), generator=0)
    tokens = torch.tensor([[1, 2, 3, 4, 5]])
    for tau in (0.0, -1.0, -1e30):
        logits, rec = model(tokens, tau=tau, record=True)
        assert torch.isfinite(logits).all(), tau
        A = rec[0]["attention"][0, 0]
        assert torch.allclose(A.sum(-1), torch.ones(5)) and torch.all(A.triu(1) == 0)
    _, rec = model(tokens, tau=0.0, record=True)
    assert torch.allclose(rec[0]["attention"][0, 0], torch.tril(torch.ones(5, 5)) / torch.arange(1, 6)[:, None])


@pytest.mark.parametrize("tokens, error, match", [
    (torch.tensor([[1, 2, 11]]), ValueError, r"token ids must lie in \[0, vocab=11\); got ids from 1 to 11"),
    (torch.tensor([[-1, 2]]), ValueError, r"token ids must lie in \[0, vocab=11\)"),
    (torch.tensor([[1.0, 2.0]]), TypeError, "tokens must be an integer tensor"),
    (torch.tensor([[True, False]]), TypeError, "tokens must be an integer tensor"),
    ([[1, 2]], TypeError, "tokens must be an integer tensor"),
    (torch.zeros(2, 0, dtype=torch.long), ValueError, r"1 <= T' <= T=6; got \(2, 0\)"),
    (torch.zeros(0, 3, dtype=torch.long), ValueError, r"batch >= 1"),
])
def test_bad_tokens_are_refused_clearly(tokens, error, match):
    # IndexError (ids >= vocab, float ids) and RuntimeError (zero length) before issue 37
    model = sp.TinyLM(sp.LMConfig(vocab=11, T=6, d=8), generator=0)
    with pytest.raises(error, match=match):
        model(tokens)


def test_fit_refuses_a_missing_optimizer():
    model = sp.TinyLM(sp.LMConfig(vocab=11, T=6, d=8), generator=0)
    with pytest.raises(TypeError, match=r"optimizer must be a torch.optim.Optimizer .* got NoneType"):
        sp.fit(model, lambda step: (None, None), steps=1, optimizer=None)
    with pytest.raises(TypeError, match="sample must be callable"):
        sp.fit(model, None, steps=1, optimizer=torch.optim.SGD(model.parameters(), lr=0.1))


@pytest.mark.parametrize("kwargs", [dict(vocab=10**12, T=8, d=8), dict(vocab=10, T=10**11, d=8)])
def test_sizes_beyond_memory_are_refused_before_allocating(kwargs):
    with pytest.raises(ValueError, match=r"TinyLM's parameters .* would need .* more than the budget"):
        sp.TinyLM(sp.LMConfig(**kwargs), generator=0)
