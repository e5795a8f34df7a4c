r"""Cross-token covariance of attention outputs (Aghajanyan 2025).

Source: A. Aghajanyan, *Proof: Attention Values Correlate After Layer 1* (blog post, 2025),
cited as ``aghajanyan2025``. The captured text lost its displayed equations; the formulas
below are the book's reconstruction (chapter ``chapters/aghajanyan2025``), each checked
against Monte Carlo in ``tests/test_covariance.py``.

Setting (post, Section 1). Tokens :math:`X_1,\dots,X_N \in \mathbb R^d` i.i.d., mean zero,
covariance :math:`\Sigma_X`. One head: :math:`s_{ij} = X_i^\top B X_j` with
:math:`B = c\,W_Q^\top W_K` (:math:`c = 1/\sqrt{d_k}`), logits :math:`\alpha^2 s_{ij}` when
:math:`W_Q, W_K` are scaled by :math:`\alpha`, weights
:math:`A_{ij} = \mathrm{softmax}_{j \in S_i}(\alpha^2 s_{ij})` over the visible set
:math:`S_i` (all tokens, or the prefix :math:`\{1..i\}` under a causal mask), outputs
:math:`O_i = \sum_j A_{ij} W_V X_j` and layer-2 values :math:`V^{(2)}_i = W_V^{(2)} O_i`.

Theory (float64, in ``sp.theory``):

* :func:`witness_covariance` -- Lemma 1: at :math:`\alpha=0`,
  :math:`\mathrm{Cov}(O_i,O_\ell) = W_V\Sigma_X W_V^\top / N` (full mask; every output is the
  mean :math:`M`) and :math:`W_V\Sigma_X W_V^\top/\max(i,\ell)` (causal mask, prefix means).
* :func:`small_alpha_correction` -- Lemma 5: the exact :math:`\alpha^2` coefficient of
  :math:`\mathrm{Cov}(O_i,O_\ell)` for Gaussian tokens.
* :func:`quadratic_form_variance` -- Section 6: :math:`\mathrm{Var}(u^\top S\mid A) = A^\top\Sigma_Y A`.
* :func:`compound_symmetry_covariance`, :func:`compound_symmetry_rho_range`,
  :func:`compound_symmetry_variance`, :func:`common_mode_split` -- Section 7.
* :func:`conditional_cosine`, :func:`logit_range`, :func:`overlap_lower_bound`,
  :func:`cosine_lower_bound` -- Section 10.
* :func:`common_mode_energy_of`, :func:`uniform_attention_variances`, :func:`l1_floor_constant`,
  :func:`shared_plus_noise_energy` -- Section 11.
* :func:`residual_mixture_correlation` -- Section 12.

The random attention layers these formulas describe, their measures and Monte Carlo, are in
``sigprop.attention._covariance_mc``.
"""
from __future__ import annotations

import math

import torch

from ..stats._validate import (check_finite, check_int, check_memory, check_positive, check_real, theory_function,
                               to_output)
__all__: list[str] = []
__theory__ = [
    "witness_covariance",
    "prefix_mean_factor",
    "small_alpha_correction",
    "quadratic_form_variance",
    "compound_symmetry_covariance",
    "compound_symmetry_rho_range",
    "compound_symmetry_variance",
    "common_mode_split",
    "common_mode_energy_of",
    "uniform_attention_variances",
    "l1_floor_constant",
    "shared_plus_noise_energy",
    "conditional_cosine",
    "logit_range",
    "overlap_lower_bound",
    "cosine_lower_bound",
    "residual_mixture_correlation",
]


# ----------------------------------------------------------------------------- helpers
#: The theory of this module runs in float64 on the CPU, whatever the default device.
_CPU = torch.device("cpu")


def _t64(value, name) -> torch.Tensor:
    """Any array-like -> finite float64 CPU tensor (validated)."""
    if isinstance(value, torch.Tensor):
        out = value.detach().to(device="cpu", dtype=torch.float64)
    else:
        out = torch.as_tensor(check_finite(value, name), dtype=torch.float64, device=_CPU)
    if not bool(torch.isfinite(out).all()):
        raise ValueError(f"{name} must be finite; it contains NaN or inf")
    return out


def _out(result: torch.Tensor, *like):
    return to_output(result.numpy(), *like)


def _check_matrix(m, name, *, square=False):
    if m.ndim < 2:
        raise ValueError(f"{name} must be a matrix (..., rows, cols); got shape {tuple(m.shape)}")
    if square and m.shape[-1] != m.shape[-2]:
        raise ValueError(f"{name} must be square; got shape {tuple(m.shape)}")


def _sigma_x(sigma_x, d):
    if sigma_x is None:
        return torch.eye(d, dtype=torch.float64, device=_CPU)
    s = _t64(sigma_x, "sigma_x")
    if s.shape != (d, d):
        raise ValueError(f"sigma_x must have shape ({d}, {d}) to match w_v; got {tuple(s.shape)}")
    return s


def _visible(n: int, causal: bool) -> torch.Tensor:
    """(n, n) 0/1 float64 mask, row i = visible set S_i."""
    ones = torch.ones(n, n, dtype=torch.float64, device=_CPU)
    return torch.tril(ones) if causal else ones


# ----------------------------------------------------------------------------- Lemma 1
@theory_function
def prefix_mean_factor(n_tokens: int, *, causal: bool = True) -> torch.Tensor:
    r"""(N, N) factor :math:`\kappa_{i\ell}` with :math:`\mathrm{Cov}(M_i,M_\ell)=\kappa_{i\ell}\,W_V\Sigma_XW_V^\top`.

    Aghajanyan 2025, Lemma 1 (causal mask): the output at :math:`\alpha=0` is the prefix mean
    :math:`M_i = \frac1i\sum_{j\le i}V_j` (1-indexed) and, for :math:`i\le\ell`,
    :math:`\mathrm{Cov}(M_i,M_\ell)=\frac1{i\ell}\sum_{j\le i}\mathrm{Var}(V_j)=\frac1\ell W_V\Sigma_XW_V^\top`,
    i.e. :math:`\kappa_{i\ell}=1/\max(i,\ell)`; the correlation is :math:`\sqrt{\min/\max}`.
    With ``causal=False`` every entry is :math:`1/N` (all outputs equal the mean :math:`M`).
    """
    n = check_int(n_tokens, "n_tokens", minimum=1)
    check_memory(8.0 * 3 * n * n, f"prefix_mean_factor({n})")
    idx = torch.arange(1, n + 1, dtype=torch.float64, device=_CPU)
    if causal:
        return 1.0 / torch.maximum(idx[:, None], idx[None, :])
    return torch.full((n, n), 1.0 / n, dtype=torch.float64, device=_CPU)


@theory_function
def witness_covariance(w_v, n_tokens: int, *, sigma_x=None, causal: bool = False, u=None):
    r"""Cross-token covariance of single-head outputs at the uniform-attention witness.

    Aghajanyan 2025, Lemma 1 (reconstructed). At :math:`\alpha = 0` (query/key scaled to zero)

    * full mask: :math:`O_i = M = W_V\bar X` for every :math:`i`, so
      :math:`\mathrm{Cov}(O_i,O_\ell)=\mathrm{Var}(M)=\frac1N W_V\Sigma_XW_V^\top` and
      :math:`\mathrm{Var}(u^\top M) = \frac1N u^\top W_V\Sigma_X W_V^\top u` (also Lemma 4);
    * causal mask: :math:`\mathrm{Cov}(O_i,O_\ell)=W_V\Sigma_XW_V^\top/\max(i,\ell)`.

    Parameters: ``w_v`` (d_v, d); ``sigma_x`` (d, d) token covariance (identity if None);
    ``u`` (d_v,) optional direction. Returns (N, N, d_v, d_v), or (N, N) when ``u`` is given.
    Used in the chapter's notebook 01 (witness vs Monte Carlo).
    """
    w = _t64(w_v, "w_v")
    _check_matrix(w, "w_v")
    if w.ndim != 2:
        raise ValueError(f"w_v must be a single (d_v, d) matrix; got shape {tuple(w.shape)}")
    s = _sigma_x(sigma_x, w.shape[1])
    base = w @ s @ w.T  # (d_v, d_v)
    kappa = prefix_mean_factor(n_tokens, causal=causal)
    if u is not None:
        uu = _t64(u, "u")
        if uu.shape != (w.shape[0],):
            raise ValueError(f"u must have shape ({w.shape[0]},); got {tuple(uu.shape)}")
        res = kappa * (uu @ base @ uu)
        return _out(res, w_v, u)
    return _out(kappa[:, :, None, None] * base, w_v)


# ----------------------------------------------------------------------------- Lemma 5
@theory_function
def small_alpha_correction(w_q, w_k, w_v, n_tokens: int, *, sigma_x=None, causal: bool = False,
                           u=None, key_scale=None):
    r"""The :math:`\alpha^2` coefficient :math:`C^{(1)}_{i\ell}` in
    :math:`\mathrm{Cov}(O_i,O_\ell)=\mathrm{Cov}(M_i,M_\ell)+\alpha^2C^{(1)}_{i\ell}+O(\alpha^4)`.

    Aghajanyan 2025, Lemma 5, computed in closed form for Gaussian tokens
    :math:`X_j\sim\mathcal N(0,\Sigma)`. With :math:`s_{ij}=X_i^\top BX_j`,
    :math:`B=c\,W_Q^\top W_K` (``key_scale`` :math:`c`, default :math:`1/\sqrt{d_k}`), the softmax
    expansion :math:`A_{ij}=\frac1{n_i}+\frac{\alpha^2}{n_i}(s_{ij}-\bar s_i)+O(\alpha^4)` gives
    :math:`O_i = M_i+\alpha^2\Delta_i+O(\alpha^4)` with :math:`\Delta_i = W_V\hat C_i B^\top X_i`,
    :math:`\hat C_i` the (biased) empirical covariance of the tokens visible to :math:`i`, and
    :math:`C^{(1)}_{i\ell} = G_{i\ell}+G_{\ell i}^\top`, :math:`G_{k i}=\mathrm E[M_k\Delta_i^\top]`:

    .. math::
        G_{ki} = W_V\big[t_1\,\Sigma B\Sigma + t_2(\Sigma B^\top\Sigma+\mathrm{tr}(B\Sigma)\Sigma)\big]W_V^\top,
        \quad t_1 = \frac{[i\in S_k]}{n_k}\Big(1-\frac1{n_i}\Big),\quad
        t_2 = \frac1{n_k}\Big(\frac{[i\in S_k]}{n_i}-\frac{|S_k\cap S_i|}{n_i^2}\Big)

    (Isserlis' theorem). Full mask: :math:`C^{(1)}_{i\ell}=\frac{N-1}{N^2}W_V\Sigma(B+B^\top)\Sigma W_V^\top`
    for all :math:`i,\ell`, so to order :math:`\alpha^2` outputs stay perfectly correlated.

    Shapes: ``w_q``, ``w_k`` (d_k, d), ``w_v`` (d_v, d), ``u`` (d_v,) optional. Returns
    (N, N, d_v, d_v), or (N, N) when ``u`` is given. Used in notebook 01 (Lemma 5).
    """
    wq, wk, wv = _t64(w_q, "w_q"), _t64(w_k, "w_k"), _t64(w_v, "w_v")
    for m, name in ((wq, "w_q"), (wk, "w_k"), (wv, "w_v")):
        if m.ndim != 2:
            raise ValueError(f"{name} must be a (rows, d) matrix; got shape {tuple(m.shape)}")
    d = wv.shape[1]
    if wq.shape != wk.shape or wq.shape[1] != d:
        raise ValueError(f"w_q and w_k must both be (d_k, {d}); got {tuple(wq.shape)} and {tuple(wk.shape)}")
    n = check_int(n_tokens, "n_tokens", minimum=1)
    c = 1.0 / math.sqrt(wq.shape[0]) if key_scale is None else float(check_finite(key_scale, "key_scale"))
    s = _sigma_x(sigma_x, d)
    b = c * wq.T @ wk
    m1 = wv @ s @ b @ s @ wv.T
    m2 = wv @ (s @ b.T @ s + torch.trace(b @ s) * s) @ wv.T
    vis = _visible(n, causal)  # vis[k, i] = [i in S_k]
    nk = vis.sum(1)  # (N,) sizes n_k
    inter = vis @ vis.T  # |S_k ∩ S_i|
    t1 = vis / nk[:, None] * (1.0 - 1.0 / nk[None, :])
    t2 = (vis / nk[None, :] - inter / nk[None, :] ** 2) / nk[:, None]
    g = t1[:, :, None, None] * m1 + t2[:, :, None, None] * m2  # (N, N, d_v, d_v): G[k, i]
    c1 = g + g.transpose(0, 1).transpose(-1, -2)
    if u is not None:
        uu = _t64(u, "u")
        if uu.shape != (wv.shape[0],):
            raise ValueError(f"u must have shape ({wv.shape[0]},); got {tuple(uu.shape)}")
        return _out(torch.einsum("a,klab,b->kl", uu, c1, uu), w_q, w_k, w_v, u)
    return _out(c1, w_q, w_k, w_v)


# ----------------------------------------------------------------------------- Sections 6, 7
@theory_function
def quadratic_form_variance(a, cov, b=None):
    r"""Conditional (co)variance of attention outputs with fixed weights: :math:`a^\top\Sigma_Y b`.

    Aghajanyan 2025, Section 6 (reconstructed): for :math:`S=\sum_j A_jV_j` with fixed :math:`A`
    and :math:`Y_j = u^\top V_j`, :math:`\mathrm{Var}(u^\top S\mid A)=A^\top\Sigma_Y A`, and
    :math:`\mathrm{Cov}(u^\top S_i,u^\top S_\ell\mid A)=A_i^\top\Sigma_Y A_\ell` (Section 2). The
    norm-only identity :math:`\sigma^2\|A\|_2^2` is the special case :math:`\Sigma_Y=\sigma^2I`.

    ``a``, ``b`` (..., N); ``cov`` (..., N, N). Returns (...).
    """
    aa, cc = _t64(a, "a"), _t64(cov, "cov")
    _check_matrix(cc, "cov", square=True)
    bb = aa if b is None else _t64(b, "b")
    n = cc.shape[-1]
    if aa.shape[-1] != n or bb.shape[-1] != n:
        raise ValueError(f"a and b must have last dimension N = {n} (from cov); got {tuple(aa.shape)}, {tuple(bb.shape)}")
    res = torch.einsum("...i,...ij,...j->...", aa, cc, bb)
    return _out(res, a, cov) if b is None else _out(res, a, cov, b)


@theory_function
def compound_symmetry_rho_range(n_tokens: int) -> tuple[float, float]:
    r"""Interval of :math:`\rho` for which :math:`\sigma^2((1-\rho)I+\rho\mathbf 1\mathbf 1^\top)` is PSD.

    Aghajanyan 2025, Section 7: the eigenvalues are :math:`\sigma^2(1-\rho)` (multiplicity
    :math:`N-1`) and :math:`\sigma^2(1+(N-1)\rho)`, so PSD iff :math:`-1/(N-1)\le\rho\le1`.
    """
    n = check_int(n_tokens, "n_tokens", minimum=2)
    return (-1.0 / (n - 1), 1.0)


@theory_function
def compound_symmetry_covariance(n_tokens: int, sigma2, rho) -> torch.Tensor:
    r""":math:`\Sigma_Y=\sigma^2((1-\rho)I+\rho\mathbf 1\mathbf 1^\top)` (Aghajanyan 2025, Section 7), float64 (N, N)."""
    n = check_int(n_tokens, "n_tokens", minimum=2)
    s2 = float(check_positive(sigma2, "sigma2", allow_zero=True))
    r = float(check_finite(rho, "rho"))
    lo, hi = compound_symmetry_rho_range(n)
    if not lo - 1e-12 <= r <= hi + 1e-12:
        raise ValueError(f"rho must lie in [{lo:.4g}, 1] for a PSD covariance with N = {n}; got {r}")
    check_memory(8.0 * 3 * n * n, f"compound_symmetry_covariance({n})")
    eye = torch.eye(n, dtype=torch.float64, device=_CPU)
    return s2 * ((1 - r) * eye + r * torch.ones(n, n, dtype=torch.float64, device=_CPU))


@theory_function
def compound_symmetry_variance(a, sigma2, rho):
    r""":math:`\sigma^2\big((1-\rho)\|a\|_2^2+\rho(\mathbf 1^\top a)^2\big)`.

    Aghajanyan 2025, Section 7: the variance :math:`a^\top\Sigma_Ya` under compound symmetry.
    For attention weights (:math:`a\ge0`) :math:`(\mathbf 1^\top a)^2=\|a\|_1^2`, the post's form
    :math:`\sigma^2((1-\rho)\|a\|_2^2+\rho\|a\|_1^2)`; for signed vectors the sum, not the
    L1 norm, is the right quantity. ``a`` (..., N); ``sigma2``, ``rho`` broadcast over (...).
    """
    aa = _t64(a, "a")
    s2, r = _t64(sigma2, "sigma2"), _t64(rho, "rho")
    res = s2 * ((1 - r) * (aa**2).sum(-1) + r * aa.sum(-1) ** 2)
    return _out(res, a, sigma2, rho)


@theory_function
def common_mode_split(cov):
    r"""General decomposition :math:`\Sigma_Y=\bar c\,\mathbf 1\mathbf 1^\top+R` (Section 7, reconstructed).

    :math:`\bar c` is the mean off-diagonal covariance, :math:`R=\Sigma_Y-\bar c\mathbf 1\mathbf 1^\top`
    (its off-diagonal entries average to zero), so that
    :math:`A^\top\Sigma_YA=\bar c(\mathbf 1^\top A)^2+A^\top RA=\bar c\|A\|_1^2+A^\top RA` for
    :math:`A\ge0`. Under compound symmetry :math:`\bar c=\rho\sigma^2`, :math:`R=(1-\rho)\sigma^2I`.
    ``cov`` (..., N, N), N >= 2. Returns ``(c_bar (...), R (..., N, N))``.
    """
    c = _t64(cov, "cov")
    _check_matrix(c, "cov", square=True)
    n = c.shape[-1]
    if n < 2:
        raise ValueError(f"cov must be at least 2 x 2; got N = {n}")
    off = c.sum((-1, -2)) - torch.diagonal(c, dim1=-2, dim2=-1).sum(-1)
    cbar = off / (n * (n - 1))
    r = c - cbar[..., None, None]
    return _out(cbar, cov), _out(r, cov)


# ----------------------------------------------------------------------------- Section 11
@theory_function
def common_mode_energy_of(cov):
    r"""Common-mode energy :math:`E_{\rm cm}=\frac1{N^2}\mathbf 1^\top\Sigma_Y\mathbf 1=\mathrm{Var}(\bar Y)`.

    Aghajanyan 2025, Section 11 (reconstructed from "uniform attention weights give variance
    equal to the common mode energy"). ``cov`` (..., N, N) -> (...).
    """
    c = _t64(cov, "cov")
    _check_matrix(c, "cov", square=True)
    n = c.shape[-1]
    return _out(c.sum((-1, -2)) / n**2, cov)


@theory_function
def uniform_attention_variances(cov):
    r"""Variances under L1- and L2-normalised uniform weights: :math:`(E_{\rm cm},\,N E_{\rm cm})`.

    Aghajanyan 2025, Section 11: :math:`A=\mathbf 1/N` (:math:`\|A\|_1=1`) gives
    :math:`A^\top\Sigma_YA=E_{\rm cm}`; :math:`A=\mathbf 1/\sqrt N` (:math:`\|A\|_2=1`) gives
    :math:`N E_{\rm cm}`. Their ratio is exactly :math:`N`. ``cov`` (..., N, N).
    """
    c = _t64(cov, "cov")
    _check_matrix(c, "cov", square=True)
    n = c.shape[-1]
    e = c.sum((-1, -2)) / n**2
    return _out(e, cov), _out(n * e, cov)


@theory_function
def l1_floor_constant(cov, *, rcond: float = 1e-10):
    r"""The constant :math:`\lambda_{\rm cm}=1/(\mathbf 1^\top\Sigma_Y^{+}\mathbf 1)` of the L1² floor.

    Aghajanyan 2025, Section 11.1 (reconstructed): by Cauchy-Schwarz in the
    :math:`\Sigma_Y` inner product, :math:`(\mathbf 1^\top A)^2\le(\mathbf 1^\top\Sigma_Y^{-1}\mathbf 1)
    (A^\top\Sigma_YA)`, hence :math:`A^\top\Sigma_YA\ge\lambda_{\rm cm}\|A\|_1^2` for :math:`A\ge0`, with
    equality at :math:`A\propto\Sigma_Y^{-1}\mathbf 1`. For a singular PSD :math:`\Sigma_Y` the
    pseudo-inverse works when :math:`\mathbf 1` lies in the range of :math:`\Sigma_Y`; otherwise
    some :math:`A` has :math:`\mathbf 1^\top A\ne0` and zero variance and the floor is 0 (returned).
    ``cov`` (..., N, N) -> (...). ``rcond``: relative eigenvalue cut for the pseudo-inverse.
    """
    rcond = check_real(rcond, "rcond", minimum=0.0, maximum=1.0)
    c = _t64(cov, "cov")
    _check_matrix(c, "cov", square=True)
    evals, evecs = torch.linalg.eigh(0.5 * (c + c.transpose(-1, -2)))
    if bool((evals < -1e-8 * evals.abs().amax(-1, keepdim=True).clamp_min(1e-300)).any()):
        raise ValueError("cov must be positive semidefinite; it has a negative eigenvalue")
    n = c.shape[-1]
    ones = torch.ones(n, dtype=torch.float64, device=_CPU)
    proj = torch.einsum("...ik,i->...k", evecs, ones)  # components of 1 on eigenvectors
    keep = evals > rcond * evals.amax(-1, keepdim=True).clamp_min(1e-300)
    quad = torch.where(keep, proj**2 / torch.where(keep, evals, torch.ones_like(evals)), torch.zeros_like(evals)).sum(-1)
    outside = torch.where(keep, torch.zeros_like(proj), proj**2).sum(-1) > 1e-12 * n
    res = torch.where(outside | (quad <= 0), torch.zeros_like(quad), 1.0 / quad.clamp_min(1e-300))
    return _out(res, cov)


@theory_function
def shared_plus_noise_energy(n_tokens, *, shared_var=0.0, noise_var=1.0, mean_offdiag=None):
    r"""Common-mode energy in the heuristic regimes of Aghajanyan 2025, Section 11.

    :math:`Y_j=g+\varepsilon_j` (shared component of variance :math:`\tau^2` = ``shared_var``,
    independent noise :math:`\sigma^2` = ``noise_var``): :math:`E_{\rm cm}=\tau^2+\sigma^2/N`
    (constant + :math:`1/N`; :math:`\tau^2=0` is the independent regime :math:`\sigma^2/N`).
    With ``mean_offdiag`` = :math:`\bar c` (may depend on N) the general value
    :math:`E_{\rm cm}=\bar\sigma^2/N+(N-1)\bar c/N` is returned instead (``noise_var`` =
    mean diagonal :math:`\bar\sigma^2`); :math:`\bar c\propto1/N` gives the :math:`1/N` regime.
    """
    n = _t64(n_tokens, "n_tokens")
    if bool((n < 1).any()):
        raise ValueError(f"n_tokens must be >= 1; got min {float(n.min()):.4g}")
    s2 = _t64(noise_var, "noise_var")
    if mean_offdiag is None:
        res = _t64(shared_var, "shared_var") + s2 / n
        return _out(res, n_tokens, shared_var, noise_var)
    cb = _t64(mean_offdiag, "mean_offdiag")
    return _out(s2 / n + (n - 1) * cb / n, n_tokens, noise_var, mean_offdiag)


# ----------------------------------------------------------------------------- Section 10
@theory_function
def conditional_cosine(p, q):
    r"""Cosine similarity of attention rows :math:`p^\top q/(\|p\|_2\|q\|_2)`.

    Aghajanyan 2025, Section 10.2: with independent, mean-zero, equal-variance scalar values
    and fixed rows :math:`p, q`, :math:`\mathrm{Corr}(p^\top Y, q^\top Y\mid A)` equals this cosine.
    ``p``, ``q`` (..., N) -> (...).
    """
    pp, qq = _t64(p, "p"), _t64(q, "q")
    res = (pp * qq).sum(-1) / (pp.norm(dim=-1) * qq.norm(dim=-1))
    return _out(res, p, q)


@theory_function
def logit_range(z):
    r"""Logit range :math:`R(z)=\max_jz_j-\min_jz_j` along the last dimension (Section 10.3)."""
    zz = _t64(z, "z")
    if zz.ndim == 0 or zz.shape[-1] == 0:
        raise ValueError(f"z must have at least one logit along its last dimension; got shape {tuple(zz.shape)}")
    return _out(zz.amax(-1) - zz.amin(-1), z)


@theory_function
def overlap_lower_bound(range_p, range_q, n_tokens):
    r"""The post's floor :math:`p^\top q\ge e^{-(R_p+R_q)}/N` (Aghajanyan 2025, Section 10.3).

    Softmax gives :math:`p_j\ge e^{-R_p}/N` for every :math:`j` (each logit is within
    :math:`R_p` of the largest), hence :math:`p^\top q\ge N\cdot e^{-R_p}e^{-R_q}/N^2`; because
    :math:`\|p\|_2,\|q\|_2\le1` the same number bounds the cosine. With a common range
    :math:`R` this is :math:`e^{-2R}/N`.
    """
    rp, rq = _t64(range_p, "range_p"), _t64(range_q, "range_q")
    n = _t64(n_tokens, "n_tokens")
    return _out(torch.exp(-(rp + rq)) / n, range_p, range_q, n_tokens)


@theory_function
def cosine_lower_bound(range_p, range_q):
    r"""Sharper, N-free floor :math:`\cos(p,q)\ge\operatorname{sech}\big((R_p+R_q)/2\big)`.

    The book's strengthening of Aghajanyan 2025, Section 10.3. Entries lie in
    :math:`[m_p, e^{R_p}m_p]` and :math:`[m_q,e^{R_q}m_q]`, so the ratios :math:`p_j/q_j` lie in
    :math:`[\lambda_-,\lambda_+]` with :math:`\lambda_+/\lambda_-=e^{R_p+R_q}`; summing
    :math:`(p_j-\lambda_-q_j)(\lambda_+q_j-p_j)\ge0` and using AM-GM gives the Pólya-Szegő bound
    :math:`\cos\ge2\sqrt{\lambda_-\lambda_+}/(\lambda_-+\lambda_+)`. It is always
    :math:`\ge e^{-(R_p+R_q)/2}\ge e^{-(R_p+R_q)}/N`.
    """
    rp, rq = _t64(range_p, "range_p"), _t64(range_q, "range_q")
    return _out(1.0 / torch.cosh((rp + rq) / 2), range_p, range_q)


# ----------------------------------------------------------------------------- Section 12
@theory_function
def residual_mixture_correlation(cov_r, var_r_i, var_r_l, var_a_i, var_a_l, *, cov_ra=0.0, cov_ar=0.0, cov_a=0.0):
    r"""Correlation of :math:`z_i=r_i+a_i` and :math:`z_\ell=r_\ell+a_\ell` (Aghajanyan 2025, Section 12).

    :math:`\mathrm{Cov}(z_i,z_\ell)=\mathrm{Cov}(r_i,r_\ell)+\mathrm{Cov}(r_i,a_\ell)+\mathrm{Cov}(a_i,r_\ell)
    +\mathrm{Cov}(a_i,a_\ell)` (``cov_r``, ``cov_ra``, ``cov_ar``, ``cov_a``). When the update is
    uncorrelated across tokens and with the residual (the defaults), this is
    :math:`\mathrm{Cov}(r_i,r_\ell)` and
    :math:`\mathrm{Corr}(z_i,z_\ell)=\mathrm{Corr}(r_i,r_\ell)\sqrt{\frac{\mathrm{Var}\,r_i}{\mathrm{Var}\,r_i+\mathrm{Var}\,a_i}
    \frac{\mathrm{Var}\,r_\ell}{\mathrm{Var}\,r_\ell+\mathrm{Var}\,a_\ell}}`: diluted, never removed.
    (The variances assume :math:`\mathrm{Cov}(r_i,a_i)=0`.) Returns the correlation.
    """
    vals = [_t64(v, n) for v, n in ((cov_r, "cov_r"), (var_r_i, "var_r_i"), (var_r_l, "var_r_l"),
                                    (var_a_i, "var_a_i"), (var_a_l, "var_a_l"), (cov_ra, "cov_ra"),
                                    (cov_ar, "cov_ar"), (cov_a, "cov_a"))]
    cr, vri, vrl, vai, val, cra, car, ca = vals
    cov = cr + cra + car + ca
    res = cov / torch.sqrt((vri + vai) * (vrl + val))
    return _out(res, cov_r, var_r_i, var_r_l, var_a_i, var_a_l)
