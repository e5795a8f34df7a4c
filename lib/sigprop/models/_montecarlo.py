r"""Monte Carlo over initialisations of one off-the-shelf model: :func:`mc_model_cosine`.

The theory for a model's initialisation (:meth:`sigprop.ModelInit.predict`) is a statement about the *distribution*
of its weights; one model is one draw. This redraws the same model ``inits`` times -- with a
:class:`~sigprop.BlockConfig`'s variances (:func:`sigprop.reinitialise`) or with any initialiser of your own (e.g.
the library's, ``lambda model, seed: model.apply(model._init_weights)`` under ``torch.manual_seed(seed)``) --
feeds each draw ``seqs`` sequences of ``T`` equicorrelated tokens of cosine ``rho0``
(:func:`sigprop.equicorrelated_tokens`, a fresh draw per initialisation), probes it (:func:`sigprop.probe`), and
returns the per-initialisation statistic (default: the mean cosine after each block, averaged over the
sequences) as an :class:`~sigprop.Estimate` whose ``samples`` a curve-level test (:func:`sigprop.curve_agreement`)
takes directly: the blocks of one initialisation are correlated, initialisations are independent.

Seeds: initialisation ``i`` is drawn with seed ``1000 generator + i`` and its tokens with ``1000 generator + 500 +
i``, so two calls with different ``generator`` are independent and a call is reproducible.

Used in the book's chapter on off-the-shelf transformers.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import torch
from torch import nn

from ..block import BlockConfig
from ..inputs import equicorrelated_tokens
from ..stats._config import threads_for
from ..stats._estimate import Estimate, estimate
from ..stats._validate import check_int, check_real
from ._adapter import adapter_for
from ._probe import ProbeResult, _width, probe
from ._reinit import reinitialise

__all__ = ["mc_model_cosine", "at_width"]


def at_width(config: BlockConfig, d: int) -> BlockConfig:
    """The same block at width ``d``, in the maps' units: every variance that the map reads per unit width
    (``sigma_qk2 d``, ``sigma_v2``, ``sigma_o2``, ``sigma_w2``, ``sigma_w2_out``) kept, heads of the same width
    ``d_k`` (``d // d_k`` of them, at least one), key/value groups in the same proportion (rounded down to a divisor),
    the MLP's width ratio kept. ``config.beta(T)`` and the block map are unchanged; a model built at this width
    and re-initialised with it is the original initialisation at a width a laptop runs.

    HF initialisers draw every weight with a fixed standard deviation (0.02), so the same default is a different
    initialisation at every width: this is how the book runs published shapes at reduced width."""
    if not isinstance(config, BlockConfig):
        raise TypeError(f"config must be a BlockConfig; got {type(config).__name__}")
    d = check_int(d, "d", minimum=1)
    hd = config.head_dim
    heads = max(1, d // hd)
    groups = max(1, (heads * config.group_count) // config.heads)
    while heads % groups:
        groups -= 1
    return dataclasses.replace(config, d=d, heads=heads, kv_heads=None if groups == heads else groups,
                               d_k=None if heads * hd == d else hd, d_ff=max(1, round(config.hidden * d / config.d)),
                               sigma_qk2=config.qk_variance * config.d / d)


def _mean_cosine(result: ProbeResult) -> torch.Tensor:
    return result.cosine.mean(-1)


def mc_model_cosine(model: nn.Module, init, *, T: int, inits: int = 16, seqs: int = 2, rho0: float = 0.1,
                    generator: int = 0, blocks=None, stat: Callable[[ProbeResult], torch.Tensor] | None = None,
                    offset: Callable[[int], torch.Tensor] | None = None, **probe_kw) -> Estimate:
    """The mean token cosine after each block of ``model`` over ``inits`` initialisations (module docstring).

    Args:
        model: any model :func:`sigprop.probe` runs.
        init: a :class:`~sigprop.BlockConfig` (written with :func:`sigprop.reinitialise`), or a callable
            ``init(model, seed) -> model`` drawing a fresh initialisation (it may return a new model).
        T, seqs, rho0: each initialisation is fed ``seqs`` sequences of ``T`` equicorrelated tokens of cosine
            ``rho0`` in the model's dtype and device.
        inits: independent initialisations (the curve-level test at level 0.001 needs at least 13).
        generator: an int seed (module docstring).
        blocks: passed to :func:`sigprop.reinitialise` and :func:`sigprop.probe` (default: the model's).
        stat: ``stat(ProbeResult) -> tensor`` per initialisation (default: ``result.cosine.mean(-1)``, shape
            ``(L + 1,)``); e.g. ``lambda r: r.ipr.mean(-1)`` for the attention IPR per block.
        offset: ``offset(seed) -> (T, d)`` tensor added to every sequence of the initialisation drawn with ``seed``
            (e.g. absolute position embeddings drawn for it), or None.
        probe_kw: further keywords of :func:`sigprop.probe` (``causal``, ``weights``, ``pairs``).

    Returns:
        :class:`~sigprop.Estimate` over initialisations, with ``samples`` ``(inits, *stat shape)``.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module; got {type(model).__name__}")
    if not (isinstance(init, BlockConfig) or callable(init)):
        raise TypeError(f"init must be a BlockConfig or a callable init(model, seed); got {type(init).__name__}")
    inits = check_int(inits, "inits", minimum=2)
    seqs = check_int(seqs, "seqs", minimum=1)
    T = check_int(T, "T", minimum=2)
    rho0 = check_real(rho0, "rho0", minimum=0.0, maximum=1.0)
    generator = check_int(generator, "generator", minimum=0)
    stat = _mean_cosine if stat is None else stat
    rows = []
    for i in range(inits):
        seed = 1000 * generator + i
        if isinstance(init, BlockConfig):
            reinitialise(model, init, generator=seed, blocks=blocks)
        else:
            model = init(model, seed)
            if not isinstance(model, nn.Module):
                raise TypeError(f"init(model, seed) must return the model; got {type(model).__name__}")
        if i == 0:
            adapter = adapter_for(model, blocks, probe_kw.get("causal"))
            d = _width(adapter, adapter.blocks[0], model)
            if d is None:
                raise ValueError(f"the width of {type(adapter.blocks[0]).__name__} could not be read: probe the "
                                 "model with your own tokens and sp.estimate")
        param = next(model.parameters())
        x = equicorrelated_tokens(seqs, T=T, d=d, rho=rho0, generator=seed + 500)
        if offset is not None:
            x = x + torch.as_tensor(offset(seed), dtype=x.dtype).expand(T, d)
        with threads_for(seqs * T * x.shape[-1] ** 2):
            r = probe(model, x.to(param.device, param.dtype), blocks=blocks, **probe_kw)
        rows.append(torch.as_tensor(stat(r), dtype=torch.float64))
    return estimate(torch.stack(rows))
