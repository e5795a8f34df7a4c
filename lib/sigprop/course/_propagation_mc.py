r"""The signal propagation probability of Bao, Hataya & Karakida 2024 counted and predicted, cell by cell of their
Fig. 5 (``chapters/bao2024/02``).

One *cell* is an eigenvalue distribution :math:`\mathcal N(\mathrm{mean}, \mathrm{scale}^2)` of
:math:`W_{QK} = B\operatorname{diag}(w)B^\top` and a token covariance :math:`\Sigma`: ``draws`` draws of
:math:`W_{QK}` (:func:`sigprop.spectral_qk_matrix`), ``walks`` random walks per draw (Assumption 1,
:func:`sigprop.random_walk_tokens`), temperature :math:`\lambda = \sqrt d`. :func:`mc_propagation_cell` counts
:math:`\rho_i = \mathbb P\{Z_i\in[0,1]\}` for the last query (Definition 1) and evaluates, per draw, the three
predictions the page compares: the Gaussian probability with the exact finite-:math:`T` moments
(:func:`sigprop.theory.signal_propagation_moments`) and Eq. (6) with the printed and the corrected variance
profile (:func:`sigprop.theory.rho_theta` at the draw's :math:`(\xi, \eta)`). It also measures what the true
softmax does with the same logits: the attention entropy of the full :math:`T\times T` matrix, the attention mass
:math:`T\,\mathbb E[S_i]` and the Jacobian diagonal :math:`\mathbb E[S_i(1-S_i)]/\gamma^i_i` (both 1 for uniform
attention).

:meth:`PropagationCell.test` is the curve-level test of a prediction over the :math:`T` positions at the book's
level: its rows are (draw, group of walks) means of the count minus the draw's prediction, independent given the
draws, so that 10 draws split into 2 groups give the 20 rows a test at level 0.001 needs (at least 13).
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch

from ..attention._layer import self_attention                                # requested in the interface
from ..attention._localisation import (                                       # requested in the interface
    gaussian_propagation_probability, last_query_logits, propagation_indicator, qk_traces, rho_theta,
    signal_propagation_moments, spectral_qk_matrix, xi_eta,
)
from ..inputs._tokens import random_walk_tokens                               # requested in the interface
from ..stats._agreement import CurveAgreement, curve_agreement
from ..stats._estimate import Estimate, estimate
from ..stats._measures import attention_entropy
from ..stats._random import as_generator
from ..stats._validate import check_int
from ._tables import LEVEL, N_RESAMPLES

__all__: list[str] = []
__theory__: list[str] = []
__course__ = ["PropagationCell", "mc_propagation_cell"]


@dataclasses.dataclass(frozen=True)
class PropagationCell:
    r"""One cell of Fig. 5 (:func:`mc_propagation_cell`). ``indicator``: :math:`\mathbb 1\{Z_i\in[0,1]\}`,
    ``(draws, walks, T)``; ``gauss``, ``paper``, ``corrected_s``: the predictions per draw, ``(draws, T)``;
    ``xi``, ``eta``: means over the draws; ``entropy``: mean row entropy of the full attention (nats; None when
    not measured); ``mass``, ``gain``: Estimates ``(T,)`` over all walks; ``layer_gap``: the largest difference
    between the last row of :func:`sigprop.self_attention` and ``softmax(omega)`` (float64 rounding: the logits
    counted are those of the attention layer)."""

    indicator: torch.Tensor
    gauss: np.ndarray
    paper: np.ndarray
    corrected_s: np.ndarray
    xi: float
    eta: float
    entropy: float | None
    mass: Estimate
    gain: Estimate
    layer_gap: float

    @property
    def per_draw(self) -> np.ndarray:
        """The counted :math:`\\rho_i` of each draw, ``(draws, T)``."""
        return self.indicator.double().mean(1).numpy()

    @property
    def counted(self) -> Estimate:
        """The counted :math:`\\rho_i` over all walks of the cell, ``(T,)`` (SE over walks)."""
        return estimate(self.indicator.double().reshape(-1, self.indicator.shape[-1]))

    def largest_gap(self, prediction: str) -> float:
        """:math:`\\max_i|\\text{counted} - \\text{prediction}|` with the prediction (``"gauss"``, ``"paper"`` or
        ``"corrected_s"``) averaged over the draws, as the counts are."""
        return float(np.abs(getattr(self, prediction).mean(0) - self.counted.numpy()[0]).max())

    def test(self, prediction: str, *, groups: int = 2) -> CurveAgreement:
        """Curve-level test (level 0.001, sign flips) of a prediction over the positions. Rows: the mean count of
        each of ``groups`` groups of walks of each draw minus that draw's prediction; under a correct prediction
        they are independent with mean zero given the draws. A position counted 0 (or 1) in every walk of the cell
        agrees with a prediction whose mean over the draws is within ``3 / (draws walks)`` of it (the 95 % bound of
        a zero count): its rows are set to 0, as the draws' slightly different predictions would otherwise make a
        spread-free difference of ~1e-5 look like many standard errors; further away, its rows are kept."""
        draws, walks, T = self.indicator.shape
        groups = check_int(groups, "groups", minimum=1, maximum=walks)
        if walks % groups:
            raise ValueError(f"{walks} walks per draw do not split into {groups} equal groups")
        ind, pred = self.indicator.double(), torch.as_tensor(getattr(self, prediction), dtype=torch.float64)
        counts = ind.reshape(draws, groups, walks // groups, T).mean(2)
        rows = (counts - pred[:, None]).reshape(-1, T)
        atol = 3 / (draws * walks)
        constant = ind.amin((0, 1)) == ind.amax((0, 1))                                   # (T,)
        bound = constant & ((pred.mean(0) - ind[0, 0]).abs() <= atol)
        rows[:, bound] = 0.0
        return curve_agreement(rows, 0.0, level=LEVEL, n_resamples=N_RESAMPLES, atol=atol)


def mc_propagation_cell(mean: float, scale: float, *, d: int, T: int, draws: int, walks: int, sigma=None,
                        generator=None, lam: float | None = None, entropy_walks: int = 30) -> PropagationCell:
    """Count and predict :math:`\\rho_i` in one cell (module docstring). Draws from ``generator`` in the order
    :math:`W_{QK}` (``draws``), walks (``draws x walks``); ``sigma`` (``(d, d)`` or None for :math:`I`); temperature
    ``lam`` (default :math:`\\sqrt d`). The entropy of the full attention uses the first ``entropy_walks`` walks of
    each draw (0: not measured)."""
    d, T = check_int(d, "d", minimum=1), check_int(T, "T", minimum=2)
    draws, walks = check_int(draws, "draws", minimum=1), check_int(walks, "walks", minimum=1)
    g, lam = as_generator(generator), math.sqrt(d) if lam is None else float(lam)
    w_qk = spectral_qk_matrix(draws, d=d, mean=mean, scale=scale, generator=g)             # (draws, d, d)
    x = random_walk_tokens(draws, walks, T=T, d=d, sigma=sigma, generator=g, dtype=torch.float64)
    omega = last_query_logits(x, w_qk[:, None], lam)                                       # (draws, walks, T)
    tr = qk_traces(w_qk, sigma)
    trw, trw2 = tr["tr_w"].cpu().numpy()[:, None], tr["tr_w2"].cpu().numpy()[:, None]
    i = np.arange(1, T + 1)[None]
    mu, v = signal_propagation_moments(i, T, tr_w=trw, tr_w2=trw2, lam=lam)
    xi, eta = xi_eta(trw, trw2, lam)
    entropy, layer_gap = None, 0.0
    if entropy_walks:
        _, A = self_attention(x[:, :entropy_walks], w_qk=w_qk[:, None], logit_scale=1 / lam)   # (draws, w, T, T)
        entropy = float(attention_entropy(A).mean())
        layer_gap = float((A[..., -1, :] - torch.softmax(omega[:, :entropy_walks], -1)).abs().max())
    last = torch.softmax(omega, -1).reshape(-1, T)                                          # last row, all walks
    return PropagationCell(
        indicator=propagation_indicator(omega), gauss=np.asarray(gaussian_propagation_probability(mu, v)),
        paper=np.asarray(rho_theta(i / T, xi, eta, form="paper")),
        corrected_s=np.asarray(rho_theta(i / T, xi, eta, form="corrected")), xi=float(np.mean(xi)),
        eta=float(np.mean(eta)), entropy=entropy, layer_gap=layer_gap, mass=estimate(T * last),
        gain=estimate(last * (1 - last) / ((1 / T) * (1 - 1 / T))))
