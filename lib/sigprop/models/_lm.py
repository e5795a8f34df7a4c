r"""A small trainable transformer language model and its training loop, for the chapters' training pages.

The random transformers of ``sigprop.block._network`` are batched over initialisations and built for Monte
Carlo; the training pages need an ordinary ``nn.Module`` with embeddings, a read-out and an optimiser.
:class:`TinyLM` is that module, configured by :class:`LMConfig` to be each page's model:

* Noci et al. 2022, App. C.1 (sequence reversal): post-LN or no-LN encoder, branch weight ``alpha``
  (``x + alpha f(x)``, their Eq. (2)), inverse temperature ``tau`` in the softmax (Eq. (19)), sinusoidal
  positions;
* Bao, Hataya & Karakida 2024, Sec. 7 (LocATER): one causal post-LN layer with separate ``W_Q, W_K``
  (so ``W_QK = W_Q^T W_K``), an output projection and affine LayerNorm;
* Aghajanyan 2025 (values after training): pre-LN causal blocks with ``d_k != d`` and a final LN.

Its blocks are the random transformer's (one implementation): :class:`LMConfig` holds the
:class:`~sigprop.BlockConfig` of its blocks (``.block``) and :class:`TinyLM`'s parameters are the weights of a
one-network :class:`~sigprop.TransformerParams`, run by the block network's forward (``sigprop.block``)::

    post:  x <- LN(x + branch f(x))      pre:  x <- x + branch f(LN x)      none:  x <- x + branch f(x)

Attention ``A = softmax(tau (W_Q x).(W_K x) / sqrt(d_k))`` (causal optional); values ``W_V x``, optionally
projected by ``W_O``; MLP ``W_2 relu(W_1 x + b_1) + b_2``. Every weight matrix is drawn from ``N(0, gain^2 /
fan_in)`` with an explicit generator (no global RNG) in its own order (the chapters' records depend on it);
biases start at zero. ``forward(tokens, record=True)`` also
returns, per layer, the attention weights, their logits and the values, for the pages' measurements.

:func:`fit` trains any such model on batches from a sampler, with an optional penalty (e.g.
:func:`sigprop.locater_penalty`), per-step forward options (e.g. a ``tau`` schedule) and an evaluation
callback, on one thread when the model is small (:func:`sigprop.threads_for`).
"""
from __future__ import annotations

import contextlib
import dataclasses
import enum
import math
from typing import Callable

import torch
import torch.nn.functional as F

from ..block import BlockConfig, TransformerParams, apply_block, normalisation
from ..stats._config import threads_for
from ..stats._random import as_generator
from ..stats._validate import check_flag, check_int, check_memory, check_option, check_real

__all__ = ["LMConfig", "TinyLM", "fit"]


class _Positions(str, enum.Enum):
    LEARNED = "learned"
    SINUSOIDAL = "sinusoidal"


#: The fields of :class:`LMConfig` that describe its blocks; they are validated (and stored) by the
#: :class:`~sigprop.BlockConfig` the LM config holds as ``.block``.
_BLOCK_FIELDS = ("d", "heads", "d_k", "d_ff", "norm", "causal", "ln_center")


@dataclasses.dataclass(frozen=True)
class LMConfig:
    """Architecture and initialisation of :class:`TinyLM` (see the module docstring).

    ``block`` (derived, not an argument) is the :class:`~sigprop.BlockConfig` of its blocks: the same width,
    heads, norm placement, mask and centring, branch weights ``branch``, weight variances ``gain^2 / fan_in``
    (``sigma_qk2 = gain^2 / d``, ``sigma_v2 = sigma_w2 = sigma_w2_out = gain^2``, ``sigma_o2 = gain^2`` with
    ``out_proj``) and zero biases; the block fields are validated there.
    """

    vocab: int
    T: int
    d: int
    depth: int = 1
    heads: int = 1
    d_k: int | None = None          # query/key width per head (default d / heads)
    d_ff: int | None = None         # MLP width (default d)
    norm: str = "post"
    causal: bool = False
    branch: float = 1.0             # Noci et al.'s alpha_1 = alpha_2
    out_proj: bool = False          # W_O after the heads
    final_norm: bool = False        # LN before the read-out
    ln_center: bool = False         # subtract the feature mean in LN (torch's LayerNorm)
    ln_affine: bool = False         # learnable LN gain and bias (start at 1 and 0)
    mlp_bias: bool = True
    positions: str = "learned"
    emb_std: float = 1.0
    pos_std: float = 0.02
    gain: float = 1.0               # weights N(0, gain^2 / fan_in); 1/sqrt(3) matches torch's default variance
    block: BlockConfig = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self):
        def put(name, value):
            object.__setattr__(self, name, value)

        for name in ("vocab", "T", "depth"):
            put(name, check_int(getattr(self, name), name, minimum=1))
        put("positions", check_option(self.positions, _Positions, "positions").value)
        for name in ("out_proj", "final_norm", "ln_affine", "mlp_bias"):
            put(name, check_flag(getattr(self, name), name))
        for name in ("branch", "emb_std", "pos_std", "gain"):
            put(name, check_real(getattr(self, name), name, minimum=0.0))
        block = BlockConfig(**{k: getattr(self, k) for k in _BLOCK_FIELDS}, branch_sa=self.branch,
                            branch_mlp=self.branch, sigma_v2=self.gain**2, sigma_w2=self.gain**2,
                            sigma_w2_out=self.gain**2, sigma_o2=self.gain**2 if self.out_proj else None)
        block = dataclasses.replace(block, sigma_qk2=self.gain**2 / block.d)
        for k in _BLOCK_FIELDS:
            put(k, getattr(block, k))
        put("block", block)

    @property
    def head_dim(self) -> int:
        return self.block.head_dim

    @property
    def hidden(self) -> int:
        return self.block.hidden


def sinusoidal_positions(T: int, d: int) -> torch.Tensor:
    """``(T, d)`` sinusoidal position codes (Vaswani et al. 2017)."""
    cpu = torch.device("cpu")
    pos, i = torch.arange(T, device=cpu)[:, None], torch.arange(0, d, 2, device=cpu)[None]
    pe = torch.zeros(T, d, device=cpu)
    pe[:, 0::2] = torch.sin(pos / 10000 ** (i / d))
    pe[:, 1::2] = torch.cos(pos / 10000 ** (i[:, : d // 2] / d))
    return pe


class TinyLM(torch.nn.Module):
    """A small transformer language model (``LMConfig``); parameters drawn from ``generator``.

    Embedding, the blocks of :func:`sigprop.transformer_forward` (one network: its weights are this module's
    parameters, its forward is :func:`sigprop.block.apply_block`), and a read-out. Parameters (leading axis
    ``depth``): ``w_q, w_k (L, H, d_k, d)``, ``w_v (L, H, d/H, d)``, ``w_o (L, d, d)`` (if ``out_proj``),
    ``w1 (L, d_ff, d)``, ``b1``, ``w2 (L, d, d_ff)``, ``b2``, LN gains and biases ``(L, 2, d)`` (if
    ``ln_affine``), ``emb (vocab, d)``, ``pos (T, d)`` (learned) and ``head (vocab, d)``, ``head_b``.
    """

    def __init__(self, config: LMConfig, *, generator=None):
        super().__init__()
        if not isinstance(config, LMConfig):
            raise TypeError(f"config must be an LMConfig; got {type(config).__name__}")
        c = self.config = config
        g = as_generator(generator)
        L, H, dk, dv, d, f = c.depth, c.heads, c.head_dim, c.d // c.heads, c.d, c.hidden
        check_memory(4.0 * (2 * c.vocab * d + c.T * d + L * (2 * H * dk * d + H * dv * d + d * d + 2 * f * d + 6 * d)),
                     f"TinyLM's parameters (vocab={c.vocab}, T={c.T}, d={d}, depth={L})")

        def weight(*shape):  # fan-in is the last axis
            return torch.nn.Parameter(c.gain / math.sqrt(shape[-1]) * torch.randn(*shape, generator=g, device=g.device))

        def zeros(*shape):
            return torch.nn.Parameter(torch.zeros(*shape, device=g.device))

        # draw order (emb, pos, w_q, w_k, w_v, w_o, w1, w2, head) fixed: a seed gives the same network as before
        self.emb = torch.nn.Parameter(c.emb_std * torch.randn(c.vocab, d, generator=g, device=g.device))
        if c.positions == "learned":
            self.pos = torch.nn.Parameter(c.pos_std * torch.randn(c.T, d, generator=g, device=g.device))
        else:
            self.register_buffer("pos", sinusoidal_positions(c.T, d).to(g.device))
        self.w_q, self.w_k, self.w_v = weight(L, H, dk, d), weight(L, H, dk, d), weight(L, H, dv, d)
        self.w_o = weight(L, d, d) if c.out_proj else None
        self.w1, self.w2 = weight(L, f, d), weight(L, d, f)
        self.b1, self.b2 = (zeros(L, f), zeros(L, d)) if c.mlp_bias else (None, None)
        if c.ln_affine:
            self.ln_gain, self.ln_bias = torch.nn.Parameter(torch.ones(L, 2, d, device=g.device)), zeros(L, 2, d)
            self.final_gain, self.final_bias = torch.nn.Parameter(torch.ones(d, device=g.device)), zeros(d)
        self.head, self.head_b = weight(c.vocab, d), zeros(c.vocab)

    def blocks(self) -> TransformerParams:
        """The blocks' weights as a one-network :class:`~sigprop.TransformerParams` (views of the parameters)."""
        c = self.config
        opt = dict(w_o=self.w_o, b1=self.b1, b2=self.b2)
        if c.ln_affine:
            opt.update(ln_gain=self.ln_gain, ln_bias=self.ln_bias)
        like = self.w1
        if self.b1 is None:
            opt.update(b1=like.new_zeros(c.depth, c.hidden), b2=like.new_zeros(c.depth, c.d))
        present = {k: v[None] for k, v in opt.items() if v is not None}
        return TransformerParams(w_q=self.w_q[None], w_k=self.w_k[None], w_v=self.w_v[None], w1=self.w1[None],
                                 w2=self.w2[None], **present)

    def forward(self, tokens: torch.Tensor, *, tau: float = 1.0, record: bool = False):
        """``tokens (B, T')`` with ``T' <= T`` -> logits ``(B, T', vocab)``; with ``record`` also a list, per
        layer, of ``dict(attention (B, H, T', T'), logits (B, H, T', T'), values (B, H, T', d/H))``."""
        c = self.config
        if not isinstance(tokens, torch.Tensor) or tokens.is_floating_point() or tokens.is_complex() \
                or tokens.dtype == torch.bool:
            got = f"a {tokens.dtype} tensor" if isinstance(tokens, torch.Tensor) else type(tokens).__name__
            raise TypeError(f"tokens must be an integer tensor of token ids in [0, vocab={c.vocab}); got {got}")
        if tokens.ndim != 2 or not 1 <= tokens.shape[1] <= c.T or tokens.shape[0] == 0:
            raise ValueError(f"tokens must have shape (batch, T') with batch >= 1 and 1 <= T' <= T={c.T}; got "
                             f"{tuple(tokens.shape)}")
        B, Tp = tokens.shape
        check_memory(4.0 * B * Tp * (c.vocab + c.hidden + 4 * c.d + 3 * c.heads * Tp) * (1 + 2 * record),
                     f"TinyLM.forward on tokens of shape {(B, Tp)}")
        low, high = int(tokens.min()), int(tokens.max())
        if low < 0 or high >= c.vocab:
            raise ValueError(f"token ids must lie in [0, vocab={c.vocab}); got ids from {low} to {high}")
        tau = check_real(tau, "tau")   # any real: tau <= 0 gives uniform (0) or reversed (< 0) attention
        x = (self.emb[tokens] + self.pos[: tokens.shape[1]])[None]       # (1, B, T', d): one network
        params, rec = self.blocks(), ([] if record else None)
        for l in range(c.depth):
            x = apply_block(x, params, c.block, l, rec, tau=tau)
        x = x[0]
        if c.final_norm:
            norm = normalisation(c.block)
            x = norm.forward(x, self.final_gain, self.final_bias) if c.ln_affine else norm.forward(x)
        logits = x @ self.head.T + self.head_b
        if not record:
            return logits
        return logits, [{k: v[0] for k, v in r.items()} for r in rec]

    def work(self, batch: int) -> int:
        """Multiply-adds of the largest matrix product of one forward pass on ``batch`` sequences."""
        c = self.config
        return batch * c.T * c.d * max(c.d, c.hidden, c.vocab)


def fit(model: torch.nn.Module, sample: Callable[[int], tuple], *, steps: int, optimizer: torch.optim.Optimizer,
        penalty: Callable[[torch.nn.Module], torch.Tensor] | None = None,
        forward: Callable[[int], dict] | None = None, evaluate: Callable[[int, torch.nn.Module], dict] | None = None,
        every: int = 50, work: float | None = None) -> list[dict]:
    """Train ``model`` for ``steps`` steps; returns the records of ``evaluate``.

    ``sample(step) -> (inputs, targets)``: one batch (targets ``-100`` are ignored); the loss is the mean
    cross-entropy of ``model(inputs, **forward(step))`` against ``targets``, plus ``penalty(model)``.
    ``evaluate(step, model) -> dict`` runs (under ``no_grad``) at step 0, every ``every`` steps and at the
    end; each record gets ``step`` and the training ``loss`` of the last step. ``work`` (multiply-adds per
    matrix product; default ``model.work(batch)`` where defined) decides the thread count
    (:func:`sigprop.threads_for`).
    """
    steps = check_int(steps, "steps", minimum=0)
    every = check_int(every, "every", minimum=1)
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module; got {type(model).__name__}")
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"optimizer must be a torch.optim.Optimizer over the model's parameters (e.g. "
                        f"torch.optim.Adam(model.parameters(), lr=1e-3)); got {type(optimizer).__name__}")
    for name, fn in (("sample", sample), ("penalty", penalty), ("forward", forward), ("evaluate", evaluate)):
        if (fn is not None or name == "sample") and not callable(fn):
            raise TypeError(f"{name} must be callable; got {type(fn).__name__}")
    records, last = [], float("nan")
    with contextlib.ExitStack() as stack:
        for step in range(steps + 1):
            if evaluate is not None and (step % every == 0 or step == steps):
                with torch.no_grad():
                    records.append(dict(step=step, loss=last, **evaluate(step, model)))
            if step == steps:
                break
            inputs, targets = sample(step)
            if step == 0:  # the thread policy, decided once from the first batch's size
                size = model.work(inputs.shape[0]) if work is None and hasattr(model, "work") else work
                stack.enter_context(threads_for(float("inf") if size is None else size))
            logits = model(inputs, **(forward(step) if forward else {}))
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100)
            if penalty is not None:
                loss = loss + penalty(model)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            last = float(loss.detach())
            if not math.isfinite(last):
                raise FloatingPointError(f"training diverged at step {step} (loss {last}); lower the learning rate")
    return records
