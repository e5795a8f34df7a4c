"""The random transformer: its weights (:class:`TransformerParams`), sampler and forward pass.

One block (Giorlandino & Goldt 2025, Eq. (8); Noci et al. 2022, Eqs. (2)-(3); layouts in
``sigprop.block._components.compose``):

* ``post``:  x <- LN(alpha_sa x + branch_sa SA(x));    x <- LN(alpha_mlp x + branch_mlp MLP(x))
* ``pre``:   x <- alpha_sa x + branch_sa SA(LN x);      x <- alpha_mlp x + branch_mlp MLP(LN x)
* ``none``:  x <- alpha_sa x + branch_sa SA(x);         x <- alpha_mlp x + branch_mlp MLP(x)
* ``parallel`` (pre-LN): x <- alpha_mlp (alpha_sa x + branch_sa SA(LN x)) + branch_mlp MLP(LN' x)

``alpha_*`` are Giorlandino & Goldt's skip strengths, ``branch_*`` Noci et al.'s branch weights. SA and MLP are
the components of ``sigprop.block._attention`` and ``_components``; :class:`~sigprop.BlockConfig` (module
``_config``) lists every part and its initialisation.

**One config, two descriptions.** The same config drives this random network and its analytic map
(:func:`sigprop.theory.block_map`, :func:`sigprop.theory.iterate_gram_map`); both are compositions of the same
components. Weights carry leading ``(inits, depth)`` axes so that many independent networks run as one batched
computation; activations have shape ``(inits, samples, T, d)``. :func:`forward_reference` (autograd- and
``torch.func``-safe) and the fast kernel (:func:`transformer_forward` without autograd: the same components,
in place on fresh intermediates, each block written straight into the result) are one block function,
:func:`apply_block`, run two ways; ``tests/test_block.py`` checks both against an independent plain-PyTorch
transformer.
"""
from __future__ import annotations

import dataclasses
import math

import torch

from ..stats._random import as_generator
from ..stats._validate import check_int, check_memory, check_tensor
from ._attention import attention_forward
from ._components import compose, mlp_forward, normalisation
from ._config import BlockConfig

__all__ = ["TransformerParams", "sample_transformer", "transformer_forward"]


@dataclasses.dataclass(frozen=True)
class TransformerParams:
    """Weights of ``inits`` independent ``depth``-block transformers (leading axes ``(inits, depth)``).

    Optional parts (omitted: a zero bias, or an empty ``(n, L, 0, 0)`` matrix meaning "absent"): ``w_o`` (the
    documents' block has no output projection), ``b_v, b_o``, the gate ``w3, b3`` (gated MLP), ``b_q, b_k``,
    and LayerNorm gains and biases ``ln_gain, ln_bias (n, L, 2, d)`` (identity when absent; :class:`TinyLM`
    trains them). With grouped-query heads ``w_k, w_v, b_k, b_v`` have ``kv_heads`` heads.
    """

    w_q: torch.Tensor  # (n, L, H, d_k, d)
    w_k: torch.Tensor  # (n, L, G, d_k, d)
    w_v: torch.Tensor  # (n, L, G, d_v, d)
    w1: torch.Tensor  # (n, L, d_ff, d)
    b1: torch.Tensor  # (n, L, d_ff)
    w2: torch.Tensor  # (n, L, d, d_ff)
    b2: torch.Tensor  # (n, L, d)
    w_o: torch.Tensor | None = None  # (n, L, d, H d_v), or (n, L, 0, 0): no W_O
    b_v: torch.Tensor | None = None  # (n, L, G, d_v)
    b_o: torch.Tensor | None = None  # (n, L, d)
    w3: torch.Tensor | None = None  # (n, L, d_ff, d), or (n, L, 0, 0): not gated
    b3: torch.Tensor | None = None  # (n, L, d_ff)
    b_q: torch.Tensor | None = None  # (n, L, H, d_k)
    b_k: torch.Tensor | None = None  # (n, L, G, d_k)
    ln_gain: torch.Tensor | None = None  # (n, L, K, d), K = 2 (4 with branch norms), or (n, L, 0, 0): no gains
    ln_bias: torch.Tensor | None = None  # (n, L, K, d), or (n, L, 0, 0)
    q_gain: torch.Tensor | None = None   # (n, L, d_k) or (n, L, H d_k): QK-norm gains, or (n, L, 0): unit
    k_gain: torch.Tensor | None = None   # (n, L, d_k) or (n, L, G d_k), or (n, L, 0)
    router: torch.Tensor | None = None   # (n, L, E, d): a mixture of experts' router (then w1, w3 (n, L, E, d_ff, d),
                                         # w2 (n, L, E, d, d_ff)), or (n, L, 0, 0)

    def __post_init__(self):
        n, L, G, dv, d = self.w_v.shape
        H, dk, f = self.w_q.shape[2], self.w_q.shape[3], self.w1.shape[-2]
        like = dict(device=self.w_v.device, dtype=self.w_v.dtype)
        defaults = dict(w_o=(n, L, 0, 0), b_v=(n, L, G, dv), b_o=(n, L, d), w3=(n, L, 0, 0), b3=(n, L, f),
                        b_q=(n, L, H, dk), b_k=(n, L, G, dk), ln_gain=(n, L, 0, 0), ln_bias=(n, L, 0, 0),
                        q_gain=(n, L, 0), k_gain=(n, L, 0), router=(n, L, 0, 0))
        for name, shape in defaults.items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, torch.zeros(shape, **like))

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
    """Draw ``inits`` independent random transformers of ``depth`` blocks (see ``BlockConfig``).

    The documents' weights are drawn first, in a fixed order (``W_Q, W_K, W_V, W_1, b_1, W_2, b_2``), then each
    optional part only when present (``W_O, b_V, b_O, W_3, b_3, b_Q, b_K``), so adding a part never moves the
    draws of a configuration without it (the ledger's and the chapters' numbers stay put)."""
    if not isinstance(config, BlockConfig):
        raise TypeError(f"config must be a BlockConfig; got {type(config).__name__}")
    depth = check_int(depth, "depth", minimum=1)
    inits = check_int(inits, "inits", minimum=1)
    g = as_generator(generator, device)
    device = g.device
    c = config
    n, L, H, G, dk, dv, d, f = inits, depth, c.heads, c.group_count, c.head_dim, c.value_dim, c.d, c.hidden
    check_memory(n * L * ((H + 2 * G) * max(dk, dv) * d + 3 * f * d * (getattr(c, "experts", None) or 1)
                          + H * dv * d + 2 * (f + d + H * dk))
                 * torch.empty((), dtype=dtype).element_size(), f"sample_transformer(inits={n}, depth={L}) at d={d}")

    def normal(var, *shape):
        return math.sqrt(var) * torch.randn(n, L, *shape, generator=g, device=device, dtype=dtype)

    E = () if c.experts is None else (c.experts,)   # a mixture of experts: one MLP per expert
    params = dict(w_q=normal(c.qk_variance, H, dk, d), w_k=normal(c.qk_variance, G, dk, d),
                  w_v=normal(c.sigma_v2 / d, G, dv, d), w1=normal(c.sigma_w2 / d, *E, f, d), b1=normal(c.sigma_b2, f),
                  w2=normal(c.w2_variance / f, *E, d, f), b2=normal(c.b2_variance, d))
    optional = (("w_o", c.has_out_proj, lambda: normal(c.sigma_o2 / (H * dv), d, H * dv)),
                ("b_v", c.sigma_bv2 > 0, lambda: normal(c.sigma_bv2, G, dv)),
                ("b_o", c.sigma_bo2 > 0, lambda: normal(c.sigma_bo2, d)),
                ("w3", c.gated, lambda: normal(c.sigma_w2 / d, *E, f, d)),
                ("b3", c.gated and c.sigma_b2 > 0, lambda: normal(c.sigma_b2, f)),
                ("b_q", c.sigma_bqk2 > 0, lambda: normal(c.sigma_bqk2, H, dk)),
                ("b_k", c.key_bias_variance > 0, lambda: normal(c.key_bias_variance, G, dk)),
                ("router", c.experts is not None, lambda: normal(c.router_sigma2 / d, *E, d)))
    for name, present, draw in optional:
        if present:
            params[name] = draw()
    return TransformerParams(**params)


def apply_block(x, params, config, l, record=None, *, inplace=False, tau=1.0):
    """Block ``l`` (attention, then MLP, in the config's layout) on ``x (n, b, T, d)``.

    ``record``: a list receiving the attention's ``dict(attention, logits, values)``; ``tau`` multiplies the logit
    scale; ``inplace`` (no autograd) works in place on fresh intermediates and skips zero biases."""
    c, norm = config, normalisation(config)
    gain, bias = params.ln_gain[:, l], params.ln_bias[:, l]
    affine = gain.shape[-1] > 0

    eps = c.norm_eps

    def norm_of(h, k):
        if affine:
            return norm.forward(h, gain[:, None, None, k], bias[:, None, None, k], eps)
        return norm.forward_(h.clone(), eps) if inplace else norm.forward(h, eps=eps)

    def norm_fresh(h, k):
        return norm.forward_(h, eps) if inplace and not affine else norm_of(h, k)

    def combine(x, y, skip, weight):
        if inplace:   # y is a fresh branch output
            if weight != 1.0:
                y.mul_(weight)
            return y.add_(x, alpha=skip) if skip != 0.0 else y
        return skip * x + weight * y

    return compose(x, c, attention=lambda h: attention_forward(h, params, l, c, inplace=inplace, record=record,
                                                               tau=tau),
                   mlp=lambda h: mlp_forward(h, params, l, c, inplace=inplace), norm=norm_of, combine=combine,
                   norm_fresh=norm_fresh)


def forward_reference(x, params, config, keep):
    """The plain block loop (autograd- and ``torch.func``-safe); used when gradients are needed."""
    outs = [keep(x)]
    for l in range(params.depth):
        x = apply_block(x, params, config, l)
        outs.append(keep(x))
    return torch.stack(outs)


def _forward_fast(x, params, config, keep, measured):
    """The same blocks in place (no autograd); each block's output written straight into the result."""
    if measured:
        outs = [keep(x)]
    else:
        result = torch.empty((params.depth + 1, *x.shape), dtype=x.dtype, device=x.device)
        result[0] = x
    for l in range(params.depth):
        x = apply_block(x, params, config, l, inplace=True)
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


def expected_shapes(c: BlockConfig) -> dict:
    """Shapes (after the ``(inits, depth)`` axes) of every weight of a config's network."""
    H, G, dk, dv, d, f = c.heads, c.group_count, c.head_dim, c.value_dim, c.d, c.hidden
    E = () if c.experts is None else (c.experts,)
    return {"w_q": (H, dk, d), "w_k": (G, dk, d), "w_v": (G, dv, d), "w1": (*E, f, d), "b1": (f,), "w2": (*E, d, f),
            "b2": (d,), "w_o": (d, H * dv) if c.has_out_proj else (0, 0), "b_v": (G, dv), "b_o": (d,),
            "w3": (*E, f, d) if c.gated else (0, 0), "b3": (f,), "b_q": (H, dk), "b_k": (G, dk),
            "router": (*E, d) if E else (0, 0)}


def _check_params(params, c):
    for name, shape in expected_shapes(c).items():
        got = tuple(getattr(params, name).shape[2:])
        if got != shape:
            raise ValueError(f"params do not match config: {name} has shape (inits, depth, *{got}), expected "
                             f"(inits, depth, *{shape}) for {c.heads} head(s) ({c.group_count} key/value), "
                             f"d_k={c.head_dim}, d_ff={c.hidden}, {'with' if c.has_out_proj else 'without'} W_O "
                             f"(sigma_o2={c.sigma_o2}), {'gated' if c.gated else 'not gated'}")
    K = 4 if c.branch_norm else 2
    for name in ("ln_gain", "ln_bias"):
        got = tuple(getattr(params, name).shape[2:])
        if got not in ((0, 0), (K, c.d)):
            raise ValueError(f"params.{name} must have shape (inits, depth, {K}, d={c.d}) or be absent; got {got}")
    widths = {"none": (0, 0), "head": (c.head_dim, c.head_dim),
              "all": (c.heads * c.head_dim, c.group_count * c.head_dim)}[c.qk_norm]
    for name, w in zip(("q_gain", "k_gain"), widths):
        got = tuple(getattr(params, name).shape[2:])
        if got not in ((0,), (w,)):
            raise ValueError(f"params.{name} must have shape (inits, depth, {w}) (qk_norm={c.qk_norm!r}) or be "
                             f"absent; got {got}")


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
    _check_params(params, config)
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
    return _forward_fast(x.contiguous(), params, config, keep, measure is not None)
