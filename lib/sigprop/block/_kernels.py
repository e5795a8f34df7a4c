r"""Gaussian kernels of activations, ``K(a, b, c) = E[phi(u) phi(v)]`` for ``(u, v)`` centred Gaussian with
variances ``a, b`` and covariance ``c``: one quadrature for every activation, and the closed forms it is
checked against.

The MLP's map (Poole et al. 2016; Giorlandino & Goldt 2025, App. B.6.2, Eqs. (35)-(37)) needs ``K`` at
variances from ~1e-3 to ~1e4 and correlations ``r = c / sqrt(ab)`` in ``[-1, 1]``. A fixed Gauss-Hermite
rule fails there: ``tanh(sqrt(a) z)`` turns into a step of width ``1/sqrt(a)`` that its nodes do not see
(issue 26: a 48 x 48 rule gave 0.898 for ``a = b = c = 30``; the value is 0.856). Writing
``u = sqrt(a) z_1``, ``v = sqrt(b) (r z_1 + s z_2)`` with ``s = sqrt(1 - r^2)``,

.. math::  K = \int \phi(\sqrt a\, z_1)\, \Psi(z_1)\, \varphi(z_1)\, dz_1, \qquad
           \Psi(z_1) = \int \phi(\sqrt b\,(r z_1 + s z_2))\, \varphi(z_2)\, dz_2,

each integral is a composite Gauss-Legendre rule on ``[-10, 10]`` (Gaussian mass outside: 1.5e-23) with
panels at most 2 wide, refined geometrically (halving) toward the point where its integrand changes on
a small scale: ``z_1 = 0`` for the outer one (``phi(sqrt(a) z_1)`` varies on the scale ``1/sqrt(a)``,
``Psi`` on ``max(1, sqrt(b) s) / (sqrt(b) |r|)``, or ``min(...)`` for ReLU's kink) and ``z_2 = -r z_1 / s``
for the inner one (scale ``1/(sqrt(b) s)``); every activation here is analytic on each side of that
point. Ten nodes per panel. Measured error (``tests/test_components.py``): below 1e-13 of
``sqrt(K(a,a,a) K(b,b,b))`` on a grid of variances 1e-3 ... 1e4 and correlations -1 ... 1, against
ReLU's and GELU's closed forms, SciPy's adaptive quadrature (QUADPACK) and the sign limit
``(2/pi) arcsin r`` of ``tanh`` at large variance. Cost: ~150 x 150 function values per kernel; where
many kernels share one variance pair (LayerNorm'd tokens: one pair), they are tabulated in ``r`` once
(Chebyshev, degree 128; refused, and computed point by point, where the tail coefficients show the
table would be less accurate than 1e-11, e.g. a step-like ``tanh``).

Many variance pairs (a Gram map without LayerNorm: ``T`` tokens of ``T`` norms, ``T^2`` kernels; issue 37, item 9:
20 s per block at ``T = 96``). Mehler's expansion of the bivariate Gaussian separates the two variances,

.. math::  K(a, b, c) = \sum_{n\ge0} r^n\, c_n(a)\, c_n(b), \qquad c_n(a) = \mathbb E[\phi(\sqrt a z)\, h_n(z)],

``h_n = He_n / sqrt(n!)`` the orthonormal Hermite polynomials: ``T`` one-dimensional quadratures (composite
Gauss-Legendre, panels of 0.25 halving toward 0 down to ``1/sqrt(a)``, 161 coefficients) and a sum per pair. Its
tail is at most ``|r|^162 sqrt(t_a t_b)`` with ``t_a = E phi^2 - sum_n c_n(a)^2`` (Cauchy-Schwarz); a pair whose bound
exceeds 1e-11 of ``sqrt(K(a,a,a) K(b,b,b))`` goes to the quadrature (``r`` near 1 with a step-like ``tanh``). Measured
against the quadrature on 48 tokens of variances spread over 0.5-2, 0.01-100 and 1e-3-1e4 with cosines 0.4-1: largest
error 3e-13 (tanh), 8e-12 (SiLU), 2e-12 (tanh-GELU) of that scale, 35-100 times faster (``tests/test_kernels.py``).

Closed forms: ReLU ``sqrt(ab) f(r) / 2`` with ``f(r) = (sqrt(1-r^2) + r (pi - arccos r)) / pi`` (Cho &
Saul 2009); GELU ``u Phi(u)`` (two Gaussian integrations by parts), written with ``A = 1 + a``,
``B = 1 + b``, ``rho = c / sqrt(AB)`` and ``delta^2 = (1 + a + b + ab (1 - r^2)) / (AB)`` (no cancellation,
no intermediate beyond ``sqrt(AB)``, so variances up to 1e300 stay finite):

.. math::  K = c\Big(\frac14 + \frac{\arcsin\rho}{2\pi}\Big)
           + \frac{1}{2\pi}\Big(\frac{a}{A}\frac{b}{B}\sqrt{AB}\,\delta + \frac{\rho^2}{\sqrt{AB}\,\delta}\Big).

A gated unit ``phi(W_1 x) * (W_3 x)`` (SwiGLU, GeGLU; Shazeer 2020) with ``W_1, W_3`` independent and of
equal variance has the kernel ``c K(a, b, c)``: the gate and the linear path are independent Gaussian
pairs with the same covariance.
"""
from __future__ import annotations

import functools

import numpy as np

__all__: list[str] = []

#: Half-width of the integration range in standard-normal units (mass outside 1.5e-23), the widest panel,
#: the Gauss-Legendre order per panel, and the smallest refined panel (below it a transition is narrower than
#: the quadrature's own error: its weight in K is ~ its width).
_Z, _WMAX, _NODES, _H_MIN = 10.0, 2.0, 10, 1e-12
_GL_X, _GL_W = np.polynomial.legendre.leggauss(_NODES)
_GRID = np.linspace(-_Z, _Z, int(round(2 * _Z / _WMAX)) + 1)
#: Kernels computed at once (memory ~ chunk x 150 x 150 x 8 bytes).
_CHUNK = 16
#: Chebyshev degree of a table in r and the largest tail coefficient accepted (relative to max |K|).
_CHEB_DEG, _CHEB_TAIL = 128, 1e-11
_CHEB_X = np.cos(np.pi * (np.arange(_CHEB_DEG + 1) + 0.5) / (_CHEB_DEG + 1))


def _rule(center, h):
    """Nodes and Gaussian-weighted weights ``(..., M)`` on ``[-Z, Z]``: panels at most ``_WMAX`` wide, halving
    toward ``center`` down to width ``h`` (arrays of one shape)."""
    K = max(1, int(np.ceil(np.log2(_WMAX / float(np.min(h))))) + 1)
    steps = np.minimum(h[..., None] * 2.0 ** np.arange(K), _WMAX)
    c = np.clip(center, -_Z, _Z)[..., None]
    edges = np.concatenate([np.broadcast_to(_GRID, c.shape[:-1] + _GRID.shape), np.clip(c - steps, -_Z, _Z), c,
                            np.clip(c + steps, -_Z, _Z)], -1)
    edges.sort(-1)
    half, mid = (edges[..., 1:] - edges[..., :-1]) / 2, (edges[..., 1:] + edges[..., :-1]) / 2
    nodes = mid[..., None] + half[..., None] * _GL_X
    weights = half[..., None] * _GL_W * np.exp(-nodes**2 / 2) / np.sqrt(2 * np.pi)
    return nodes.reshape(*nodes.shape[:-2], -1), weights.reshape(*weights.shape[:-2], -1)


def _quad_chunk(phi, sa, sb, r, smooth):
    """The double integral of the module docstring for 1-D arrays ``sqrt(a), sqrt(b), r``."""
    s = np.sqrt(np.maximum(0.0, (1.0 - r) * (1.0 + r)))
    smoothing = sb * s
    width = np.maximum(1.0, smoothing) if smooth else np.minimum(1.0, smoothing)
    with np.errstate(divide="ignore", invalid="ignore"):
        h1 = np.fmin(np.fmin(1.0, 1.0 / sa), np.where(r != 0, width / (sb * np.abs(r)), np.inf))
        h2 = np.fmin(1.0, 1.0 / smoothing)
    z1, w1 = _rule(np.zeros(sa.shape), np.maximum(h1, _H_MIN))                      # (N, M1)
    outer = w1 * phi(sa[:, None] * z1)
    out = np.empty(sa.shape)
    flat = s == 0                                                                     # r = +-1: v = r sqrt(b/a) u
    if flat.any():
        out[flat] = (outer[flat] * phi(sb[flat, None] * r[flat, None] * z1[flat])).sum(-1)
    if (~flat).any():
        k = ~flat
        z2, w2 = _rule(-r[k, None] * z1[k] / s[k, None], np.broadcast_to(np.maximum(h2[k], _H_MIN)[:, None], z1[k].shape))
        v = sb[k, None, None] * (r[k, None, None] * z1[k, :, None] + s[k, None, None] * z2)
        out[k] = (outer[k] * (w2 * phi(v)).sum(-1)).sum(-1)
    return out


def quadrature(phi, a, b, c, *, smooth=True):
    """``E[phi(u) phi(v)]`` by the quadrature of the module docstring (broadcast float64 arrays, no validation;
    ``smooth=False`` for an activation with a kink at 0)."""
    a, b, c = np.broadcast_arrays(*(np.asarray(t, dtype=float) for t in (a, b, c)))
    sa, sb = np.sqrt(a).ravel(), np.sqrt(b).ravel()
    r = np.clip(np.divide(c.ravel(), sa * sb, out=np.zeros(sa.shape), where=sa * sb > 0), -1.0, 1.0)
    out = np.empty(sa.shape)
    for i in range(0, sa.size, _CHUNK):
        sl = slice(i, i + _CHUNK)
        out[sl] = _quad_chunk(phi, sa[sl], sb[sl], r[sl], smooth)
    return out.reshape(a.shape)


@functools.lru_cache(maxsize=512)
def _table(name: str, phi, a: float, b: float, smooth: bool, odd: bool):
    """Chebyshev coefficients in ``r`` of the kernel at fixed variances, or None (tail too large)."""
    vals = quadrature(phi, a, b, _CHEB_X * np.sqrt(a * b), smooth=smooth)
    coef = np.polynomial.chebyshev.chebfit(_CHEB_X, vals, _CHEB_DEG)
    if odd:
        coef[0::2] = 0.0   # odd phi: K is odd in r, so r = 0 maps to exactly 0 (no seed of p < 0 in the maps)
    if np.abs(coef[-8:]).max() > _CHEB_TAIL * max(1.0, float(np.abs(vals).max())):
        return None
    return coef


#: The Hermite (Mehler) path for many variance pairs: orders kept, the coefficients' panel width (resolves h_n up
#: to n = _MEHLER_N, wavelength ~ 2 pi / sqrt(2 n) = 0.35) and the accepted tail bound of a pair, relative to
#: sqrt(K(a, a, a) K(b, b, b)) (above it the pair goes to :func:`quadrature`).
_MEHLER_N, _MEHLER_PANEL, _MEHLER_TOL = 160, 0.25, 1e-11
_MEHLER_Z = float(np.sqrt(4 * _MEHLER_N + 2) + 6.0)   # h_n(z)^2 e^{-z^2/2} is below e^{-270} beyond it


def _hermite_coefficients(phi, sa, odd):
    """``c_n(a) = E[phi(sqrt(a) z) h_n(z)]``, ``n = 0.._MEHLER_N`` (``h_n = He_n / sqrt(n!)``, orthonormal), and
    ``E[phi(sqrt(a) z)^2]``, for a 1-D array ``sa = sqrt(a)``: composite Gauss-Legendre panels of width
    ``_MEHLER_PANEL`` on ``[-_MEHLER_Z, _MEHLER_Z]``, halving toward 0 down to ``1 / sa`` (a step-like ``tanh``)."""
    coef, norm2 = np.empty((sa.size, _MEHLER_N + 1)), np.empty(sa.size)
    base = np.arange(-_MEHLER_Z, _MEHLER_Z + _MEHLER_PANEL / 2, _MEHLER_PANEL)
    for i, s in enumerate(sa):
        h = min(_MEHLER_PANEL, 1.0 / max(float(s), 1e-300))
        fine = h * 2.0 ** np.arange(max(0, int(np.ceil(np.log2(_MEHLER_PANEL / h)))))
        edges = np.unique(np.concatenate([base[np.abs(base) > _MEHLER_PANEL], -fine, [0.0], fine]))
        half, mid = (edges[1:] - edges[:-1]) / 2, (edges[1:] + edges[:-1]) / 2
        z = (mid[:, None] + half[:, None] * _GL_X).ravel()
        w = (half[:, None] * _GL_W).ravel() * np.exp(-z * z / 2) / np.sqrt(2 * np.pi)
        f = phi(s * z)
        fw = f * w
        norm2[i] = fw @ f
        prev, cur = np.zeros_like(z), np.ones_like(z)
        coef[i, 0] = fw.sum()
        for n in range(_MEHLER_N):
            prev, cur = cur, (z * cur - np.sqrt(n) * prev) / np.sqrt(n + 1.0)
            coef[i, n + 1] = fw @ cur
    if odd:
        coef[:, 0::2] = 0.0
    return coef, norm2


def _mehler(phi, a, b, c, smooth, odd):
    """``K`` by Mehler's expansion ``sum_n r^n c_n(a) c_n(b)`` where its tail is provably small, the rest by
    :func:`quadrature` (1-D float64 arrays in, out). The coefficients are computed once per distinct variance, so
    ``T`` tokens of ``T`` different norms cost ``T`` one-dimensional quadratures instead of ``T^2`` two-dimensional
    ones; the tail of a pair is at most ``|r|^(N+1) sqrt(t_a t_b)`` (Cauchy-Schwarz), ``t_a = E phi^2 - sum c_n^2``."""
    keys, inverse = np.unique(np.concatenate([a, b]), return_inverse=True)
    ia, ib = inverse[: a.size], inverse[a.size:]
    coef, norm2 = _hermite_coefficients(phi, np.sqrt(keys), odd)
    tail = np.clip(norm2 - np.sum(coef * coef, axis=1), 0.0, None) + 4e-16 * norm2   # rounding of the difference
    ab = np.sqrt(a * b)
    r = np.clip(np.divide(c, ab, out=np.zeros(ab.shape), where=ab > 0), -1.0, 1.0)
    bound = np.abs(r) ** (_MEHLER_N + 1) * np.sqrt(tail[ia] * tail[ib])
    ok = bound <= _MEHLER_TOL * np.sqrt(norm2[ia] * norm2[ib])
    same = (ia == ib) & (r == 1.0)   # a token with itself: E phi^2, already integrated
    ok &= ~same
    out = np.empty(a.size)
    out[same] = norm2[ia[same]]
    acc, power = np.zeros(int(ok.sum())), np.ones(int(ok.sum()))
    ca, cb, rr = coef[ia[ok]], coef[ib[ok]], r[ok]
    for n in range(_MEHLER_N + 1):
        acc += power * ca[:, n] * cb[:, n]
        power *= rr
    out[ok] = acc
    rest = ~ok & ~same
    if rest.any():
        out[rest] = quadrature(phi, a[rest], b[rest], c[rest], smooth=smooth)
    return out


def tabulated(name, phi, a, b, c, *, smooth=True, odd=False):
    """:func:`quadrature`, through one Chebyshev table per distinct variance pair when there are many entries
    and few pairs (at most 16); with more pairs (tokens of different norms: a Gram map without LayerNorm) through
    Mehler's expansion where its tail is provably below 1e-11, by symmetric pairs (``a, b`` and ``b, a`` once);
    point by point otherwise."""
    a, b, c = np.broadcast_arrays(*(np.asarray(t, dtype=float) for t in (a, b, c)))
    if a.size >= 4 * _CHEB_DEG:
        ar, br = a.ravel(), b.ravel()
        if ar.min() == ar.max() and br.min() == br.max():   # one pair (LayerNorm'd tokens): no sort
            pairs, inverse = [(ar[0], br[0])], np.zeros(ar.size, dtype=int)
        else:
            keys, inverse = np.unique(ar + 1j * br, return_inverse=True)
            pairs = [(k.real, k.imag) for k in keys[:17]]
        if len(pairs) <= 16:
            tables = [_table(name, phi, float(x), float(y), smooth, odd) for x, y in pairs]
            if all(t is not None for t in tables):
                ab = np.sqrt(a * b).ravel()
                r = np.clip(np.divide(c.ravel(), ab, out=np.zeros(ab.shape), where=ab > 0), -1.0, 1.0)
                out = np.empty(r.size)
                inverse = inverse.ravel()
                for k, coef in enumerate(tables):
                    sel = inverse == k
                    out[sel] = np.polynomial.chebyshev.chebval(r[sel], coef)
                return out.reshape(a.shape)
    if smooth and a.size >= _MEHLER_MIN:
        return _symmetric(lambda x, y, z: _mehler(phi, x, y, z, smooth, odd), a, b, c)
    return quadrature(phi, a, b, c, smooth=smooth)


#: Entries from which the Mehler path pays (its coefficients cost about 100 two-dimensional kernels).
_MEHLER_MIN = 256


def _symmetric(kernel, a, b, c):
    """``kernel`` on the entries of a square symmetric problem (a Gram map's ``(T, T)`` arrays with ``b = a^T``,
    ``c = c^T``) only once per unordered pair; other shapes entry by entry."""
    if a.ndim == 2 and a.shape[0] == a.shape[1] and np.array_equal(a, b.T) and np.array_equal(c, c.T):
        i, j = np.triu_indices(a.shape[0])
        upper = kernel(a[i, j], b[i, j], c[i, j])
        out = np.empty(a.shape)
        out[i, j], out[j, i] = upper, upper
        return out
    return kernel(a.ravel(), b.ravel(), c.ravel()).reshape(a.shape)


def correlation(a, b, c):
    """``(sqrt(a b), r)``: ``r = c / sqrt(ab)`` clipped to [-1, 1] (rounding can push it a few ulp past 1),
    0 where a variance is 0 (then ``u`` or ``v`` is 0 and every kernel below vanishes)."""
    ab = np.sqrt(a) * np.sqrt(b)
    return ab, np.clip(np.divide(c, ab, out=np.zeros(np.shape(ab)), where=ab > 0), -1.0, 1.0)


def relu_closed(a, b, c):
    """ReLU: ``sqrt(ab) f(r) / 2`` (Cho & Saul 2009)."""
    ab, r = correlation(a, b, c)
    return ab * ((np.sqrt((1.0 - r) * (1.0 + r)) + r * (np.pi - np.arccos(r))) / np.pi) / 2.0


def gelu_closed(a, b, c):
    """GELU ``u Phi(u)``: the closed form of the module docstring (finite for variances up to ~1e300)."""
    _, r = correlation(a, b, c)
    fa, fb = a / (1.0 + a), b / (1.0 + b)                   # a/A, b/B
    root = np.sqrt(1.0 + a) * np.sqrt(1.0 + b)              # sqrt(AB)
    rho = r * np.sqrt(fa) * np.sqrt(fb)                     # c / sqrt(AB)
    delta = np.sqrt(1.0 / (1.0 + a) / (1.0 + b) + fa / (1.0 + b) + fb / (1.0 + a) + fa * fb * (1.0 - r) * (1.0 + r))
    cc = r * np.sqrt(a) * np.sqrt(b)
    return cc * (0.25 + np.arcsin(rho) / (2 * np.pi)) + (fa * fb * root * delta + rho**2 / (root * delta)) / (2 * np.pi)


def linear_closed(a, b, c):
    return np.array(c, dtype=float, copy=True)
