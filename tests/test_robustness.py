"""Robustness of the public API (issue 9): bad inputs raise clear errors, edge inputs give numbers.

Each bad input must raise ``ValueError`` or ``TypeError`` whose message names the argument and,
where there is one, the allowed range; no bad input may return NaN. Edge inputs that *are*
allowed (collapsed tokens, zero tokens, huge logits) must return finite values.
"""
import math

import numpy as np
import pytest
import torch

import sigprop as sp

NAN, INF = float("nan"), float("inf")


def _cfg(**kw):
    return sp.BlockConfig(**{"d": 8, "sigma_qk2": 0.1, **kw})


def _params(dtype=torch.float32):
    return sp.sample_transformer(_cfg(), 1, inits=2, generator=0, dtype=dtype)


def _x(*shape, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0), dtype=dtype)


def _w(*shape, dtype=torch.float32):
    return _x(*shape, dtype=dtype)


def _nan_tokens():
    x = _x(2, 4, 8)
    x[0, 1, 2] = NAN
    return x


def _neg_attention():
    a = torch.full((2, 3), 1 / 3)
    a[0, 0] = -0.1
    return a


# (id, callable, exception, regex the message must match: argument name ... allowed range)
BAD = [
    # --- REM theory: beta, q, p, r, T
    ("beta_c q<=0", lambda: sp.theory.beta_c(-1.0, 0.0), ValueError, r"q must be > 0"),
    ("beta_c |p|>q", lambda: sp.theory.beta_c(1.0, 1.5), ValueError, r"\|p\| <= q"),
    ("beta_c p=q", lambda: sp.theory.beta_c(1.0, 1.0), ValueError, r"p < q"),
    ("ipr beta<0", lambda: sp.theory.ipr(-1.0), ValueError, r"beta must be > 0"),
    ("ipr beta=0", lambda: sp.theory.ipr(0.0), ValueError, r"beta must be > 0"),
    ("ipr beta nan", lambda: sp.theory.ipr(NAN), ValueError, r"beta must be finite"),
    ("ipr beta inf in array", lambda: sp.theory.ipr(np.array([1.0, INF])), ValueError, r"beta must be finite"),
    ("ipr r<1", lambda: sp.theory.ipr(2.0, r=0.5), ValueError, r"r .*must lie in \[1.0, 64.0\]"),
    ("ipr p<-q", lambda: sp.theory.ipr(2.0, q=1.0, p=-2.0), ValueError, r"\|p\| <= q"),
    ("ipr beta str", lambda: sp.theory.ipr("two"), TypeError, r"beta must be a number"),
    ("ipr_finite T<2", lambda: sp.theory.ipr_finite(2.0, T=1), ValueError, r"T .*>= 2"),
    ("ipr_finite T inf", lambda: sp.theory.ipr_finite(2.0, T=INF), ValueError, r"T must be finite"),
    # --- block maps
    ("block_map beta<0", lambda: sp.theory.block_map(1.0, 0.0, beta=-1.0), ValueError, r"beta must be >= 0"),
    ("block_map norm", lambda: sp.theory.block_map(1.0, 0.0, beta=1.0, norm="sandwich"), ValueError,
     r"norm must be one of 'post', 'pre', 'none'"),
    ("block_map activation", lambda: sp.theory.block_map(1.0, 0.0, beta=1.0, activation="swish"), ValueError,
     r"activation must be one of"),
    ("block_map sigma_w2<0", lambda: sp.theory.block_map(1.0, 0.0, beta=1.0, sigma_w2=-1.0), ValueError,
     r"sigma_w2 must be >= 0"),
    ("block_map correlation<-1", lambda: sp.theory.block_map(1.0, -1.5, beta=1.0), ValueError, r"\|p\| <= q"),
    ("block_map p<0 at T=inf", lambda: sp.theory.block_map(1.0, -1.0, beta=2.0), ValueError,
     r"T -> infinity map needs p >= 0"),
    ("block_map q nan", lambda: sp.theory.block_map(NAN, 0.0, beta=1.0), ValueError, r"q must be finite"),
    ("iterate depth<0", lambda: sp.theory.iterate_block_map(1.0, 0.0, -1, beta=1.0), ValueError, r"depth must be >= 0"),
    ("iterate depth float", lambda: sp.theory.iterate_block_map(1.0, 0.0, 2.5, beta=1.0), TypeError,
     r"depth must be an int"),
    ("iterate unknown kw", lambda: sp.theory.iterate_block_map(1.0, 0.0, 2, beta=1.0, alpha=1.0), TypeError,
     r"unexpected keyword"),
    ("mlp_map sigma_b2<0", lambda: sp.theory.mlp_map(1.0, 0.0, sigma_b2=-1.0), ValueError, r"sigma_b2 must be >= 0"),
    ("attention_map |p|>q", lambda: sp.theory.attention_map(1.0, 2.0, beta=1.0), ValueError, r"\|p\| <= q"),
    # --- architecture and sampling
    ("config d=0", lambda: sp.BlockConfig(d=0), ValueError, r"d must be >= 1"),
    ("config d float", lambda: sp.BlockConfig(d=8.0), TypeError, r"d must be an int"),
    ("config heads", lambda: sp.BlockConfig(d=8, heads=3), ValueError, r"d must be divisible by heads"),
    ("config alpha_sa inf", lambda: sp.BlockConfig(d=8, alpha_sa=INF), ValueError, r"alpha_sa must be finite"),
    ("config sigma_v2<0", lambda: sp.BlockConfig(d=8, sigma_v2=-1.0), ValueError, r"sigma_v2 must be >= 0"),
    ("config norm", lambda: sp.BlockConfig(d=8, norm="Post-LN"), ValueError, r"norm must be one of"),
    ("qk_variance_for_beta beta", lambda: sp.theory.qk_variance_for_beta(0.0, T=10, d=8), ValueError, r"beta must be > 0"),
    ("from_beta T", lambda: sp.BlockConfig.from_beta(1.0, T=1, d=8), ValueError, r"T .*>= 2"),
    ("glorot fan_in", lambda: sp.theory.glorot_variance(0, 8), ValueError, r"fan_in must be > 0"),
    ("sample depth=0", lambda: sp.sample_transformer(_cfg(), 0), ValueError, r"depth must be >= 1"),
    ("sample inits=0", lambda: sp.sample_transformer(_cfg(), 1, inits=0), ValueError, r"inits must be >= 1"),
    ("sample config type", lambda: sp.sample_transformer({"d": 8}, 1), TypeError, r"config must be a BlockConfig"),
    ("forward x nan", lambda: sp.transformer_forward(_nan_tokens(), _params(), _cfg()), ValueError,
     r"x must be finite"),
    ("forward wrong d", lambda: sp.transformer_forward(_x(3, 4, 5), _params(), _cfg()), ValueError,
     r"x must have last dimension d=8"),
    ("forward wrong inits", lambda: sp.transformer_forward(_x(3, 2, 4, 8), _params(), _cfg()), ValueError,
     r"x must have shape \(inits=2"),
    ("forward mixed dtypes", lambda: sp.transformer_forward(_x(2, 4, 8, dtype=torch.float64), _params(), _cfg()),
     ValueError, r"share device and dtype"),
    ("forward x not tensor", lambda: sp.transformer_forward(np.zeros((2, 4, 8)), _params(), _cfg()), TypeError,
     r"x must be a torch.Tensor"),
    # --- attention and measures
    ("self_attention w_q shape", lambda: sp.self_attention(_x(4, 8), _w(8, 5), _w(8, 8)), ValueError,
     r"w_q must have shape \(\.\.\., d_k, d\) with d=8"),
    ("self_attention d_k mismatch", lambda: sp.self_attention(_x(4, 8), _w(6, 8), _w(5, 8)), ValueError,
     r"w_q and w_k must share d_k"),
    ("self_attention mixed dtypes", lambda: sp.self_attention(_x(4, 8), _w(8, 8, dtype=torch.float64), _w(8, 8)),
     TypeError, r"one dtype"),
    ("self_attention int x", lambda: sp.self_attention(torch.ones(4, 8, dtype=torch.long), _w(8, 8), _w(8, 8)),
     TypeError, r"x must be a floating-point tensor"),
    ("self_attention inf weights", lambda: sp.self_attention(_x(4, 8), _w(8, 8) * INF, _w(8, 8)), ValueError,
     r"w_q must be finite"),
    ("attention_ipr negative", lambda: sp.attention_ipr(_neg_attention()), ValueError, r"A must be non-negative"),
    ("attention_ipr r<1", lambda: sp.attention_ipr(torch.full((2, 3), 1 / 3), r=0.5), ValueError, r"r must be >= 1"),
    ("token_overlaps T<2", lambda: sp.token_overlaps(_x(2, 1, 8)), ValueError, r"T >= 2"),
    ("mean_cosine nan", lambda: sp.mean_cosine(_nan_tokens()), ValueError, r"x must be finite"),
    ("covariance shape", lambda: sp.cross_token_covariance(_x(5, 8)), ValueError, r"v must have at least 3"),
    # --- data
    ("gaussian T=0", lambda: sp.gaussian_tokens(2, T=0, d=4), ValueError, r"T must be >= 1"),
    ("gaussian q<0", lambda: sp.gaussian_tokens(2, T=3, d=4, q=-1.0), ValueError, r"q must be > 0"),
    ("equicorrelated rho>1", lambda: sp.equicorrelated_tokens(T=3, d=4, rho=1.5), ValueError,
     r"rho must lie in \[-1.0, 1.0\]"),   # down to the Gram bound -1/(T-1) (issue 37)
    ("equicorrelated rho nan", lambda: sp.equicorrelated_tokens(T=3, d=4, rho=NAN), ValueError, r"rho must be finite"),
    ("orthogonal T>d", lambda: sp.orthogonal_tokens(T=8, d=4), ValueError, r"T <= d"),
    ("random walk sigma shape", lambda: sp.random_walk_tokens(T=3, d=4, sigma=torch.eye(3)), ValueError,
     r"sigma must have shape \(d, d\)"),
    ("markov vocab", lambda: sp.MarkovSource(1), ValueError, r"vocab must be >= 2"),
    ("markov concentration", lambda: sp.MarkovSource(4, concentration=0.0), ValueError, r"concentration must be > 0"),
    # --- Monte Carlo engine
    ("mc_ipr beta<=0", lambda: sp.mc_attention_ipr([0.0], T=100, d=8), ValueError, r"beta must be > 0"),
    ("mc_ipr T<2", lambda: sp.mc_attention_ipr([1.0], T=1, d=8), ValueError, r"T must be >= 2"),
    ("mc_ipr d=0", lambda: sp.mc_attention_ipr([1.0], T=100, d=0), ValueError, r"d must be >= 1"),
    ("mc_ipr queries>T", lambda: sp.mc_attention_ipr([1.0], T=10, d=8, queries=20), ValueError,
     r"queries must be <= T=10"),
    ("mc_ipr p>q", lambda: sp.mc_attention_ipr([1.0], T=100, d=8, q=1.0, p=1.5), ValueError, r"\|p\| <= q"),
    ("mc_ipr p<0", lambda: sp.mc_attention_ipr([1.0], T=100, d=8, q=1.0, p=-0.5), ValueError,
     r"p/q must lie in \[0.0, 1.0\]"),
    ("mc_ipr chunk", lambda: sp.mc_attention_ipr([1.0], T=100, d=8, chunk=1500), ValueError,
     r"chunk must be a multiple of 1024"),
    ("mc_ipr inits=1", lambda: sp.mc_attention_ipr([1.0], T=100, d=8, inits=1), ValueError, r"inits must be >= 2"),
    ("monte_carlo n<2", lambda: sp.monte_carlo(lambda m, g: torch.zeros(m), 1, generator=0), ValueError,
     r"n must be >= 2"),
    ("monte_carlo chunk=0", lambda: sp.monte_carlo(lambda m, g: torch.zeros(m), 4, generator=0, chunk=0),
     ValueError, r"chunk must be >= 1"),
    ("monte_carlo bad sample_fn", lambda: sp.monte_carlo(lambda m, g: torch.zeros(m + 1), 4, generator=0,
                                                         device="cpu"), ValueError, r"leading dimension"),
    ("estimate n<2", lambda: sp.estimate(torch.ones(1)), ValueError, r"at least 2 samples"),
    ("generator seed<0", lambda: sp.as_generator(-1), ValueError, r"generator seed must satisfy 0 <= seed < 2\*\*64"),
    ("generator type", lambda: sp.as_generator("abc"), TypeError, r"generator must be an int seed"),
    ("generator float", lambda: sp.as_generator(1.5), TypeError, r"generator must be an int seed"),
    # --- trainability diagram (theory only)
    ("diagram beta<0", lambda: sp.theory.trainability_diagram([-1.0, 1.0], [1.0], depth=3), ValueError,
     r"beta must be > 0"),
    ("diagram depth=0", lambda: sp.theory.trainability_diagram([1.0], [1.0], depth=0), ValueError,
     r"depth must be >= 1"),
    ("diagram rho0>1", lambda: sp.theory.trainability_diagram([1.0], [1.0], depth=3, rho0=1.5), ValueError,
     r"rho0 must lie in \[-1.0, 1.0\]"),
    ("diagram threshold", lambda: sp.theory.trainability_diagram([1.0], [1.0], depth=3, rank_threshold=2.0),
     ValueError, r"rank_threshold must lie in \[0.0, 1.0\]"),
]


@pytest.mark.parametrize("name, fn, exc, match", BAD, ids=[b[0] for b in BAD])
def test_bad_input_raises_clear_error(name, fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()


def test_table_is_large_enough():
    assert len(BAD) >= 30
    assert len({b[0] for b in BAD}) == len(BAD)


def test_bad_profile_option(monkeypatch):
    monkeypatch.setenv("SIGPROP_PROFILE", "medium")
    with pytest.raises(ValueError, match=r"SIGPROP_PROFILE must be one of quick, full"):
        sp.profile()


def test_mixed_devices_forward_on_cpu_machine():
    # the "meta" device stands in for a second device: the check runs before any computation
    import dataclasses

    p = _params()
    meta = sp.TransformerParams(**{f.name: getattr(p, f.name).to("meta") for f in dataclasses.fields(p)})
    with pytest.raises(ValueError, match=r"x \(cpu, torch.float32\) and params \(meta, torch.float32\) must share"):
        sp.transformer_forward(_x(2, 4, 8), meta, _cfg())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="mixed devices need a second device")
def test_mixed_devices():  # pragma: no cover - CPU-only CI
    x = _x(4, 8)
    with pytest.raises(ValueError, match=r"one device"):
        sp.self_attention(x, _w(8, 8).cuda(), _w(8, 8))
    with pytest.raises(ValueError, match=r"share device and dtype"):
        sp.transformer_forward(_x(2, 4, 8).cuda(), _params(), _cfg())


# ----------------------------------------------------------------------------- allowed edge inputs -> numbers

EDGE = [
    ("ipr at p=q (collapsed tokens)", lambda: sp.theory.ipr(3.0, q=1.0, p=1.0)),
    ("ipr tiny beta", lambda: sp.theory.ipr(1e-300)),
    ("ipr huge beta", lambda: sp.theory.ipr(1e300)),
    ("ipr_finite large sigma", lambda: sp.theory.ipr_finite(50.0, T=100_000, p=0.9)),
    ("block_map at p=q", lambda: sp.theory.block_map(1.0, 1.0, beta=2.0)),
    ("block_map at p=-q, T=2", lambda: sp.theory.block_map(1.0, -1.0, beta=2.0, T=2)),
    ("block_map tanh at p=q", lambda: sp.theory.block_map(1.0, 1.0, beta=2.0, activation="tanh")),
    ("layer_norm of zeros", lambda: sp.layer_norm(torch.zeros(3, 4))),
    ("mean_cosine of zero tokens", lambda: sp.mean_cosine(torch.zeros(2, 3, 4))),
    ("self_attention huge logits", lambda: sp.self_attention(1e3 * _x(5, 8), _w(8, 8), _w(8, 8))[0]),
    ("forward huge sigma_qk2", lambda: sp.transformer_forward(
        _x(2, 4, 8), sp.sample_transformer(_cfg(sigma_qk2=1e6), 3, inits=2, generator=0), _cfg(sigma_qk2=1e6))),
    ("forward zero input", lambda: sp.transformer_forward(torch.zeros(2, 4, 8), _params(), _cfg())),
    ("attention_entropy one-hot", lambda: sp.attention_entropy(torch.eye(4))),
]


@pytest.mark.parametrize("name, fn", EDGE, ids=[e[0] for e in EDGE])
def test_edge_inputs_give_finite_numbers(name, fn):
    out = fn()
    values = out if isinstance(out, tuple) else (out,)
    for v in values:
        arr = v.detach().cpu().double().numpy() if isinstance(v, torch.Tensor) else np.asarray(v, dtype=float)
        assert np.all(np.isfinite(arr)), f"{name} returned non-finite values"


def test_validation_errors_never_return_nan_silently():
    # every BAD call raised (above); here: the same calls never return a value at all
    returned = []
    for name, fn, _, _ in BAD:
        try:
            out = fn()
        except (ValueError, TypeError):
            continue
        returned.append((name, out))
    assert not returned, f"returned instead of raising: {[n for n, _ in returned]}"


def test_beta_c_is_inf_free_at_valid_inputs():
    assert math.isfinite(sp.theory.beta_c(1.0, 0.999999))


# ----------------------------------------------------------------------------- notebooks write only to scratch

_WRITE_CALLS = ("savefig(", ".to_csv(", "np.save(", "np.savez", "torch.save(", ".write_text(", ".write_bytes(",
                "json.dump(", "shutil.copy", "os.makedirs(", ".mkdir(")


def _notebook_paths():
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[1]
    return sorted(p for top in ("chapters", "book") for p in (root / top).rglob("*.ipynb")
                  if ".ipynb_checkpoints" not in p.parts and "_build" not in p.parts)


@pytest.mark.parametrize("path", _notebook_paths(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_notebooks_write_only_to_build_or_temp(path):
    # Static guard for "no notebook writes outside the build folder" (issue 9): a page that writes a
    # file must build the path from the system temp folder or _build. (`python -m sigprop.bench
    # --pages` checks the same dynamically, by snapshotting the repository around each page.)
    import re

    import nbformat

    nb = nbformat.read(path, as_version=4)
    src = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    writes = [line for line in src.splitlines()
              if any(w in line for w in _WRITE_CALLS) or re.search(r"open\([^)]*['\"][wa]b?['\"]", line)]
    if writes:
        assert "gettempdir" in src or "_build" in src or "TemporaryDirectory" in src, (
            f"{path.name} writes files ({writes[:3]}) without a temp or _build path")
