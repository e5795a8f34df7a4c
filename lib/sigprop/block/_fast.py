"""The fast forward kernel of random transformers (no autograd).

The same computation as :func:`sigprop.block._network.forward_reference`, reorganised for speed: sequences
flattened into one batched matmul per initialisation, Q/K/V (and the value bias) from one fused matmul,
biases fused into the matmul (skipped when exactly zero), in-place elementwise work on fresh
intermediates, and each block's output written straight into the result. It shares the LayerNorm and softmax of
``sigprop.attention._layer`` (one precision policy). ``tests/test_block.py`` checks it against the reference
to float rounding for every norm, activation, head count, mask, gain control, output projection and
attention bias.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ..attention import attention_weights, normalise_tokens_

_ACTIVATIONS_ = {"relu": torch.relu_, "tanh": torch.tanh_, "linear": lambda z: z, "gelu": F.gelu,
                 "gelu_tanh": lambda z: F.gelu(z, approximate="tanh")}


def _combine_(branch, x, skip, weight):
    """``skip * x + weight * branch``, in place on the fresh ``branch``."""
    if weight != 1.0:
        branch.mul_(weight)
    if skip != 0.0:
        branch.add_(x, alpha=skip)
    return branch


def _linear(x2, w, b):
    """``x2 (n, m, d) @ w^T (n, d, k) + b (n, k)``; the bias is fused, and skipped when all zero."""
    if bool(b.any()):
        return torch.baddbmm(b.unsqueeze(1), x2, w.transpose(1, 2))
    return torch.bmm(x2, w.transpose(1, 2))


def forward_fast(x, params, config, keep, measured: bool):
    """``x (n, b, T, d)`` -> all layers ``(depth + 1, n, b, T, d)``, or ``keep`` of each layer if ``measured``."""
    c = config
    n, b, T, d = x.shape
    H, dk, dv = c.heads, c.head_dim, c.value_dim
    act = _ACTIVATIONS_[c.activation]
    if measured:
        outs = [keep(x)]
    else:
        result = torch.empty((params.depth + 1, n, b, T, d), dtype=x.dtype, device=x.device)
        result[0] = x
    for l in range(params.depth):
        # ---- attention
        xin = normalise_tokens_(x.clone(), c.ln_center) if c.norm == "pre" else x
        w = torch.cat([params.w_q[:, l].reshape(n, H * dk, d), params.w_k[:, l].reshape(n, H * dk, d),
                       params.w_v[:, l].reshape(n, H * dv, d)], 1)
        bias = torch.cat([params.b_v.new_zeros(n, 2 * H * dk), params.b_v[:, l].reshape(n, H * dv)], 1)
        qkv = _linear(xin.reshape(n, b * T, d), w, bias).view(n, b, T, -1)
        q, k, v = qkv.split([H * dk, H * dk, H * dv], -1)
        q = q.unflatten(-1, (H, dk)).transpose(2, 3)  # (n, b, H, T, dk)
        k = k.unflatten(-1, (H, dk)).transpose(2, 3)
        v = v.unflatten(-1, (H, dv)).transpose(2, 3)
        if q.dtype in (torch.float16, torch.bfloat16):  # logits accumulate in >= float32
            q, k = q.float(), k.float()
        A = attention_weights(torch.matmul(q, k.transpose(-1, -2)), scale=c.scale, causal=c.causal).to(v.dtype)
        if c.gain_control:
            v = v - v.mean(-2, keepdim=True)
        o = torch.matmul(A, v).transpose(2, 3).reshape(n, b, T, H * dv)
        if c.has_out_proj:
            o = _linear(o.reshape(n, b * T, d), params.w_o[:, l], params.b_o[:, l]).view(n, b, T, d)
        elif bool(params.b_o[:, l].any()):
            o = o + params.b_o[:, l, None, None, :]
        o = _combine_(o, x, c.alpha_sa, c.branch_sa)
        x = normalise_tokens_(o, c.ln_center) if c.norm == "post" else o
        # ---- MLP
        if c.mlp:
            xin = normalise_tokens_(x.clone(), c.ln_center) if c.norm == "pre" else x
            h = act(_linear(xin.reshape(n, b * T, d), params.w1[:, l], params.b1[:, l]))
            o = _linear(h, params.w2[:, l], params.b2[:, l]).view(n, b, T, d)
            o = _combine_(o, x, c.alpha_mlp, c.branch_mlp)
            x = normalise_tokens_(o, c.ln_center) if c.norm == "post" else o
        if measured:
            outs.append(keep(x))
        else:
            result[l + 1] = x
            x = result[l + 1]
    return torch.stack(outs) if measured else result
