"""sp.probe against a hand computation on each supported family (same model, same input).

The hand side runs the model by its own route (HF ``encoder`` / ``inputs_embeds`` forward, the
blocks called without hooks, which for ``TransformerEncoderLayer`` is torch's fused fast path),
recomputes every attention matrix from the projection weights with plain torch, and computes the
measures with explicit loops over token pairs. Tolerance basis: the two routes differ only in
the order of floating-point operations, so in float64 they agree to ``TOL[float64]``; in
float32 a few ulps (2^-24 ~ 6e-8) per op compound over L = 3 blocks of O(d) sums, well inside
``TOL[float32]`` = (1e-5, 1e-6).
"""
import json
import math

import pytest
import torch
from torch import nn

from sigprop.models._probe import ProbeResult, probe
from sigprop.stats._validate import TOL

transformers = pytest.importorskip("transformers")

B, T, D, H, L = 3, 8, 32, 4, 3
DTYPES = (torch.float32, torch.float64)


# the tensors here are tiny: one thread avoids waiting on a busy second core at every op
pytestmark = pytest.mark.usefixtures("one_thread")


def close(a, b, dtype):
    rtol, atol = TOL[dtype]
    torch.testing.assert_close(torch.as_tensor(a, dtype=torch.float64),
                               torch.as_tensor(b, dtype=torch.float64), rtol=rtol, atol=atol)


def first(out):
    """A block's hidden states: transformers 4.x blocks return a tuple, 5.x a tensor."""
    return out[0] if isinstance(out, (tuple, list)) else out


def additive(allowed, dtype):
    """An explicit additive mask (B|1, 1, T, T): without one, 5.x eager attention masks nothing (GPT-2 included)."""
    return torch.zeros(allowed.shape, dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min)


def inputs(dtype, seed=0):
    return torch.randn(B, T, D, generator=torch.Generator().manual_seed(seed)).to(dtype)


# ---------------------------------------------------------------- plain-torch measures

def hand_geometry(hs, n_real=None):
    """hs: L+1 tensors (B, T, d); n_real[b] real tokens (right padding) -> cos, q, p of shape (L+1, B)."""
    h = torch.stack([z.detach().double() for z in hs])  # (L+1, B, T, d)
    n = torch.tensor([T] * B if n_real is None else n_real)
    cos = dot = sq = 0.0
    for t in range(T):
        sq = sq + (t < n) * (h[:, :, t] ** 2).sum(-1)
        for s in range(T):
            if t != s:
                w = ((t < n) & (s < n)).double()  # (B,): both tokens real
                ht, hs_ = h[:, :, t], h[:, :, s]
                dot = dot + w * (ht * hs_).sum(-1)
                cos = cos + w * (ht * hs_).sum(-1) / ((ht ** 2).sum(-1).sqrt() * (hs_ ** 2).sum(-1).sqrt())
    pairs = n * (n - 1)
    return torch.stack([cos / pairs, sq / (n * D), dot / (D * pairs)])


def hand_attention(As, n_real=None):
    """As: L tensors (B, H, T, T) -> ipr, entropy (L, B) over real query rows, ipr by position (L, B, T)."""
    ipr = torch.zeros(len(As), B, dtype=torch.float64)
    ent = torch.zeros_like(ipr)
    by_pos = torch.stack([(A.double() ** 2).sum(-1).mean(1) for A in As])
    for l, A in enumerate(As):
        A = A.double()
        for b in range(B):
            n = T if n_real is None else n_real[b]
            ipr[l, b] = (A[b, :, :n] ** 2).sum(-1).mean()
            ent[l, b] = -torch.special.xlogy(A[b, :, :n], A[b, :, :n]).sum(-1).mean()
    return ipr, ent, by_pos


def softmax_heads(q, k, scale, allowed=None):
    """q, k (B, T, d) -> (B, H, T, T) softmax(q k^T * scale) per head."""
    q, k = (z.reshape(B, T, H, D // H).transpose(1, 2) for z in (q, k))
    s = q @ k.transpose(-1, -2) * scale
    if allowed is not None:
        s = s.masked_fill(~allowed, -math.inf)
    return s.softmax(-1)


def check(result, hs, As, dtype, n_real=None):
    cos, q, p = hand_geometry(hs, n_real)
    close(result.cosine, cos, dtype)
    close(result.q, q, dtype)
    close(result.p, p, dtype)
    ipr, ent, by_pos = hand_attention(As, n_real)
    close(result.ipr, ipr, dtype)
    close(result.entropy, ent, dtype)
    close(result.ipr_by_position, by_pos, dtype)
    assert result.cosine.shape == (L + 1, B) and result.ipr.shape == (L, B)
    assert result.ipr_by_position.shape == (L, B, T)


def hand_grads(blocks, hs_fn, wq_k_v):
    """Frobenius norms of dloss/dW for each block by autograd on the hand route -> (L, 3)."""
    with torch.enable_grad():
        h_last = hs_fn()
        loss = squared_error(h_last)
        ws = [w for b in blocks for w in wq_k_v(b)]
        params = list({id(p): p for p, _ in ws}.values())
        g = dict(zip(map(id, params), torch.autograd.grad(loss, params)))
    return torch.tensor([[float(g[id(p)][idx].double().norm()) for p, idx in wq_k_v(b)] for b in blocks],
                        dtype=torch.float64)


def squared_error(h):
    target = torch.randn(h.shape, generator=torch.Generator().manual_seed(7)).to(h.dtype)
    return ((h - target) ** 2).mean()


# ---------------------------------------------------------------- models

def bert_config(**kw):
    # vocab_size is irrelevant (embeddings are bypassed); small keeps construction fast
    return transformers.BertConfig(vocab_size=16, hidden_size=D, num_hidden_layers=L, num_attention_heads=H,
                                   intermediate_size=2 * D, **kw)


def gpt2_config(**kw):
    return transformers.GPT2Config(vocab_size=16, n_embd=D, n_layer=L, n_head=H, n_positions=16, **kw)


def bert(dtype, attn="eager", dropout=0.0):
    torch.manual_seed(0)
    cfg = bert_config(hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout, attn_implementation=attn)
    return transformers.BertModel(cfg).to(dtype).eval()


def gpt2(dtype, attn="eager"):
    torch.manual_seed(0)
    return transformers.GPT2Model(gpt2_config(attn_implementation=attn)).to(dtype).eval()


def encoder(dtype, norm_first, batch_first=True):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(D, H, 2 * D, dropout=0.1, batch_first=batch_first, norm_first=norm_first)
    return nn.TransformerEncoder(layer, L, enable_nested_tensor=False).to(dtype).eval()


class ToyBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(D)
        self.attn = nn.MultiheadAttention(D, H, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(D, 2 * D), nn.Tanh(), nn.Linear(2 * D, D))

    def forward(self, h):
        a = self.ln(h)
        h = h + self.attn(a, a, a, need_weights=False)[0]
        return h + self.mlp(h)


class Toy(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, D)
        self.layers = nn.ModuleList(ToyBlock() for _ in range(L))

    def forward(self, ids):
        h = self.embed(ids)
        for block in self.layers:
            h = block(h)
        return h


def mha_weights(b):
    w = b.in_proj_weight
    return [(w, slice(i * D, (i + 1) * D)) for i in range(3)]


def mha_attention(mha, a, allowed=None):
    q, k, _ = (a @ w.T + bias for w, bias in zip(mha.in_proj_weight.chunk(3), mha.in_proj_bias.chunk(3)))
    return softmax_heads(q, k, (D // H) ** -0.5, allowed)


# ---------------------------------------------------------------- equality with the hand computation

@pytest.mark.parametrize("dtype", DTYPES)
def test_bert_matches_hand_computation(dtype):
    model, x = bert(dtype), inputs(dtype)
    result = probe(model, x, grads=True, loss=squared_error)
    with torch.no_grad():  # the model's own blocks, called without hooks
        hs = [x]
        for lay in model.encoder.layer:
            hs.append(first(lay(hs[-1])))
    As = [softmax_heads(lay.attention.self.query(h), lay.attention.self.key(h), (D // H) ** -0.5)
          for lay, h in zip(model.encoder.layer, hs)]
    check(result, hs, As, dtype)
    assert result.family == "bert" and not result.causal
    assert result.block_names == tuple(f"encoder.layer.{i}" for i in range(L))

    def run():
        h = x
        for lay in model.encoder.layer:
            h = first(lay(h))
        return h
    grads = hand_grads(model.encoder.layer, run, lambda lay: [(lay.attention.self.query.weight, ...),
                                                              (lay.attention.self.key.weight, ...),
                                                              (lay.attention.self.value.weight, ...)])
    close(torch.stack([result.grad_q, result.grad_k, result.grad_v], 1), grads, dtype)


def test_bert_padding_and_sdpa():
    x = inputs(torch.float64)
    n_real = [T, 5, 6]
    mask = torch.tensor([[1] * n + [0] * (T - n) for n in n_real])
    model = bert(torch.float64)
    result = probe(model, x, attention_mask=mask)
    allowed = mask.bool()[:, None, None, :]
    ext = additive(allowed.expand(B, 1, T, T), torch.float64)
    with torch.no_grad():
        hs = [x]
        for lay in model.encoder.layer:
            hs.append(first(lay(hs[-1], attention_mask=ext)))
    As = [softmax_heads(lay.attention.self.query(h), lay.attention.self.key(h), (D // H) ** -0.5, allowed)
          for lay, h in zip(model.encoder.layer, hs)]
    check(result, hs, As, torch.float64, n_real)
    sdpa = bert(torch.float64, attn="sdpa")  # same seed, same weights; falls back to eager for the weights
    assert torch.equal(sdpa.encoder.layer[0].attention.self.query.weight,
                       model.encoder.layer[0].attention.self.query.weight)
    r2 = probe(sdpa, x, attention_mask=mask)
    close(r2.cosine, result.cosine, torch.float64)
    close(r2.ipr, result.ipr, torch.float64)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gpt2_matches_hand_computation(dtype):
    model, x = gpt2(dtype), inputs(dtype)
    result = probe(model, x, grads=True, loss=squared_error)
    allowed = torch.ones(T, T, dtype=torch.bool).tril()
    with torch.no_grad():
        hs, As = [x], []
        for block in model.h:
            qkv = block.ln_1(hs[-1]) @ block.attn.c_attn.weight + block.attn.c_attn.bias
            As.append(softmax_heads(qkv[..., :D], qkv[..., D:2 * D], (D // H) ** -0.5, allowed))
            hs.append(first(block(hs[-1], attention_mask=additive(allowed[None, None], dtype))))
        # the model's own route, embeddings cancelled: hidden_states[l] is the input of block l
        native = model(inputs_embeds=x - model.wpe(torch.arange(T)), output_hidden_states=True).hidden_states
    for l in range(L):
        close(native[l], hs[l], dtype)
    check(result, hs, As, dtype)
    assert result.causal and result.family == "gpt2"
    close(result.ipr_by_position[0, :, 0], torch.ones(B), dtype)  # row 0 sees one key
    assert any("final LayerNorm" in n for n in result.notes)

    def run():
        h = x
        mask = additive(torch.ones(T, T, dtype=torch.bool).tril()[None, None], dtype)
        for block in model.h:
            h = first(block(h, attention_mask=mask))
        return h
    grads = hand_grads(model.h, run, lambda b: [(b.attn.c_attn.weight, (slice(None), slice(i * D, (i + 1) * D)))
                                                for i in range(3)])
    close(torch.stack([result.grad_q, result.grad_k, result.grad_v], 1), grads, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_transformer_encoder_matches_hand_computation(dtype, norm_first, causal):
    model, x = encoder(dtype, norm_first), inputs(dtype)
    result = probe(model, x, causal=causal, grads=True, loss=squared_error)
    allowed = torch.ones(T, T, dtype=torch.bool).tril() if causal else None
    mask = nn.Transformer.generate_square_subsequent_mask(T, dtype=dtype) if causal else None
    with torch.no_grad():  # no hooks, eval, no grad: torch's fused fast path where it applies
        hs, As = [x], []
        for layer in model.layers:
            a = layer.norm1(hs[-1]) if norm_first else hs[-1]
            As.append(mha_attention(layer.self_attn, a, allowed))
            hs.append(layer(hs[-1], src_mask=mask, is_causal=causal))
        close(model(x, mask=mask, is_causal=causal), hs[-1], dtype)
    check(result, hs, As, dtype)
    assert result.family == "torch" and result.causal == causal

    def run():
        h = x
        for layer in model.layers:
            h = layer(h, src_mask=mask, is_causal=causal)
        return h
    grads = hand_grads(model.layers, run, lambda layer: mha_weights(layer.self_attn))
    close(torch.stack([result.grad_q, result.grad_k, result.grad_v], 1), grads, dtype)


def test_transformer_encoder_batch_first_false_is_transposed():
    x = inputs(torch.float64)
    first = encoder(torch.float64, norm_first=True)
    second = encoder(torch.float64, norm_first=True, batch_first=False)
    second.load_state_dict(first.state_dict())
    a, b = probe(first, x), probe(second, x)
    for field in ("cosine", "q", "p", "ipr", "entropy", "ipr_by_position"):
        close(getattr(b, field), getattr(a, field), torch.float64)


def test_custom_blocks_match_hand_computation():
    torch.manual_seed(0)
    model, x = Toy().double(), inputs(torch.float64)
    result = probe(model, x, blocks=model.layers, grads=True, loss=squared_error)
    with torch.no_grad():
        hs, As = [x], []
        for block in model.layers:
            As.append(mha_attention(block.attn, block.ln(hs[-1])))
            hs.append(block(hs[-1]))
    check(result, hs, As, torch.float64)
    assert result.family == "custom" and result.block_names == tuple(f"layers.{i}" for i in range(L))

    def run():
        h = x
        for block in model.layers:
            h = block(h)
        return h
    grads = hand_grads(model.layers, run, lambda b: mha_weights(b.attn))
    close(torch.stack([result.grad_q, result.grad_k, result.grad_v], 1), grads, torch.float64)


# ---------------------------------------------------------------- shapes, wrappers, unavailability

def test_single_sequence_and_wrappers():
    x = inputs(torch.float64)
    base = probe(bert(torch.float64), x)
    one = probe(bert(torch.float64), x[1])
    assert one.cosine.shape == (L + 1,) and one.ipr.shape == (L,) and one.ipr_by_position.shape == (L, T)
    close(one.cosine, base.cosine[:, 1], torch.float64)
    close(one.ipr, base.ipr[:, 1], torch.float64)
    torch.manual_seed(0)
    mlm = transformers.BertForMaskedLM(bert_config(attn_implementation="eager")).double()
    wrapped = probe(mlm, x)
    assert wrapped.block_names[0] == "bert.encoder.layer.0"
    torch.testing.assert_close(wrapped.cosine, probe(mlm.bert, x).cosine, rtol=0, atol=0)
    torch.manual_seed(0)
    lm = transformers.GPT2LMHeadModel(gpt2_config())
    assert probe(lm, x.float()).block_names[-1] == f"transformer.h.{L - 1}"
    assert isinstance(base, ProbeResult)
    json.dumps(base.to_dict())
    with pytest.raises(AttributeError):
        base.cosine = None


def test_gpt2_sdpa_gives_the_eager_weights():
    # a model built with SDPA: probe switches to eager attention for the call, only to read the weights
    x = inputs(torch.float32)
    sdpa, eager = gpt2(torch.float32, attn="sdpa"), gpt2(torch.float32)
    r, e = probe(sdpa, x), probe(eager, x)
    for field in ("cosine", "ipr", "entropy", "ipr_by_position"):
        close(getattr(r, field), getattr(e, field), torch.float32)
    assert sdpa.config._attn_implementation == "sdpa"
    fast = probe(sdpa, x, weights=False)
    assert fast.ipr is None and fast.entropy is None and fast.ipr_by_position is None
    close(fast.cosine, e.cosine, torch.float32)


def test_blocks_without_attention():
    torch.manual_seed(0)
    blocks = nn.ModuleList(nn.Sequential(nn.Linear(D, D), nn.Tanh()) for _ in range(2))
    r = probe(blocks, inputs(torch.float32), blocks=blocks, grads=True, loss=squared_error)
    assert r.ipr is None and r.grad_q is None and r.cosine.shape == (3, B)
    assert any("0 recognised attention modules" in n for n in r.notes)
    assert any("no query/key/value weights" in n for n in r.notes)


# ---------------------------------------------------------------- no side effects

def test_no_hooks_grads_or_mode_left_behind():
    model, x = bert(torch.float32, dropout=0.5), inputs(torch.float32)
    reference = probe(model, x)  # eval mode
    model.train()
    model.encoder.layer[1].eval()  # a mixed state, restored module by module
    modes = {n: m.training for n, m in model.named_modules()}
    preset = model.encoder.layer[0].attention.self.query.weight
    preset.grad = torch.full_like(preset, 3.0)
    with torch.no_grad():
        r = probe(model, x, grads=True, loss=squared_error)
    assert {n: m.training for n, m in model.named_modules()} == modes
    assert all(len(m._forward_hooks) == 0 and len(m._forward_pre_hooks) == 0 for m in model.modules())
    assert torch.equal(preset.grad, torch.full_like(preset, 3.0))
    assert all(p.grad is None for p in model.parameters() if p is not preset)
    close(r.cosine, reference.cosine, torch.float32)  # dropout was off
    assert any("eval mode" in n for n in r.notes)


# ---------------------------------------------------------------- errors

def test_errors_are_clear():
    model, x = bert(torch.float32), inputs(torch.float32)
    with pytest.raises(ValueError, match=r"could not find transformer blocks in Linear; pass blocks=\[...\]"):
        probe(nn.Linear(D, D), x)
    with pytest.raises(TypeError, match="torch.nn.Module"):
        probe("bert", x)
    with pytest.raises(ValueError, match=r"last dimension d = 32.*got shape \(3, 8, 16\)"):
        probe(model, x[..., :16])
    with pytest.raises(ValueError, match=r"\(B, T, d\) or \(T, d\)"):
        probe(model, x[0, 0])
    with pytest.raises(ValueError, match="T >= 2"):
        probe(model, x[:, :1])
    with pytest.raises(ValueError, match="device and dtype"):
        probe(model, x.double())
    with pytest.raises(ValueError, match="attention is causal: causal=False cannot be imposed"):
        probe(gpt2(torch.float32), x, causal=False)
    with pytest.raises(ValueError, match="grads=True needs loss"):
        probe(model, x, grads=True)
    with pytest.raises(ValueError, match="pass grads=True"):
        probe(model, x, loss=squared_error)
    with pytest.raises(ValueError, match=r"attention_mask must have shape \(3, 8\)"):
        probe(model, x, attention_mask=torch.ones(3, 7))
    with pytest.raises(ValueError, match="pad on the right"):
        probe(gpt2(torch.float32), x, attention_mask=torch.tensor([[0] + [1] * (T - 1)] * B))
    toy = Toy()
    with pytest.raises(ValueError, match="custom blocks"):
        probe(toy, x, blocks=toy.layers, attention_mask=torch.ones(B, T))
    with pytest.raises(ValueError, match=r"blocks\[0\] must return hidden states of shape"):
        probe(toy, x, blocks=[nn.Linear(D, 2 * D)])
    with pytest.raises(ValueError, match="scalar tensor"):
        probe(model, x, grads=True, loss=lambda h: h)


@pytest.mark.parametrize("dtype", DTYPES)
def test_cosine_pairs_match_hand_computation(dtype):
    # pairs=True: the cosine of every token pair per block, from the model's own hidden states
    model, x = gpt2(dtype), inputs(dtype)
    result = probe(model, x, pairs=True)
    with torch.no_grad():   # the model's own route, position embeddings cancelled; the last state is after ln_f
        hs = model(inputs_embeds=x - model.wpe(torch.arange(T)), output_hidden_states=True).hidden_states[:L]
    assert result.cosine_pairs.shape == (L + 1, B, T, T)
    for l, h in enumerate(hs):
        h = h.double()
        for t, s in ((0, 0), (0, 5), (3, 7), (7, 2)):
            want = (h[:, t] * h[:, s]).sum(-1) / (h[:, t].norm(dim=-1) * h[:, s].norm(dim=-1))
            close(result.cosine_pairs[l, :, t, s], want, dtype)
    off = ~torch.eye(T, dtype=torch.bool)
    close(result.cosine_pairs[:, :, off].mean(-1), result.cosine, dtype)   # its off-diagonal mean is `cosine`
    assert probe(model, x).cosine_pairs is None
    with pytest.raises(TypeError, match="pairs must be True or False"):
        probe(model, x, pairs=1)
