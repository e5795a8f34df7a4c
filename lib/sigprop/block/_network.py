"""The random transformer block: its configuration, sampler, forward pass and Monte Carlo.

One block (Giorlandino & Goldt 2025, Eq. (8); Noci et al. 2022, Eqs. (2)-(3)):

* ``post``:  x <- LN(alpha_sa x + branch_sa SA(x));    x <- LN(alpha_mlp x + branch_mlp MLP(x))
* ``pre``:   x <- alpha_sa x + branch_sa SA(LN x);      x <- alpha_mlp x + branch_mlp MLP(LN x)
* ``none``:  x <- alpha_sa x + branch_sa SA(x);         x <- alpha_mlp x + branch_mlp MLP(x)

``alpha_*`` are Giorlandino & Goldt's skip strengths, ``branch_*`` Noci et al.'s ``alpha_1, alpha_2``
(branch weights). SA has ``heads`` heads of width ``d_k`` for queries/keys and ``d / heads`` for values,
concatenated: ``SA(x)_t = W_O concat_h(sum_s A^h_ts (W_V^h x_s + b_V^h)) + b_O``, and
``MLP(x) = W_2 phi(W_1 x + b_1) + b_2`` with ``phi`` ReLU, tanh, the identity, GELU ``x Phi(x)``
(``"gelu"``) or its tanh approximation (``"gelu_tanh"``, GPT-2's ``gelu_new``).

Initialisation (all Gaussian, zero mean): ``W_Q, W_K`` entries variance ``sigma_qk2`` (default Xavier,
Noci et al. 2022, Sec. 3); ``W_V`` ``sigma_v2 / d``; ``W_1`` ``sigma_w2 / d``; ``W_2`` ``sigma_w2_out / d_ff``
(default ``sigma_w2``); ``b_1`` ``sigma_b2``, ``b_2`` ``sigma_b2_out`` (default ``sigma_b2``). The documents'
block has no output projection and no attention biases (``sigma_o2=None``, ``sigma_bv2 = sigma_bo2 = 0``);
off-the-shelf models have ``W_O`` (entries ``sigma_o2 / d``), a value bias ``b_V`` (``sigma_bv2``) and an
output bias ``b_O`` (``sigma_bo2``). :meth:`BlockConfig.from_beta` sets ``sigma_qk2 = beta sqrt(log T) / d``
(Giorlandino & Goldt, Result 1) and :meth:`BlockConfig.beta` reads the equivalent ``beta`` back at a
sequence length.

**One config, two descriptions.** The same :class:`BlockConfig` drives the random block
(:func:`sample_transformer`, :func:`transformer_forward`, :func:`mc_cosine_vs_depth`) and its analytic
map (:func:`sigprop.theory.block_map`, :func:`sigprop.theory.iterate_block_map`, ``sigprop.block._map``;
for causal attention, position by position, :func:`sigprop.theory.iterate_gram_map`).

Weights carry leading ``(inits, depth)`` axes so that many independent networks run as one batched
computation; activations have shape ``(inits, samples, T, d)``. The plain block loop below is the
reference (and the autograd path); ``sigprop.block._fast`` is the fast kernel, tested against it.
"""
from __future__ import annotations

import dataclasses
import enum
import math

import torch

from ..attention import mix_values, normalise_tokens
from ..stats._config import _work_dtype
from ._fast import forward_fast
from ..attention import beta_equivalent, glorot_variance, qk_variance_for_beta
from ..stats._estimate import Estimate, estimate
from ..stats._measures import mean_cosine
from ..stats._random import as_generator
from ..inputs import equicorrelated_tokens
from ..stats._validate import check_flag, check_int, check_option, check_real, check_tensor

__all__ = [
    "BlockConfig",
    "TransformerParams",
    "sample_transformer",
    "transformer_forward",
    "mc_cosine_vs_depth",
]


class Norm(str, enum.Enum):
    POST = "post"
    PRE = "pre"
    NONE = "none"


class Activation(str, enum.Enum):
    RELU = "relu"
    TANH = "tanh"
    LINEAR = "linear"
    GELU = "gelu"            # x Phi(x) (erf form): HF BERT "gelu", torch "gelu"
    GELU_TANH = "gelu_tanh"  # tanh approximation: GPT-2 "gelu_new", torch gelu(approximate="tanh")


_ACTIVATIONS = {"relu": torch.relu, "tanh": torch.tanh, "linear": lambda z: z,
                "gelu": torch.nn.functional.gelu,
                "gelu_tanh": lambda z: torch.nn.functional.gelu(z, approximate="tanh")}


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
    sigma_o2: float | None = None
    sigma_bv2: float = 0.0
    sigma_bo2: float = 0.0
    sigma_w2_out: float | None = None
    sigma_b2_out: float | None = None

    def __post_init__(self):
        # validate, and store what was validated: ints as int, reals as float, flags as bool, options as str
        def put(name, value):
            object.__setattr__(self, name, value)

        put("d", check_int(self.d, "d", minimum=1))
        put("heads", check_int(self.heads, "heads", minimum=1))
        if self.d % self.heads:
            raise ValueError(f"d must be divisible by heads; got d={self.d}, heads={self.heads}")
        for name in ("d_k", "d_ff"):
            if getattr(self, name) is not None:
                put(name, check_int(getattr(self, name), name, minimum=1))
        put("norm", check_option(self.norm, Norm, "norm").value)
        put("activation", check_option(self.activation, Activation, "activation").value)
        for name in ("alpha_sa", "alpha_mlp", "branch_sa", "branch_mlp", "sigma_v2", "sigma_w2", "sigma_b2",
                     "sigma_bv2", "sigma_bo2"):
            put(name, check_real(getattr(self, name), name, minimum=0.0))
        for name in ("sigma_qk2", "logit_scale", "sigma_o2", "sigma_w2_out", "sigma_b2_out"):
            if getattr(self, name) is not None:
                put(name, check_real(getattr(self, name), name, minimum=0.0))
        for name in ("gain_control", "causal", "mlp", "ln_center"):
            put(name, check_flag(getattr(self, name), name))

    @classmethod
    def from_beta(cls, beta: float, *, T: int, d: int, **fields) -> "BlockConfig":
        """The block whose logits have Giorlandino & Goldt's scale ``beta`` at sequence length ``T``:
        ``sigma_qk2 = beta sqrt(log T) / d`` for the default logit scale ``1/sqrt(d_k)`` (Result 1;
        :func:`sigprop.theory.qk_variance_for_beta` for other ``d_k`` or scales)."""
        probe = cls(d=d, **fields)
        var = qk_variance_for_beta(beta, T=T, d=d, d_k=probe.head_dim, logit_scale=probe.scale)
        return dataclasses.replace(probe, sigma_qk2=var)

    def beta(self, T: int) -> float:
        """The equivalent ``beta`` of this block's query/key initialisation at sequence length ``T``
        (the inverse of :meth:`from_beta`; :func:`sigprop.theory.beta_equivalent`)."""
        return float(beta_equivalent(logit_scale=self.scale, d=self.d, d_k=self.head_dim,
                                     sigma_qk2=self.qk_variance, T=T))

    def map_params(self, T: int) -> dict:
        """Keyword arguments of :func:`sigprop.theory.block_map` describing this block at length ``T``."""
        return dict(beta=self.beta(T), alpha_sa=self.alpha_sa, alpha_mlp=self.alpha_mlp, sigma_w2=self.sigma_w2,
                    sigma_b2=self.sigma_b2, sigma_v2=self.sigma_v2, branch_sa=self.branch_sa,
                    branch_mlp=self.branch_mlp, norm=self.norm, gain_control=self.gain_control,
                    activation=self.activation, mlp=self.mlp, sigma_o2=self.out_variance, sigma_bv2=self.sigma_bv2,
                    sigma_bo2=self.sigma_bo2, sigma_w2_out=self.w2_variance, sigma_b2_out=self.b2_variance)

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
        return self.sigma_qk2 if self.sigma_qk2 is not None else glorot_variance(self.d, self.head_dim)

    @property
    def scale(self) -> float:
        return self.logit_scale if self.logit_scale is not None else 1.0 / math.sqrt(self.head_dim)

    @property
    def has_out_proj(self) -> bool:
        """Whether the attention has an output projection ``W_O`` (``sigma_o2`` set)."""
        return self.sigma_o2 is not None

    @property
    def out_variance(self) -> float:
        """``sigma_o2``, or 1 without ``W_O`` (the identity's effect on ``q, p`` equals a random ``W_O``'s
        with ``sigma_o2 = 1``)."""
        return self.sigma_o2 if self.sigma_o2 is not None else 1.0

    @property
    def w2_variance(self) -> float:
        """``sigma_w2_out``, or ``sigma_w2`` when unset (the documents' MLP)."""
        return self.sigma_w2_out if self.sigma_w2_out is not None else self.sigma_w2

    @property
    def b2_variance(self) -> float:
        """``sigma_b2_out``, or ``sigma_b2`` when unset."""
        return self.sigma_b2_out if self.sigma_b2_out is not None else self.sigma_b2


@dataclasses.dataclass(frozen=True)
class TransformerParams:
    """Weights of ``inits`` independent ``depth``-block transformers (leading axes ``(inits, depth)``).

    ``w_o, b_v, b_o`` are optional: omitted, ``b_v`` and ``b_o`` are zeros and ``w_o`` is empty,
    ``(n, L, 0, 0)``, meaning "no output projection" (the documents' block).
    """

    w_q: torch.Tensor  # (n, L, H, d_k, d)
    w_k: torch.Tensor  # (n, L, H, d_k, d)
    w_v: torch.Tensor  # (n, L, H, d_v, d)
    w1: torch.Tensor  # (n, L, d_ff, d)
    b1: torch.Tensor  # (n, L, d_ff)
    w2: torch.Tensor  # (n, L, d, d_ff)
    b2: torch.Tensor  # (n, L, d)
    w_o: torch.Tensor | None = None  # (n, L, d, d), or (n, L, 0, 0): no W_O
    b_v: torch.Tensor | None = None  # (n, L, H, d_v)
    b_o: torch.Tensor | None = None  # (n, L, d)

    def __post_init__(self):
        n, L, H, dv, d = self.w_v.shape
        like = dict(device=self.w_v.device, dtype=self.w_v.dtype)
        if self.w_o is None:
            object.__setattr__(self, "w_o", torch.zeros(n, L, 0, 0, **like))
        if self.b_v is None:
            object.__setattr__(self, "b_v", torch.zeros(n, L, H, dv, **like))
        if self.b_o is None:
            object.__setattr__(self, "b_o", torch.zeros(n, L, d, **like))

    @property
    def has_out_proj(self) -> bool:
        return self.w_o.shape[-1] > 0

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
    g = as_generator(generator, device)
    device = g.device
    c = config
    n, L, H, dk, dv, d, f = inits, depth, c.heads, c.head_dim, c.value_dim, c.d, c.hidden

    def normal(var, *shape):
        return math.sqrt(var) * torch.randn(n, L, *shape, generator=g, device=device, dtype=dtype)

    params = dict(
        w_q=normal(c.qk_variance, H, dk, d),
        w_k=normal(c.qk_variance, H, dk, d),
        w_v=normal(c.sigma_v2 / d, H, dv, d),
        w1=normal(c.sigma_w2 / d, f, d),
        b1=normal(c.sigma_b2, f),
        w2=normal(c.w2_variance / f, d, f),
        b2=normal(c.b2_variance, d),
    )
    # drawn after the documents' weights, and only when present, so that their draws do not move
    if c.has_out_proj:
        params["w_o"] = normal(c.sigma_o2 / d, d, d)
    if c.sigma_bv2 > 0:
        params["b_v"] = normal(c.sigma_bv2, H, dv)
    if c.sigma_bo2 > 0:
        params["b_o"] = normal(c.sigma_bo2, d)
    return TransformerParams(**params)


def _attention_layer(x, p: TransformerParams, l: int, c: BlockConfig, weights: list | None = None):
    # x (n, b, T, d); weights (n, H, k, d). Appends A (n, b, H, T, T) to ``weights`` when given.
    q = torch.einsum("nbtd,nhkd->nbhtk", x, p.w_q[:, l])
    k = torch.einsum("nbtd,nhkd->nbhtk", x, p.w_k[:, l])
    v = torch.einsum("nbtd,nhkd->nbhtk", x, p.w_v[:, l]) + p.b_v[:, l, None, :, None, :]
    work = _work_dtype(q.dtype)
    out, A = mix_values(q.to(work) @ k.to(work).transpose(-1, -2), v, scale=c.scale, causal=c.causal,
                  gain_control=c.gain_control)
    if weights is not None:
        weights.append(A)
    n, b, H, T, dv = out.shape
    out = out.permute(0, 1, 3, 2, 4).reshape(n, b, T, H * dv)  # concat heads -> (n, b, T, d)
    if c.has_out_proj:
        out = torch.einsum("nbtd,ned->nbte", out, p.w_o[:, l])
    return out + p.b_o[:, l, None, None, :]


def _mlp_layer(x, p: TransformerParams, l: int, c: BlockConfig):
    h = torch.einsum("nbtd,nfd->nbtf", x, p.w1[:, l]) + p.b1[:, l, None, None, :]
    h = _ACTIVATIONS[c.activation](h)
    return torch.einsum("nbtf,ndf->nbtd", h, p.w2[:, l]) + p.b2[:, l, None, None, :]


def _residual(x, branch, skip, weight, norm, center):
    if norm == "post":
        return normalise_tokens(skip * x + weight * branch(x), center)
    if norm == "pre":
        return skip * x + weight * branch(normalise_tokens(x, center))
    return skip * x + weight * branch(x)


def apply_block(x, params, config, l, weights=None):
    """Block ``l`` (attention, then MLP), autograd-safe; appends its attention weights to ``weights``."""
    c = config
    x = _residual(x, lambda y: _attention_layer(y, params, l, c, weights), c.alpha_sa, c.branch_sa, c.norm,
                  c.ln_center)
    if c.mlp:
        x = _residual(x, lambda y: _mlp_layer(y, params, l, c), c.alpha_mlp, c.branch_mlp, c.norm, c.ln_center)
    return x


def forward_reference(x, params, config, keep):
    """The plain block loop (autograd- and ``torch.func``-safe); used when gradients are needed."""
    outs = [keep(x)]
    for l in range(params.depth):
        x = apply_block(x, params, config, l)
        outs.append(keep(x))
    return torch.stack(outs)


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
    c = config
    expected = {"w_q": (c.heads, c.head_dim, d), "w_k": (c.heads, c.head_dim, d), "w_v": (c.heads, c.value_dim, d),
                "w1": (c.hidden, d), "b1": (c.hidden,), "w2": (d, c.hidden), "b2": (d,),
                "w_o": (d, d) if c.has_out_proj else (0, 0), "b_v": (c.heads, c.value_dim), "b_o": (d,)}
    for name, shape in expected.items():
        got = tuple(getattr(params, name).shape[2:])
        if got != shape:
            raise ValueError(f"params do not match config: {name} has shape (inits, depth, *{got}), expected "
                             f"(inits, depth, *{shape}) for {c.heads} head(s), d_k={c.head_dim}, d_ff={c.hidden}, "
                             f"{'with' if c.has_out_proj else 'without'} W_O (sigma_o2={c.sigma_o2})")
    if x.ndim == 3:
        x = x.unsqueeze(0).expand(n, *x.shape)
    if x.ndim != 4 or x.shape[0] != n:
        raise ValueError(f"x must have shape (inits={n}, samples, T, d) or (samples, T, d); got {tuple(x.shape)}")
    if x.shape[1] < 1 or x.shape[2] < 1:
        raise ValueError(f"x needs at least one sample and one token; got shape {tuple(x.shape)}")
    if x.device != params.w_q.device or x.dtype != params.w_q.dtype:
        raise ValueError(f"x ({x.device}, {x.dtype}) and params ({params.w_q.device}, {params.w_q.dtype}) "
                         "must share device and dtype")
    keep = (lambda y: y) if measure is None else measure
    if _needs_autograd(x, params):
        return forward_reference(x, params, config, keep)
    return forward_fast(x.contiguous(), params, config, keep, measure is not None)


def mc_cosine_vs_depth(config: BlockConfig, depth: int, *, T: int, inits: int = 16, seqs: int = 1,
                       rho0: float = 0.0, generator=None, device=None, dtype=torch.float32,
                       chunk: int | None = None) -> Estimate:
    """Mean token cosine after each block of random transformers: the Monte Carlo twin of
    :func:`sigprop.theory.iterate_block_map` (Giorlandino & Goldt 2025, Figs. 1(d), 1(e), 2, 6).

    ``inits`` independent networks of ``depth`` blocks (``config``), each fed ``seqs`` sequences of ``T``
    equicorrelated tokens of cosine ``rho0`` (:func:`sigprop.equicorrelated_tokens`). Returns an
    :class:`~sigprop.Estimate` of shape ``(depth + 1,)`` (row 0: the input) over the ``inits`` networks,
    each averaged over its sequences; ``.samples`` holds the per-network curves ``(inits, depth + 1)``
    for curve-level tests (layers of one network are correlated). Networks run in batches of ``chunk``
    (default: all at once); each batch draws its weights, then its tokens, from ``generator``.
    """
    if not isinstance(config, BlockConfig):
        raise TypeError(f"config must be a BlockConfig; got {type(config).__name__}")
    depth = check_int(depth, "depth", minimum=1)
    T = check_int(T, "T", minimum=2)
    inits = check_int(inits, "inits", minimum=2)
    seqs = check_int(seqs, "seqs", minimum=1)
    chunk = inits if chunk is None else check_int(chunk, "chunk", minimum=1)
    g = as_generator(generator, device)
    curves = []
    for start in range(0, inits, chunk):
        m = min(chunk, inits - start)
        params = sample_transformer(config, depth, inits=m, generator=g, device=g.device, dtype=dtype)
        x = equicorrelated_tokens(m, seqs, T=T, d=config.d, rho=rho0, generator=g, dtype=dtype)
        rho = transformer_forward(x, params, config, measure=mean_cosine)  # (depth + 1, m, seqs)
        curves.append(rho.double().mean(-1).T.cpu())  # (m, depth + 1)
    return estimate(torch.cat(curves))
