"""Small HuggingFace models of today's families, built from configs (nothing downloaded), and an independent float64
forward of their blocks, written here from each family's published equations and read by explicit attribute paths
(not through sigprop's readers), for tests/test_probe_families.py and tests/test_real.py.

Runs under transformers 4.44 to 5.x: the only version-dependent facts used here are the config spellings of the
RoPE base (4.x ``rope_theta`` / ``rotary_emb_base``, 5.x ``rope_parameters``) and ``dtype`` vs ``torch_dtype``.
"""
import math

import torch
import torch.nn.functional as F

import transformers as tf

tf.logging.set_verbosity_error()
V = tuple(int(v) for v in tf.__version__.split(".")[:2])
D, H, L, B, T = 32, 4, 3, 2, 8

FAMILIES = ("llama", "llama_lm", "qwen2", "mistral", "neox", "neox_seq", "vit", "roberta", "bert", "gpt2")
LLAMA_LIKE = ("llama", "llama_lm", "qwen2", "mistral")


def config(name, **kw):
    """The family's config at the test sizes; ``kw`` overrides any field."""
    common = dict(vocab_size=16, max_position_embeddings=64)
    llama = dict(hidden_size=D, intermediate_size=48, num_hidden_layers=L, num_attention_heads=H, **common)
    if name in ("llama", "llama_lm"):
        cls, base = tf.LlamaConfig, dict(llama, num_key_value_heads=2 if name == "llama" else 1, rms_norm_eps=1e-6)
    elif name == "qwen2":
        cls, base = tf.Qwen2Config, dict(llama, num_key_value_heads=2)
    elif name == "mistral":   # a window of 3 keys, well inside T = 8: the window is exercised
        cls, base = tf.MistralConfig, dict(llama, num_key_value_heads=1, sliding_window=3)
    elif name.startswith("neox"):
        cls, base = tf.GPTNeoXConfig, dict(llama, intermediate_size=64, rotary_pct=0.5,
                                           use_parallel_residual=name == "neox")
    elif name == "vit":
        eager = dict(attn_implementation="eager") if V < (4, 48) else {}   # 4.44's ViT SDPA returns no weights
        cls, base = tf.ViTConfig, dict(hidden_size=D, intermediate_size=64, num_hidden_layers=L, num_attention_heads=H,
                                       image_size=16, patch_size=8, **eager)
    elif name in ("roberta", "bert"):
        cls = tf.RobertaConfig if name == "roberta" else tf.BertConfig
        base = dict(hidden_size=D, intermediate_size=64, num_hidden_layers=L, num_attention_heads=H, vocab_size=16,
                    max_position_embeddings=70)
    elif name == "gpt2":
        cls, base = tf.GPT2Config, dict(n_embd=D, n_layer=L, n_head=H, vocab_size=16, n_positions=64)
    else:
        raise KeyError(name)
    return cls(**{**base, **kw})


CLASSES = {"llama": "LlamaModel", "llama_lm": "LlamaForCausalLM", "qwen2": "Qwen2Model", "mistral": "MistralModel",
           "neox": "GPTNeoXModel", "neox_seq": "GPTNeoXModel", "vit": "ViTModel", "roberta": "RobertaModel",
           "bert": "BertModel", "gpt2": "GPT2Model"}


def build(name, dtype=None, seed=0, **kw):
    """The model, in eval mode; ``dtype`` builds it in half precision (``_from_config``, as users do)."""
    cls = getattr(tf, CLASSES[name])
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        if dtype is None:
            return cls(config(name, **kw)).eval()
        key = "dtype" if V >= (4, 56) else "torch_dtype"
        return cls._from_config(config(name, **kw), **{key: dtype}).eval()


@torch.no_grad()
def scramble(model, seed=0):
    """Every parameter random, so biases, gains and non-uniform attention are exercised: norm gains 1 + 0.1 N,
    other vectors 0.1 N, matrices N / sqrt(fan_in) (logits of order one)."""
    g = torch.Generator().manual_seed(seed)
    for n, p in model.named_parameters():
        z = torch.randn(p.shape, generator=g, dtype=torch.float64)
        if p.ndim == 1:
            gain = n.endswith("weight") and ("norm" in n.lower() or n.split(".")[-2].startswith("ln"))
            p.copy_((1.0 if gain else 0.0) + 0.1 * z)
        elif p.ndim == 2:
            p.copy_(z / math.sqrt(p.shape[0] if ".c_" in n else p.shape[1]))   # GPT-2 Conv1D stores (in, out)
    return model


def blocks_of(name, model):
    base = model.model if name == "llama_lm" else model
    if name in LLAMA_LIKE or name.startswith("neox"):
        return list(base.layers)
    if name == "vit":
        return list(base.layers) if hasattr(base, "layers") else list(base.encoder.layer)
    if name == "gpt2":
        return list(base.h)
    return list(base.encoder.layer)


def rope_base(cfg):
    params = getattr(cfg, "rope_parameters", None) or {}
    return float(params.get("rope_theta", getattr(cfg, "rope_theta", None) or getattr(cfg, "rotary_emb_base", None)))


def rope_share(cfg):
    """GPT-NeoX's rotated share of each head (4.x ``rotary_pct``, 5.x ``rope_parameters``)."""
    params = getattr(cfg, "rope_parameters", None) or {}
    return float(params.get("partial_rotary_factor", getattr(cfg, "rotary_pct", 1.0)))


def _lin(x, m):
    """An nn.Linear (or GPT-2 Conv1D, stored (in, out)) applied in float64."""
    w = m.weight.double()
    y = x @ (w if type(m).__name__ == "Conv1D" else w.T)
    return y if m.bias is None else y + m.bias.double()


def _norm(x, m, rms):
    w = m.weight.double()
    eps = getattr(m, "variance_epsilon", getattr(m, "eps", None))
    if rms:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w
    mu = x.mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt((x - mu).pow(2).mean(-1, keepdim=True) + eps) * w + m.bias.double()


def _rotate(x, dims, theta):
    """Rotary embedding of the first ``dims`` features of each head (HF's rotate_half pairing)."""
    Tn = x.shape[-2]
    inv = theta ** (-torch.arange(0, dims, 2, dtype=torch.float64) / dims)
    ang = torch.arange(Tn, dtype=torch.float64)[:, None] * inv[None]
    cos, sin = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)
    r, rest = x[..., :dims], x[..., dims:]
    half = torch.cat([-r[..., dims // 2:], r[..., :dims // 2]], -1)
    return torch.cat([r * cos + half * sin, rest], -1)


def _qkv(name, block, a):
    """(q, k, v) as (B, heads, T, head_dim) and the logit scale, by each family's attribute paths."""
    Bn, Tn, d = a.shape
    if name in LLAMA_LIKE:
        at = block.self_attn
        hd = at.head_dim
        q, k, v = (_lin(a, m).view(Bn, Tn, -1, hd).transpose(1, 2) for m in (at.q_proj, at.k_proj, at.v_proj))
        return q, k, v, hd ** -0.5
    if name.startswith("neox"):
        hd = d // H   # query_key_value rows interleave per head: [q_h; k_h; v_h]
        qkv = _lin(a, block.attention.query_key_value).view(Bn, Tn, H, 3, hd)
        return (*(qkv[:, :, :, j].transpose(1, 2) for j in range(3)), hd ** -0.5)
    if name == "gpt2":
        q, k, v = _lin(a, block.attn.c_attn).split(d, -1)
    else:
        at = block.attention.self if name in ("roberta", "bert") else (
            block.attention.attention if hasattr(block.attention, "attention") else block.attention)
        names = ("query", "key", "value") if hasattr(at, "query") else ("q_proj", "k_proj", "v_proj")
        q, k, v = (_lin(a, getattr(at, n)) for n in names)
    return (*(t.view(Bn, Tn, H, d // H).transpose(1, 2) for t in (q, k, v)), (d // H) ** -0.5)


def allowed_keys(Tn, causal, window=None):
    i = torch.arange(Tn)
    ok = torch.ones(Tn, Tn, dtype=torch.bool)
    if causal:
        ok &= i[None] <= i[:, None]
    if window is not None:
        ok &= i[None] > i[:, None] - window
    return ok


def hand_attention(name, block, a, cfg):
    """Self-attention in float64 -> (output (B, T, d), weights (B, H, T, T))."""
    q, k, v, scale = _qkv(name, block, a)
    if name in LLAMA_LIKE or name.startswith("neox"):
        hd = q.shape[-1]
        dims = int(hd * rope_share(cfg)) if name.startswith("neox") else hd
        q, k = _rotate(q, dims, rope_base(cfg)), _rotate(k, dims, rope_base(cfg))
    k = k.repeat_interleave(q.shape[1] // k.shape[1], 1)   # grouped-query: head h reads key/value group h // (H/G)
    v = v.repeat_interleave(q.shape[1] // v.shape[1], 1)
    causal = name in LLAMA_LIKE or name.startswith("neox") or name == "gpt2"
    window = cfg.sliding_window if name == "mistral" else None
    A = (q @ k.transpose(-1, -2) * scale).masked_fill(~allowed_keys(a.shape[1], causal, window), -math.inf).softmax(-1)
    ctx = (A @ v).transpose(1, 2).reshape(*a.shape[:2], -1)
    if name == "gpt2":
        out = block.attn.c_proj
    elif name in LLAMA_LIKE:
        out = block.self_attn.o_proj
    elif name.startswith("neox"):
        out = block.attention.dense
    elif hasattr(block.attention, "output"):   # BERT, RoBERTa, ViT 4.x
        out = block.attention.output.dense
    else:                                      # ViT 5.x
        out = block.attention.o_proj
    return _lin(ctx, out), A


def hand_mlp(name, block, x):
    if name in LLAMA_LIKE:
        m = block.mlp
        return _lin(F.silu(_lin(x, m.gate_proj)) * _lin(x, m.up_proj), m.down_proj)
    if name.startswith("neox"):
        return _lin(F.gelu(_lin(x, block.mlp.dense_h_to_4h)), block.mlp.dense_4h_to_h)
    if name == "gpt2":
        return _lin(F.gelu(_lin(x, block.mlp.c_fc), approximate="tanh"), block.mlp.c_proj)
    if name == "vit" and hasattr(block, "mlp"):
        return _lin(F.gelu(_lin(x, block.mlp.fc1)), block.mlp.fc2)
    return _lin(F.gelu(_lin(x, block.intermediate.dense)), block.output.dense)


def hand_block(name, block, h, cfg):
    """One block in float64 from its own weights -> (output, attention weights)."""
    if name in ("roberta", "bert"):   # post-LN
        o, A = hand_attention(name, block, h, cfg)
        h1 = _norm(h + o, block.attention.output.LayerNorm, False)
        return _norm(h1 + hand_mlp(name, block, h1), block.output.LayerNorm, False), A
    rms = name in LLAMA_LIKE
    if name == "gpt2":
        ln1, ln2 = block.ln_1, block.ln_2
    elif name == "vit":
        ln1, ln2 = block.layernorm_before, block.layernorm_after
    else:
        ln1, ln2 = block.input_layernorm, block.post_attention_layernorm
    o, A = hand_attention(name, block, _norm(h, ln1, rms), cfg)
    if name == "neox":   # parallel residual
        return h + o + hand_mlp(name, block, _norm(h, ln2, rms)), A
    h1 = h + o
    return h1 + hand_mlp(name, block, _norm(h1, ln2, rms)), A


def hand_run(name, model, x):
    """States (L+1) x (B, T, d) and weights L x (B, H, T, T), float64, from the model's weights as stored."""
    cfg = model.config
    h, states, weights = x.double(), [x.double()], []
    for block in blocks_of(name, model):
        h, A = hand_block(name, block, h, cfg)
        states.append(h)
        weights.append(A)
    return states, weights


def model_inputs(name, model, seed=0):
    """Inputs of the whole model (its own route)."""
    g = torch.Generator().manual_seed(seed)
    if name == "vit":
        return dict(pixel_values=torch.randn(B, 3, 16, 16, generator=g).to(next(model.parameters()).dtype))
    return dict(input_ids=torch.randint(2, 16, (B, T), generator=g))
