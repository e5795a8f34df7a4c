r"""Cross-token covariance of attention outputs, measured (Aghajanyan 2025).

The Monte Carlo side of ``sigprop.attention._covariance`` (the theory): measures with standard errors
(:func:`covariance_matrix`, :func:`common_mode_energy`, :func:`pearson`), the two terms of the law of
total covariance (:func:`total_covariance_terms`, Section 2) and the value-correlation experiment
(:func:`mc_value_correlation`, Section 8; the post's setting is ``sigprop.presets.AGHAJANYAN_SEC8``),
batched over initialisations and logit scales. Used in ``chapters/aghajanyan2025``.
"""
from __future__ import annotations

import dataclasses
import math

import torch

from ._layer import self_attention, softmax_attention
from ..stats._config import float64_device
from ._covariance import _t64
from ..stats._estimate import Estimate
from ..stats._random import as_generator
from ..stats._validate import check_int, check_memory, check_tensor

__all__ = [
    "common_mode_energy",
    "pearson",
    "total_covariance_terms",
    "logit_subspace_split",
    "ValueCorrelation",
    "mc_value_correlation",
    "covariance_matrix",
]


def covariance_matrix(y: torch.Tensor, dim: int = 0) -> torch.Tensor:
    r"""Unbiased sample covariance of the entries of ``y`` over the sample axis ``dim``.

    ``y`` (..., samples, N) with ``dim=-2`` or (samples, N) with ``dim=0``; returns (..., N, N)
    in float64.
    """
    check_tensor(y, "y", ndim_min=2)
    if isinstance(dim, bool) or not isinstance(dim, int) or not -y.ndim <= dim < y.ndim:
        raise ValueError(f"dim must be an axis of y (shape {tuple(y.shape)}); got {dim!r}")
    x = y.detach().to(float64_device(y.device), torch.float64).movedim(dim, -2)
    n = x.shape[-2]
    if n < 2:
        raise ValueError(f"need at least 2 samples; got {n}")
    xc = x - x.mean(-2, keepdim=True)
    return xc.transpose(-1, -2) @ xc / (n - 1)


def common_mode_energy(y: torch.Tensor, *, vector: bool = False) -> Estimate:
    r"""Monte Carlo common-mode energy :math:`\mathrm{Var}(\bar Y)` with its standard error.

    Aghajanyan 2025, Section 11. ``y`` (..., samples, N): scalar projections :math:`Y_j=u^\top V_j`.
    With ``vector=True``, ``y`` is (..., samples, N, d_v) and the trace of
    :math:`\mathrm{Cov}(\frac1N\sum_jV_j)` is returned (the post's Section-8 proxy: the sum over
    an orthonormal basis of directional energies). The estimate is the unbiased sample variance
    of the position mean; its standard error is the delta-method one,
    :math:`\mathrm{sd}\{\|\bar y-\hat\mu\|^2\}/\sqrt n`.
    """
    check_tensor(y, "y", ndim_min=3 if vector else 2)
    return _cm_energy(y, vector)


def _cm_energy(y, vector):
    if vector:
        ybar = y.double().mean(-2)  # (..., samples, d_v)
        dev = ybar - ybar.mean(-2, keepdim=True)
        per = (dev**2).sum(-1)  # (..., samples)
    else:
        ybar = y.double().mean(-1)  # (..., samples)
        dev = ybar - ybar.mean(-1, keepdim=True)
        per = dev**2
    n = per.shape[-1]
    if n < 2:
        raise ValueError(f"need at least 2 samples; got {n}")
    mean = per.sum(-1) / (n - 1)
    se = per.std(-1) / math.sqrt(n) * n / (n - 1)
    return Estimate(mean, se, int(n))


def pearson(x: torch.Tensor, y: torch.Tensor) -> Estimate:
    r"""Pearson correlation along the last dimension with an influence-function standard error.

    ``x``, ``y`` (..., samples). The standard error uses the asymptotic influence function of
    the correlation coefficient, :math:`\psi = z_xz_y-\frac r2(z_x^2+z_y^2)` (standardised
    variables), valid without normality: :math:`\mathrm{se}=\mathrm{sd}(\psi)/\sqrt n`.
    """
    check_tensor(x, "x", ndim_min=1)
    check_tensor(y, "y", ndim_min=1)
    if x.shape != y.shape:
        raise ValueError(f"x and y must have the same shape; got {tuple(x.shape)} and {tuple(y.shape)}")
    return _pearson(x, y)


def _pearson(x, y):
    xd, yd = x.double(), y.double()
    n = xd.shape[-1]
    if n < 3:
        raise ValueError(f"need at least 3 samples; got {n}")
    sx, sy = xd.std(-1, unbiased=False, keepdim=True), yd.std(-1, unbiased=False, keepdim=True)
    if bool((sx == 0).any()) or bool((sy == 0).any()):
        raise ValueError("x and y must vary across samples: a constant sample has no correlation (0/0)")
    zx = (xd - xd.mean(-1, keepdim=True)) / sx
    zy = (yd - yd.mean(-1, keepdim=True)) / sy
    r = (zx * zy).mean(-1)
    psi = zx * zy - 0.5 * r[..., None] * (zx**2 + zy**2)
    return Estimate(r, psi.std(-1) / math.sqrt(n), int(n))


# ----------------------------------------------------------------------------- Section 2
def logit_subspace_split(w_q: torch.Tensor, w_k: torch.Tensor, w_v: torch.Tensor, u: torch.Tensor):
    r"""Split the value direction :math:`w=W_V^\top u` into :math:`c=Pw` and :math:`r=(I-P)w`.

    :math:`P` projects onto the row space of :math:`[W_Q;W_K]` (the part of a token the logits
    see). For standard Gaussian tokens, :math:`Z_j=PX_j` determines the attention weights and
    :math:`r^\top X_j` is independent of them. ``w_q, w_k`` (..., d_k, d), ``w_v`` (..., d_v, d),
    ``u`` (..., d_v). Returns ``(c, r)``, each (..., d), float64.
    """
    for name, w in (("w_q", w_q), ("w_k", w_k), ("w_v", w_v)):
        check_tensor(w, name, ndim_min=2)
    check_tensor(u, "u", ndim_min=1)
    d = w_q.shape[-1]
    if w_k.shape[-1] != d or w_v.shape[-1] != d or u.shape[-1] != w_v.shape[-2]:
        raise ValueError(f"w_q, w_k (..., d_k, d), w_v (..., d_v, d) and u (..., d_v) must agree; got w_q "
                         f"{tuple(w_q.shape)}, w_k {tuple(w_k.shape)}, w_v {tuple(w_v.shape)}, u {tuple(u.shape)}")
    try:
        torch.broadcast_shapes(w_q.shape[:-2], w_k.shape[:-2], w_v.shape[:-2], u.shape[:-1])
    except RuntimeError:
        raise ValueError(f"the batch dimensions of w_q, w_k, w_v and u must broadcast; got {tuple(w_q.shape)}, "
                         f"{tuple(w_k.shape)}, {tuple(w_v.shape)}, {tuple(u.shape)}") from None
    w_q, w_k = torch.broadcast_tensors(w_q, w_k) if w_q.shape[:-2] != w_k.shape[:-2] else (w_q, w_k)
    stacked = torch.cat([w_q, w_k], dim=-2).double()  # (..., 2 d_k, d)
    _, svals, vh = torch.linalg.svd(stacked, full_matrices=False)
    keep = (svals > 1e-10 * svals.amax(-1, keepdim=True)).double()  # rank mask
    basis = vh * keep[..., None]  # (..., r, d) orthonormal rows (zeros dropped)
    w = torch.einsum("...v,...vd->...d", u.double(), w_v.double())
    c = torch.einsum("...rd,...r->...d", basis, torch.einsum("...rd,...d->...r", basis, w))
    return c, w - c


def total_covariance_terms(x: torch.Tensor, w_q: torch.Tensor, w_k: torch.Tensor, w_v: torch.Tensor,
                           u: torch.Tensor, *, logit_scale: float | None = None, causal: bool = False):
    r"""Per-sample terms of the law of total covariance for attention outputs (Section 2).

    Aghajanyan 2025, Section 2 (reconstructed): with :math:`Y_j=u^\top V_j` and
    :math:`S_i=\sum_jA_{ij}Y_j`,
    :math:`\mathrm{Cov}(S_i,S_\ell)=\mathrm E[\mathrm{Cov}(S_i,S_\ell\mid\mathcal G)]
    +\mathrm{Cov}(\mathrm E[S_i\mid\mathcal G],\mathrm E[S_\ell\mid\mathcal G])` for any
    :math:`\sigma`-algebra :math:`\mathcal G` that fixes the weights. For standard Gaussian tokens
    (:math:`\Sigma_X=I`, which this function assumes) take :math:`\mathcal G=\sigma(PX_1,\dots,PX_N)`
    (see :func:`logit_subspace_split`); then both terms are explicit per sample:

    * mixing through conditional covariance: :math:`\mathrm{Cov}(S_i,S_\ell\mid\mathcal G)=\|r\|^2A_i^\top A_\ell`
      (:math:`\Sigma_{Y\mid\mathcal G}=\|r\|^2I`), ``conditional``;
    * weights depending on the data: :math:`m_i=\mathrm E[S_i\mid\mathcal G]=\sum_jA_{ij}c^\top X_j`,
      ``mean_part`` :math:`=m_im_\ell`.

    All of :math:`S, m` have mean zero (the map :math:`X\mapsto-X` leaves :math:`A` fixed), so
    :math:`\mathrm E[S_iS_\ell]=\mathrm E[\text{conditional}]+\mathrm E[\text{mean\_part}]`.

    Shapes: ``x`` (..., samples, N, d); weights (..., d_k|d_v, d) broadcasting against
    ``x[..., 0, :, :]``; ``u`` (..., d_v). Returns a dict of (..., samples, N, N) float64 tensors
    ``product`` (:math:`S_iS_\ell`), ``conditional`` and ``mean_part``.
    """
    check_tensor(x, "x", ndim_min=3)
    c, r = logit_subspace_split(w_q, w_k, w_v, u)
    xd = x.double()
    wq, wk = w_q.double()[..., None, :, :], w_k.double()[..., None, :, :]  # add samples axis
    _, a = self_attention(xd, wq, wk, None, logit_scale=logit_scale, causal=causal)  # (..., s, N, N)
    y = (xd * (c + r)[..., None, None, :]).sum(-1)  # Y_j = w^T X_j, (..., samples, N)
    cz = (xd * c[..., None, None, :]).sum(-1)  # c^T X_j
    s = torch.einsum("...sij,...sj->...si", a, y)
    m = torch.einsum("...sij,...sj->...si", a, cz)
    r2 = (r**2).sum(-1)[..., None, None, None]
    return {
        "product": s[..., :, None] * s[..., None, :],
        "conditional": r2 * (a @ a.transpose(-1, -2)),
        "mean_part": m[..., :, None] * m[..., None, :],
    }


# ----------------------------------------------------------------------------- Section 8
@dataclasses.dataclass(frozen=True)
class ValueCorrelation:
    """Results of :func:`mc_value_correlation`; estimates have shape (inits, len(alphas)).

    ``correlation``: Pearson correlation of :math:`u^\\top O_0` and :math:`u^\\top O_1`;
    ``cross_cov_fro``: :math:`\\|\\mathrm{Cov}(O_0,O_1)\\|_F` (sample covariance, delta-method se;
    biased upward by sampling noise of order :math:`d_v/\\sqrt{n}` times the entry scale);
    ``mean_output_trace``: :math:`\\mathrm{tr}\\,\\mathrm{Cov}(\\frac1N\\sum_iO_i)`;
    ``scalar_energy``: common-mode energy of the scalar projections :math:`u^\\top O_i`.
    """

    alphas: torch.Tensor
    correlation: Estimate
    cross_cov_fro: Estimate
    mean_output_trace: Estimate
    scalar_energy: Estimate
    n_tokens: int
    causal: bool
    w_q: torch.Tensor  # (inits, d_k, d) base weights (before the alpha scaling)
    w_k: torch.Tensor
    w_v: torch.Tensor  # (inits, d_v, d)
    u: torch.Tensor  # (inits, d_v) unit directions


def _frobenius_cross_cov(o0: torch.Tensor, o1: torch.Tensor) -> Estimate:
    """``o0, o1`` (..., samples, d_v) -> ||Cov(o0, o1)||_F with a delta-method standard error."""
    n = o0.shape[-2]
    a = o0 - o0.mean(-2, keepdim=True)
    b = o1 - o1.mean(-2, keepdim=True)
    cov = a.transpose(-1, -2) @ b / (n - 1)  # (..., d_v, d_v)
    fro = cov.flatten(-2).norm(dim=-1)
    unit = cov / fro[..., None, None].clamp_min(1e-300)
    psi = torch.einsum("...sa,...ab,...sb->...s", a, unit, b)  # <unit, a b^T> per sample
    return Estimate(fro, psi.std(-1) / math.sqrt(n), int(n))


def mc_value_correlation(alphas, *, generator, n_tokens: int, d: int, d_k: int, d_v: int, samples: int,
                         causal: bool = False, positions=(0, 1)) -> ValueCorrelation:
    r"""The Monte Carlo experiment of Aghajanyan 2025, Section 8, batched over inits and :math:`\alpha`.

    One single-head attention layer, no training: :math:`W_Q,W_K\in\mathbb R^{d_k\times d}`,
    :math:`W_V\in\mathbb R^{d_v\times d}` with i.i.d. :math:`\mathcal N(0,1/d)` entries (variance scaled
    by the model dimension), queries and keys multiplied by :math:`\alpha` (logits
    :math:`\alpha^2 q\cdot k/\sqrt{d_k}`), tokens i.i.d. :math:`\mathcal N(0,I_d)`, a random unit
    direction :math:`u\in\mathbb R^{d_v}` per init. The same ``samples`` input draws are used for every
    :math:`\alpha` of one init (common random numbers; each :math:`\alpha` alone is an i.i.d. sample).

    ``generator``: an int seed, a ``torch.Generator`` (one init), or a sequence of int seeds, one init
    per seed (the post's "seeds 0 through 49"). The post's setting (seed 42, N = 8, d = 32,
    d_k = d_v = 16, 2000 samples) is ``sigprop.presets.AGHAJANYAN_SEC8``. ``positions`` are the two token
    indices compared (0-indexed).
    Our RNG differs from the author's, so individual numbers are not bit-comparable.
    """
    n = check_int(n_tokens, "n_tokens", minimum=2)
    for name, v in (("d", d), ("d_k", d_k), ("d_v", d_v)):
        check_int(v, name, minimum=1)
    samples = check_int(samples, "samples", minimum=3)
    if not isinstance(positions, (tuple, list)) or len(positions) != 2:
        raise ValueError(f"positions must be two token indices (i, j); got {positions!r}")
    i0, i1 = (check_int(i, "positions[]", minimum=0, maximum=n - 1) for i in positions)
    if i0 == i1:
        raise ValueError(f"positions must be two distinct indices in [0, {n}); got {positions}")
    al = _t64(alphas, "alphas").reshape(-1)
    if al.numel() == 0:
        raise ValueError("alphas must hold at least one value; got an empty array")
    if not bool(torch.isfinite(al**2).all()) or float((al**2).max()) > 1e150:   # logits alpha^2 q.k / sqrt(d_k)
        raise ValueError(f"alphas must satisfy alpha^2 <= 1e150 (the logits alpha^2 q.k/sqrt(d_k) must stay in "
                         f"float64); got max |alpha| = {float(al.abs().max()):g}")
    if isinstance(generator, (list, tuple, range)):
        gens = [as_generator(int(s)) for s in generator]
    else:
        gens = [as_generator(generator)]
    if not gens:
        raise ValueError("generator must name at least one seed")
    inits = len(gens)
    # the inputs (inits, samples, N, d) and the outputs (alphas, inits, samples, N, d_v), float64
    check_memory(8.0 * inits * samples * n * (d + 3 * len(al) * max(d_v, n)), "mc_value_correlation at these sizes")
    std = 1.0 / math.sqrt(d)
    cpu = gens[0].device   # the generators' device (the CPU for int seeds)
    wq = torch.empty(inits, d_k, d, dtype=torch.float64, device=cpu)
    wk, wv = torch.empty_like(wq), torch.empty(inits, d_v, d, dtype=torch.float64, device=cpu)
    u = torch.empty(inits, d_v, dtype=torch.float64, device=cpu)
    x = torch.empty(inits, samples, n, d, dtype=torch.float64, device=cpu)
    for i, g in enumerate(gens):  # weights, direction and inputs of init i from its own generator, in place
        for buf in (wq[i], wk[i], wv[i], u[i], x[i]):
            torch.randn(buf.shape, generator=g, dtype=torch.float64, device=cpu, out=buf)
    wq, wk, wv = wq * std, wk * std, wv * std
    u = u / u.norm(dim=-1, keepdim=True)
    inits = x.shape[0]
    flat = x.reshape(inits, samples * n, d)  # one large matmul per projection

    def project(w):  # (inits, m, d) -> (inits, samples, N, m)
        return (flat @ w.transpose(-1, -2)).reshape(inits, samples, n, -1)

    q, k, v = project(wq), project(wk), project(wv)
    # queries and keys scaled by alpha: logits alpha^2 q.k / sqrt(d_k); batched over alphas in front
    out, _ = softmax_attention((al**2)[:, None, None, None, None] * q, k, v, scale=1.0 / math.sqrt(d_k),
                               causal=causal)  # (n_alpha, inits, samples, N, d_v)
    out = out.movedim(0, 1)  # (inits, n_alpha, samples, N, d_v)
    proj = torch.einsum("iasnv,iv->iasn", out, u)
    corr = _pearson(proj[..., i0], proj[..., i1])
    fro = _frobenius_cross_cov(out[..., i0, :], out[..., i1, :])
    trace = _cm_energy(out, True)
    energy = _cm_energy(proj, False)
    return ValueCorrelation(al, corr, fro, trace, energy, n, bool(causal), wq, wk, wv, u)
