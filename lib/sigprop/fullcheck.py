"""``python -m sigprop.fullcheck [--device cuda|mps|cpu] [--size quick|full] [--json FILE] [--claims]``.

The Monte Carlo core of every chapter, run outside Jupyter at a chosen size: for each figure, the random
objects against their theory, with the wall time, the peak memory and the agreement statistic. It is the
script a GPU session runs at the documents' sizes (``--size full``) and ``make test`` runs at ``--size quick``
(``tests/test_fullcheck.py``). ``--claims`` also runs the claims ledger.

Each core returns per-initialisation samples and the theory; whole curves are judged by
:func:`sigprop.curve_agreement` (points of a curve share initialisations), single numbers by their z-score.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import resource
import sys
import time
from typing import Callable

import numpy as np
import torch

import sigprop as sp
from sigprop import claims
from sigprop.stats._validate import check_output_path

__all__ = ["CORES", "FigureCheck", "run", "main"]

#: Curve-level level for every figure (about 8 curves per run: family-wise false alarm below 1 %).
LEVEL = 1e-3


@dataclasses.dataclass(frozen=True)
class FigureCheck:
    """One figure's core: what was measured, at which sizes, how long it took and whether it agrees."""

    name: str
    source: str
    sizes: dict
    seconds: float
    peak_memory_mb: float
    statistic: str
    passed: bool

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def _gg_fig1d(size, device):
    T, d, inits, depth = {"quick": (32, 128, 16, 60), "full": (256, 512, 64, 60)}[size]
    cfg = sp.BlockConfig.from_beta(0.1, T=T, d=d, norm="post", alpha_sa=1.5, **sp.presets.GG_APP_C1)
    est = sp.mc_cosine_vs_depth(cfg, depth, T=T, inits=inits, seqs=2, rho0=0.1, generator=0, device=device)
    q, p = sp.theory.iterate_block_map(1.0, float(est.mean[0]), depth, cfg, T=T)
    return dict(T=T, d=d, inits=inits, depth=depth), est.samples[:, 1:], (p / q)[1:]


def _gg_fig3(size, device):
    T, d, inits = {"quick": (2000, 128, 16), "full": (100_000, 256, 64)}[size]
    betas = np.array([0.5, 1.0, 1.5, 2.0, 2.5, 3.0])
    est = sp.mc_attention_ipr(betas, T=T, d=d, inits=inits, queries=16, generator=1, device=device)
    theory = sp.mc_ipr_finite_width(betas, T=T, d=d, samples=256, generator=2).mean.numpy()
    return dict(T=T, d=d, inits=inits), est.samples[..., 0], theory


def _gg_fig4(size, device):
    # the finite-width gap closes like 1/d (book, G&G page 5): extrapolate three widths linearly in 1/d
    T, ds, n = {"quick": (64, (32, 64, 128), 200), "full": (2048, (256, 512, 1024), 200)}[size]
    ests = [sp.mc_rem_query_grad_sq_norm(2.0, T, d, n, generator=3 + d, device=device, progress=False) for d in ds]
    m = np.array([float(e.mean) for e in ests])
    s = np.array([float(e.stderr) for e in ests])
    X = np.stack([np.ones(len(ds)), 1.0 / np.asarray(ds, dtype=float)], 1)
    cov = np.linalg.inv(X.T @ (X / s[:, None] ** 2))
    coef = cov @ X.T @ (m / s**2)
    est = sp.Estimate(torch.tensor(coef[0], device="cpu"), torch.tensor(math.sqrt(cov[0, 0]), device="cpu"), n)
    return dict(T=T, d=list(ds), samples=n), est, sp.theory.rem_query_grad_sq_norm(2.0, T=T)


def _noci_lemma33(size, device):
    n, d, inits, depth = {"quick": (10, 30, 400, 6), "full": (10, 30, 4000, 10)}[size]
    g = sp.as_generator(4, device)
    x = sp.gaussian_tokens(inits, T=n, d=d, q=1.0 / d, generator=g, dtype=torch.float64)
    f0, c0 = float(x.pow(2).sum((-1, -2)).mean()), float(sp.gram_sum(x).mean())   # Eq. (12) is linear in both
    f = []
    for _ in range(depth):   # uniform attention (x-bar W_V) and a linear MLP, unit branches, weights N(0, 1/d)
        w_v, w = (torch.randn(2, inits, d, d, generator=g, device=x.device, dtype=x.dtype) / math.sqrt(d)).unbind(0)
        x = x + x.mean(-2, keepdim=True) @ w_v
        x = x + x @ w
        f.append(x.pow(2).sum((-1, -2)))
    theory = np.array([sp.theory.uniform_sq_norm(f0, c0, n, L) for L in range(1, depth + 1)])
    return dict(n=n, d=d, inits=inits, depth=depth), torch.stack(f, -1), theory


def _bao_lemma1(size, device):
    T, d, walks = {"quick": (40, 128, 4000), "full": (40, 128, 20_000)}[size]
    g = sp.as_generator(6, device)
    w_qk = sp.spectral_qk_matrix(d=d, mean=0.05, scale=0.5, generator=g)
    x = sp.random_walk_tokens(walks, T=T, d=d, generator=g, dtype=torch.float32 if device.type == "mps" else
                              torch.float64)
    z = sp.linearised_softmax_argument(sp.last_query_logits(x, w_qk.to(x), math.sqrt(d)))
    tr = sp.qk_traces(w_qk.double().cpu())
    mu, _ = sp.theory.signal_propagation_moments(np.arange(1, T + 1), T, tr_w=float(tr["tr_w"]),
                                                 tr_w2=float(tr["tr_w2"]), lam=math.sqrt(d))
    return dict(T=T, d=d, walks=walks), z, mu


def _aghajanyan_lemma1(size, device):
    # alpha = 0, causal mask: outputs are prefix means, Cov(u.O_0, u.O_l) = u^T W_V W_V^T u / (l + 1) (Lemma 1)
    N, d, d_v, n = 8, 32, 16, {"quick": 4000, "full": 40_000}[size]
    g = sp.as_generator(7, device)
    dt = torch.float32 if device.type == "mps" else torch.float64
    w_v = torch.randn(d_v, d, generator=g, device=g.device, dtype=dt) / math.sqrt(d)
    u = torch.randn(d_v, generator=g, device=g.device, dtype=dt)
    u = u / u.norm()
    x = torch.randn(n, N, d, generator=g, device=g.device, dtype=dt)
    zero = torch.zeros(16, d, device=g.device, dtype=dt)
    out, _ = sp.self_attention(x, zero, zero, w_v, causal=True)
    y = out @ u                                              # (n, N)
    theory = sp.theory.witness_covariance(w_v.double().cpu(), N, causal=True, u=u.double().cpu())[0].numpy()
    return dict(N=N, d=d, d_v=d_v, samples=n), y[:, :1] * y, theory


#: name -> (source, core). A core returns (sizes, samples (n, k) or an Estimate, theory).
CORES: dict[str, tuple[str, Callable]] = {
    "gg2025-fig1d": ("Giorlandino & Goldt 2025, Fig. 1(d): cosine vs depth, finite-T map", _gg_fig1d),
    "gg2025-fig3": ("Giorlandino & Goldt 2025, Fig. 3: IPR vs beta, finite-width REM", _gg_fig3),
    "gg2025-fig4": ("Giorlandino & Goldt 2025, Fig. 4 / Result 2: query gradient at beta = 2", _gg_fig4),
    "noci2022-lemma33": ("Noci et al. 2022, Lemma 3.3: ||X^l||^2 under uniform attention", _noci_lemma33),
    "bao2024-lemma1": ("Bao et al. 2024, Lemma 1: mean of the linearised softmax argument", _bao_lemma1),
    "aghajanyan2025-lemma1": ("Aghajanyan 2025, Lemma 1: prefix-mean covariances at alpha = 0", _aghajanyan_lemma1),
}


def _peak_mb(device) -> float:
    """Peak memory: the device's during the core (CUDA), else the process's peak resident set so far (CPU)."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(*, size: str = "quick", device=None, only=None) -> list[FigureCheck]:
    """Run the cores (all, or the names in ``only``) at ``size`` on ``device`` (default :func:`sp.default_device`)."""
    if size not in ("quick", "full"):
        raise ValueError(f"size must be 'quick' or 'full'; got {size!r}")
    device = sp.as_device(device)  # validated: the machine has it (MPS, CUDA), meta refused
    names = list(CORES) if only is None else list(only)
    unknown = set(names) - set(CORES)
    if unknown:
        raise ValueError(f"unknown cores {sorted(unknown)}; choose from {list(CORES)}")
    out = []
    for name in names:
        source, core = CORES[name]
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        start = time.perf_counter()
        sizes, measured, theory = core(size, device)
        seconds = time.perf_counter() - start
        if isinstance(measured, sp.Estimate) and np.ndim(measured.mean) == 0:
            z = float(measured.zscore(theory))
            stat, passed = f"z = {z:+.2f} (|z| <= 4)", abs(z) <= 4.0
        else:
            res = sp.curve_agreement(measured, np.asarray(theory, dtype=float), level=LEVEL, n_resamples=9999)
            stat, passed = str(res), bool(res.passed)
        out.append(FigureCheck(name, source, sizes, round(seconds, 3), round(_peak_mb(device), 1), stat, passed))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sigprop.fullcheck", description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=["cpu", "cuda", "mps"], default=None, help="default: sp.default_device()")
    ap.add_argument("--size", choices=["quick", "full"], default="quick")
    ap.add_argument("--json", metavar="FILE", help="also write the results (and the machine) as JSON")
    ap.add_argument("--claims", action="store_true", help="also run the claims ledger")
    ap.add_argument("--only", nargs="+", choices=list(CORES), help="run only these cores")
    args = ap.parse_args(argv)
    try:  # everything checked before anything runs or is written
        device = sp.as_device(args.device)  # e.g. "--device mps but Apple MPS is not available on this machine"
        if args.json:
            check_output_path(args.json, "--json")
    except ValueError as exc:
        ap.error(str(exc).replace("device=", "--device "))
    checks = run(size=args.size, device=device, only=args.only)
    for c in checks:
        print(f"{c.name:24s} {'ok ' if c.passed else 'FAIL'} {c.seconds:8.2f} s {c.peak_memory_mb:9.1f} MB  {c.statistic}")
    result = {"device": str(device), "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else
              "cpu", "torch": torch.__version__, "size": args.size, "checks": [c.as_dict() for c in checks]}
    if args.claims:
        rows = claims.run()
        result["claims"] = [r.as_json() for r in rows]
        wrong = [r.id for r in rows if r.status != r.expected]
        print(f"claims: {len(rows)} run, {len(wrong)} with an unexpected status {wrong}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1)
    return 0 if all(c.passed for c in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
