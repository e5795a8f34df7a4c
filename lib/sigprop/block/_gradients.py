"""Gradients of a random transformer's weights (Noci et al. 2022, Fig. 3(b, c)), by ``torch.func``.

The per-layer squared gradient norms of the block network of :mod:`sigprop.block._network` under a fixed
random linear read-out; the attention-layer formulas they are compared with (Lemma 3.1, Eqs. (17)-(18))
live beside the single attention layer in :mod:`sigprop.attention._gradients`.
"""
from __future__ import annotations

import dataclasses

import torch

from ..stats._validate import check_tensor
from ._network import BlockConfig, TransformerParams, forward_reference

__all__ = ["transformer_layer_grad_sq_norms"]


def transformer_layer_grad_sq_norms(x, params, config, readout, *, names=("w_q", "w_k", "w_v")):
    r"""Per-network, per-layer :math:`\|\partial\mathcal L/\partial W_\ell\|_F^2` of a random transformer, by ``vmap(grad)``.

    The loss is a fixed random linear read-out of the last layer,
    :math:`\mathcal L = \langle G, X^L\rangle` (``readout`` = :math:`G`), so
    :math:`\partial\mathcal L/\partial X^L = G` is isotropic; Noci et al. (2022), Fig. 3(b, c)
    ("gradients ... with respect to some loss"). ``torch.func.grad`` of the per-network loss
    is ``torch.func.vmap``-ed over the ``inits`` axis of ``params`` (a
    :class:`sigprop.TransformerParams`); the forward pass is the reference block loop of
    :func:`sigprop.transformer_forward` (``sigprop.block._network.forward_reference``).

    ``x`` (inits, samples, T, d); ``readout`` the same shape. Returns ``{name: (inits, depth)}``
    for ``names`` among ``w_q, w_k, w_v, w1, w2``.
    """
    if not isinstance(config, BlockConfig):
        raise TypeError(f"config must be a BlockConfig; got {type(config).__name__}")
    if not isinstance(params, TransformerParams):
        raise TypeError(f"params must be a TransformerParams; got {type(params).__name__}")
    check_tensor(x, "x", ndim_min=4)
    check_tensor(readout, "readout", ndim_min=4)
    if x.shape[0] != params.inits or x.shape[-1] != config.d:
        raise ValueError(f"x must have shape (inits={params.inits}, samples, T, d={config.d}); got {tuple(x.shape)}")
    if readout.shape != x.shape:
        raise ValueError(f"readout must have the shape of x {tuple(x.shape)}; got {tuple(readout.shape)}")
    fields = [f.name for f in dataclasses.fields(TransformerParams)]
    bad = [n for n in names if n not in fields]
    if bad:
        raise ValueError(f"names must be among {fields}; got {bad}")

    def keep(y):  # every layer is kept by the reference loop; only the last is used
        return y

    def loss(pd, xb, gb):
        p = TransformerParams(**{k: v.unsqueeze(0) for k, v in pd.items()})  # singleton inits axis
        out = forward_reference(xb.unsqueeze(0), p, config, keep)          # (depth+1, 1, samples, T, d)
        return (out[-1, 0] * gb).sum()

    pd = {k: getattr(params, k) for k in fields}
    grads = torch.func.vmap(torch.func.grad(loss))(pd, x, readout)
    return {k: grads[k].pow(2).flatten(2).sum(-1) for k in names}
