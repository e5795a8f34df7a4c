r"""Training random transformers from their initialisation on a masked-token task.

Giorlandino & Goldt 2025 test their trainability diagram by training: a 60-layer BERT in the
rank-collapse, entropy-collapse and trainable regimes (Fig. 1(f), App. C.1) and vanilla against
gain-controlled attention (Fig. 5, App. D.1), on masked-language modelling of TinyStories. This
module is the same experiment at a size a CPU runs, on a language the project generates:

* **data** -- :class:`MaskedTask`: sequences of a :class:`sigprop.MarkovSource`, each token
  replaced by a ``[MASK]`` symbol with probability ``mask_prob`` (BERT's 15 %); the loss is the
  cross-entropy at masked positions. :meth:`MaskedTask.bayes_loss` is the best any model can do
  (exact posterior of a masked token given every visible token, by the forward-backward
  recursion of the chain), :meth:`MaskedTask.unigram_loss` the best without context.
* **model** -- the random transformer of :mod:`sigprop.block._network` (the same
  :class:`~sigprop.BlockConfig`, the same initialisation, so its cosine at initialisation is the
  block map's, Algorithms 1-3) with token and absolute position embeddings (each entry
  ``N(0, 1/2)``, so input tokens have ``q = 1``) and a linear readout.
* **optimiser** -- AdamW with linear warm-up and linear decay, weight decay (on every parameter,
  embeddings and biases included) and gradient-norm clipping, as in App. C.1 (learning rate and
  steps scaled to the miniature).

``seeds`` independent networks train as one batched computation along the ``inits`` axis: their
losses are summed (each network's gradient is its own), AdamW acts entrywise and clipping is per
network, so a sweep over seeds is one run that is equivalent to ``seeds`` separate ones.
Used in ``chapters/giorlandino-goldt2025/06_training.ipynb``.
"""
from __future__ import annotations

import dataclasses
import math
import time

import numpy as np
import torch
import torch.nn.functional as F

from ..block import BlockConfig, TransformerParams, apply_block, sample_transformer
from ..inputs import MaskedTask
from ..stats._measures import attention_entropy, mean_cosine
from ..stats._config import as_device, threads_for
from ..stats._montecarlo import progress_bar
from ..stats._random import as_generator, draw_seed
from ..stats._validate import check_int, check_memory, check_positive, check_range

__all__ = ["TrainingRun", "train_masked_lm", "masked_lm_init"]

#: The weights every masked-LM network trains (the documents' block: ``b_1, b_2`` even when drawn as zeros);
#: the optional parts of a :class:`~sigprop.BlockConfig` train only where the config has them (:func:`_trained`).
_WEIGHTS = ("w_q", "w_k", "w_v", "w1", "b1", "w2", "b2")


def _trained(config: BlockConfig) -> tuple[str, ...]:
    optional = (("w_o", config.has_out_proj), ("b_v", config.sigma_bv2 > 0), ("b_o", config.sigma_bo2 > 0),
                ("w3", config.gated), ("b3", config.gated), ("b_q", config.sigma_bqk2 > 0),
                ("b_k", config.sigma_bqk2 > 0))
    return _WEIGHTS + tuple(name for name, present in optional if present)


@dataclasses.dataclass(frozen=True)
class TrainingRun:
    """Result of :func:`train_masked_lm`; per-network arrays have a last axis ``seeds``.

    ``eval_loss``, ``attention_entropy`` (mean over layers, heads and queries, nats) and
    ``top_cosine`` (mean token cosine after the last block) are recorded at ``steps``;
    ``init_cosine`` ``(depth + 1, seeds)`` is the cosine after each block at initialisation.
    ``bayes_loss`` / ``unigram_loss``: the best loss with / without context on the same data.
    """

    steps: np.ndarray              # (n_eval,)
    eval_loss: np.ndarray          # (n_eval, seeds)
    attention_entropy: np.ndarray  # (n_eval, seeds)
    top_cosine: np.ndarray         # (n_eval, seeds)
    init_cosine: np.ndarray        # (depth + 1, seeds)
    bayes_loss: float
    unigram_loss: float
    seconds: float
    settings: dict

    def gap_closed(self) -> np.ndarray:
        """``(seeds,)`` fraction of the way from the context-free floor (0) to the Bayes floor (1) reached
        at the last evaluation."""
        return (self.unigram_loss - self.eval_loss[-1]) / (self.unigram_loss - self.bayes_loss)

    def to_dict(self) -> dict:
        """JSON-ready dict (arrays as nested lists); inverse :meth:`from_dict`."""
        out = dataclasses.asdict(self)
        return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in out.items()}

    @classmethod
    def from_dict(cls, data: dict) -> "TrainingRun":
        arrays = {"steps", "eval_loss", "attention_entropy", "top_cosine", "init_cosine"}
        return cls(**{k: (np.asarray(v) if k in arrays else v) for k, v in data.items()})


def masked_lm_init(config: BlockConfig, depth: int, vocab: int, T: int, *, seeds: int = 1, generator=None,
                   device=None, dtype=torch.float32) -> dict:
    """Parameters of ``seeds`` masked-LM transformers: the blocks of :func:`sigprop.sample_transformer`
    plus ``emb (seeds, vocab + 1, d)``, ``pos (seeds, T, d)`` (entries ``N(0, 1/2)``), ``w_out
    (seeds, d, vocab)`` (``N(0, 1/d)``) and ``b_out (seeds, vocab)`` (zero); leaf tensors."""
    depth = check_int(depth, "depth", minimum=1)
    vocab = check_int(vocab, "vocab", minimum=2)
    T = check_int(T, "T", minimum=2)
    device = torch.device("cpu") if device is None else as_device(device)
    g = as_generator(generator, device)
    blocks = sample_transformer(config, depth, inits=seeds, generator=g, device=device, dtype=dtype)
    d = config.d

    def normal(std, *shape):
        return std * torch.randn(seeds, *shape, generator=g, device=device, dtype=dtype)

    params = {name: getattr(blocks, name) for name in _trained(config)}
    params.update(emb=normal(math.sqrt(0.5), vocab + 1, d), pos=normal(math.sqrt(0.5), T, d),
                  w_out=normal(1 / math.sqrt(d), d, vocab), b_out=torch.zeros(seeds, vocab, device=device, dtype=dtype))
    return {k: v.requires_grad_() for k, v in params.items()}


def _encode(params, config, inputs, record=None):
    """``inputs (b, T)`` -> logits ``(seeds, b, T, vocab)`` and every block's output ``(seeds, b, T, d)``;
    ``record`` receives each block's attention record (``sigprop.block.apply_block``)."""
    blocks = TransformerParams(**{name: params[name] for name in _trained(config)})
    x = params["emb"][:, inputs] + params["pos"][:, None, : inputs.shape[1]]   # (seeds, b, T, d)
    layers = [x]
    for l in range(blocks.depth):
        x = apply_block(x, blocks, config, l, record)
        layers.append(x)
    logits = torch.einsum("nbtd,ndv->nbtv", x, params["w_out"]) + params["b_out"][:, None, None]
    return logits, layers


def _masked_ce(logits, targets, mask):
    """Per network mean cross-entropy over masked positions: ``(seeds,)``."""
    n = logits.shape[0]
    picked = logits[:, mask]                                                 # (seeds, m, vocab)
    ce = F.cross_entropy(picked.reshape(-1, picked.shape[-1]), targets[mask].repeat(n), reduction="none")
    return ce.view(n, -1).mean(1)


@torch.no_grad()
def _evaluate(params, config, inputs, targets, mask):
    """Per network: held-out masked-token loss, attention entropy (mean over layers, heads, queries) and the mean
    cosine after each block ``(depth + 1, seeds)``, as numpy arrays."""
    record = []
    logits, layers = _encode(params, config, inputs, record)
    cos = torch.stack([mean_cosine(x.double()).mean(1) for x in layers])          # (depth + 1, seeds)
    ent = torch.stack([attention_entropy(r["attention"].double()).mean((1, 2, 3)) for r in record]).mean(0)
    return _masked_ce(logits, targets, mask).cpu().numpy(), ent.cpu().numpy(), cos.cpu().numpy()


def _clip_per_network(params, max_norm):
    sq = sum(p.grad.pow(2).flatten(1).sum(1) for p in params)               # (seeds,)
    scale = (max_norm / (sq.sqrt() + 1e-6)).clamp(max=1.0)
    for p in params:
        p.grad.mul_(scale.view(-1, *([1] * (p.ndim - 1))))


def train_masked_lm(config: BlockConfig, depth: int, task: MaskedTask, *, seeds: int = 3, steps: int = 1000,
                    batch: int = 128, lr: float = 3e-3, weight_decay: float = 0.01, warmup: float = 0.05,
                    max_grad_norm: float = 1.0, eval_every: int = 50, eval_size: int = 512, stop_at: int | None = None,
                    generator=None, device=None, progress: bool = True) -> TrainingRun:
    """Train ``seeds`` transformers (``config``, ``depth`` blocks) on ``task`` from their initialisation.

    Fresh sequences every step (an endless corpus, like one epoch of a large one). Every
    ``eval_every`` steps (and at 0 and ``steps``) the masked-token loss, attention entropy and
    top-layer cosine are measured on ``eval_size`` held-out sequences. ``generator`` seeds the
    initialisations, the training stream and the held-out set (three independent streams).
    ``stop_at`` ends training early with the learning-rate schedule of ``steps`` (it replays the
    start of a long run; ``tests/test_training.py`` checks a committed record this way).
    """
    if not isinstance(config, BlockConfig):
        raise TypeError(f"config must be a BlockConfig; got {type(config).__name__}")
    if not isinstance(task, MaskedTask):
        raise TypeError(f"task must be a MaskedTask; got {type(task).__name__}")
    seeds, steps = check_int(seeds, "seeds", minimum=1), check_int(steps, "steps", minimum=1)
    batch, eval_every = check_int(batch, "batch", minimum=1), check_int(eval_every, "eval_every", minimum=1)
    eval_size = check_int(eval_size, "eval_size", minimum=1)
    check_positive(lr, "lr")
    check_positive(weight_decay, "weight_decay", allow_zero=True)
    check_range(warmup, "warmup", 0.0, 1.0)
    check_positive(max_grad_norm, "max_grad_norm")
    last = steps if stop_at is None else check_int(stop_at, "stop_at", minimum=0)
    if last > steps:
        raise ValueError(f"stop_at must be <= steps={steps}; got {stop_at}")
    # the one size guard: the evaluation and training forwards keep every block's activations (seeds x sequences x
    # T x (d, hidden, heads T)) and the logits over the vocabulary, in float32
    per_token = depth * (4 * config.d + config.hidden + 2 * config.heads * task.T) + task.vocab
    check_memory(4.0 * seeds * max(eval_size, batch) * task.T * per_token,
                 f"train_masked_lm with seeds={seeds}, eval_size={eval_size}, batch={batch} at T={task.T}")
    device = torch.device("cpu") if device is None else as_device(device)
    g = as_generator(generator)
    init_g, data_g, eval_g = (torch.Generator().manual_seed(draw_seed(g)) for _ in range(3))
    params = masked_lm_init(config, depth, task.vocab, task.T, seeds=seeds,
                            generator=torch.Generator(device).manual_seed(draw_seed(init_g)), device=device)
    leaves = list(params.values())
    opt = torch.optim.AdamW(leaves, lr=lr, weight_decay=weight_decay)
    n_warm = max(1, round(warmup * steps))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / n_warm, max(0.0, (steps - s) / max(1, steps - n_warm))))
    ev_in, ev_tgt, ev_mask = task.sample(eval_size, generator=eval_g)
    bayes = float(task.bayes_loss(ev_tgt, ev_mask).mean())
    ev_in, ev_tgt, ev_mask = ev_in.to(device), ev_tgt.to(device), ev_mask.to(device)
    record = {"steps": [], "eval_loss": [], "attention_entropy": [], "top_cosine": []}
    init_cosine = None
    start = time.perf_counter()
    bar = progress_bar(last, desc=f"training {seeds} networks", enabled=progress)
    work = seeds * batch * task.T * config.d * max(3 * config.d, config.hidden)   # multiply-adds per product
    with threads_for(work):
        for step in range(last + 1):
            if step % eval_every == 0 or step == last:
                loss, ent, cos = _evaluate(params, config, ev_in, ev_tgt, ev_mask)
                init_cosine = cos if init_cosine is None else init_cosine
                for key, value in (("steps", step), ("eval_loss", loss), ("attention_entropy", ent),
                                   ("top_cosine", cos[-1])):
                    record[key].append(value)
            if step == last:
                break
            inputs, targets, mask = (t.to(device) for t in task.sample(batch, generator=data_g))
            logits, _ = _encode(params, config, inputs)
            loss = _masked_ce(logits, targets, mask).sum()
            if not bool(torch.isfinite(loss)):
                raise FloatingPointError(f"training diverged at step {step} (loss {loss.item()}); lower lr={lr}")
            opt.zero_grad(set_to_none=False)
            loss.backward()
            _clip_per_network(leaves, max_grad_norm)
            opt.step()
            sched.step()
            bar.update(1)
    bar.close()
    settings = dict(config=dataclasses.asdict(config), depth=depth, T=task.T, vocab=task.vocab,
                    mask_prob=task.mask_prob, seeds=seeds, steps=steps, stop_at=last, batch=batch, lr=lr,
                    weight_decay=weight_decay, warmup=warmup, max_grad_norm=max_grad_norm, device=str(device))
    return TrainingRun(np.asarray(record["steps"]), np.stack(record["eval_loss"]),
                       np.stack(record["attention_entropy"]), np.stack(record["top_cosine"]), init_cosine,
                       bayes, task.unigram_loss(), time.perf_counter() - start, settings)
