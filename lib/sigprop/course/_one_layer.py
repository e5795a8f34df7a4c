r"""One random attention layer, drawn and measured the way the Noci pages do it (``chapters/noci2022`` 01-02).

The first two pages of the Noci chapter study a single attention layer at a fixed input or over equicorrelated
inputs. What they repeat is collected here, so that a page cell reads as a sentence:

* **draws**: :func:`layer_weights` (:math:`W_Q, W_K, W_V` with i.i.d. :math:`\mathcal N(0, s^2/d)` entries, the
  variance :math:`1/d` of Noci et al. 2022, Sec. 3);
* **Monte Carlo**: :func:`mc_uniform_deviation` (Noci et al. 2022, Fig. 7: the distance of softmax attention from
  uniform over weight draws), :func:`mc_query_value_ratio` (Figs. 11-13: the query/value gradient ratio of real
  softmax attention, with its delta-method standard error).

The theory these are compared with lives in ``sp.theory`` (``uniform_deviation``, ``query_value_log_ratio``).
Candidates for ``sigprop.attention`` (requested); everything here is float64 unless a ``dtype`` is given.
"""
from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import torch

from ..attention._gradients import softmax_param_grad_sq_norms   # not yet in attention's interface (requested)
from ..attention._layer import self_attention                    # not yet in attention's interface (requested)
from ..inputs import equicorrelated_tokens
from ..stats._estimate import Estimate, estimate
from ..stats._montecarlo import monte_carlo
from ..stats._random import as_generator
from ..stats._validate import check_int, check_positive

__all__: list[str] = []
__theory__: list[str] = []
__course__ = ["LayerWeights", "layer_weights", "mc_uniform_deviation", "QueryValueRatio", "mc_query_value_ratio"]


class LayerWeights(NamedTuple):
    """Query, key and value weights of one head, PyTorch's ``(d_out, d_in)`` layout (unpack as ``*w``)."""

    w_q: torch.Tensor
    w_k: torch.Tensor
    w_v: torch.Tensor


def layer_weights(*batch: int, d: int, d_k: int | None = None, d_v: int | None = None, scale: float = 1.0,
                  generator=None, dtype=torch.float64) -> LayerWeights:
    r""":math:`W_Q, W_K \in \mathbb R^{d_k\times d}`, :math:`W_V\in\mathbb R^{d_v\times d}` (leading ``batch``
    dimensions), i.i.d. :math:`\mathcal N(0, \mathrm{scale}^2/d)`, drawn in the order Q, K, V from ``generator``.
    ``d_k`` and ``d_v`` default to ``d``."""
    d = check_int(d, "d", minimum=1)
    d_k = d if d_k is None else check_int(d_k, "d_k", minimum=1)
    d_v = d if d_v is None else check_int(d_v, "d_v", minimum=1)
    check_positive(scale, "scale")
    g, s = as_generator(generator), scale / math.sqrt(d)
    return LayerWeights(*(s * torch.randn(*batch, m, d, generator=g, dtype=dtype) for m in (d_k, d_k, d_v)))


def mc_uniform_deviation(x: torch.Tensor, d_k: int, *, sigma_k2: float, draws: int, generator=None,
                         chunk: int = 20) -> Estimate:
    r"""Monte Carlo of :math:`\frac1{n^2}\|A - U\|_F^2` over ``draws`` draws of :math:`W_Q, W_K` (entries of
    variance ``sigma_k2``, shape ``(d_k, d_v)``) at the fixed input ``x`` ``(n, d_v)``: Noci et al. 2022, Fig. 7
    (Lemma A.7). Softmax attention from :func:`sigprop.self_attention` (log-sum-exp) in the dtype of ``x``; the
    statistic in float64. Compare with :func:`sigprop.theory.uniform_deviation` ``(x, sigma_k2)``."""
    n, d_v = x.shape
    d_k = check_int(d_k, "d_k", minimum=1)
    s = math.sqrt(check_positive(sigma_k2, "sigma_k2"))

    def sample(m, g):           # m weight draws -> (m,) values of ||A - U||^2 / n^2
        wq = s * torch.randn(m, d_k, d_v, generator=g, dtype=x.dtype)
        wk = s * torch.randn(m, d_k, d_v, generator=g, dtype=x.dtype)
        _, A = self_attention(x.expand(m, n, d_v), wq, wk, wk)
        return (A.double() - 1.0 / n).pow(2).sum((-2, -1)) / n**2

    return monte_carlo(sample, check_int(draws, "draws", minimum=2), generator=generator, chunk=chunk,
                       device="cpu", progress=False)


@dataclasses.dataclass(frozen=True)
class QueryValueRatio:
    """:func:`mc_query_value_ratio`: ``log_ratio`` (scalar Estimate: log of mean query over mean value gradient
    norm, delta-method SE), ``query`` and ``value`` (scalar Estimates of the two mean squared norms)."""

    log_ratio: Estimate
    query: Estimate
    value: Estimate


def mc_query_value_ratio(n: int, d: int, rho: float, sigma_x: float, *, runs: int, generator=None,
                         budget: float = 2e7) -> QueryValueRatio:
    r"""The query/value gradient ratio of one layer of **real softmax attention**, Noci et al. 2022, Figs. 11-13.

    ``runs`` independent draws of equicorrelated tokens (``n`` tokens, width ``d``, correlation ``rho``, variance
    ``sigma_x**2``) and of the weights (variance :math:`1/d`); exact squared Jacobian norms by
    :func:`sigprop.softmax_param_grad_sq_norms`. The log ratio of the two means has the delta-method SE
    :math:`\mathrm{sd}(q - r v)/(\sqrt{\mathrm{runs}}\,\bar v\,r)`. Draws are chunked so that the
    ``(chunk, n, max(n, d), d)`` intermediates stay below ``budget`` elements. Compare with
    :func:`sigprop.theory.query_value_log_ratio`."""
    runs = check_int(runs, "runs", minimum=2)
    g = as_generator(generator)
    chunk = max(1, min(runs, int(budget // (n * max(n, d) * d))))
    qs, vs = [], []
    for start in range(0, runs, chunk):
        m = min(chunk, runs - start)
        x = equicorrelated_tokens(m, T=n, d=d, rho=rho, q=sigma_x**2, generator=g, dtype=torch.float64)
        out = softmax_param_grad_sq_norms(x, *layer_weights(m, d=d, generator=g))
        qs.append(out["q"]); vs.append(out["v"])
    q, v = torch.cat(qs), torch.cat(vs)
    r = q.mean() / v.mean()
    se = (q - r * v).std() / (math.sqrt(runs) * v.mean())
    log_ratio = Estimate(r.log(), se / r, runs)
    return QueryValueRatio(log_ratio=log_ratio, query=estimate(q), value=estimate(v))

