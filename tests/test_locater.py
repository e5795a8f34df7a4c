"""Tests for sigprop.attention._locater: LocATER (Bao, Hataya & Karakida 2024, Sec. 6) against autograd.

Exact identities in float64 with the tolerance table sp.TOL.
"""
from __future__ import annotations

import pytest
import torch

from sigprop.attention._locater import locater_gradients, locater_penalty, qk_eigen_stats
from sigprop.stats._validate import TOL
from test_localisation import DeviceAudit, meta_is_mps  # noqa: F401  (meta stands in for an accelerator)

RTOL, ATOL = TOL[torch.float64]
RTOL, ATOL = max(RTOL, 1e-9), max(ATOL, 1e-10)  # sums of O(d^3) products: float64 rounding ~1e-13 relative


def _autograd(w_q, w_k, kappa1, kappa2, target=1.0):
    q = w_q.clone().requires_grad_(True)
    k = w_k.clone().requires_grad_(True)
    locater_penalty(q, k, kappa1=kappa1, kappa2=kappa2, target=target).sum().backward()
    return q.grad, k.grad


@pytest.mark.parametrize("shape", [(6, 6), (3, 4, 6), (2, 5, 7)])
def test_corrected_gradients_match_autograd(shape):
    g = torch.Generator().manual_seed(sum(shape))
    w_q = torch.randn(*shape, generator=g, dtype=torch.float64) / shape[-1] ** 0.5
    w_k = torch.randn(*shape, generator=g, dtype=torch.float64) / shape[-1] ** 0.5
    f = locater_gradients(w_q, w_k, form="corrected", target=0.7)
    gq, gk = _autograd(w_q, w_k, 1.0, 0.0)
    assert torch.allclose(f["scale_q"], gq, rtol=RTOL, atol=ATOL)
    assert torch.allclose(f["scale_k"], gk, rtol=RTOL, atol=ATOL)
    gq, gk = _autograd(w_q, w_k, 0.0, 1.0, target=0.7)
    assert torch.allclose(f["mean_q"], gq, rtol=RTOL, atol=ATOL)
    assert torch.allclose(f["mean_k"], gk, rtol=RTOL, atol=ATOL)


def test_paper_scale_gradients_right_mean_gradients_wrong():
    g = torch.Generator().manual_seed(3)
    d = 8
    w_q = torch.randn(d, d, generator=g, dtype=torch.float64)
    w_k = torch.randn(d, d, generator=g, dtype=torch.float64)
    p = locater_gradients(w_q, w_k, form="paper")
    gq, gk = _autograd(w_q, w_k, 1.0, 0.0)
    assert torch.allclose(p["scale_q"], gq, rtol=RTOL, atol=ATOL)
    assert torch.allclose(p["scale_k"], gk, rtol=RTOL, atol=ATOL)
    gq, gk = _autograd(w_q, w_k, 0.0, 1.0)
    rel = (p["mean_q"] - gq).norm() / gq.norm()
    tr = torch.trace(w_q.T @ w_k)
    assert rel > 0.1
    # the printed formula is the true gradient times tr(W_QK)/2
    assert torch.allclose(p["mean_q"], gq * tr / 2, rtol=RTOL, atol=ATOL)
    assert torch.allclose(p["mean_k"], gk * tr / 2, rtol=RTOL, atol=ATOL)


def test_penalty_value_and_stats():
    w_q = torch.eye(3, dtype=torch.float64)
    w_k = 2 * torch.eye(3, dtype=torch.float64)
    # W_QK = 2 I: tr(W^T W) = 12, tr W = 6
    val = locater_penalty(w_q, w_k, kappa1=0.5, kappa2=2.0)
    assert float(val) == pytest.approx(0.5 * 12 + 2.0 * 25)
    st = qk_eigen_stats(w_q.T @ w_k)
    assert float(st["mean"]) == 6 and float(st["scale"]) == 12 and float(st["variance"]) == pytest.approx(0.0)


def test_validation():
    with pytest.raises(ValueError, match="w_q and w_k"):
        locater_penalty(torch.zeros(3, 4), torch.zeros(4, 4), kappa1=1.0, kappa2=1.0)
    with pytest.raises(ValueError, match="form"):
        locater_gradients(torch.zeros(3, 3), torch.zeros(3, 3), form="autograd")
    with pytest.raises(TypeError, match="w_q"):
        locater_penalty([[1.0]], torch.zeros(1, 1), kappa1=1.0, kappa2=1.0)


def test_devices_follow_the_inputs():
    """Penalty and gradients stay on the device of W_Q, W_K (meta stands in for CUDA; no CPU tensor made)."""
    w_q = torch.randn(3, 4, 6, device="meta")
    w_k = torch.randn(3, 4, 6, device="meta")
    with DeviceAudit() as audit:
        pen = locater_penalty(w_q, w_k, kappa1=1.0, kappa2=0.5)
        grads = locater_gradients(w_q, w_k)
        stats = qk_eigen_stats(w_q.transpose(-1, -2) @ w_k)
    assert pen.device.type == "meta" and pen.shape == (3,)
    assert all(v.device.type == "meta" and v.shape == w_q.shape for v in grads.values())
    assert stats["mean"].device.type == "meta" and stats["mean"].dtype == torch.float64
    assert not audit.mixed and not audit.cpu_created and not audit.to_cpu, (audit.mixed, audit.cpu_created)
    with DeviceAudit(), pytest.raises(ValueError, match="one device"):
        locater_penalty(w_q, torch.zeros(3, 4, 6), kappa1=1.0, kappa2=1.0)


def test_eigen_stats_in_float64_off_a_device_without_it(meta_is_mps):
    """On MPS (no float64) qk_eigen_stats computes in float64 on the CPU."""
    with DeviceAudit() as audit:
        stats = qk_eigen_stats(torch.randn(5, 5, device="meta"))
    assert stats["scale"].device.type == "cpu" and stats["scale"].dtype == torch.float64
    assert not audit.float64_on_meta, audit.float64_on_meta
