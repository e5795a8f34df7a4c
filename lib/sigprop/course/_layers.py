r"""Small Monte Carlo helpers that only the synthesis pages use (candidates for the science folders).

* :func:`mc_layer_ipr`: the mean IPR of single-head attention layers given in any document's scaling (entry
  variance of :math:`W_Q, W_K`, head width :math:`d_k`, logit multiplier), the Monte Carlo behind the dictionary of
  equivalent :math:`\beta` (``chapters/synthesis/01``);
* :func:`mc_overlap_ratio_vs_depth`: the ratio :math:`p/q` of the mean token overlaps after each block of random
  transformers, with per-network pseudo-values for a curve-level test (``chapters/synthesis/02``, Noci et al.'s
  setting without LayerNorm, where token norms grow and the mean cosine is not :math:`p/q`).
"""
from __future__ import annotations

import math

import torch

from ..attention._layer import self_attention          # not yet in attention's interface (requested)
from ..block import BlockConfig, sample_transformer, transformer_forward
from ..inputs._tokens import gaussian_tokens            # not yet in inputs' interface (requested)
from ..stats._estimate import Estimate, estimate
from ..stats._measures import attention_ipr, token_overlaps
from ..stats._random import as_generator
from ..stats._validate import check_int, check_positive

__all__: list[str] = []
__theory__: list[str] = []
__course__ = ["mc_layer_ipr", "mc_overlap_ratio_vs_depth"]


def mc_layer_ipr(*, d: int, d_k: int, sigma_qk2: float, logit_scale: float, T: int, n: int,
                 generator=None) -> Estimate:
    r"""Mean IPR :math:`\sum_s A_{ts}^2` of the rows of ``n`` independent single-head attention layers.

    Each layer draws Gaussian tokens ``(T, d)`` (:math:`q = 1`) and :math:`W_Q, W_K \in \mathbb R^{d_k\times d}`
    with entries of variance ``sigma_qk2``; logits :math:`s\,(W_Qx_t)\cdot(W_Kx_u)` with ``s = logit_scale``.
    Returns a scalar :class:`~sigprop.Estimate` over the ``n`` layers (rows of one layer are averaged first).
    Compare with the finite-width REM at the equivalent :math:`\beta` (:func:`sigprop.theory.beta_equivalent`).
    Float64 throughout."""
    for name, v in (("d", d), ("d_k", d_k), ("T", T)):
        check_int(v, name, minimum=1)
    check_int(n, "n", minimum=2)
    check_positive(sigma_qk2, "sigma_qk2")
    check_positive(logit_scale, "logit_scale")
    g = as_generator(generator)
    x = torch.randn(n, T, d, generator=g, dtype=torch.float64)
    w_q = math.sqrt(sigma_qk2) * torch.randn(n, d_k, d, generator=g, dtype=torch.float64)
    w_k = math.sqrt(sigma_qk2) * torch.randn(n, d_k, d, generator=g, dtype=torch.float64)
    _, A = self_attention(x, w_q, w_k, logit_scale=logit_scale)
    return estimate(attention_ipr(A).mean(-1))


def mc_overlap_ratio_vs_depth(config: BlockConfig, depth: int, *, T: int, inits: int, seqs: int = 2,
                              generator=None) -> Estimate:
    r""":math:`p/q` after each block of ``inits`` random transformers ``config``, as a ratio of Monte Carlo means.

    :math:`q` and :math:`p` are the mean squared norm and mean overlap of the tokens (``sp.token_overlaps``),
    averaged over ``seqs`` Gaussian input sequences per network. The ratio of the means over networks is the
    quantity the maps of Noci et al. (Lemmas 3.2-3.3) and of Giorlandino & Goldt predict; without LayerNorm it
    differs from the mean cosine. Returns an :class:`~sigprop.Estimate` ``(depth + 1,)`` whose ``mean`` is that
    ratio and whose ``samples`` ``(inits, depth + 1)`` are the per-network pseudo-values
    :math:`\bar r + (p_i - \bar r q_i)/\bar q` (the ratio's influence function): their mean is the ratio and their
    standard error the delta-method SE, so :func:`sigprop.course.curve_test` tests the ratio curve. Float64.
    """
    depth = check_int(depth, "depth", minimum=1)
    inits = check_int(inits, "inits", minimum=2)
    g = as_generator(generator)
    params = sample_transformer(config, depth, inits=inits, generator=g, dtype=torch.float64)
    x = gaussian_tokens(inits, check_int(seqs, "seqs", minimum=1), T=T, d=config.d, generator=g,
                        dtype=torch.float64)

    def overlaps(y):                                       # (inits, seqs, T, d) -> (inits, 2)
        return torch.stack(token_overlaps(y), -1).mean(-2)

    qp = transformer_forward(x, params, config, measure=overlaps)          # (depth + 1, inits, 2)
    q, p = qp[..., 0].numpy().T, qp[..., 1].numpy().T                       # (inits, depth + 1)
    ratio = p.mean(0) / q.mean(0)
    pseudo = ratio + (p - ratio * q) / q.mean(0)
    est = estimate(torch.as_tensor(pseudo))
    return Estimate(torch.as_tensor(ratio), est.stderr, est.n, est.samples)
