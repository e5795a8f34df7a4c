"""Random transformers: block configuration, initialisation, batched forward pass.

One block (Giorlandino & Goldt 2025, Eq. (8); Noci et al. 2022, Eqs. (2)-(3)):

* ``post``:  x <- LN(alpha_sa x + branch_sa SA(x));    x <- LN(alpha_mlp x + branch_mlp MLP(x))
* ``pre``:   x <- alpha_sa x + branch_sa SA(LN x);      x <- alpha_mlp x + branch_mlp MLP(LN x)
* ``none``:  x <- alpha_sa x + branch_sa SA(x);         x <- alpha_mlp x + branch_mlp MLP(x)

``alpha_*`` are Giorlandino & Goldt's skip strengths, ``branch_*`` Noci et al.'s
``alpha_1, alpha_2`` (branch weights). SA has ``heads`` heads of width ``d_k`` for
queries/keys and ``d / heads`` for values (concatenated; no output projection), and
``MLP(x) = W_2 phi(W_1 x + b_1) + b_2``.

Initialisation (all Gaussian, zero mean): ``W_Q, W_K`` entries variance ``sigma_qk2``;
``W_V`` ``sigma_v2 / d``; ``W_1`` ``sigma_w2 / d``; ``W_2`` ``sigma_w2 / d_ff``; biases
``sigma_b2``. Helpers: :func:`gg_qk_variance` (``beta sqrt(log T) / d``, Giorlandino &
Goldt Result 1) and :func:`xavier_variance` (Noci et al. 2022, Sec. 3).

Weights carry leading ``(inits, depth)`` axes so that many independent networks run
as one batched computation; activations have shape ``(inits, samples, T, d)``.
"""
from __future__ import annotations

import dataclasses
import enum
import math

import torch

from ._attention import LN_EPS, _mix, layer_norm
from ._random import as_generator
from ._validate import check_int, check_option, check_positive, check_seq_len, check_tensor

__all__ = [
    "BlockConfig",
    "TransformerParams",
    "sample_transformer",
    "transformer_forward",
    "gg_qk_variance",
    "xavier_variance",
]


class Norm(str, enum.Enum):
    POST = "post"
    PRE = "pre"
    NONE = "none"


class Activation(str, enum.Enum):
    RELU = "relu"
    TANH = "tanh"
    LINEAR = "linear"


_ACTIVATIONS = {"relu": torch.relu, "tanh": torch.tanh, "linear": lambda z: z}


def gg_qk_variance(beta: float, T: int, d: int) -> float:
    """Query/key weight variance ``beta * sqrt(log T) / d`` (Giorlandino & Goldt 2025, Result 1)."""
    check_positive(beta, "beta")
    check_seq_len(T)
    check_int(d, "d", minimum=1)
    return float(beta) * math.sqrt(math.log(T)) / d


def xavier_variance(fan_in: int, fan_out: int) -> float:
    """Glorot/Xavier normal variance ``2 / (fan_in + fan_out)`` (Noci et al. 2022, Sec. 3)."""
    check_int(fan_in, "fan_in", minimum=1)
    check_int(fan_out, "fan_out", minimum=1)
    return 2.0 / (fan_in + fan_out)


@dataclasses.dataclass(frozen=True)
class BlockConfig:
    """Architecture and initialisation of one transformer block (see module docstring)."""

    d: int
    heads: int = 1
    d_k: int | None = None
    d_ff: int | None = None
    norm: str = "post"
    alpha_sa: float = 1.0
    alpha_mlp: float = 1.0
    branch_sa: float = 1.0
    branch_mlp: float = 1.0
    activation: str = "relu"
    sigma_qk2: float | None = None
    sigma_v2: float = 1.0
    sigma_w2: float = 2.0
    sigma_b2: float = 0.0
    logit_scale: float | None = None
    gain_control: bool = False
    causal: bool = False
    mlp: bool = True
    ln_center: bool = False

    def __post_init__(self):
        check_int(self.d, "d", minimum=1)
        check_int(self.heads, "heads", minimum=1)
        if self.d % self.heads:
            raise ValueError(f"d must be divisible by heads; got d={self.d}, heads={self.heads}")
        if self.d_k is not None:
            check_int(self.d_k, "d_k", minimum=1)
        if self.d_ff is not None:
            check_int(self.d_ff, "d_ff", minimum=1)
        object.__setattr__(self, "norm", check_option(self.norm, Norm, "norm").value)
        object.__setattr__(self, "activation", check_option(self.activation, Activation, "activation").value)
        for name in ("alpha_sa", "alpha_mlp", "branch_sa", "branch_mlp", "sigma_v2", "sigma_w2", "sigma_b2"):
            check_positive(getattr(self, name), name, allow_zero=True)
        if self.sigma_qk2 is not None:
            check_positive(self.sigma_qk2, "sigma_qk2", allow_zero=True)
        if self.logit_scale is not None:
            check_positive(self.logit_scale, "logit_scale", allow_zero=True)

    @property
    def head_dim(self) -> int:
        """Query/key width per head (default ``d / heads``)."""
        return self.d_k if self.d_k is not None else self.d // self.heads

    @property
    def value_dim(self) -> int:
        return self.d // self.heads

    @property
    def hidden(self) -> int:
        return self.d_ff if self.d_ff is not None else self.d

    @property
    def qk_variance(self) -> float:
        """``sigma_qk2`` or, if unset, Xavier for a (d_k, d) map."""
        return self.sigma_qk2 if self.sigma_qk2 is not None else xavier_variance(self.d, self.head_dim)

    @property
    def scale(self) -> float:
        return self.logit_scale if self.logit_scale is not None else 1.0 / math.sqrt(self.head_dim)


@dataclasses.dataclass(frozen=True)
class TransformerParams:
    """Weights of ``inits`` independent ``depth``-block transformers (leading axes ``(inits, depth)``)."""

    w_q: torch.Tensor  # (n, L, H, d_k, d)
    w_k: torch.Tensor  # (n, L, H, d_k, d)
    w_v: torch.Tensor  # (n, L, H, d_v, d)
    w1: torch.Tensor  # (n, L, d_ff, d)
    b1: torch.Tensor  # (n, L, d_ff)
    w2: torch.Tensor  # (n, L, d, d_ff)
    b2: torch.Tensor  # (n, L, d)

    @property
    def inits(self) -> int:
        return int(self.w_q.shape[0])

    @property
    def depth(self) -> int:
        return int(self.w_q.shape[1])


def sample_transformer(config: BlockConfig, depth: int, *, inits: int = 1, generator=None, device=None,
                       dtype=torch.float32) -> TransformerParams:
    """Draw ``inits`` independent random transformers of ``depth`` blocks (see module docstring)."""
    if not isinstance(config, BlockConfig):
        raise TypeError(f"config must be a BlockConfig; got {type(config).__name__}")
    depth = check_int(depth, "depth", minimum=1)
    inits = check_int(inits, "inits", minimum=1)
    if isinstance(generator, torch.Generator):
        device = generator.device
    device = torch.device("cpu") if device is None else torch.device(device)
    g = as_generator(generator, device)
    c = config
    n, L, H, dk, dv, d, f = inits, depth, c.heads, c.head_dim, c.value_dim, c.d, c.hidden

    def normal(var, *shape):
        return math.sqrt(var) * torch.randn(n, L, *shape, generator=g, device=device, dtype=dtype)

    return TransformerParams(
        w_q=normal(c.qk_variance, H, dk, d),
        w_k=normal(c.qk_variance, H, dk, d),
        w_v=normal(c.sigma_v2 / d, H, dv, d),
        w1=normal(c.sigma_w2 / d, f, d),
        b1=normal(c.sigma_b2, f),
        w2=normal(c.sigma_w2 / f, d, f),
        b2=normal(c.sigma_b2, d),
    )


def _attention_layer(x, p: TransformerParams, l: int, c: BlockConfig, weights: list | None = None):
    # x (n, b, T, d); weights (n, H, k, d). Appends A (n, b, H, T, T) to ``weights`` when given.
    q = torch.einsum("nbtd,nhkd->nbhtk", x, p.w_q[:, l])
    k = torch.einsum("nbtd,nhkd->nbhtk", x, p.w_k[:, l])
    v = torch.einsum("nbtd,nhkd->nbhtk", x, p.w_v[:, l])
    out, A = _mix(c.scale * (q @ k.transpose(-1, -2)), v, causal=c.causal, gain_control=c.gain_control)
    if weights is not None:
        weights.append(A)
    n, b, H, T, dv = out.shape
    return out.permute(0, 1, 3, 2, 4).reshape(n, b, T, H * dv)  # concat heads -> (n, b, T, d)


def _mlp_layer(x, p: TransformerParams, l: int, c: BlockConfig):
    h = torch.einsum("nbtd,nfd->nbtf", x, p.w1[:, l]) + p.b1[:, l, None, None, :]
    h = _ACTIVATIONS[c.activation](h)
    return torch.einsum("nbtf,ndf->nbtd", h, p.w2[:, l]) + p.b2[:, l, None, None, :]


def _residual(x, branch, skip, weight, norm, center):
    if norm == "post":
        return layer_norm(skip * x + weight * branch(x), center=center)
    if norm == "pre":
        return skip * x + weight * branch(layer_norm(x, center=center))
    return skip * x + weight * branch(x)


def _block(x, params, config, l, weights=None):
    """Block ``l`` (attention, then MLP), autograd-safe; appends its attention weights to ``weights``."""
    c = config
    x = _residual(x, lambda y: _attention_layer(y, params, l, c, weights), c.alpha_sa, c.branch_sa, c.norm,
                  c.ln_center)
    if c.mlp:
        x = _residual(x, lambda y: _mlp_layer(y, params, l, c), c.alpha_mlp, c.branch_mlp, c.norm, c.ln_center)
    return x


def _forward_reference(x, params, config, keep):
    """The plain block loop (autograd- and ``torch.func``-safe); used when gradients are needed."""
    outs = [keep(x)]
    for l in range(params.depth):
        x = _block(x, params, config, l)
        outs.append(keep(x))
    return torch.stack(outs)


# ---------------------------------------------------------------- fast path (no autograd)
# The same computation as :func:`_forward_reference`, reorganised for speed (issue 9): sequences
# flattened into one batched matmul per initialisation, Q/K/V from one fused matmul, biases fused
# into the matmul (skipped when exactly zero), in-place elementwise work on fresh intermediates,
# a one-pass RMS norm, and each block's output written straight into the result. Results agree
# with the reference to float rounding (tests/test_properties.py checks this).

def _ln_inplace(x, center):
    """:func:`layer_norm` on a fresh tensor, in place: ``x / max(|x|/sqrt(d), sqrt(LN_EPS))``."""
    if center:
        x.sub_(x.mean(-1, keepdim=True))
    rms = torch.linalg.vector_norm(x, dim=-1, keepdim=True)
    if not bool(torch.isfinite(rms).all()):
        # |x|^2 overflowed (entries beyond ~1e19 in float32): norm of x / max|x|, times max|x|
        top = x.abs().amax(-1, keepdim=True)
        rms = torch.where(torch.isfinite(rms), rms,
                          top * torch.linalg.vector_norm(x / top.clamp_min(torch.finfo(x.dtype).tiny), dim=-1,
                                                         keepdim=True))
    rms.mul_(1.0 / math.sqrt(x.shape[-1])).clamp_min_(math.sqrt(LN_EPS))
    return x.div_(rms)


def _combine_(branch, x, skip, weight):
    """``skip * x + weight * branch``, in place on the fresh ``branch``."""
    if weight != 1.0:
        branch.mul_(weight)
    if skip != 0.0:
        branch.add_(x, alpha=skip)
    return branch


def _linear(x2, w, b):
    """``x2 (n, m, d) @ w^T (n, d, k) + b (n, k)``; the bias is fused, and skipped when all zero."""
    if bool(b.any()):
        return torch.baddbmm(b.unsqueeze(1), x2, w.transpose(1, 2))
    return torch.bmm(x2, w.transpose(1, 2))


def _forward_fast(x, params, config, keep, measured):
    c = config
    n, b, T, d = x.shape
    H, dk, dv = c.heads, c.head_dim, c.value_dim
    act = {"relu": torch.relu_, "tanh": torch.tanh_, "linear": lambda z: z}[c.activation]
    mask = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1) if c.causal else None
    if measured:
        outs = [keep(x)]
    else:
        result = torch.empty((params.depth + 1, n, b, T, d), dtype=x.dtype, device=x.device)
        result[0] = x
    for l in range(params.depth):
        # ---- attention
        xin = _ln_inplace(x.clone(), c.ln_center) if c.norm == "pre" else x
        w = torch.cat([params.w_q[:, l].reshape(n, H * dk, d), params.w_k[:, l].reshape(n, H * dk, d),
                       params.w_v[:, l].reshape(n, H * dv, d)], 1)
        qkv = torch.bmm(xin.reshape(n, b * T, d), w.transpose(1, 2)).view(n, b, T, -1)
        q, k, v = qkv.split([H * dk, H * dk, H * dv], -1)
        q = q.unflatten(-1, (H, dk)).transpose(2, 3)  # (n, b, H, T, dk)
        k = k.unflatten(-1, (H, dk)).transpose(2, 3)
        v = v.unflatten(-1, (H, dv)).transpose(2, 3)
        logits = torch.matmul(q, k.transpose(-1, -2)).mul_(c.scale)
        if mask is not None:
            logits.masked_fill_(mask, float("-inf"))
        work = logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits
        A = torch.softmax(work, dim=-1).to(v.dtype)
        if c.gain_control:
            v = v - v.mean(-2, keepdim=True)
        o = torch.matmul(A, v).transpose(2, 3).reshape(n, b, T, H * dv)
        o = _combine_(o, x, c.alpha_sa, c.branch_sa)
        x = _ln_inplace(o, c.ln_center) if c.norm == "post" else o
        # ---- MLP
        if c.mlp:
            xin = _ln_inplace(x.clone(), c.ln_center) if c.norm == "pre" else x
            h = act(_linear(xin.reshape(n, b * T, d), params.w1[:, l], params.b1[:, l]))
            o = _linear(h, params.w2[:, l], params.b2[:, l]).view(n, b, T, d)
            o = _combine_(o, x, c.alpha_mlp, c.branch_mlp)
            x = _ln_inplace(o, c.ln_center) if c.norm == "post" else o
        if measured:
            outs.append(keep(x))
        else:
            result[l + 1] = x
            x = result[l + 1]
    return torch.stack(outs) if measured else result


def _needs_autograd(x, params):
    if not torch.is_grad_enabled():
        return False
    return x.requires_grad or any(getattr(params, f.name).requires_grad for f in dataclasses.fields(params))


def transformer_forward(x: torch.Tensor, params: TransformerParams, config: BlockConfig, *,
                        measure=None) -> torch.Tensor:
    """Run every block; return all representations, shape ``(depth + 1, inits, samples, T, d)``.

    ``x`` is ``(inits, samples, T, d)`` or ``(samples, T, d)`` (the same inputs for every init).
    Layer 0 of the result is the input. With ``measure`` (a function of one layer's
    ``(inits, samples, T, d)`` activations, e.g. :func:`sigprop.mean_cosine`) only
    ``measure`` of each layer is kept and stacked: ``(depth + 1, *measure_shape)``, so deep
    networks never hold every layer in memory.
    """
    check_tensor(x, "x", ndim_min=3)
    if not isinstance(config, BlockConfig):
        raise TypeError(f"config must be a BlockConfig; got {type(config).__name__}")
    if not isinstance(params, TransformerParams):
        raise TypeError(f"params must be a TransformerParams; got {type(params).__name__}")
    n, d = params.inits, config.d
    if x.shape[-1] != d:
        raise ValueError(f"x must have last dimension d={d}; got shape {tuple(x.shape)}")
    if params.w_q.shape[-1] != d or params.w_q.shape[2] != config.heads:
        raise ValueError(f"params do not match config (d={d}, heads={config.heads}): w_q has shape "
                         f"{tuple(params.w_q.shape)}, expected (inits, depth, {config.heads}, {config.head_dim}, {d})")
    if x.ndim == 3:
        x = x.unsqueeze(0).expand(n, *x.shape)
    if x.ndim != 4 or x.shape[0] != n:
        raise ValueError(f"x must have shape (inits={n}, samples, T, d) or (samples, T, d); got {tuple(x.shape)}")
    if x.device != params.w_q.device or x.dtype != params.w_q.dtype:
        raise ValueError(f"x ({x.device}, {x.dtype}) and params ({params.w_q.device}, {params.w_q.dtype}) "
                         "must share device and dtype")
    keep = (lambda y: y) if measure is None else measure
    if _needs_autograd(x, params):
        return _forward_reference(x, params, config, keep)
    return _forward_fast(x.contiguous(), params, config, keep, measure is not None)
