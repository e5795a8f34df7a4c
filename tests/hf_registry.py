"""Every text and vision family of the installed transformers, built at tiny sizes from its config (nothing
downloaded), for tests/test_hf_registry.py.

The families are enumerated, not listed by hand: the model types of the causal-LM, masked-LM and image-classification
registries that have a base model (``AutoModel``). Each config is the family's default with its sizes shrunk (width
64, 2 blocks, 4 heads, 2 key/value heads, head width 16, feed-forward 128, vocabulary 64, 128 positions, 4 experts,
image 32 px in patches of 8; sub-configs alike), the token ids moved inside the vocabulary and per-layer lists cut to
the number of blocks. A family is *not buildable* when the shrunk config still makes more than 20 M parameters or its
constructor raises; the reason is kept.

``python tests/hf_registry.py --record`` rewrites tests/records/hf_registry_transformers<major>.json: per family,
whether it builds, what sp.probe and sp.read_init do with it (read and proved: the replay's error; refused: the
message) and the time taken.
"""
import json
import pathlib
import sys
import time
import warnings

import torch
import transformers as tf
from transformers.models.auto import configuration_auto as ca, modeling_auto as ma

tf.logging.set_verbosity_error()
MAJOR = int(tf.__version__.split(".")[0])
RECORD = pathlib.Path(__file__).resolve().parent / "records" / f"hf_registry_transformers{MAJOR}.json"
MAX_PARAMS = 20_000_000
SMALL = dict(hidden_size=64, d_model=64, n_embd=64, dim=64, embed_dim=64, embedding_size=64, num_hidden_layers=2,
             n_layer=2, num_layers=2, n_layers=2, num_attention_heads=4, n_head=4, n_heads=4, num_heads=4,
             encoder_attention_heads=4, decoder_attention_heads=4, encoder_layers=2, decoder_layers=2,
             num_key_value_heads=2, intermediate_size=128, ffn_dim=128, d_ff=128, n_inner=128, ffn_hidden_size=128,
             encoder_ffn_dim=128, decoder_ffn_dim=128, moe_intermediate_size=32, shared_expert_intermediate_size=32,
             head_dim=16, rotary_dim=8, vocab_size=64, max_position_embeddings=128, n_positions=128,
             num_local_experts=4, num_experts=4, n_routed_experts=4, num_experts_per_tok=2, image_size=32,
             patch_size=8, kv_lora_rank=16, q_lora_rank=32, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16)
TOKEN_IDS = ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id", "sep_token_id", "cls_token_id")


def families() -> list:
    names = set(ma.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES) | set(ma.MODEL_FOR_MASKED_LM_MAPPING_NAMES)
    names |= set(getattr(ma, "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES", {}))
    return sorted(n for n in names if n in ma.MODEL_MAPPING_NAMES and isinstance(ma.MODEL_MAPPING_NAMES[n], str))


def _small(cfg) -> dict:
    keys = set(cfg.to_dict()) | set(getattr(type(cfg), "attribute_map", {}))
    small = {k: v for k, v in SMALL.items() if k in keys}
    if "qk_rope_head_dim" in keys:   # latent attention (DeepSeek): one key/value head per head, rope part = head_dim
        small.update(num_key_value_heads=small.get("num_attention_heads", 4), head_dim=SMALL["qk_rope_head_dim"])
    small.update({k: 1 for k in ("n_group", "topk_group") if k in keys})   # expert groups of the 4 experts
    return small


def _shrink(cfg, seen=None):
    seen = set() if seen is None else seen
    if id(cfg) in seen:
        return cfg
    seen.add(id(cfg))
    small = _small(cfg)
    try:   # through the constructor, so that derived fields (qk_head_dim, layer_types, ...) follow
        cfg = type(cfg)(**{k: v for k, v in cfg.to_dict().items() if k not in ("layer_types", "model_type")}, **{
            k: v for k, v in small.items() if k not in getattr(type(cfg), "attribute_map", {})})
    except Exception:
        pass
    for k, v in small.items():
        try:
            setattr(cfg, k, v)
        except Exception:   # a read-only alias
            pass
    vocab = getattr(cfg, "vocab_size", None)
    for k in TOKEN_IDS:
        v = getattr(cfg, k, None)
        if isinstance(v, int) and isinstance(vocab, int) and v >= vocab:
            setattr(cfg, k, vocab - 1)
    layers = getattr(cfg, "num_hidden_layers", None)
    for k in ("layer_types", "mlp_layer_types", "attention_types"):
        v = getattr(cfg, k, None)
        if isinstance(v, list) and isinstance(layers, int) and len(v) > layers:
            setattr(cfg, k, v[:layers])
    for k, v in list(vars(cfg).items()):
        if isinstance(v, tf.PretrainedConfig):
            setattr(cfg, k, _shrink(v, seen))
    return cfg


def tiny_config(name):
    return _shrink(ca.CONFIG_MAPPING[name]())


def build(name, **kw):
    """The family's base model at tiny sizes, in eval mode; ``kw`` overrides config fields. Raises what building
    raises (a ``RuntimeError`` for too many parameters)."""
    cfg = tiny_config(name)
    for k, v in kw.items():
        setattr(cfg, k, v)
    cls = getattr(tf, ma.MODEL_MAPPING_NAMES[name])
    with warnings.catch_warnings(), torch.device("meta"):
        warnings.simplefilter("ignore")
        n = sum(p.numel() for p in cls(cfg).parameters())
    if n > MAX_PARAMS:
        raise RuntimeError(f"{n / 1e6:.0f} M parameters after shrinking to tiny sizes")
    with warnings.catch_warnings(), torch.random.fork_rng():
        warnings.simplefilter("ignore")
        torch.manual_seed(0)
        return cls(cfg).eval()


#: Families not run, and why (listed in the record with the reason).
SKIP = {"falcon_h1": "its Mamba mixer's CPU fallback takes minutes at T = 12 (transformers 4.57)"}


def classify(name) -> dict:
    """What building, probing and reading family ``name`` gives (module docstring)."""
    import sigprop as sp
    from sigprop.models._adapter import adapter_for
    from sigprop.models._probe import _width
    if name in SKIP:
        return dict(build=f"skipped: {SKIP[name]}", probe=None, read=None, seconds=0.0)
    t0 = time.perf_counter()
    try:
        model = build(name)
    except Exception as e:
        return dict(build=f"{type(e).__name__}: {str(e)[:200]}", probe=None, read=None,
                    seconds=round(time.perf_counter() - t0, 2))
    out = dict(build="ok")
    for what, run in (("probe", lambda: _probe(sp, model, adapter_for, _width)), ("read", lambda: _read(sp, model))):
        try:
            out[what] = run()
        except ValueError as e:
            out[what] = "refused: " + str(e)
        except Exception as e:   # anything but a clear refusal is a defect: the test fails on it
            out[what] = f"ERROR {type(e).__name__}: {str(e)[:300]}"
    out["seconds"] = round(time.perf_counter() - t0, 2)
    return out


def _probe(sp, model, adapter_for, width):
    ad = adapter_for(model)
    d = width(ad, ad.blocks[0], model)
    if d is None:
        raise ValueError("the width of the first block could not be read")
    x = torch.randn(2, 12, d, generator=torch.Generator().manual_seed(0)).to(next(model.parameters()).dtype)
    r = sp.probe(model, x)
    if not bool(torch.isfinite(r.cosine).all()):
        raise ValueError("non-finite cosines")
    return "ok" + ("" if r.ipr is not None else " (no attention weights: " + "; ".join(r.notes)[:200] + ")")


def _read(sp, model):
    init = sp.read_init(model)
    return f"proved (replay error {init.proof.error:.1e}, T = {init.proof.T})"


def status(entry) -> str:
    """``not-buildable``, ``read``, ``refused`` or ``error`` (a probe or read raising anything but a ValueError)."""
    if entry["build"] != "ok":
        return "skipped" if entry["build"].startswith("skipped") else "not-buildable"
    if any(str(entry[k]).startswith("ERROR") for k in ("probe", "read")):
        return "error"
    return "read" if entry["read"].startswith("proved") else "refused"


if __name__ == "__main__" and "--record" in sys.argv:
    warnings.filterwarnings("ignore")
    table = {n: classify(n) for n in families()}
    RECORD.parent.mkdir(exist_ok=True)
    RECORD.write_text(json.dumps(dict(transformers=tf.__version__, torch=torch.__version__, families=table),
                                 indent=1, sort_keys=True) + "\n")
    counts = {s: sum(status(e) == s for e in table.values()) for s in ("read", "refused", "not-buildable", "skipped",
                                                                        "error")}
    print(RECORD, counts, f"{sum(e['seconds'] for e in table.values()):.0f} s")
