r"""The sequence-reversal task of Noci et al. 2022, App. C.1, and the two training experiments of Sec. 3.4 the
chapter runs on it (``chapters/noci2022/04``).

**Task and model** (``sp.presets.NOCI_APP_C1``): 20 digits 0-9, target the same digits reversed; a 5-block
encoder of width 16, one head, a ReLU MLP of width 16, layer norm without affine parameters, digit embeddings of
variance 1 plus sinusoidal positions, weights :math:`\mathcal N(0, 1/(3\,\mathrm{fan\_in}))` (the variance of
PyTorch's default ``nn.Linear`` initialisation): :func:`reversal_model`, :func:`reversal_batch`.

* :func:`train_reversal_adam` -> :class:`AdamRun`: Fig. 5, Adam's *effective learning rate*
  :math:`\eta/(\sqrt{\hat v}+\epsilon)` (median over the entries of each layer's :math:`W^Q, W^K, W^V`, with the
  bias-corrected second moment :math:`\hat v`) and the training loss every ``every`` steps;
* :func:`train_reversal_sgd` -> :class:`SGDRun`: one run of the small analogue of Table 1 (SGD with momentum 0.9;
  post-LN, residual scaling, or residual scaling with the inverse temperature :math:`\tau` of Eq. 19 warmed up as
  :math:`\tau_{\rm final}\min(1, \mathrm{step}/\mathrm{warmup})`, App. C.2 with ``min`` for its printed ``max``);
  :func:`sgd_table` summarises runs over seeds (mean ± SE where there are several).
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch

from ..models import LMConfig, TinyLM, fit
from ..presets import NOCI_APP_C1
from ..stats._random import as_generator
from ..stats._validate import check_int

__all__: list[str] = []
__theory__: list[str] = []
__course__ = ["reversal_model", "reversal_batch", "AdamRun", "train_reversal_adam", "SGDRun", "train_reversal_sgd",
              "sgd_table"]

_ADAM_BETAS = (0.9, 0.999)
_EPS = 1e-8


def reversal_model(*, norm: str = "post", branch: float = 1.0, seed: int = 0) -> TinyLM:
    """App. C.1's encoder (``NOCI_APP_C1``) with layer-norm placement ``norm`` and residual branch weight
    ``branch`` (:math:`\\alpha_1 = \\alpha_2`), initialised from ``seed``."""
    c = NOCI_APP_C1
    config = LMConfig(vocab=c["vocab"], T=c["T"], d=c["d"], depth=c["depth"], heads=c["heads"], d_ff=c["d_ff"],
                      norm=norm, branch=branch, ln_center=True, positions="sinusoidal", gain=3**-0.5)
    return TinyLM(config, generator=seed)


def reversal_batch(generator, batch: int = NOCI_APP_C1["batch"]):
    """``batch`` fresh random digit sequences and their reversals: ``(inputs, targets)``, each ``(batch, 20)``."""
    x = torch.randint(0, NOCI_APP_C1["vocab"], (check_int(batch, "batch", minimum=1), NOCI_APP_C1["T"]),
                      generator=as_generator(generator))
    return x, x.flip(1)


@dataclasses.dataclass(frozen=True)
class AdamRun:
    """:func:`train_reversal_adam`: the logged ``steps``, training ``loss`` and ``effective_lr`` (``"q"``, ``"k"``,
    ``"v"`` -> array ``(records, layers)`` of medians over each layer's entries)."""

    steps: np.ndarray
    loss: np.ndarray
    effective_lr: dict


def train_reversal_adam(steps: int, *, seed: int = 0, data_seed: int = 100, every: int = 10) -> AdamRun:
    """Fig. 5: Adam (betas 0.9, 0.999; learning rate 0.01, no weight decay) on the reversal task, logging the
    median effective learning rate of each layer's query, key and value weights from step ``every`` on."""
    lr, depth = NOCI_APP_C1["lr"], NOCI_APP_C1["depth"]
    net = reversal_model(seed=seed)
    opt = torch.optim.Adam(net.parameters(), lr=lr, betas=_ADAM_BETAS, weight_decay=0.0)
    g = as_generator(data_seed)

    def effective_lr(step, model):
        if step == 0:                                 # no second moment yet
            return {}
        out = {}
        for name in "qkv":
            st = opt.state[getattr(model, f"w_{name}")]
            v_hat = st["exp_avg_sq"] / (1 - _ADAM_BETAS[1] ** float(st["step"]))   # (layers, heads, rows, d)
            out[name] = [float((lr / (v_hat[layer].sqrt() + _EPS)).median()) for layer in range(depth)]
        return out

    log = fit(net, lambda step: reversal_batch(g), steps=steps, optimizer=opt, evaluate=effective_lr, every=every)[1:]
    return AdamRun(steps=np.array([r["step"] for r in log]), loss=np.array([r["loss"] for r in log]),
                   effective_lr={name: np.array([r[name] for r in log]) for name in "qkv"})


@dataclasses.dataclass(frozen=True)
class SGDRun:
    """:func:`train_reversal_sgd`: ``solved`` (the first logged step at which the held-out sequences are reversed
    with the target per-digit accuracy, or None) and the final held-out ``accuracy``."""

    solved: int | None
    accuracy: float


def train_reversal_sgd(seed: int, steps: int, *, norm: str, branch: float, tau_final: float = 1.0,
                       warmup: int = 50, lr: float = 0.1, target: float = 0.99, held_out: int = 512) -> SGDRun:
    """One SGD run (momentum 0.9) on the reversal task with the temperature warm-up of Eq. (19); accuracy on
    ``held_out`` fixed sequences every 10 steps."""
    net = reversal_model(norm=norm, branch=branch, seed=seed)
    opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9)
    g = as_generator(1000 + seed)
    xt, yt = reversal_batch(999, batch=held_out)

    def tau(step):
        return {"tau": tau_final * min(1.0, (step + 1) / warmup)}

    def accuracy(step, model):
        return {"accuracy": float((model(xt, **tau(max(step - 1, 0))).argmax(-1) == yt).float().mean())}

    log = fit(net, lambda step: reversal_batch(g), steps=steps, optimizer=opt, forward=tau, evaluate=accuracy,
              every=10)
    solved = next((r["step"] for r in log if r["accuracy"] >= target), None)
    return SGDRun(solved=solved, accuracy=log[-1]["accuracy"])


def _mean_se(values) -> str:
    v = np.asarray(values, dtype=float)
    if len(v) < 2:
        return f"{v.mean():.3g}"
    return f"{v.mean():.3g} ± {v.std(ddof=1) / math.sqrt(len(v)):.2g}"


def sgd_table(runs: dict, *, target: float = 0.99):
    """One row per variant (``runs``: name -> list of :class:`SGDRun` over seeds): the step at which each seed
    reaches ``target`` ("-" if not within the budget), their mean ± SE when every seed does, and the final
    held-out accuracy (mean ± SE over seeds; one seed: its value). A pandas DataFrame indexed by variant."""
    import pandas as pd

    rows = []
    for name, rs in runs.items():
        solved = [r.solved for r in rs if r.solved is not None]
        rows.append({"variant": name,
                     f"steps to {100 * target:g} % (per seed; - = not within budget)":
                         " ".join("-" if r.solved is None else str(r.solved) for r in rs),
                     "mean steps": _mean_se(solved) if len(solved) == len(rs) else f"{len(solved)}/{len(rs)} solved",
                     "held-out accuracy": _mean_se([r.accuracy for r in rs])})
    return pd.DataFrame(rows).set_index("variant")
