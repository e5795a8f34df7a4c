r"""The parts a block of an off-the-shelf model is read into: weights as views, normalisations measured, activations
recognised, rotary embeddings read (used by ``sigprop.models._families``).

* **Weights** are returned in ``nn.Linear``'s layout ``(out, in)`` as a :class:`View` of the module's parameter (a
  transposed ``Conv1D`` weight, a slice of a fused projection), so :func:`sigprop.reinitialise` writes through it.
* **Normalisations** are *measured*, not named (:func:`read_norm`): a norm module is run (a float64 copy) on ``x`` and
  ``-x`` at two scales, which gives its bias (the even part), its gain and its ``eps`` (the odd part: ``g x /
  sqrt(mean x^2 + eps)``), and whether it centres (a shift of ``x`` leaves a LayerNorm unchanged); the fitted norm must
  then reproduce the module on fresh inputs (relative error ``_NORM_TOL``) or the module is refused. So RMSNorm,
  LayerNorm, Gemma's ``1 + weight`` gain and OLMo's parameter-free LayerNorm with its hard-coded ``eps`` are read by
  one rule, and a normalisation that is none of these is refused by name.
* **Activations** are recognised numerically against sigprop's own activations on ``[-6, 6]`` (class names differ
  between transformers versions).
* **RoPE**: base and rotated share from the config in either spelling (4.x ``rope_theta`` / ``rotary_pct``; 5.x
  ``rope_parameters``), checked against the module's ``inv_freq``.
"""
from __future__ import annotations

import copy
import dataclasses
from typing import Callable

import torch
from torch import nn

from ..block import ACTIVATIONS

__all__: list[str] = []

#: Relative error (to the output's rms) within which a fitted normalisation must reproduce its module: the
#: module runs in float64 here (float32 where it casts internally, e.g. OLMo's: roundoff ~1e-7), and a
#: misread gain, eps or centring shows at 1e-3 or more on the test inputs.
_NORM_TOL = 1e-5
#: The two input scales (rms) at which a norm is run: at 1e-3 an eps of 1e-12 ... 1e-2 moves the output measurably.
_SCALES = (1.0, 1e-3)


@dataclasses.dataclass(frozen=True)
class View:
    """A weight as a view of a parameter: ``fn(param)`` (a transpose, a slice of a fused projection). ``of(t)``
    applies the same view to a tensor shaped like the parameter, e.g. its gradient."""

    param: torch.Tensor
    fn: Callable = lambda t: t

    def get(self) -> torch.Tensor:
        return self.fn(self.param)

    def of(self, t: torch.Tensor) -> torch.Tensor:
        return self.fn(t)


@dataclasses.dataclass(frozen=True)
class Stacked:
    """A weight held by several parameters, one per expert (transformers 4.x keeps a ``ModuleList`` of expert MLPs):
    ``get()`` stacks their views (a copy), ``write(x)`` writes ``x[e]`` through view ``e``."""

    parts: tuple

    @property
    def params(self) -> list:
        return [v.param for v in self.parts]

    def get(self) -> torch.Tensor:
        return torch.stack([v.get() for v in self.parts])

    def write(self, x: torch.Tensor) -> None:
        for v, xe in zip(self.parts, x):
            v.get().copy_(xe)


def view(param, fn=None):
    return None if param is None else View(param, fn or (lambda t: t))


def get(module, path):
    """``module.a.b.c`` for path ``"a.b.c"``, or None."""
    for part in path.split("."):
        module = getattr(module, part, None)
        if module is None:
            return None
    return module


def _transpose(t):
    return t.T


def linear(m):
    """-> (W, b) views in nn.Linear's (out, in) layout of an nn.Linear or HF Conv1D (stored (in, out))."""
    if type(m).__name__ == "Conv1D":
        return view(m.weight, _transpose), view(m.bias)
    if not isinstance(m, nn.Linear):
        raise ValueError(f"{type(m).__name__} is not an nn.Linear or Conv1D")
    return view(m.weight), view(m.bias)


def rows(v, index):
    """A view of rows ``index`` of ``v`` (None stays None)."""
    if v is None:
        return None
    fn = v.fn
    return View(v.param, lambda t: fn(t)[index])


def fused(layout, W, b, heads):
    """Query/key/value views of a fused projection: GPT-NeoX interleaves per head (``(H, d_k, d)`` views), GPT-2
    concatenates."""
    out_rows, d = W.get().shape
    if layout == "neox":
        hd = out_rows // (3 * heads)
        fw, fb = W.fn, None if b is None else b.fn
        views = {}
        for j, r in enumerate("qkv"):
            views[f"w_{r}"] = View(W.param, lambda t, j=j: fw(t).view(heads, 3, hd, d)[:, j])
            views[f"b_{r}"] = None if b is None else View(b.param, lambda t, j=j: fb(t).view(heads, 3, hd)[:, j])
        return views
    E = out_rows // 3
    if out_rows != 3 * d:
        raise ValueError(f"a fused query/key/value projection of {out_rows} rows is not 3 x {d} (queries, keys and "
                         "values of the full width): multi-query or grouped keys and values in one projection "
                         "(GPT-BigCode) are not read")
    views = {}
    for j, r in enumerate("qkv"):
        views[f"w_{r}"], views[f"b_{r}"] = rows(W, slice(j * E, (j + 1) * E)), rows(b, slice(j * E, (j + 1) * E))
    return views


def mha_views(a):
    """Query/key/value weight and bias views of an ``nn.MultiheadAttention`` (packed ``in_proj``), or None."""
    if not a._qkv_same_embed_dim:
        return None
    d = a.embed_dim
    W, b = view(a.in_proj_weight), view(a.in_proj_bias)
    out = {}
    for j, r in enumerate("qkv"):
        out[f"w_{r}"], out[f"b_{r}"] = rows(W, slice(j * d, (j + 1) * d)), rows(b, slice(j * d, (j + 1) * d))
    return out


# ---------------------------------------------------------------- activations

_RECOGNISED: dict = {}


def recognise_activation(f, where) -> str:
    """The :class:`~sigprop.BlockConfig` name of activation ``f`` (module or function), recognised numerically
    against sigprop's activations in float64 on [-6, 6] (the erf and tanh GELUs differ by 4.7e-4 there);
    remembered per parameter-free module class and options."""
    key = None
    if isinstance(f, nn.Module) and next(f.parameters(), None) is None:
        key = (type(f), tuple(sorted((k, v) for k, v in vars(f).items()
                                     if not k.startswith("_") and isinstance(v, (bool, int, float, str)))))
        if key in _RECOGNISED:
            return _RECOGNISED[key]
    name = _recognise(f, where)
    if key is not None:
        _RECOGNISED[key] = name
    return name


def _recognise(f, where) -> str:
    x = torch.linspace(-6, 6, 1201, dtype=torch.float64)
    try:
        with torch.no_grad():
            y = f(x)
    except Exception as e:  # a module that cannot run on a float64 vector
        raise ValueError(f"the activation {f!r} of {where} could not be evaluated ({type(e).__name__}: {e})") from None
    for name, act in ACTIVATIONS.items():
        if isinstance(y, torch.Tensor) and y.shape == x.shape and float((y - act.forward(x)).abs().max()) < 1e-9:
            return name
    raise ValueError(f"the activation {f!r} of {where} is none of sigprop's {', '.join(ACTIVATIONS)}")


# ---------------------------------------------------------------- normalisations


@dataclasses.dataclass(frozen=True)
class NormPart:
    """A normalisation module, measured (module docstring): ``y = gain * n(x) + bias`` with ``n(x) = u / sqrt(mean
    u^2 + eps)``, ``u = x - mean x`` (``center``) or ``x``. ``style`` says how its parameter holds the gain:
    ``"weight"`` (``gain = weight``), ``"1+weight"`` (Gemma) or ``"none"`` (no gain parameter)."""

    module: nn.Module
    center: bool
    eps: float
    gain: torch.Tensor       # (width,) float64
    bias: torch.Tensor       # (width,) float64
    style: str

    @property
    def kind(self) -> str:
        return "layer" if self.center else "rms"

    @property
    def identity(self) -> bool:
        return bool((self.gain == 1).all() and (self.bias == 0).all())

    def params(self) -> list:
        return [p for p in (getattr(self.module, "weight", None), getattr(self.module, "bias", None))
                if isinstance(p, torch.Tensor)]

    @torch.no_grad()
    def reset(self) -> None:
        """Write the identity gain and a zero bias into the module's parameters."""
        w, b = getattr(self.module, "weight", None), getattr(self.module, "bias", None)
        if isinstance(w, torch.Tensor):
            w.fill_(0.0 if self.style == "1+weight" else 1.0)
        if isinstance(b, torch.Tensor):
            b.zero_()


def _normalised(x, center, eps):
    u = x - x.mean(-1, keepdim=True) if center else x
    return u / torch.sqrt(u.pow(2).mean(-1, keepdim=True) + eps)


def own_copy(module: nn.Module) -> nn.Module:
    """``copy.deepcopy(module)`` whose submodules run their own class's ``forward``.

    transformers 4.57's output capture (``check_model_inputs``, asked for attention weights) leaves ``forward`` as an
    instance attribute that closes over the *original* module; a deep copy keeps that closure, so a float64 or float32
    copy would silently run the original's weights (GPT-NeoX after :func:`sigprop.probe`). Such attributes are dropped
    from the copy; a ``forward`` bound to the copied module itself is kept."""
    out = copy.deepcopy(module)
    for m in out.modules():
        f = m.__dict__.get("forward")
        if f is not None and getattr(f, "__self__", None) is not m:
            del m.__dict__["forward"]
    return out


@torch.no_grad()
def read_norm(m: nn.Module, width: int, where: str) -> NormPart:
    """Measure the normalisation ``m`` acting on ``width`` features (module docstring); refuse what it is not."""
    if next((b for b in m.buffers()), None) is not None and not isinstance(m, nn.LayerNorm):
        names = ", ".join(n for n, _ in m.named_buffers())
        raise ValueError(f"{where} ({type(m).__name__}) holds buffers ({names}): not a plain normalisation")
    mm = own_copy(m).double()
    g = torch.Generator().manual_seed(0)
    u = torch.randn(3, width, generator=g, dtype=torch.float64)
    u = u - u.mean(-1, keepdim=True)
    u = u / u.pow(2).mean(-1, keepdim=True).sqrt()            # centred, unit rms: n(u) = u / sqrt(1 + eps)
    try:
        out = [mm(s * u[:1]) for s in _SCALES] + [mm(-s * u[:1]) for s in _SCALES] + [mm(u[1:] + 3.0), mm(u[1:])]
    except Exception as e:
        raise ValueError(f"{where} ({type(m).__name__}) could not be run on (1, {width}) float64 features "
                         f"({type(e).__name__}: {e})") from None
    big, small, mbig, msmall, shifted, plain = (o.double().reshape(-1, width) for o in out)
    bias = (big + mbig)[0] / 2
    odd_big, odd_small = (big - mbig)[0] / 2, (small - msmall)[0] / 2    # gain u / sqrt(s^2 + eps) * s
    ok = (odd_big.abs() > 1e-6 * odd_big.abs().max()) & (u[0].abs() > 1e-3)
    r = float((odd_small[ok] / odd_big[ok]).median()) if bool(ok.any()) else float("nan")
    s2 = _SCALES[1] ** 2
    eps = max(0.0, s2 * (1 - r * r) / (r * r - s2)) if r == r and r * r > s2 else float("nan")
    gain = odd_big * (1 + eps) ** 0.5 / torch.where(u[0].abs() > 1e-12, u[0], torch.ones_like(u[0]))
    center = bool((shifted - plain).abs().max() <= 1e-6 * plain.abs().max())
    part = _exact(NormPart(m, center, eps, gain, bias, _style(m, gain)))
    fresh = torch.randn(4, width, generator=g, dtype=torch.float64) * torch.tensor([[1.0], [3.0], [0.3], [1e-2]],
                                                                                    dtype=torch.float64)
    fresh = fresh + 0.5
    want = mm(fresh).double()
    got = part.gain * _normalised(fresh, center, eps) + part.bias
    err = float((got - want).abs().max() / want.pow(2).mean().sqrt().clamp_min(1e-300))
    if not err <= _NORM_TOL:
        raise ValueError(f"{where} ({type(m).__name__}) is not a LayerNorm or RMSNorm with a per-feature gain and bias "
                         f"(the best such fit misses its output by {err:.2g} of its rms): not read")
    return part


def _exact(part: NormPart) -> NormPart:
    """The measured norm with its parameters' own values where they hold it (the measurement has roundoff): the gain
    from ``weight`` (or ``1 + weight``), the bias from ``bias``, ``eps`` from the module's attribute where the
    measurement agrees with it; 1 and 0 where a module without those parameters measures 1 or 0 to 1e-6 (float32
    internals leave ~1e-7; a misread gain would be off by far more, and the replay checks it)."""
    m = part.module
    w, b = getattr(m, "weight", None), getattr(m, "bias", None)
    gain, bias = part.gain, part.bias
    if part.style in ("weight", "1+weight"):
        gain = w.detach().double().cpu().reshape(-1) + (1.0 if part.style == "1+weight" else 0.0)
    elif (gain - 1).abs().max() <= 1e-6:   # no gain parameter: 1, measured through float32 internals (OLMo)
        gain = torch.ones_like(gain)
    if isinstance(b, torch.Tensor) and b.shape == bias.shape and torch.allclose(bias, b.detach().double().cpu(),
                                                                                 rtol=1e-5, atol=1e-6):
        bias = b.detach().double().cpu().clone()
    elif bias.abs().max() <= 1e-6:
        bias = torch.zeros_like(bias)
    eps = part.eps
    attr = getattr(m, "variance_epsilon", getattr(m, "eps", None))
    if isinstance(attr, (int, float)) and abs(attr - eps) <= 1e-3 * attr + 1e-12:
        eps = float(attr)
    return dataclasses.replace(part, gain=gain, bias=bias, eps=eps)


def _style(m, gain) -> str:
    w = getattr(m, "weight", None)
    if not isinstance(w, torch.Tensor):
        return "none"
    w = w.detach().double().cpu().reshape(-1)
    if w.shape != gain.shape:
        return "other"
    if torch.allclose(gain, w, rtol=1e-5, atol=1e-6):
        return "weight"
    if torch.allclose(gain, 1 + w, rtol=1e-5, atol=1e-6):
        return "1+weight"
    return "other"


# ---------------------------------------------------------------- rotary embeddings


def config_of(attn, block):
    return getattr(attn, "config", None) or getattr(block, "config", None)


def rope_of(attn, block, rotary, head_dim):
    """-> (theta, fraction, rope_type, inv_freq agrees with theta, freqs) for a block with rotary embeddings, else
    None; ``freqs`` the module's inverse frequencies where they are not ``theta^(-2i/r)`` in float32 (Llama 3's,
    linear scaling), else None. ``rotary`` is the model-level rotary module (4.57+, 5.x), or None (4.44: inside the
    attention). Rotary tables with an attention scaling (YaRN, LongRoPE) or recomputed per length (dynamic) are
    refused: they are not rotations by fixed angles."""
    inner = next((m for m in attn.modules() if type(m).__name__.endswith("RotaryEmbedding")), None)
    module = rotary if rotary is not None else inner
    if module is None:
        return None
    cfg = config_of(attn, block)
    params = dict(getattr(cfg, "rope_parameters", None) or {})
    kind = getattr(attn, "layer_type", None) or getattr(attn, "attention_type", None)
    if params and all(isinstance(v, dict) for v in params.values()):   # 5.x per layer type (Gemma3, ModernBERT)
        params = dict(params.get(kind) or next(iter(params.values())))
    theta = params.get("rope_theta", getattr(cfg, "rope_theta", None) or getattr(cfg, "rotary_emb_base", None))
    if theta is None:
        theta = getattr(module, "base", None)
    dims = getattr(attn, "rotary_ndims", None)
    if dims is None:
        frac = params.get("partial_rotary_factor", getattr(cfg, "partial_rotary_factor", None) or 1.0)
        dims = int(head_dim * float(frac))
    if dims == 0:   # GPT-NeoX with rotary_pct = 0: nothing is rotated
        return None
    if theta is None:
        raise ValueError(f"{type(attn).__name__} rotates queries and keys but its RoPE base (rope_theta) could not be "
                         "read from its config")
    rope_type = str(params.get("rope_type", (getattr(cfg, "rope_scaling", None) or {}).get("rope_type", "default"))
                    or "default")
    scaling = getattr(module, "attention_scaling", None)
    if isinstance(scaling, dict):
        scaling = scaling.get(kind, 1.0)
    if "dynamic" in rope_type or (isinstance(scaling, (int, float)) and scaling != 1.0):
        raise ValueError(f"{type(attn).__name__}'s rotary embeddings (rope_type {rope_type!r}, attention scaling "
                         f"{scaling}) are not rotations by fixed angles: not modelled")
    inv = getattr(module, "inv_freq", None)
    if not isinstance(inv, torch.Tensor):
        inv = getattr(module, f"{kind}_inv_freq", None)
    if not isinstance(inv, torch.Tensor) or inv.numel() != dims // 2:
        return float(theta), dims / head_dim, rope_type, False, None
    plain = 1.0 / (float(theta) ** (torch.arange(0, dims, 2, dtype=torch.int64).float() / dims))
    got = inv.detach().float().cpu()
    if torch.equal(got, plain):
        return float(theta), dims / head_dim, rope_type, True, None
    return float(theta), dims / head_dim, rope_type, False, tuple(float(f) for f in got)
