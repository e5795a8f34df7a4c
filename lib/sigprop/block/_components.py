r"""The parts of a transformer block, each defined once with its forward and its Gaussian map.

neural-tangents' pairing at the scale of a block's parts: every part carries the random network's
forward (torch, for :func:`sigprop.transformer_forward`, its reference loop and its in-place fast kernel,
and :class:`sigprop.TinyLM`) and the map of its second moments (float64 numpy, for
:func:`sigprop.theory.block_map` on ``(q, p)`` and :func:`sigprop.theory.gram_block_map` on a Gram matrix),
so the network and the theory are compositions of the same objects:

* **activations** (:data:`ACTIVATIONS`): ``forward``, ``forward_`` (in place on a fresh tensor) and
  ``kernel(a, b, c) = E[phi(u) phi(v)]`` (``sigprop.block._kernels``: closed forms for ReLU, GELU and the
  identity, one accurate quadrature for tanh, tanh-GELU and SiLU); :func:`activation_from_hf` reads a
  HuggingFace ``hidden_act`` string or activation module;
* **MLP** (:func:`mlp_forward`, :func:`mlp_overlaps`, :func:`mlp_gram`): ``W_2 phi(W_1 x + b_1) + b_2`` or the
  gated ``W_2 (phi(W_1 x + b_1) * (W_3 x + b_3)) + b_2``, whose kernel is ``c K(a, b, c)``;
* **normalisation** (:data:`RMS_NORM`, :data:`LAYER_NORM`): RMS (the documents' LN, RMSNorm without gain)
  or centred LayerNorm; both map ``(q, p) -> (1, p/q)`` (Giorlandino & Goldt 2025, Eq. (5)) and ``G_ts ->
  G_ts / sqrt(G_tt G_ss)``: centring removes the feature mean, whose share of ``q`` and ``p`` is the same
  ``1/d`` (isotropic features), so the cosine is unchanged to that order (measured in
  ``tests/test_components.py``);
* **residual layout** (:func:`compose`): sequential post-LN / pre-LN / no LN, or parallel (GPT-NeoX, GPT-J),
  written once for any representation of the tokens (a tensor, ``(q, p)``, a Gram matrix) given its
  ``combine`` (``skip x + weight y`` for tensors, ``skip^2 x + weight^2 y`` for second moments: the branches
  have independent zero-mean weights, so cross terms vanish).

The attention part (projections, grouped-query heads, RoPE, biases, ``W_O``) is ``sigprop.block._attention``.
"""
from __future__ import annotations

import dataclasses
import types
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F
from scipy.special import expit, ndtr

from ..attention import normalise_tokens, normalise_tokens_
from ..stats._config import _work_dtype
from . import _kernels
from ._moe import moe_forward, routing_factor

__all__: list[str] = []


@dataclasses.dataclass(frozen=True)
class Activation:
    """One activation ``phi``: its forward (torch), in-place forward, float64 numpy form and Gaussian kernel."""

    name: str
    forward: Callable[[torch.Tensor], torch.Tensor]
    forward_: Callable[[torch.Tensor], torch.Tensor]
    numpy: Callable[[np.ndarray], np.ndarray]
    closed_form: Callable | None = None
    smooth: bool = True          # analytic (no kink): sets the quadrature's refinement
    odd: bool = False
    hf_names: tuple[str, ...] = ()

    def kernel(self, a, b, c) -> np.ndarray:
        """``E[phi(u) phi(v)]`` for variances ``a, b`` and covariance ``c`` (broadcast float64, no validation)."""
        if self.closed_form is not None:
            return self.closed_form(a, b, c)
        return _kernels.tabulated(self.name, self.numpy, a, b, c, smooth=self.smooth, odd=self.odd)

    def kernel_quadrature(self, a, b, c) -> np.ndarray:
        """The same by the quadrature of ``sigprop.block._kernels`` (for closed forms: their check)."""
        return _kernels.quadrature(self.numpy, a, b, c, smooth=self.smooth)


def _gelu_tanh_np(z):
    with np.errstate(over="ignore"):
        return 0.5 * z * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (z + 0.044715 * z**3)))


def _identity(z):
    return z


def _gelu_tanh(z):
    return F.gelu(z, approximate="tanh")


def _silu_(z):
    return F.silu(z, inplace=True)


#: The activations, by ``BlockConfig.activation`` name.
ACTIVATIONS = {a.name: a for a in (
    Activation("relu", torch.relu, torch.relu_, lambda z: np.maximum(z, 0.0), _kernels.relu_closed, smooth=False,
               hf_names=("relu", "ReLU")),
    Activation("tanh", torch.tanh, torch.tanh_, np.tanh, odd=True, hf_names=("tanh", "Tanh")),
    Activation("linear", _identity, _identity, _identity, _kernels.linear_closed, odd=True,
               hf_names=("linear", "LinearActivation", "Identity")),
    # x Phi(x), erf form: HF BERT "gelu", torch.nn.GELU()
    Activation("gelu", F.gelu, F.gelu, lambda z: z * ndtr(z), _kernels.gelu_closed,
               hf_names=("gelu", "gelu_python", "GELUActivation", "GELU")),
    # tanh approximation: GPT-2 "gelu_new", torch gelu(approximate="tanh")
    Activation("gelu_tanh", _gelu_tanh, _gelu_tanh, _gelu_tanh_np,
               hf_names=("gelu_new", "gelu_pytorch_tanh", "gelu_fast", "gelu_accurate", "NewGELUActivation",
                         "GELUTanh", "PytorchGELUTanh", "FastGELUActivation", "AccurateGELUActivation")),
    # x sigmoid(x): Llama, Mistral, Qwen2 (gated: SwiGLU)
    Activation("silu", F.silu, _silu_, lambda z: z * expit(z), hf_names=("silu", "swish", "SiLU", "SiLUActivation")),
)}


def activation_from_hf(name) -> Activation:
    """The activation of a HuggingFace config string (``config.hidden_act``, e.g. ``"gelu_new"``, ``"silu"``)
    or of an activation module / its class name (``NewGELUActivation``, ``nn.GELU(approximate="tanh")``)."""
    if isinstance(name, torch.nn.GELU):
        return ACTIVATIONS["gelu" if name.approximate == "none" else "gelu_tanh"]
    key = name if isinstance(name, str) else type(name).__name__
    for act in ACTIVATIONS.values():
        if key in act.hf_names or key == act.name:
            return act
    known = sorted(n for a in ACTIVATIONS.values() for n in a.hf_names)
    raise ValueError(f"activation {name!r} is not supported; known: {', '.join(known)}")


# ---------------------------------------------------------------- normalisation


@dataclasses.dataclass(frozen=True)
class Normalisation:
    """Token normalisation without gain: RMS (``center=False``) or LayerNorm (``center=True``); ``eps`` > 0 is the
    variance floor of HF's norms, ``x / sqrt(mean x^2 + eps)`` (``BlockConfig.norm_eps``; the maps take 0)."""

    center: bool

    def forward(self, x, gain=None, bias=None, eps=0.0):
        y = normalise_tokens(x, self.center) if eps == 0 else _with_eps(x, self.center, eps)
        return y if gain is None else y * gain + bias

    def forward_(self, x, eps=0.0):
        return normalise_tokens_(x, self.center) if eps == 0 else _with_eps(x, self.center, eps)

    @staticmethod
    def overlaps(q, p):
        """``(q, p) -> (1, p/q)`` (Giorlandino & Goldt 2025, Eq. (5))."""
        return np.ones_like(q), p / q

    @staticmethod
    def gram(G):
        """``G_ts / sqrt(G_tt G_ss)``."""
        s = np.sqrt(np.diag(G))
        return G / (s[:, None] * s[None, :])


RMS_NORM, LAYER_NORM = Normalisation(False), Normalisation(True)


def _with_eps(x, center, eps):
    """``(x - [mean]) / sqrt(mean (x - [mean])^2 + eps)`` in at least float32 (HF's RMSNorm / LayerNorm without gain)."""
    w = x.to(_work_dtype(x.dtype))
    if center:
        w = w - w.mean(-1, keepdim=True)
    return (w * torch.rsqrt(w.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def normalisation(config) -> Normalisation:
    return LAYER_NORM if config.ln_center else RMS_NORM


# ---------------------------------------------------------------- residual layout


def compose(x, c, *, attention, mlp, norm, combine, norm_fresh=None):
    """One block of config ``c`` in its residual layout, for any representation of the tokens.

    ``attention(h)``, ``mlp(h)``: the branches; ``norm(h, k)``: the normalisation before (pre) or after (post)
    sub-layer ``k`` (0 attention, 1 MLP), which must not change ``h``; ``norm_fresh`` may work in place on a
    fresh argument (default ``norm``); ``combine(x, y, skip, weight)``: the residual sum. Layouts:

    * post:  ``x <- N(a_sa x + b_sa SA(x))``; ``x <- N(a_mlp x + b_mlp MLP(x))``
    * pre:   ``x <- a_sa x + b_sa SA(N x)``;  ``x <- a_mlp x + b_mlp MLP(N x)``
    * none:  ``x <- a_sa x + b_sa SA(x)``;    ``x <- a_mlp x + b_mlp MLP(x)``
    * parallel (pre only): ``x <- a_mlp (a_sa x + b_sa SA(N x)) + b_mlp MLP(N' x)``: the pre-LN block whose MLP
      reads the block's input (GPT-NeoX, GPT-J: ``x + SA(LN x) + MLP(LN' x)`` at unit strengths);
    * ``branch_norm`` (pre or none): each branch's output normalised, ``norm(y, k + 2)``, before it is added --
      sandwich norms (Gemma2, Gemma3: ``x + N_2(SA(N_0 x))``) or Peri-LN's output norm alone (OLMo2:
      ``x + N_2(SA(x))``). A normalised branch adds a fixed ``b^2`` to the token norm ``q`` per sub-layer, so the
      residual stream grows linearly with depth (``q_l = q_0 + l (b_sa^2 + b_mlp^2)`` at unit gains).
    """
    fresh = norm if norm_fresh is None else norm_fresh
    if c.branch_norm:
        attention_in, mlp_in = attention, mlp
        attention = lambda h: fresh(attention_in(h), 2)   # noqa: E731  (branch outputs are fresh)
        mlp = lambda h: fresh(mlp_in(h), 3)               # noqa: E731
    if c.parallel:
        h_mlp = norm(x, 1) if c.mlp else None
        y = combine(x, attention(norm(x, 0)), c.alpha_sa, c.branch_sa)
        return combine(y, mlp(h_mlp), c.alpha_mlp, c.branch_mlp) if c.mlp else y

    def sublayer(x, branch, k, skip, weight):
        if c.norm == "post":
            return fresh(combine(x, branch(x), skip, weight), k)
        if c.norm == "pre":
            return combine(x, branch(norm(x, k)), skip, weight)
        return combine(x, branch(x), skip, weight)

    x = sublayer(x, attention, 0, c.alpha_sa, c.branch_sa)
    return sublayer(x, mlp, 1, c.alpha_mlp, c.branch_mlp) if c.mlp else x


def combine_moments(x, y, skip, weight):
    """``combine`` for second moments (``(q, p)`` pairs or Gram matrices): ``skip^2 x + weight^2 y``."""
    if isinstance(x, tuple):
        return tuple(skip**2 * a + weight**2 * b for a, b in zip(x, y))
    return skip**2 * x + weight**2 * y


# ---------------------------------------------------------------- MLP


def linear(x, w, b, *, skip_zero_bias=False):
    """``x (n, b, T, k) @ w^T + b`` with ``w (n, m, k)``, ``b (n, m)`` -> ``(n, b, T, m)``, one batched product per
    initialisation. ``skip_zero_bias`` (the fast kernel; no autograd, no vmap) skips an all-zero bias."""
    n, bb, T, k = x.shape
    x2 = x.reshape(n, bb * T, k)
    if skip_zero_bias and not bool(b.any()):
        out = torch.bmm(x2, w.transpose(1, 2))
    else:
        out = torch.baddbmm(b.unsqueeze(1), x2, w.transpose(1, 2))
    return out.view(n, bb, T, -1)


def mlp_forward(x, p, l, c, *, inplace=False):
    """The MLP of block ``l`` on ``x (n, b, T, d)``; ``inplace`` for the fast kernel (no autograd); a mixture of
    experts in ``sigprop.block._moe``."""
    act = ACTIVATIONS[c.activation]
    if c.experts is not None:
        return moe_forward(x, p, l, c, act.forward)
    h = linear(x, p.w1[:, l], p.b1[:, l], skip_zero_bias=inplace)
    h = act.forward_(h) if inplace else act.forward(h)
    if c.gated:
        up = linear(x, p.w3[:, l], p.b3[:, l], skip_zero_bias=inplace)
        h = h.mul_(up) if inplace else h * up
    return linear(h, p.w2[:, l], p.b2[:, l], skip_zero_bias=inplace)


def unit_kernel(activation, gated, a, b, c):
    """The hidden unit's kernel: ``K(a, b, c)``, times ``c`` for a gated unit (module docstring)."""
    k = ACTIVATIONS[activation].kernel(a, b, c)
    return k * c if gated else k


def mlp_overlaps(q, p, P):
    """MLP map ``(q, p) -> (q_2, p_2)`` (App. B.6.2, Eqs. (35)-(37)); ``P`` holds ``sigma_w2, sigma_b2,
    sigma_w2_out, sigma_b2_out, activation, gated`` (broadcast arrays)."""
    q1, p1 = P["sigma_w2"] * q + P["sigma_b2"], P["sigma_w2"] * p + P["sigma_b2"]
    e_qq = unit_kernel(P["activation"], P["gated"], q1, q1, q1)
    e_pq = unit_kernel(P["activation"], P["gated"], q1, q1, p1)
    if P.get("moe") is not None:   # a mixture of experts: one expert's kernel times the routing factor
        c = _moe_spec(P["moe"])
        e_qq, e_pq = e_qq * routing_factor(q, q, c), e_pq * routing_factor(q, p, c)
    return P["sigma_w2_out"] * e_qq + P["sigma_b2_out"], P["sigma_w2_out"] * e_pq + P["sigma_b2_out"]


def _moe_spec(moe):
    return types.SimpleNamespace(experts=int(moe[0]), top_k=int(moe[1]), router_sigma2=float(moe[2]),
                                 norm_topk=bool(moe[3]))


def mlp_gram(H, c):
    """MLP map of a Gram matrix ``H (T, T)``: elementwise kernels at the tokens' own variances."""
    G1 = c.sigma_w2 * H + c.sigma_b2
    d = np.diag(G1)
    K = unit_kernel(c.activation, c.gated, d[:, None], d[None, :], G1)
    if c.experts is not None:
        K = K * routing_factor(np.diag(H)[:, None] + 0 * H, H, c)
    return c.w2_variance * K + c.b2_variance
