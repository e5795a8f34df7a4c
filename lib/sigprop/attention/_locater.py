r"""LocATER: localised-attention regularisation (Bao, Hataya & Karakida 2024, Sec. 6).

With ``W_QK = W_Q^T W_K`` (``W_Q, W_K`` of shape ``(d_k, d)``, so that the logits of
:func:`sigprop.self_attention` are ``x W_Q^T W_K x^T``), LocATER adds to the loss

.. math::  R(W_Q, W_K) = \kappa_1 \operatorname{tr}(W_{QK}^\top W_{QK})
                       + \kappa_2 (\operatorname{tr} W_{QK} - 1)^2 ,

shrinking the eigenspectrum scale while holding the mean near one.

Gradients. The paper prints (Sec. 6)

* ``grad_{W_Q} tr(W_QK^T W_QK) = 2 W_K W_K^T W_Q`` and ``grad_{W_K} = 2 W_Q W_Q^T W_K``;
* ``grad_{W_Q} (tr W_QK - 1)^2 = (tr W_QK - 1) tr(W_QK) W_K`` (and ``W_Q`` for ``W_K``).

The first pair is right (``d tr(W_K^T W_Q W_Q^T W_K) = 2 tr(W_Q^T W_K W_K^T dW_Q)``). The
second pair is wrong: since ``d tr(W_Q^T W_K) = tr(dW_Q^T W_K)``, the gradient of
``(tr W_QK - 1)^2`` is ``2 (tr W_QK - 1) W_K`` (and ``2 (tr W_QK - 1) W_Q``); the printed formula
carries a spurious factor ``tr(W_QK)/2``.
:func:`locater_gradients` returns both versions (``form="paper"`` / ``"corrected"``); the tests
and ``chapters/bao2024/03_*`` check them against autograd.

Devices: the penalty and the gradients are computed on the device and in the dtype of ``W_Q, W_K``
(which must share both); :func:`qk_eigen_stats` works in float64 on :func:`sigprop.float64_device`
(the device itself, or the CPU for Apple MPS).
"""
from __future__ import annotations

import enum

import torch

from ..stats._config import float64_device
from ..stats._validate import check_option, check_real, check_same_device, check_tensor, finite_tensor

__all__ = ["locater_penalty", "locater_gradients", "qk_eigen_stats"]
__theory__: list[str] = []


class GradientForm(str, enum.Enum):
    CORRECTED = "corrected"
    PAPER = "paper"


def _check_pair(w_q, w_k):
    check_tensor(w_q, "w_q", ndim_min=2)
    check_tensor(w_k, "w_k", ndim_min=2)
    if w_q.shape != w_k.shape:
        raise ValueError(f"w_q and w_k must have the same shape (..., d_k, d); got {tuple(w_q.shape)} and "
                         f"{tuple(w_k.shape)}")
    check_same_device(w_q=w_q, w_k=w_k)


def locater_penalty(w_q: torch.Tensor, w_k: torch.Tensor, *, kappa1: float, kappa2: float,
                    target: float = 1.0) -> torch.Tensor:
    """``kappa1 tr(W_QK^T W_QK) + kappa2 (tr W_QK - target)^2``, ``W_QK = W_Q^T W_K`` (Bao et al. 2024, Sec. 6).

    ``w_q, w_k (..., d_k, d)`` -> ``(...)``. Differentiable (use it inside a training loss).
    """
    _check_pair(w_q, w_k)
    kappa1, kappa2 = check_real(kappa1, "kappa1"), check_real(kappa2, "kappa2")
    target = check_real(target, "target")
    w_qk = w_q.transpose(-1, -2) @ w_k  # (..., d, d)
    scale = (w_qk * w_qk).sum((-2, -1))
    trace = torch.diagonal(w_qk, dim1=-2, dim2=-1).sum(-1)
    return finite_tensor(kappa1 * scale + kappa2 * (trace - target) ** 2, "the LocATER penalty")


def locater_gradients(w_q: torch.Tensor, w_k: torch.Tensor, *, form: str = "corrected",
                      target: float = 1.0) -> dict:
    """Closed-form gradients of the two LocATER terms with respect to ``W_Q`` and ``W_K``.

    Returns ``{"scale_q", "scale_k", "mean_q", "mean_k"}``: gradients of ``tr(W_QK^T W_QK)`` and
    of ``(tr W_QK - target)^2``. ``form="paper"`` gives the formulas printed in Sec. 6 (the mean
    terms there are wrong); ``form="corrected"`` the right ones. Shapes as ``w_q``.
    """
    _check_pair(w_q, w_k)
    f = check_option(form, GradientForm, "form")
    target = check_real(target, "target")
    w_qk = w_q.transpose(-1, -2) @ w_k
    trace = torch.diagonal(w_qk, dim1=-2, dim2=-1).sum(-1)[..., None, None]
    scale_q = 2 * w_k @ w_k.transpose(-1, -2) @ w_q
    scale_k = 2 * w_q @ w_q.transpose(-1, -2) @ w_k
    if f is GradientForm.PAPER:
        mean_q = (trace - target) * trace * w_k
        mean_k = (trace - target) * trace * w_q
    else:
        mean_q = 2 * (trace - target) * w_k
        mean_k = 2 * (trace - target) * w_q
    out = {"scale_q": scale_q, "scale_k": scale_k, "mean_q": mean_q, "mean_k": mean_k}
    return {k: finite_tensor(v, f"the gradient {k}") for k, v in out.items()}


def qk_eigen_stats(w_qk: torch.Tensor) -> dict:
    """Eigenspectrum summaries of ``W_QK`` used in Sec. 6--7: ``mean = tr W_QK``,
    ``scale = tr(W_QK^T W_QK)`` (the paper's "scale" for asymmetric ``W_QK``) and
    ``variance = d tr(sym^2) - tr(sym)^2`` of the symmetrised matrix (``d^2`` times the eigenvalue
    variance, Eq. (8)). Float64 tensors on :func:`sigprop.float64_device` of ``w_qk``'s device."""
    check_tensor(w_qk, "w_qk", ndim_min=2)
    if w_qk.shape[-1] != w_qk.shape[-2]:
        raise ValueError(f"w_qk must be square, shape (..., d, d); got {tuple(w_qk.shape)}")
    a = w_qk.to(float64_device(w_qk.device), torch.float64)
    d = a.shape[-1]
    sym = 0.5 * (a + a.transpose(-1, -2))
    tr = torch.diagonal(a, dim1=-2, dim2=-1).sum(-1)
    tr_sym2 = (sym * sym).sum((-2, -1))
    return {"mean": tr, "scale": (a * a).sum((-2, -1)), "variance": d * tr_sym2 - tr**2}
