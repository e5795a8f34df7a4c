import math

import pytest
import torch

import sigprop as sp


def _w(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_attention_matches_reference_formula():
    x, wq, wk, wv = _w(2, 5, 8), _w(4, 8, seed=1), _w(4, 8, seed=2), _w(3, 8, seed=3)
    out, A = sp.self_attention(x, wq, wk, wv)
    logits = (x @ wq.T) @ (x @ wk.T).transpose(-1, -2) / math.sqrt(4)
    ref_A = torch.exp(logits) / torch.exp(logits).sum(-1, keepdim=True)
    assert torch.allclose(A, ref_A, atol=1e-12)
    assert torch.allclose(out, ref_A @ (x @ wv.T), atol=1e-12)


def test_joint_wqk_equals_factored():
    x, wq, wk = _w(5, 6), _w(6, 6, seed=1), _w(6, 6, seed=2)
    _, a1 = sp.self_attention(x, wq, wk, logit_scale=0.3)
    _, a2 = sp.self_attention(x, w_qk=wq.T @ wk, logit_scale=0.3)
    assert torch.allclose(a1, a2, atol=1e-12)


def test_causal_mask_and_rows_sum_to_one():
    x, wq, wk = _w(7, 4), _w(4, 4, seed=1), _w(4, 4, seed=2)
    _, A = sp.self_attention(x, wq, wk, causal=True)
    assert torch.allclose(A.sum(-1), torch.ones(7, dtype=torch.float64))
    assert torch.all(A.triu(1) == 0)
    assert A[0, 0] == 1


def test_gain_control_removes_uniform_output():
    # with zero logits attention is uniform, so gain-controlled output vanishes exactly
    x = _w(6, 4)
    zero = torch.zeros(4, 4, dtype=torch.float64)
    out, _ = sp.self_attention(x, zero, zero, gain_control=True)
    assert torch.allclose(out, torch.zeros_like(out), atol=1e-12)


def test_softmax_is_stable_for_huge_logits():
    x = _w(5, 4) * 1e3
    _, A = sp.self_attention(x, _w(4, 4, seed=1), _w(4, 4, seed=2))
    assert torch.isfinite(A).all() and torch.allclose(A.sum(-1), torch.ones(5, dtype=torch.float64))


def test_multihead_by_broadcasting():
    x, wq, wk = _w(3, 5, 8), _w(2, 4, 8, seed=1), _w(2, 4, 8, seed=2)
    _, A = sp.self_attention(x[:, None], wq, wk)
    assert A.shape == (3, 2, 5, 5)
    _, A0 = sp.self_attention(x, wq[0], wk[0])
    assert torch.allclose(A[:, 0], A0)


def test_layer_norm_rms():
    y = sp.layer_norm(_w(3, 10))
    assert torch.allclose(y.pow(2).mean(-1), torch.ones(3, dtype=torch.float64))
    assert torch.isfinite(sp.layer_norm(torch.zeros(2, 4))).all()


@pytest.mark.parametrize("kwargs, match", [
    (dict(w_q=_w(4, 7), w_k=_w(4, 8)), "w_q must have shape"),
    (dict(w_q=_w(4, 8), w_k=_w(3, 8)), "share d_k"),
    (dict(w_qk=_w(8, 8), w_q=_w(4, 8), w_k=_w(4, 8)), "either w_qk"),
    (dict(), "needs w_q and w_k"),
])
def test_attention_bad_inputs(kwargs, match):
    with pytest.raises(ValueError, match=match):
        sp.self_attention(_w(5, 8), **kwargs)
