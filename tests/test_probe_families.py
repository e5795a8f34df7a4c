"""sp.probe on today's families (Llama, Qwen2, Mistral, GPT-NeoX, ViT, RoBERTa; BERT and GPT-2 again) in whatever
transformers major is installed (tests/test_transformers_major.py runs this file under the other one).

Each family is built from its config with every parameter scrambled (tests/hf_models.py), then probed, and compared
with (a) an independent float64 forward of its blocks written in tests/hf_models.py from the family's equations and
read by explicit attribute paths, measured by the plain loops of tests/test_probe.py, and (b) the model's own
whole-model route (``output_hidden_states``), whose hidden states l < L are block outputs.

Tolerance basis (measured by the research note behind this test, /tmp/r1-hf in the issue): a float32 model against
the float64 hand forward differs by at most 2.0e-6 relative in the states and 5.7e-7 absolute in the weights over 3
blocks of width 64 (float32 unit roundoff 6e-8 grown over O(d) sums and 3 blocks), so TOL[float32] = (1e-5, 1e-6)
holds with a margin of 5. Half-precision models are run as float32 copies: against the float64 forward on the same
half weights the states differ by <= 1.6e-6 relative, so the same tolerance applies; run natively they would differ
by 3e-3 (fp16) to 3e-2 (bf16).
"""
import math

import pytest
import torch
from torch import nn
import torch.nn.functional as F

import sigprop as sp
from sigprop.stats._validate import TOL

transformers = pytest.importorskip("transformers")
import hf_models as M  # noqa: E402
from test_probe import hand_attention, hand_geometry  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


def close(a, b, dtype=torch.float32):
    rtol, atol = TOL[dtype]
    torch.testing.assert_close(torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64),
                               rtol=rtol, atol=atol)


def close_states(a, b, rtol=1e-5):
    """Hidden states agree to ``rtol`` relative to their rms (entry-wise relative error is meaningless near 0)."""
    a, b = torch.as_tensor(a).detach().double(), torch.as_tensor(b).detach().double()
    err = float((a - b).abs().max() / b.pow(2).mean().sqrt())
    assert err <= rtol, f"max |difference| / rms = {err:.3g} > {rtol:g}"


def check(result, states, weights, dtype=torch.float32):
    """probe's measures against the plain loops of test_probe on (hand) states and weights."""
    n = states[0].shape[1]
    geo = hand_geometry_T(states)
    close(result.cosine, geo[0], dtype)
    close(result.q, geo[1], dtype)
    close(result.p, geo[2], dtype)
    ipr, ent, by_pos = hand_attention_T(weights)
    close(result.ipr, ipr, dtype)
    close(result.entropy, ent, dtype)
    close(result.ipr_by_position, by_pos, dtype)
    assert result.ipr_by_position.shape == (len(weights), M.B, n)


def hand_geometry_T(states):
    """test_probe's loops at this file's sizes."""
    import test_probe as P
    saved = (P.B, P.T, P.D)
    P.B, P.T, P.D = states[0].shape
    try:
        return hand_geometry(states)
    finally:
        P.B, P.T, P.D = saved


def hand_attention_T(weights):
    import test_probe as P
    saved = (P.B, P.T)
    P.B, P.T = weights[0].shape[0], weights[0].shape[-1]
    try:
        return hand_attention(weights)
    finally:
        P.B, P.T = saved


def whole_model_states(name, model):
    with torch.no_grad():
        hs = model(**M.model_inputs(name, model), output_hidden_states=True).hidden_states
    return hs


@pytest.mark.parametrize("name", M.FAMILIES)
def test_probe_matches_hand_forward_and_the_models_own_route(name):
    model = M.scramble(M.build(name))
    hs = whole_model_states(name, model)
    x = hs[0].detach()
    result = sp.probe(model, x)
    states, weights = M.hand_run(name, model, x)
    check(result, states, weights)
    for l in range(1, M.L):   # the model's own route: hidden_states[l] is block l's output (l < L)
        close_states(hs[l], states[l])
    assert model.config._attn_implementation == M.build(name).config._attn_implementation   # restored
    assert result.causal == (name in M.LLAMA_LIKE or name.startswith("neox") or name == "gpt2")
    if result.causal:   # row 0 sees only itself
        close(result.ipr_by_position[:, :, 0], torch.ones(M.L, M.B))
    want = {"llama_lm": "llama", "qwen2": "llama", "mistral": "llama", "neox_seq": "neox", "roberta": "bert"}
    assert result.family == want.get(name, name)
    prefix = "model." if name == "llama_lm" else ""
    assert result.block_names[0].startswith(prefix) and result.block_names[0].endswith("0")


@pytest.mark.parametrize("name", ["llama", "neox"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_is_accumulated_in_float32(name, dtype):
    full = M.scramble(M.build(name), seed=1)
    half = M.build(name, dtype=dtype)
    half.load_state_dict({k: v.to(dtype) for k, v in full.state_dict().items()})
    exact = M.build(name).double()   # the half weights, exactly, in float64
    exact.load_state_dict({k: v.to(dtype).double() for k, v in full.state_dict().items()})
    x = torch.randn(M.B, M.T, M.D, generator=torch.Generator().manual_seed(2)).to(dtype)
    result = sp.probe(half, x)
    states, weights = M.hand_run(name, exact, x.double())
    check(result, states, weights)
    assert any("float32 copies" in n for n in result.notes)
    assert next(half.parameters()).dtype == dtype      # the model itself untouched


def test_grad_norms_on_fused_and_grouped_projections():
    # GPT-NeoX's fused head-interleaved query_key_value and Llama's grouped keys: autograd on the hand forward
    for name in ("neox", "llama"):
        model = M.scramble(M.build(name), seed=3).double()
        x = torch.randn(M.B, M.T, M.D, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
        target = torch.randn(x.shape, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
        result = sp.probe(model, x, grads=True, loss=lambda h: ((h - target) ** 2).mean())
        params = list(model.parameters())
        with torch.enable_grad():
            states, _ = M.hand_run(name, model, x)
            g = dict(zip(map(id, params), torch.autograd.grad(((states[-1] - target) ** 2).mean(), params,
                                                              allow_unused=True)))
        want = []
        for block in M.blocks_of(name, model):
            if name == "neox":
                G = g[id(block.attention.query_key_value.weight)].view(M.H, 3, M.D // M.H, M.D)
                want.append([float(G[:, j].norm()) for j in range(3)])
            else:
                a = block.self_attn
                want.append([float(g[id(m.weight)].norm()) for m in (a.q_proj, a.k_proj, a.v_proj)])
        # float32 tolerance although both run in float64: HF computes RoPE's cos/sin in float32 (7e-7 measured)
        close(torch.stack([result.grad_q, result.grad_k, result.grad_v], 1), torch.tensor(want))


def test_padding_and_window():
    # right padding (3 keys) on a windowed Mistral: the real tokens' states equal the model's own masked route
    model = M.scramble(M.build("mistral"), seed=6)
    mask = torch.ones(M.B, M.T, dtype=torch.long)
    mask[0, -3:] = 0
    with torch.no_grad():
        hs = model(**M.model_inputs("mistral", model), attention_mask=mask, output_hidden_states=True).hidden_states
    r = sp.probe(model, hs[0], attention_mask=mask, pairs=True)
    for l in range(1, M.L):
        h = hs[l][1].double()   # the unpadded sequence: its cosine matrix is the model's
        cos = (h @ h.T) / (h.norm(dim=-1)[:, None] * h.norm(dim=-1)[None])
        close(r.cosine_pairs[l, 1], cos)
        real = hs[l][0, :-3].double()
        cos0 = (real @ real.T) / (real.norm(dim=-1)[:, None] * real.norm(dim=-1)[None])
        close(r.cosine_pairs[l, 0, :-3, :-3], cos0)


# ---------------------------------------------------------------- a hand-written model through an adapter

class SelfAttention(nn.Module):
    """nanoGPT's: fused c_attn, F.scaled_dot_product_attention (never materialises the weights)."""

    def __init__(self, d, heads):
        super().__init__()
        self.c_attn, self.c_proj, self.n_head = nn.Linear(d, 3 * d), nn.Linear(d, d), heads

    def qkv(self, x):
        Bn, Tn, d = x.shape
        return [t.view(Bn, Tn, self.n_head, d // self.n_head).transpose(1, 2) for t in self.c_attn(x).split(d, -1)]

    def forward(self, x):
        q, k, v = self.qkv(x)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).reshape(x.shape))


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln_1, self.attn, self.ln_2 = nn.LayerNorm(d), SelfAttention(d, heads), nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class NanoGPT(nn.Module):
    def __init__(self, d=M.D, heads=M.H, depth=M.L):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(wte=nn.Embedding(16, d), ln_f=nn.LayerNorm(d),
                                              h=nn.ModuleList(Block(d, heads) for _ in range(depth))))


def recomputed_weights(module, args, kwargs, output):
    """The softmax inside SDPA, recomputed from the attention's input (at least float32)."""
    q, k, _ = module.qkv(args[0])
    Tn = q.shape[-2]
    logits = (q @ k.transpose(-1, -2)).to(torch.promote_types(q.dtype, torch.float32)) / math.sqrt(q.shape[-1])
    return logits.masked_fill(~M.allowed_keys(Tn, True), -math.inf).softmax(-1)


def nano_adapter(model):
    return sp.BlockAdapter(blocks=model.transformer.h, causal=True, attention=lambda b: b.attn,
                           weights=recomputed_weights, final_norm=model.transformer.ln_f, family="nanoGPT")


def test_a_hand_written_model_through_an_adapter():
    torch.manual_seed(0)
    model = NanoGPT().eval().double()
    x = torch.randn(M.B, M.T, M.D, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    r = sp.probe(model, x, adapter=nano_adapter(model))
    states, weights = [x], []
    with torch.no_grad():
        for b in model.transformer.h:
            a = b.ln_1(states[-1])
            q, k, _ = b.attn.qkv(a)
            weights.append((q @ k.transpose(-1, -2) / math.sqrt(M.D // M.H)).masked_fill(
                ~M.allowed_keys(M.T, True), -math.inf).softmax(-1))
            states.append(b(states[-1]))
    check(r, states, weights, torch.float64)
    assert r.family == "nanoGPT" and r.causal and r.block_names[0] == "transformer.h.0"
    with pytest.raises(ValueError, match="could not find transformer blocks in NanoGPT"):
        sp.probe(model, x)                     # not a transformers model: its call convention is unknown
    half = NanoGPT().eval()
    half.load_state_dict(model.state_dict())
    half = half.to(torch.bfloat16)
    hb = sp.probe(half, x.to(torch.bfloat16), adapter=nano_adapter(half))
    assert hb.ipr is not None and any("float32 copies" in n for n in hb.notes)


def test_eager_is_requested_only_for_weights():
    model = M.scramble(M.build("llama"))
    impl = model.config._attn_implementation
    seen = []
    hook = model.layers[0].register_forward_pre_hook(lambda m, a: seen.append(model.config._attn_implementation))
    x = torch.randn(M.B, M.T, M.D, generator=torch.Generator().manual_seed(8))
    fast = sp.probe(model, x, weights=False)
    full = sp.probe(model, x)
    hook.remove()
    assert seen == [impl, "eager"] and model.config._attn_implementation == impl
    assert fast.ipr is None and any("weights=False" in n for n in fast.notes)
    close(fast.cosine, full.cosine)   # SDPA and eager agree with the same explicit mask
