r"""The attention part of a block: its forward (random network) and its Gaussian maps, side by side.

Forward (:func:`attention_forward`), tokens ``x (n, b, T, d)``, head ``h`` of ``heads``, key/value group
``g(h) = h // (heads / kv_heads)`` (grouped-query attention; HF's ``repeat_kv``)::

    Q_h = W_Q^h x + b_Q^h,  K_g = W_K^g x + b_K^g,  V_g = W_V^g x + b_V^g
    (RoPE)  Q_h, K_g <- R_t Q_h, R_s K_g on the first int(d_k rope_fraction) dimensions
    A_h = softmax(logit_scale Q_h K_g(h)^T)        (causal mask; >= float32, sigprop.attention_weights)
    SA(x) = W_O concat_h(A_h V_g(h)) + b_O         (values centred along the sequence with gain control)

RoPE (Su et al. 2021) in HuggingFace's convention: dimension ``i < r/2`` is paired with ``i + r/2``
(``rotate_half``) and turned by ``t theta^(-2i/r)`` at position ``t``; the angles are computed in float32
exactly as ``transformers`` computes them (so this forward equals a HF Llama's on the same weights to
rounding, in float64 too).

Maps. Giorlandino & Goldt 2025 (App. B.2.3, B.6.1, Eqs. (23), (34)): ``q_SA = sigma_v2 (p + (q-p) Y2)``,
``p_SA = sigma_v2 (p + (q-p) Y_p)`` (``sigprop.attention``'s ``attention_map_kernel``: T -> infinity or
exact finite T), then ``W_O`` multiplies by ``sigma_o2`` and the biases add ``sigma_bv2`` (carried by every
row, which sums to one; removed by gain control) and ``sigma_bo2``. Parts beyond the documents:

* **grouped-query heads** do not enter the mean map: each head's output moments are those of one head with
  its own keys and values; sharing them correlates heads, which changes fluctuations only
  (``tests/test_components.py`` measures both);
* **query/key biases** (Qwen2): the key bias adds one logit to a whole row (softmax-invariant); the query
  bias adds ``b_Q . W_K x_s``, so the logits of row ``t`` have the covariance of tokens with overlaps
  ``(q + e, p + e)``, ``e = sigma_bqk2 / (sigma_qk2 d)`` (:attr:`sigprop.BlockConfig.qk_bias`): ``Y2, Y_p`` are
  the REM's at ``(q + e, p + e)`` while the values keep ``(q, p)``;
* **RoPE** (the r2-theory report on issue 25, Eq. (R1)): for fixed tokens ``Cov(l_ts, l_t's') = sigma_a^2 G_tt'
  G_ss' c((s - t) - (s' - t'))`` with ``c(D) = (2/d_k) sum_k cos(D theta_k)``: the part of the logits shared by
  all keys, which the softmax removes without positions, becomes a field over key positions, and after one
  layer the Gram matrix is Toeplitz, not equicorrelated. No closed form of ``Y2`` or ``Y_p`` is known (the
  effective-REM and GREM closures are off by tens of percent at ``p >= 0.9``), so the ``(q, p)`` maps refuse
  ``positions="rope"``; the Gram map handles it exactly by sampling the logits' finite-``d_k`` law (Eq. (R2)).

The Gram-matrix map (:func:`attention_gram`) averages ``A H A^T`` by Monte Carlo over the logits alone (no width,
no values): without RoPE Gaussian logits ``a = sigma_a L_Q Z L^T`` (``L L^T = H``, ``L_Q L_Q^T = H + e``; App. B.1,
the ``d_k -> infinity`` law); with RoPE the exact law at the config's ``d_k``: ``l_ts = (sigma_a / sqrt(d_k))
(R_t u_t) . (R_s k_s)`` with the query and key vectors ``u = L_Q Z``, ``k = L_Q Z'`` (``Z, Z'`` standard normal ``(T,
d_k)``; both biases enter, as RoPE turns the key bias with its position). See ``sigprop.block._gram``.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from ..attention import attention_map_kernel, attention_weights
from ..stats._config import _work_dtype
from ..stats._validate import check_int
from ._components import linear

__all__ = ["alibi_slopes"]


def rope_tables(T: int, rot: int, theta: float, device, dtype, freqs=None):
    """``cos, sin (T, rot)`` of HF's rotary embedding (angles in float32 as ``transformers`` computes them);
    ``freqs`` the inverse frequencies of the pairs where they are not ``theta^(-2i/rot)``."""
    if freqs is not None:
        inv_freq = torch.tensor(freqs, dtype=torch.float32, device=device)
    else:
        inv_freq = 1.0 / (theta ** (torch.arange(0, rot, 2, dtype=torch.int64, device=device).float() / rot))
    angles = torch.arange(T, device=device).float()[:, None] * inv_freq[None, :]
    emb = torch.cat([angles, angles], -1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def apply_rope(x, cos, sin):
    """Rotate the first ``cos.shape[-1]`` dimensions of ``x (..., T, d_k)`` (HF ``apply_rotary_pos_emb``)."""
    rot = cos.shape[-1]
    xr, xp = x[..., :rot], x[..., rot:]
    x1, x2 = xr[..., : rot // 2], xr[..., rot // 2:]
    out = xr * cos + torch.cat([-x2, x1], -1) * sin
    return torch.cat([out, xp], -1) if xp.shape[-1] else out


def qk_normalise(x, gain, eps):
    """QK-norm: ``x / sqrt(mean x^2 + eps) * gain`` over the last axis in at least float32 (HF's RMSNorm); ``gain``
    broadcast, of last size 0 for unit gains."""
    w = x.to(_work_dtype(x.dtype))
    y = (w * torch.rsqrt(w.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)
    return y if gain.shape[-1] == 0 else y * gain


def attention_forward(x, p, l, c, *, inplace=False, record=None, tau=1.0):
    """Self-attention of block ``l`` on ``x (n, b, T, d)`` -> ``(n, b, T, d)``.

    ``record``: a list to which ``dict(attention (n, b, H, T, T), logits, values (n, b, G, T, d_v))`` is
    appended; ``tau`` multiplies the logit scale (Noci et al. 2022, Eq. (19)); ``inplace`` skips all-zero
    biases (the fast kernel; no autograd)."""
    n, b, T, d = x.shape
    H, G, dk, dv = c.heads, c.group_count, c.head_dim, c.value_dim
    w = torch.cat([p.w_q[:, l].reshape(n, H * dk, d), p.w_k[:, l].reshape(n, G * dk, d),
                   p.w_v[:, l].reshape(n, G * dv, d)], 1)
    bias = torch.cat([p.b_q[:, l].reshape(n, H * dk), p.b_k[:, l].reshape(n, G * dk), p.b_v[:, l].reshape(n, G * dv)], 1)
    q, k, v = linear(x, w, bias, skip_zero_bias=inplace).split([H * dk, G * dk, G * dv], -1)
    if c.qk_norm == "all":     # OLMo2: over the whole projection, before the heads are split
        q = qk_normalise(q, p.q_gain[:, l, None, None], c.qk_norm_eps)
        k = qk_normalise(k, p.k_gain[:, l, None, None], c.qk_norm_eps)
    q = q.unflatten(-1, (G, H // G, dk)).permute(0, 1, 3, 4, 2, 5)   # (n, b, G, H/G, T, dk)
    k = k.unflatten(-1, (G, 1, dk)).permute(0, 1, 3, 4, 2, 5)        # (n, b, G, 1, T, dk)
    if c.qk_norm == "head":    # Qwen3, Gemma3: each head's d_k features
        gq, gk = (g[:, l, None, None, None, None] for g in (p.q_gain, p.k_gain))
        q, k = qk_normalise(q, gq, c.qk_norm_eps), qk_normalise(k, gk, c.qk_norm_eps)
    v = v.unflatten(-1, (G, 1, dv)).permute(0, 1, 3, 4, 2, 5)        # (n, b, G, 1, T, dv)
    if c.positions == "rope":
        cos, sin = rope_tables(T, c.rotary_dims, c.rope_theta, x.device, q.dtype, c.rope_freqs)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
    work = _work_dtype(q.dtype)   # logits accumulate in >= float32
    scale = c.scale * tau
    if 0.0 < abs(scale) <= 1e4:   # the scale on the queries (T d_k numbers), not on the T^2 logits (issue 37, item 11)
        q, scale = q.to(work) * scale, 1.0
    scores = q.to(work) @ k.to(work).transpose(-1, -2)               # (n, b, G, H/G, T, T)
    if c.logit_cap is not None:   # Gemma2: c tanh(a / c) of the scaled logits, then the masked softmax
        scores, scale = c.logit_cap * torch.tanh(scores * (scale / c.logit_cap)), 1.0
    if c.alibi_slopes is not None:   # m_h s for key s: -m_h (t - s) up to a row constant the softmax removes (HF)
        slopes = torch.tensor(c.alibi_slopes, dtype=scores.dtype, device=scores.device).view(G, H // G, 1, 1)
        scores, scale = scores * scale + slopes * torch.arange(T, dtype=scores.dtype, device=scores.device), 1.0
    A = _weights(scores, c, scale).to(v.dtype)
    if c.gain_control:
        v = v - v.mean(-2, keepdim=True)
    o = (A @ v).flatten(2, 3)                                        # (n, b, H, T, dv): head h = g H/G + j
    if record is not None:
        record.append(dict(attention=A.flatten(2, 3), logits=scale * scores.flatten(2, 3), values=v.squeeze(3)))
    o = o.transpose(2, 3).reshape(n, b, T, H * dv)
    if c.has_out_proj:
        return linear(o, p.w_o[:, l], p.b_o[:, l], skip_zero_bias=inplace)
    if inplace and not bool(p.b_o[:, l].any()):
        return o
    return o + p.b_o[:, l, None, None, :]


def alibi_slopes(heads: int) -> tuple:
    """ALiBi's slope of each head (Press et al. 2022), as HuggingFace computes them for Bloom and Falcon: ``2^(-8 i / n)``
    for ``i = 1..n`` heads when ``n`` is a power of 2, else the ``n' = 2^floor(log2 n)`` of those and every other of the
    ``2 n'`` series for the rest (float32 values)."""
    n = check_int(heads, "heads", minimum=1, maximum=2**16)
    closest = 2 ** math.floor(math.log2(n))
    base = torch.tensor(2 ** (-(2 ** -(math.log2(closest) - 3))), dtype=torch.float32)
    slopes = torch.pow(base, torch.arange(1, 1 + closest, dtype=torch.int32))
    if closest != n:
        extra = torch.tensor(2 ** (-(2 ** -(math.log2(2 * closest) - 3))), dtype=torch.float32)
        rest = min(closest, n - closest)
        slopes = torch.cat([slopes, torch.pow(extra, torch.arange(1, 1 + 2 * rest, 2, dtype=torch.int32))])
    return tuple(float(m) for m in slopes)


def allowed_keys(T: int, c, device=None) -> torch.Tensor | None:
    """``(T, T)`` bool, True where query ``t`` may see key ``s``: ``s <= t`` (causal) and ``s > t - window`` (a
    sliding window, HF's ``sliding_window_overlay``); None without a mask."""
    if not c.causal:
        return None
    i = torch.arange(T, device=device)
    allowed = i[None, :] <= i[:, None]
    return allowed if c.window is None else allowed & (i[None, :] > i[:, None] - c.window)


def _weights(scores, c, scale):
    """``softmax_s(scale * scores)`` under the config's mask, in at least float32 (:func:`sigprop.attention_weights`
    for the causal or unmasked row; a window masks before and after scaling, so ``scale = 0`` stays finite)."""
    if c.window is None:
        return attention_weights(scores, scale=scale, causal=c.causal)
    allowed = allowed_keys(scores.shape[-1], c, scores.device)
    w = scores.to(_work_dtype(scores.dtype)).masked_fill(~allowed, float("-inf"))
    w = (w - w.amax(-1, keepdim=True)) * scale
    return torch.softmax(w.masked_fill(~allowed, float("-inf")), dim=-1)


def attention_overlaps(q, p, P, T):
    """Attention map ``(q, p) -> (q_SA, p_SA)`` of the module docstring on broadcast arrays; ``P`` holds ``beta,
    sigma_v2, gain_control, cross_overlap, qk_bias, qk_norm, sigma_o2, sigma_bv2, sigma_bo2``; ``T`` None = T ->
    infinity."""
    e, gc, qkn = P["qk_bias"], P["gain_control"], P.get("qk_norm", False)
    kw = dict(T=T, cross=P["cross_overlap"])
    if not np.any(e) and not qkn:
        qa, pa = attention_map_kernel(q, p, P["beta"], P["sigma_v2"], gc, **kw)
    else:
        # REM moments at other overlaps than the values': the query-biased (q + e, p + e), or with a QK-norm the
        # cosines (1, p/q) at beta_eff = scale sqrt(d_k / log T) (BlockConfig.beta); values at (q, p). The
        # gain-control form returns (q_r - p_r)(Y - 1/T) without the value mean, rescaled to the values' q - p
        qr, pr = (np.ones_like(q), p / q) if qkn else (q + e, p + e)
        yq, yp = attention_map_kernel(qr, pr, P["beta"], 1.0, True, **kw)
        if qkn:
            yq, yp = q * yq, q * yp
        mean = 0.0 if gc else p + (q - p) * (0.0 if T is None else 1.0 / np.asarray(T, dtype=float))
        qa, pa = P["sigma_v2"] * (mean + yq), P["sigma_v2"] * (mean + yp)
    bv = 0.0 if gc else P["sigma_bv2"]   # gain control removes the value bias
    return P["sigma_o2"] * (qa + bv) + P["sigma_bo2"], P["sigma_o2"] * (pa + bv) + P["sigma_bo2"]


#: Logit draws per chunk of the Gram map's Monte Carlo (memory: chunk x T x T float64).
_CHUNK = 256


def _factor(H):
    lam, U = np.linalg.eigh(H)
    return torch.from_numpy(U * np.sqrt(np.clip(lam, 0.0, None)))   # H = L L^T (PSD part)


def _logit_sampler(H, c):
    """``draw(m, g) -> (m, T, T)`` logits in antithetic pairs (``a, -a``) for the attention on input Gram ``H``: the
    Gaussian law of App. B.1 (``d_k -> infinity``) for plain logits; the exact law at the config's ``d_k`` -- query
    and key vectors drawn, normalised (QK-norm), turned (RoPE) -- where either is present; soft-capped after."""
    T = H.shape[0]
    cap = (lambda a: a) if c.logit_cap is None else (lambda a: c.logit_cap * torch.tanh(a / c.logit_cap))
    if c.positions != "rope" and c.qk_norm == "none":
        sigma_a = float(np.sqrt(c.logit_var))
        L = _factor(H)
        Lq = L if c.qk_bias == 0 else _factor(H + c.qk_bias)

        def draw(m, g):
            Z = torch.randn(m // 2, T, T, generator=g, dtype=torch.float64)
            return cap(sigma_a * (Lq @ torch.cat([Z, -Z]) @ L.T))
        return draw
    dk, s = c.head_dim, c.qk_variance * c.d
    # absolute units: a query (key) coordinate has covariance s H + sigma_bq2 (s H + sigma_bk2) over the tokens, so
    # biases without weights (s = 0) still give RoPE logits; the key bias is turned by its position and stays
    U_factor = _factor(s * H + c.sigma_bqk2)
    K_factor = U_factor if c.key_bias_variance == c.sigma_bqk2 else _factor(s * H + c.key_bias_variance)
    # QK-norm over a head's d_k features, or over all heads' (OLMo2: the first head's share of H d_k or G d_k)
    wq, wk = (dk, dk) if c.qk_norm != "all" else (c.heads * dk, c.group_count * dk)
    if c.positions == "rope":
        cos, sin = rope_tables(T, c.rotary_dims, c.rope_theta, "cpu", torch.float64, c.rope_freqs)
        turn = lambda x: apply_rope(x, cos, sin)   # noqa: E731
    else:
        turn = lambda x: x                          # noqa: E731

    def vectors(factor, Z):
        v = factor @ Z
        if c.qk_norm != "none":
            v = v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + max(c.qk_norm_eps, 1e-300))
        return turn(v[..., :dk])

    def draw_vectors(m, g):
        Z = torch.randn(m // 2, T, wq, generator=g, dtype=torch.float64)
        K = vectors(K_factor, torch.randn(m // 2, T, wk, generator=g, dtype=torch.float64))
        a = cap(c.scale * (vectors(U_factor, Z) @ K.transpose(-1, -2)))
        return torch.cat([a, -a])
    return draw_vectors


def attention_gram(H, c, samples: int, g: torch.Generator):
    """``(sigma_o2 (sigma_v2 E[A H' A^T] + sigma_bv2) + sigma_bo2, E[sum_s A_ts^2])`` for the attention on input
    Gram ``H (T, T)`` (``H' = C H C`` with gain control), by ``samples`` antithetic logit draws."""
    T = H.shape[0]
    draw = _logit_sampler(H, c)
    Hv = H
    if c.gain_control:
        C = np.eye(T) - 1.0 / T
        Hv = C @ H @ C
    Hv = torch.from_numpy(Hv)
    allowed = allowed_keys(T, c)
    mask = None if allowed is None else ~allowed
    M = torch.zeros(T, T, dtype=torch.float64)
    y2 = torch.zeros(T, dtype=torch.float64)
    done = 0
    while done < samples:
        m = min(_CHUNK, samples - done) // 2 * 2
        a = draw(m, g)
        if c.alibi_slopes is not None:   # heads in turn, one per antithetic pair: the mean over heads
            slopes = torch.tensor(c.alibi_slopes, dtype=torch.float64)
            heads = slopes[(done // 2 + torch.arange(m // 2)) % len(slopes)]
            field = heads[:, None, None] * torch.arange(T, dtype=torch.float64)
            a = a + torch.cat([field, field])
        if mask is not None:
            a = a.masked_fill(mask, float("-inf"))
        A = torch.softmax(a, dim=-1)
        M += (A @ Hv @ A.transpose(-1, -2)).sum(0)
        y2 += A.pow(2).sum(-1).sum(0)
        done += m
    bv = 0.0 if c.gain_control else c.sigma_bv2
    S = c.out_variance * (c.sigma_v2 * (M / done).numpy() + bv) + c.sigma_bo2
    return S, (y2 / done).numpy()
