"""Benchmarks of the Monte Carlo engine (issue 9): speed against the machine's own limits.

``python -m sigprop.bench [--json FILE] [--pages]`` prints one table. Every speed figure is a
*ratio measured side by side in the same run* -- achieved FLOP/s over the same machine's dense
matmul FLOP/s, or batched over naive wall time -- because absolute times on shared machines are
noise. Timings interleave the two sides of each ratio and keep the best of a few repeats.

Benchmarks (each returns a list of result rows, see :func:`run`):

* :func:`bench_forward` -- batched random-transformer forward (:func:`sigprop.transformer_forward`):
  achieved matmul FLOP/s as a fraction of a dense ``n x n`` float32 matmul (goal >= 50% for
  ``d, T >= 256`` on CPU). Only the matmul FLOPs are counted (QKV, logits, ``A V``, MLP), so the
  fraction is a lower bound on how well the elementwise work (softmax, LayerNorm) hides.
* :func:`bench_naive` -- the same networks written the way a reader would (one ``nn.Module`` per
  initialisation, one sequence at a time, Python loops over heads and layers) against the batched
  engine; speedup and the largest difference of the outputs (float rounding only).
* :func:`bench_ipr` -- :func:`sigprop.mc_attention_ipr` at ``T = 100,000``, 20 betas, 64 query
  rows, in a fresh subprocess so that its peak resident memory is measured (goal < 20 s, < 1 GB).
* :func:`bench_diagram` -- the theory-only trainability diagram (100 x 100 grid, 60 layers) for
  several block maps (goal < 2 s each).
* :func:`bench_grad` -- per-sample gradient norms at initialisation by ``torch.func.vmap(grad)``
  against a Python loop over samples (Giorlandino & Goldt 2025, Result 2; Noci et al. 2022,
  Lemma 3.1), with the agreement of the two.
* :func:`bench_pages` (``--pages``, not in the default run) -- executes every book page with
  nbclient, records its time and whether it wrote files outside the build folder; with
  ``twice=True`` runs the pages in reverse order and then again.

Nothing here is asserted in the test suite (``tests/test_bench.py`` runs it at tiny sizes only).

The tanh trainability diagram met the 2 s goal only after the tanh MLP moments were tabulated in
``rho`` (Chebyshev, one table per ``q_1``; before that, a 48 x 48 Gauss-Hermite rule per grid point and
layer took ~1-2 minutes on 100 x 100 x 60).
"""
from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import sys
import time
from typing import Callable

import numpy as np
import torch

__all__ = [
    "run",
    "format_table",
    "matmul_flops",
    "bench_forward",
    "bench_naive",
    "bench_ipr",
    "bench_diagram",
    "bench_grad",
    "bench_pages",
    "forward_flops",
    "NaiveTransformer",
]


# ----------------------------------------------------------------------------- timing helpers

def _sync(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def _time(fn: Callable[[], object], device="cpu") -> float:
    _sync(device)
    t = time.perf_counter()
    fn()
    _sync(device)
    return time.perf_counter() - t


def _best_interleaved(fns: dict, repeats: int, device="cpu", warmup: bool = True) -> dict:
    """Best-of-``repeats`` wall time of each function, the functions interleaved round by round
    (so that a burst of load from other processes hits every side of a ratio alike)."""
    if warmup:
        for f in fns.values():
            f()
    best = {k: math.inf for k in fns}
    for _ in range(repeats):
        for k, f in fns.items():
            best[k] = min(best[k], _time(f, device))
    return best


def _row(bench, setting, metric, value, *, goal=None, meets=None, **extra):
    row = {"bench": bench, "setting": setting, "metric": metric, "value": value, "goal": goal, "meets": meets}
    row.update(extra)
    return row


def _load():
    try:
        return os.getloadavg()
    except OSError:  # pragma: no cover
        return None


def matmul_flops(n: int = 1024, *, device="cpu", dtype=torch.float32) -> Callable[[], object]:
    """A closure doing one dense ``n x n`` matmul (``2 n^3`` FLOPs) on ``device``."""
    g = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, generator=g, device=device, dtype=dtype)
    b = torch.randn(n, n, generator=g, device=device, dtype=dtype)
    return lambda: a @ b


# ----------------------------------------------------------------------------- 1. batched forward

def forward_flops(config, depth: int, inits: int, samples: int, T: int) -> float:
    """Matmul FLOPs of :func:`sigprop.transformer_forward` (QKV, logits, A V, MLP; 2 per multiply-add)."""
    c = config
    H, dk, dv, d, f = c.heads, c.head_dim, c.value_dim, c.d, c.hidden
    per_seq = 2 * T * d * H * (2 * dk + dv) + 2 * T * T * H * (dk + dv)
    if c.mlp:
        per_seq += 2 * 2 * T * d * f
    return float(depth * inits * samples * per_seq)


def bench_forward(sizes=None, *, repeats: int = 3, device="cpu", matmul_n: int = 1024):
    """FLOP/s of the batched forward as a fraction of dense matmul FLOP/s, measured side by side."""
    import sigprop as sp

    if sizes is None:
        sizes = [dict(d=256, T=256, heads=1, depth=4, inits=4, samples=2),
                 dict(d=256, T=256, heads=4, depth=4, inits=4, samples=2),
                 dict(d=64, T=64, heads=1, depth=8, inits=16, samples=8)]
    mm = matmul_flops(matmul_n, device=device)
    rows = []
    for s in sizes:
        cfg = sp.BlockConfig(d=s["d"], heads=s["heads"], sigma_qk2=sp.gg_qk_variance(1.0, s["T"], s["d"]))
        params = sp.sample_transformer(cfg, s["depth"], inits=s["inits"], generator=0, device=device)
        x = sp.gaussian_tokens(s["inits"], s["samples"], T=s["T"], d=s["d"], generator=1, device=device)
        with torch.no_grad():
            t = _best_interleaved({"mm": mm, "fwd": lambda: sp.transformer_forward(x, params, cfg)},
                                  repeats, device)
        peak = 2 * matmul_n**3 / t["mm"]
        achieved = forward_flops(cfg, s["depth"], s["inits"], s["samples"], s["T"]) / t["fwd"]
        big = s["d"] >= 256 and s["T"] >= 256
        goal = ">= 0.5" if big and torch.device(device).type == "cpu" else None
        frac = achieved / peak
        rows.append(_row("forward", f"{device} d={s['d']} T={s['T']} H={s['heads']} L={s['depth']} "
                         f"inits={s['inits']} B={s['samples']}", "FLOP/s / dense matmul FLOP/s", frac,
                         goal=goal, meets=(frac >= 0.5) if goal else None,
                         gflops=achieved / 1e9, matmul_gflops=peak / 1e9, seconds=t["fwd"]))
    return rows


# ----------------------------------------------------------------------------- 2. naive loop

class NaiveTransformer(torch.nn.Module):
    """The straightforward implementation: one module per network, one sequence at a time.

    ``NaiveTransformer(config, depth)``; :meth:`load` copies network ``i`` of a
    :class:`sigprop.TransformerParams`. Python loops over layers and heads, ``nn.Linear`` layers,
    ``torch.softmax`` -- what a reader would write from the module docstring of ``sigprop._blocks``.
    """

    def __init__(self, config, depth: int):
        super().__init__()
        c = config
        self.c, self.depth = c, depth
        lin = torch.nn.Linear
        self.q = torch.nn.ModuleList([torch.nn.ModuleList([lin(c.d, c.head_dim, bias=False) for _ in range(c.heads)])
                                      for _ in range(depth)])
        self.k = torch.nn.ModuleList([torch.nn.ModuleList([lin(c.d, c.head_dim, bias=False) for _ in range(c.heads)])
                                      for _ in range(depth)])
        self.v = torch.nn.ModuleList([torch.nn.ModuleList([lin(c.d, c.value_dim, bias=False) for _ in range(c.heads)])
                                      for _ in range(depth)])
        self.fc1 = torch.nn.ModuleList([lin(c.d, c.hidden) for _ in range(depth)])
        self.fc2 = torch.nn.ModuleList([lin(c.hidden, c.d) for _ in range(depth)])

    @torch.no_grad()
    def load(self, params, i: int):
        for l in range(self.depth):
            for h in range(self.c.heads):
                self.q[l][h].weight.copy_(params.w_q[i, l, h])
                self.k[l][h].weight.copy_(params.w_k[i, l, h])
                self.v[l][h].weight.copy_(params.w_v[i, l, h])
            self.fc1[l].weight.copy_(params.w1[i, l])
            self.fc1[l].bias.copy_(params.b1[i, l])
            self.fc2[l].weight.copy_(params.w2[i, l])
            self.fc2[l].bias.copy_(params.b2[i, l])
        return self

    @staticmethod
    def _ln(x):
        return x / torch.sqrt(torch.clamp(torch.mean(x * x, dim=-1, keepdim=True), min=1e-12))

    def _sa(self, x, l):
        c = self.c
        heads = []
        for h in range(c.heads):
            a = self.q[l][h](x) @ self.k[l][h](x).T * c.scale
            if c.causal:
                a = a.masked_fill(torch.ones_like(a, dtype=torch.bool).triu(1), float("-inf"))
            v = self.v[l][h](x)
            if c.gain_control:
                v = v - v.mean(0, keepdim=True)
            heads.append(torch.softmax(a, dim=-1) @ v)
        return torch.cat(heads, dim=-1)

    def _mlp(self, x, l):
        act = {"relu": torch.relu, "tanh": torch.tanh, "linear": lambda z: z}[self.c.activation]
        return self.fc2[l](act(self.fc1[l](x)))

    def forward(self, x):
        """One sequence ``(T, d)`` -> list of the ``depth + 1`` representations."""
        c, outs = self.c, [x]
        for l in range(self.depth):
            for branch, skip, w in ((self._sa, c.alpha_sa, c.branch_sa), (self._mlp, c.alpha_mlp, c.branch_mlp)):
                if branch is self._mlp and not c.mlp:
                    continue
                if c.norm == "post":
                    x = self._ln(skip * x + w * branch(x, l))
                elif c.norm == "pre":
                    x = skip * x + w * branch(self._ln(x), l)
                else:
                    x = skip * x + w * branch(x, l)
            outs.append(x)
        return outs


def _naive_forward(models, x):
    """Loop over networks and sequences: ``x (inits, samples, T, d)`` -> ``(depth+1, inits, samples, T, d)``."""
    out = [[torch.stack(m(x[i, b])) for b in range(x.shape[1])] for i, m in enumerate(models)]
    return torch.stack([torch.stack(o) for o in out]).permute(2, 0, 1, 3, 4)


def bench_naive(sizes=None, *, repeats: int = 2, device="cpu"):
    """Speedup of :func:`sigprop.transformer_forward` over :class:`NaiveTransformer` loops, and
    the largest output difference (float32 and float64)."""
    import sigprop as sp

    if sizes is None:
        sizes = [dict(name="Aghajanyan Sec. 8", d=32, T=8, heads=1, depth=2, inits=32, samples=16, goal=20),
                 dict(name="Noci / G&G (reduced)", d=128, T=64, heads=2, depth=12, inits=4, samples=4)]
    rows = []
    for s in sizes:
        cfg = sp.BlockConfig(d=s["d"], heads=s["heads"], sigma_qk2=sp.gg_qk_variance(1.0, max(s["T"], 2), s["d"]))
        label = (f"{s['name']}: d={s['d']} T={s['T']} H={s['heads']} L={s['depth']} "
                 f"inits={s['inits']} B={s['samples']}")
        diffs = {}
        for dtype in (torch.float64, torch.float32):
            params = sp.sample_transformer(cfg, s["depth"], inits=s["inits"], generator=0, device=device, dtype=dtype)
            x = sp.gaussian_tokens(s["inits"], s["samples"], T=s["T"], d=s["d"], generator=1, device=device,
                                   dtype=dtype)
            models = [NaiveTransformer(cfg, s["depth"]).to(device=device, dtype=dtype).load(params, i)
                      for i in range(s["inits"])]
            with torch.no_grad():
                ref = _naive_forward(models, x)
                fast = sp.transformer_forward(x, params, cfg)
                diffs[dtype] = float((fast - ref).abs().max() / ref.abs().max())
                if dtype == torch.float32:
                    t = _best_interleaved({"naive": lambda: _naive_forward(models, x),
                                           "batched": lambda: sp.transformer_forward(x, params, cfg)},
                                          repeats, device)
        speed = t["naive"] / t["batched"]
        goal = s.get("goal")
        rows.append(_row("naive loop", label, "speedup (naive time / batched time)", speed,
                         goal=f">= {goal}" if goal else None, meets=(speed >= goal) if goal else None,
                         naive_s=t["naive"], batched_s=t["batched"],
                         max_rel_diff_float32=diffs[torch.float32], max_rel_diff_float64=diffs[torch.float64]))
        rows.append(_row("naive loop", label, "max |batched - naive| / max|naive| (float64)",
                         diffs[torch.float64], goal="< 1e-12", meets=diffs[torch.float64] < 1e-12))
    return rows


# ----------------------------------------------------------------------------- 3. IPR at T = 100,000

_IPR_CHILD = r"""
import json, resource, sys, time
import numpy as np, torch
torch.set_num_threads({threads})
import sigprop as sp
rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
betas = np.linspace(0.5, 5.0, {n_beta})
t = time.perf_counter()
est = sp.mc_attention_ipr(betas, T={T}, d={d}, inits={inits}, queries={queries}, generator=0, device="cpu",
                          progress=False)
dt = time.perf_counter() - t
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
ok = bool(torch.isfinite(est.mean).all()) and bool(((est.mean >= 1.0 / {T}) & (est.mean <= 1.0)).all())
print(json.dumps(dict(seconds=dt, peak_rss_kb=rss, import_rss_kb=rss0, finite_in_range=ok,
                      mean=est.mean[:, 0].tolist())))
"""


def bench_ipr(*, T: int = 100_000, n_beta: int = 20, queries: int = 64, inits: int = 4, d: int = 64,
              threads: int | None = None):
    """:func:`sigprop.mc_attention_ipr` at the issue's size, in a subprocess (peak RSS via getrusage)."""
    threads = threads or max(1, min(2, os.cpu_count() or 1))
    code = _IPR_CHILD.format(T=T, n_beta=n_beta, queries=queries, inits=inits, d=d, threads=threads)
    env = dict(os.environ, SIGPROP_DEVICE="cpu")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"IPR benchmark subprocess failed:\n{proc.stderr[-2000:]}")
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    setting = f"cpu threads={threads} T={T} betas={n_beta} queries={queries} inits={inits} d={d}"
    peak_mb = res["peak_rss_kb"] / 1024
    big = T >= 100_000 and n_beta >= 20 and queries >= 64
    return [
        _row("IPR streaming", setting, "seconds", res["seconds"], goal="< 20" if big else None,
             meets=(res["seconds"] < 20) if big else None),
        _row("IPR streaming", setting, "peak RSS of the process (MB)", peak_mb, goal="< 1024" if big else None,
             meets=(peak_mb < 1024) if big else None, import_rss_mb=res["import_rss_kb"] / 1024,
             finite_in_range=res["finite_in_range"]),
    ]


# ----------------------------------------------------------------------------- 4. trainability diagram

def bench_diagram(*, n: int = 100, depth: int = 60, repeats: int = 2, tanh: bool = True):
    """Wall time of :func:`sigprop.theory.trainability_diagram` on an ``n x n`` grid for several block maps.

    The tanh map uses the tabulated moments of ``sigprop._blockmaps._tanh_moments``; ``tanh=False`` skips it.
    """
    import sigprop as sp

    beta = np.linspace(0.05, 3.0, n)
    alpha = np.linspace(0.05, 3.0, n)  # alpha_sa = 0 with orthogonal inputs meets 0/0 in the maps (issue 9 report)
    maps = {"post-LN relu (Alg. 1)": {}, "pre-LN relu (Alg. 2)": dict(norm="pre"),
            "gain control (Alg. 3)": dict(gain_control=True), "no LN relu": dict(norm="none"),
            "post-LN linear": dict(activation="linear")}
    if tanh:
        maps["post-LN tanh"] = dict(activation="tanh")
    rows = []
    for name, kw in maps.items():
        t = _best_interleaved({"d": lambda: sp.theory.trainability_diagram(beta, alpha, depth=depth, **kw)},
                              repeats, warmup=False)["d"]
        full = n >= 100 and depth >= 60
        rows.append(_row("diagram", f"{name}: {n}x{n} grid, {depth} layers", "seconds", t,
                         goal="< 2" if full else None, meets=(t < 2) if full else None))
    return rows


# ----------------------------------------------------------------------------- 6. per-sample gradients

def _attention_loss(w_q, w_k, w_v, x, g):
    """Giorlandino & Goldt 2025, Result 2: L = (1/T) sum G * S(X) for one sample."""
    T, d = x.shape
    a = (x @ w_q.T) @ (x @ w_k.T).T / math.sqrt(d)
    return (g * (torch.softmax(a, dim=-1) @ (x @ w_v.T))).sum() / T


def bench_grad(*, B: int = 128, T: int = 32, d: int = 32, jac_batch: int = 32, repeats: int = 2, device="cpu"):
    """Per-sample ``||dL/dW_Q||_F^2`` by ``vmap(grad)`` vs a loop of ``autograd.grad``; and, when the
    chapter function exists, :func:`sigprop.attention_jacobian_sq_norms` (Noci Lemma 3.1,
    ``vmap(jacrev)``) vs a loop of ``torch.autograd.functional.jacobian``."""
    import sigprop as sp

    g = torch.Generator(device=device).manual_seed(0)
    s = math.sqrt(1.0 / d)
    w_q, w_k, w_v = (s * torch.randn(B, d, d, generator=g, device=device) for _ in range(3))
    x = torch.randn(B, T, d, generator=g, device=device)
    G = torch.randn(B, T, d, generator=g, device=device)

    def vmapped():
        gq = torch.func.vmap(torch.func.grad(_attention_loss))(w_q, w_k, w_v, x, G)
        return gq.pow(2).sum((-1, -2))

    def looped():
        out = torch.empty(B, device=device)
        for i in range(B):
            wq = w_q[i].clone().requires_grad_(True)
            (gq,) = torch.autograd.grad(_attention_loss(wq, w_k[i], w_v[i], x[i], G[i]), wq)
            out[i] = gq.pow(2).sum()
        return out

    diff = float((vmapped() - looped()).abs().max() / looped().abs().max())
    t = _best_interleaved({"loop": looped, "vmap": vmapped}, repeats, device)
    rows = [_row("per-sample grad", f"G&G Result 2: ||dL/dW_Q||^2, B={B} T={T} d={d}",
                 "speedup (loop / vmap(grad))", t["loop"] / t["vmap"], loop_s=t["loop"], vmap_s=t["vmap"],
                 max_rel_diff=diff)]
    jac = getattr(sp, "attention_jacobian_sq_norms", None)
    if jac is not None:
        Bj, n, dj = jac_batch, 8, 16
        xs = torch.randn(Bj, n, dj, generator=g, device=device, dtype=torch.float64)
        wq, wk, wv = (torch.randn(Bj, dj, dj, generator=g, device=device, dtype=torch.float64) / math.sqrt(dj)
                      for _ in range(3))

        def jac_loop():
            out = torch.empty(Bj, 3, dtype=torch.float64)
            for i in range(Bj):
                def f(a, b, c, i=i):
                    return torch.softmax((xs[i] @ a.T) @ (xs[i] @ b.T).T / math.sqrt(dj), -1) @ (xs[i] @ c.T)
                js = torch.autograd.functional.jacobian(f, (wq[i], wk[i], wv[i]))
                out[i] = torch.stack([j.pow(2).sum() for j in js])
            return out

        def jac_vmap():
            r = jac(xs, wq, wk, wv, wrt=("q", "k", "v"))
            return torch.stack([r["q"], r["k"], r["v"]], -1)

        jdiff = float((jac_vmap() - jac_loop()).abs().max() / jac_loop().abs().max())
        tj = _best_interleaved({"loop": jac_loop, "vmap": jac_vmap}, repeats, device)
        rows.append(_row("per-sample grad", f"Noci Lemma 3.1: ||dS/dW_Q,K,V||^2, B={Bj} n={n} d={dj} float64",
                         "speedup (loop / sp.attention_jacobian_sq_norms)", tj["loop"] / tj["vmap"],
                         loop_s=tj["loop"], vmap_s=tj["vmap"], max_rel_diff=jdiff))
    return rows


# ----------------------------------------------------------------------------- 5. book pages

def _repo_root():
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.abspath(os.path.join(here, "..", "..", ".."))


def _notebooks(root):
    found = []
    for top in ("chapters", "book"):
        for dirpath, dirnames, files in os.walk(os.path.join(root, top)):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "_")))
            found += [os.path.join(dirpath, f) for f in sorted(files) if f.endswith(".ipynb")]
    return found


def _snapshot(root):
    snap = {}
    for dirpath, dirnames, files in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in (".git", ".venv", "_build", "__pycache__", ".ipynb_checkpoints",
                                                        ".hypothesis", ".pytest_cache")]
        for f in files:
            p = os.path.join(dirpath, f)
            try:
                st = os.stat(p)
            except OSError:
                continue
            snap[p] = (st.st_mtime_ns, st.st_size)
    return snap


def bench_pages(notebooks=None, *, twice: bool = False, timeout: int = 900,
                progress: Callable[[str], None] | None = None):
    """Execute book pages with nbclient (quick profile, CPU); one row per page plus the total.

    Each row records the wall time, whether the page ran without error (its hidden ``assert``
    cells included) and any file it created or changed outside ``_build`` and the system temp
    folder. ``twice=True`` runs the pages in reverse order, then in order again.
    """
    import nbformat
    from nbclient import NotebookClient

    root = _repo_root()
    paths = list(notebooks) if notebooks is not None else _notebooks(root)
    order = (paths[::-1] + paths) if twice else paths
    env_backup = dict(os.environ)
    os.environ.setdefault("SIGPROP_PROFILE", "quick")
    os.environ.setdefault("SIGPROP_DEVICE", "cpu")
    rows, total = [], 0.0
    try:
        for k, path in enumerate(order):
            before = _snapshot(root)
            nb = nbformat.read(path, as_version=4)
            client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                                    resources={"metadata": {"path": os.path.dirname(path)}})
            t = time.perf_counter()
            error = None
            try:
                client.execute()
            except Exception as exc:  # noqa: BLE001 -- reported, not raised
                error = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}"
            dt = time.perf_counter() - t
            total += dt
            after = _snapshot(root)
            written = sorted(os.path.relpath(p, root) for p in after if before.get(p) != after[p])
            run = 2 if twice and k >= len(paths) else 1
            rows.append(_row("pages", os.path.relpath(path, root) + (f" (run {run})" if twice else ""), "seconds", dt,
                             goal="< 120", meets=dt < 120 and error is None, error=error, wrote_outside_build=written))
            if progress:
                progress(f"{rows[-1]['setting']}: {dt:.1f} s{'' if error is None else ', ' + error}"
                         f"{'' if not written else ', wrote ' + ', '.join(written[:3])}")
    finally:
        os.environ.clear()
        os.environ.update(env_backup)
    rows.append(_row("pages", "total", "seconds", total))
    return rows


# ----------------------------------------------------------------------------- driver

def _meta(threads):
    return {"torch": torch.__version__, "python": platform.python_version(), "machine": platform.machine(),
            "processor": platform.processor() or platform.machine(), "cpu_count": os.cpu_count(),
            "torch_threads": threads, "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
            "loadavg_start": _load(), "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def run(*, tiny: bool = False, pages: bool = False, pages_twice: bool = False, only=None, threads: int | None = None,
        progress: Callable[[str], None] | None = None) -> dict:
    """Run the benchmarks; returns ``{"meta": {...}, "rows": [...]}``.

    ``tiny=True`` uses toy sizes (seconds; for tests and the book page); ``only`` is a subset of
    ``{"forward", "naive", "ipr", "diagram", "grad", "pages"}``. ``pages`` adds :func:`bench_pages`.
    """
    threads = threads or max(1, min(2, os.cpu_count() or 1))
    old_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    names = ["forward", "naive", "ipr", "diagram", "grad"] + (["pages"] if pages or pages_twice else [])
    if only is not None:
        bad = set(only) - set(names) - {"pages"}
        if bad:
            raise ValueError(f"only must name benchmarks among {sorted(set(names) | {'pages'})}; got {sorted(bad)}")
        names = [n for n in names + ["pages"] if n in only]
        names = list(dict.fromkeys(names))
    meta = _meta(threads)
    rows = []
    t0 = time.perf_counter()
    try:
        for name in names:
            if progress:
                progress(name)
            if name == "forward":
                sizes = [dict(d=16, T=8, heads=2, depth=2, inits=2, samples=2)] if tiny else None
                rows += bench_forward(sizes, repeats=1 if tiny else 3, matmul_n=128 if tiny else 1024)
                if torch.cuda.is_available() and not tiny:
                    gpu = [dict(d=1024, T=1024, heads=8, depth=4, inits=8, samples=4)]
                    rows += bench_forward(gpu, device="cuda", matmul_n=8192)
            elif name == "naive":
                sizes = [dict(name="tiny", d=8, T=4, heads=1, depth=1, inits=2, samples=2)] if tiny else None
                rows += bench_naive(sizes, repeats=1 if tiny else 2)
            elif name == "ipr":
                rows += (bench_ipr(T=3000, n_beta=3, queries=4, inits=2, d=8, threads=threads) if tiny
                         else bench_ipr(threads=threads))
            elif name == "diagram":
                rows += bench_diagram(n=10, depth=5, repeats=1) if tiny else bench_diagram()
            elif name == "grad":
                rows += bench_grad(B=4, T=4, d=4, jac_batch=2, repeats=1) if tiny else bench_grad()
            elif name == "pages":
                rows += bench_pages(twice=pages_twice, progress=progress)
    finally:
        torch.set_num_threads(old_threads)
    meta["seconds"] = time.perf_counter() - t0
    meta["loadavg_end"] = _load()
    return {"meta": meta, "rows": rows}


def _fmt(v):
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) >= 1e-3 or v == 0 else f"{v:.2e}"
    return str(v)


def format_table(result: dict) -> str:
    """The result of :func:`run` as a plain-text table."""
    rows = result["rows"]
    head = ("benchmark", "setting", "metric", "value", "goal", "meets")
    body = [(r["bench"], r["setting"], r["metric"], _fmt(r["value"]), r["goal"] or "",
             "" if r["meets"] is None else ("yes" if r["meets"] else "NO")) for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(head)]
    line = "  ".join("{:<%d}" % w for w in widths)
    out = [line.format(*head), line.format(*("-" * w for w in widths))]
    out += [line.format(*b) for b in body]
    m = result["meta"]
    out.append("")
    out.append(f"torch {m['torch']}, {m['cpu_count']} CPUs, {m['torch_threads']} threads, cuda: {m['cuda']}; "
               f"load average {m['loadavg_start']} -> {m.get('loadavg_end')}; {m.get('seconds', 0):.0f} s in all")
    return "\n".join(out)
