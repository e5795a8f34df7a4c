"""The configuration of one random transformer block: :class:`BlockConfig`.

One frozen dataclass drives both descriptions of the block: the random network
(:func:`sigprop.sample_transformer`, :func:`sigprop.transformer_forward`, ``sigprop.block._network``) and its
Gaussian maps (:func:`sigprop.theory.block_map`, :func:`sigprop.theory.iterate_gram_map`). Each part it
names is one component of ``sigprop.block._components`` / ``_attention`` (forward and map side by side).

Fields (the documents' block is the default; off-the-shelf parts are opt-in):

* widths: ``d``, ``heads``, ``d_k`` (query/key width per head, default ``d / heads``), ``d_v`` (value width per
  head, default ``d / heads``; HF's ``head_dim`` sets both where ``heads * head_dim != d``, e.g. Qwen3-0.6B,
  Mistral-Nemo; then ``W_O`` maps ``heads * d_v`` to ``d`` and must be present), ``d_ff`` (MLP width, default ``d``),
  ``kv_heads`` (grouped-query attention: heads share keys and values in ``kv_heads`` groups, as HF's
  ``num_key_value_heads``; 1 = multi-query; default ``heads``);
* normalisation: ``norm`` placement ``"post" | "pre" | "none"``; ``ln_center`` False = RMS normalisation
  (the documents' LN, RMSNorm without gain), True = LayerNorm (centred features); ``norm_eps`` the variance
  floor ``x / sqrt(mean x^2 + eps)`` of the forward (default 0, the documents'; the maps take ``eps = 0``, an
  error of order ``eps / q``, which :func:`sigprop.read_init` reports where it is not small);
* residual layout: sequential (default) or ``parallel=True`` (GPT-NeoX, GPT-J; pre-LN only):
  ``x <- alpha_mlp (alpha_sa x + branch_sa SA(LN x)) + branch_mlp MLP(LN' x)``;
* attention: ``logit_scale`` (default ``1/sqrt(d_k)``), ``causal``, ``window`` (a causal sliding window:
  query ``t`` sees keys ``t - window < s <= t``, HF's ``sliding_window``; needs ``causal``), ``gain_control``
  (values centred along the sequence, Giorlandino & Goldt Algorithm 3), ``positions="rope"`` (rotary embeddings,
  Su et al. 2021, HF's ``rotate_half`` pairing; ``rope_theta``, ``rope_fraction`` = share of each head's
  query/key dimensions rotated, GPT-NeoX ``rotary_pct``; ``rope_freqs`` the inverse frequency of each rotated pair
  where it is not ``rope_theta^(-2i/r)``, e.g. Llama 3's or linear scaling, read from a model's ``inv_freq``),
  output projection ``W_O`` (``sigma_o2`` set), biases of values/output (``sigma_bv2``, ``sigma_bo2``) and of
  queries/keys (``sigma_bqk2``; ``sigma_bk2`` the keys' when it differs, Qwen2); ``qk_norm`` (queries and keys
  RMS-normalised before RoPE and their product: ``"head"`` over each head's ``d_k`` features, Qwen3 and Gemma3;
  ``"all"`` over the whole projection, OLMo2; ``qk_norm_eps`` its floor), ``logit_cap`` (soft-capped logits
  ``c tanh(a / c)``, Gemma2), ``alibi_slopes`` (ALiBi, Press et al. 2022: ``-m_h (t - s)`` added to head ``h``'s
  logits of a causal block, one slope per head, :func:`sigprop.alibi_slopes`; Bloom, Falcon, MPT);
* MLP as a mixture of ``experts`` (Mixtral, Qwen3-MoE; ``sigprop.block._moe``): each token's ``top_k`` experts by
  its router logits (router entries of variance ``router_sigma2 / d``), weighted by their softmax probabilities
  (renormalised over the top ``k`` with ``norm_topk``), each expert an independent copy of the MLP below;
* ``branch_norm``: each branch's output normalised before it is added (sandwich / Peri-LN: Gemma2 and Gemma3 with
  ``norm="pre"``, OLMo2 with ``norm="none"``), with its own gain;
* MLP: ``activation`` (``"relu" | "tanh" | "linear" | "gelu" | "gelu_tanh" | "silu"``), ``gated=True``:
  ``W_2 (phi(W_1 x + b_1) * (W_3 x + b_3)) + b_2`` (SwiGLU with ``"silu"``, GeGLU with ``"gelu"``), ``mlp``.

Initialisation (zero-mean Gaussians): ``W_Q, W_K`` entries ``sigma_qk2`` (default Xavier, Noci et al. 2022,
Sec. 3), ``b_Q`` ``sigma_bqk2``, ``b_K`` ``sigma_bk2`` (default ``sigma_bqk2``); ``W_V`` ``sigma_v2 / d``; ``W_O``
``sigma_o2 / (heads d_v)`` (its fan-in; ``sigma_o2 / d`` in the documents' widths); ``W_1, W_3``
``sigma_w2 / d``; ``b_1, b_3`` ``sigma_b2``; ``W_2`` ``sigma_w2_out / d_ff`` (default ``sigma_w2``); ``b_2``
``sigma_b2_out`` (default ``sigma_b2``). :meth:`BlockConfig.from_beta` sets ``sigma_qk2 = beta sqrt(log T)
/ d`` (Giorlandino & Goldt 2025, Result 1) and :meth:`BlockConfig.beta` reads ``beta`` back.
"""
from __future__ import annotations

import dataclasses
import enum
import math

from ..attention import beta_equivalent, glorot_variance, logit_variance, qk_variance_for_beta
from ..stats._validate import check_flag, check_int, check_option, check_real, check_seq_len
from ._components import ACTIVATIONS

__all__ = ["BlockConfig"]


class Norm(str, enum.Enum):
    POST = "post"
    PRE = "pre"
    NONE = "none"


#: Option strings of ``BlockConfig.activation``: the registry ``sigprop.block._components.ACTIVATIONS``.
Activation = enum.Enum("Activation", {name.upper(): name for name in ACTIVATIONS}, type=str)


class Positions(str, enum.Enum):
    NONE = "none"
    ROPE = "rope"


class QKNorm(str, enum.Enum):
    NONE = "none"
    HEAD = "head"
    ALL = "all"


@dataclasses.dataclass(frozen=True)
class BlockConfig:
    """Architecture and initialisation of one transformer block (see the module docstring)."""

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
    gated: bool = False
    kv_heads: int | None = None
    positions: str = "none"
    rope_theta: float = 10000.0
    rope_fraction: float = 1.0
    parallel: bool = False
    sigma_bqk2: float = 0.0
    d_v: int | None = None
    norm_eps: float = 0.0
    window: int | None = None
    sigma_bk2: float | None = None
    rope_freqs: tuple | None = None
    qk_norm: str = "none"
    qk_norm_eps: float = 0.0
    logit_cap: float | None = None
    branch_norm: bool = False
    alibi_slopes: tuple | None = None
    experts: int | None = None
    top_k: int = 1
    router_sigma2: float = 1.0
    norm_topk: bool = True

    def __post_init__(self):
        # validate, and store what was validated: ints as int, reals as float, flags as bool, options as str
        def put(name, value):
            object.__setattr__(self, name, value)

        put("d", check_int(self.d, "d", minimum=1))
        put("heads", check_int(self.heads, "heads", minimum=1))
        if self.d % self.heads and (self.d_k is None or self.d_v is None):
            raise ValueError(f"d must be divisible by heads (or d_k and d_v given); got d={self.d}, heads={self.heads}")
        for name in ("d_k", "d_ff", "kv_heads", "d_v", "window", "experts"):
            if getattr(self, name) is not None:
                put(name, check_int(getattr(self, name), name, minimum=1))
        if self.heads % self.group_count:
            raise ValueError(f"kv_heads must divide heads (each group of heads shares its keys and values); got "
                             f"heads={self.heads}, kv_heads={self.kv_heads}")
        put("norm", check_option(self.norm, Norm, "norm").value)
        put("activation", check_option(self.activation, Activation, "activation").value)
        put("positions", check_option(self.positions, Positions, "positions").value)
        put("qk_norm", check_option(self.qk_norm, QKNorm, "qk_norm").value)
        for name in ("alpha_sa", "alpha_mlp", "branch_sa", "branch_mlp", "sigma_v2", "sigma_w2", "sigma_b2",
                     "sigma_bv2", "sigma_bo2", "sigma_bqk2"):
            put(name, check_real(getattr(self, name), name, minimum=0.0))
        for name in ("sigma_qk2", "logit_scale", "sigma_o2", "sigma_w2_out", "sigma_b2_out", "sigma_bk2"):
            if getattr(self, name) is not None:
                put(name, check_real(getattr(self, name), name, minimum=0.0))
        put("norm_eps", check_real(self.norm_eps, "norm_eps", minimum=0.0))
        put("qk_norm_eps", check_real(self.qk_norm_eps, "qk_norm_eps", minimum=0.0))
        if self.logit_cap is not None:
            put("logit_cap", check_real(self.logit_cap, "logit_cap", minimum=0.0, strict=True))
        put("rope_theta", check_real(self.rope_theta, "rope_theta", minimum=0.0, strict=True))
        put("rope_fraction", check_real(self.rope_fraction, "rope_fraction", minimum=0.0, maximum=1.0))
        for name in ("gain_control", "causal", "mlp", "ln_center", "gated", "parallel", "branch_norm"):
            put(name, check_flag(getattr(self, name), name))
        if self.branch_norm and (self.norm == "post" or self.parallel):
            raise ValueError("branch_norm normalises each branch before it is added (sandwich / Peri-LN), with "
                             f"norm='pre' or 'none' and sequential branches; got norm={self.norm!r}, "
                             f"parallel={self.parallel}")
        put("top_k", check_int(self.top_k, "top_k", minimum=1))
        put("router_sigma2", check_real(self.router_sigma2, "router_sigma2", minimum=0.0))
        put("norm_topk", check_flag(self.norm_topk, "norm_topk"))
        if self.experts is not None and (self.top_k > self.experts or self.norm not in ("pre", "post")
                                         or self.sigma_b2 > 0 or self.b2_variance > 0 or not self.mlp):
            raise ValueError(f"a mixture of experts routes each token to top_k <= experts experts (got {self.top_k} of "
                             f"{self.experts}) of an MLP without biases whose input is normalised (norm 'pre' or "
                             f"'post'); got norm={self.norm!r}, sigma_b2={self.sigma_b2}, mlp={self.mlp}")
        if self.alibi_slopes is not None:
            slopes = tuple(check_real(m, "alibi_slopes[h]", minimum=0.0) for m in self.alibi_slopes)
            put("alibi_slopes", slopes)
            if len(slopes) != self.heads or not self.causal or self.positions == "rope":
                raise ValueError(f"alibi_slopes gives one slope per head ({self.heads}) of a causal block without RoPE "
                                 f"(ALiBi: Bloom, Falcon, MPT); got {len(slopes)} slopes, causal={self.causal}, "
                                 f"positions={self.positions!r}")
        if self.qk_norm != "none" and (self.sigma_bqk2 > 0 or self.key_bias_variance > 0):
            raise ValueError("query/key biases before a QK-norm are not modelled; set sigma_bqk2 = sigma_bk2 = 0")
        if self.parallel and self.norm != "pre":
            raise ValueError("parallel residuals (GPT-NeoX, GPT-J: x + SA(LN x) + MLP(LN' x)) need norm='pre'; "
                             f"got norm={self.norm!r}")
        if self.heads * self.value_dim != self.d and self.sigma_o2 is None:
            raise ValueError(f"heads * d_v = {self.heads} * {self.value_dim} = {self.heads * self.value_dim} differs from "
                             f"d = {self.d}: the heads' outputs reach width d only through an output projection W_O; "
                             "set sigma_o2")
        if self.window is not None and not self.causal:
            raise ValueError(f"a sliding window (window={self.window}) is a causal mask over the last keys: set "
                             "causal=True")
        if self.rope_freqs is not None:
            freqs = tuple(check_real(f, "rope_freqs[i]", minimum=0.0, strict=True) for f in self.rope_freqs)
            put("rope_freqs", freqs)
            if self.positions != "rope" or len(freqs) != self.rotary_dims // 2:
                raise ValueError(f"rope_freqs gives the inverse frequency of each rotated pair: {self.rotary_dims // 2} "
                                 f"values with positions='rope'; got {len(freqs)} with positions={self.positions!r}")
        if self.positions == "rope" and (self.rotary_dims < 2 or self.rotary_dims % 2):
            raise ValueError(f"rotary embeddings rotate pairs of dimensions: int(d_k * rope_fraction) must be even and "
                             f">= 2; got d_k={self.head_dim}, rope_fraction={self.rope_fraction} "
                             f"({self.rotary_dims} dimensions)")

    @classmethod
    def from_beta(cls, beta: float, *, T: int, d: int, **fields) -> "BlockConfig":
        """The block whose logits have Giorlandino & Goldt's scale ``beta`` at sequence length ``T``:
        ``sigma_qk2 = beta sqrt(log T) / d`` for the default logit scale ``1/sqrt(d_k)`` (Result 1;
        :func:`sigprop.theory.qk_variance_for_beta` for other ``d_k`` or scales). ``beta = 0``: zero query/key
        weights (uniform attention)."""
        if "sigma_qk2" in fields:
            raise TypeError("from_beta sets sigma_qk2 from beta; pass either beta (from_beta) or sigma_qk2 "
                            f"(BlockConfig(...)), not both; got sigma_qk2={fields['sigma_qk2']!r}")
        beta = check_real(beta, "beta", minimum=0.0)
        probe = cls(d=d, **fields)
        if beta == 0:
            check_seq_len(T)
            return dataclasses.replace(probe, sigma_qk2=0.0)
        if probe.scale == 0:
            raise ValueError(f"logit_scale = 0 gives beta = 0 whatever sigma_qk2 is; beta = {beta} cannot be reached")
        var = qk_variance_for_beta(beta, T=T, d=d, d_k=probe.head_dim, logit_scale=probe.scale)
        return dataclasses.replace(probe, sigma_qk2=var)

    def beta(self, T: int) -> float:
        """The equivalent ``beta`` of this block's query/key initialisation at sequence length ``T`` (the inverse
        of :meth:`from_beta`; :func:`sigprop.theory.beta_equivalent`); 0 for zero query/key weights or a zero
        logit scale (uniform attention)."""
        if self.qk_norm != "none":   # logits of normalised queries and keys: Var = scale^2 d_k per unit cosine
            return math.sqrt(self.logit_var / math.log(float(check_seq_len(T))))
        if self.scale == 0 or self.qk_variance == 0:
            check_seq_len(T)
            return 0.0
        return float(beta_equivalent(logit_scale=self.scale, d=self.d, d_k=self.head_dim,
                                     sigma_qk2=self.qk_variance, T=T))

    @property
    def logit_var(self) -> float:
        """``Var(a_ts) = logit_scale^2 d_k (sigma_qk2 d)^2`` per unit token overlap (App. B.1, Eq. (9)); with a
        QK-norm ``logit_scale^2 d_k`` per unit *cosine* (unit gains; ``sigprop.block._attention``)."""
        if self.qk_norm != "none":
            return self.scale ** 2 * self.head_dim
        if self.scale == 0 or self.qk_variance == 0:
            return 0.0
        return float(logit_variance(logit_scale=self.scale, d=self.d, d_k=self.head_dim, sigma_qk2=self.qk_variance))

    @property
    def qk_bias(self) -> float:
        """The query bias's share of a query, ``e = sigma_bqk2 / (sigma_qk2 d)``: with it the logits of query
        ``t`` against the keys have the covariance of tokens of overlaps ``(q + e, p + e)`` (the key bias adds
        the same logit to a whole row and drops out of the softmax); 0 without query/key weights."""
        return 0.0 if self.qk_variance == 0 or self.qk_norm != "none" else self.sigma_bqk2 / (self.qk_variance * self.d)

    def map_params(self, T: int) -> dict:
        """Keyword arguments of :func:`sigprop.theory.block_map` describing this block at length ``T``."""
        return dict(beta=self.beta(T), alpha_sa=self.alpha_sa, alpha_mlp=self.alpha_mlp, sigma_w2=self.sigma_w2,
                    sigma_b2=self.sigma_b2, sigma_v2=self.sigma_v2, branch_sa=self.branch_sa,
                    branch_mlp=self.branch_mlp, norm=self.norm, gain_control=self.gain_control,
                    activation=self.activation, mlp=self.mlp, sigma_o2=self.out_variance, sigma_bv2=self.sigma_bv2,
                    sigma_bo2=self.sigma_bo2, sigma_w2_out=self.w2_variance, sigma_b2_out=self.b2_variance,
                    gated=self.gated, parallel=self.parallel, qk_bias=self.qk_bias, qk_norm=self.qk_norm != "none",
                    branch_norm=self.branch_norm, moe=self.moe)

    @property
    def moe(self):
        """``(experts, top_k, router_sigma2, norm_topk)`` of a mixture of experts, or None."""
        return None if self.experts is None else (self.experts, self.top_k, self.router_sigma2, self.norm_topk)

    @property
    def head_dim(self) -> int:
        """Query/key width per head (default ``d / heads``)."""
        return self.d_k if self.d_k is not None else self.d // self.heads

    @property
    def value_dim(self) -> int:
        """Value width per head (``d_v``, default ``d / heads``)."""
        return self.d_v if self.d_v is not None else self.d // self.heads

    @property
    def key_bias_variance(self) -> float:
        """``sigma_bk2``, or ``sigma_bqk2`` when unset."""
        return self.sigma_bk2 if self.sigma_bk2 is not None else self.sigma_bqk2

    @property
    def group_count(self) -> int:
        """Key/value heads (``kv_heads``, default ``heads``)."""
        return self.kv_heads if self.kv_heads is not None else self.heads

    @property
    def rotary_dims(self) -> int:
        """Query/key dimensions per head that RoPE rotates, ``int(d_k rope_fraction)`` (HF's convention)."""
        return int(self.head_dim * self.rope_fraction)

    @property
    def hidden(self) -> int:
        return self.d_ff if self.d_ff is not None else self.d

    @property
    def qk_variance(self) -> float:
        """``sigma_qk2`` or, if unset, Xavier for a (d_k, d) map."""
        return self.sigma_qk2 if self.sigma_qk2 is not None else float(glorot_variance(self.d, self.head_dim))

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
