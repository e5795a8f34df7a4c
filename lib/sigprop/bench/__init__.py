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
* :func:`bench_naive` -- the same networks written the way a reader would (the test suite's reference
  transformer, ``tests/reference_transformer.py``: one ``nn.Module`` per initialisation, one sequence at a
  time, Python loops over heads and layers) against the batched engine; speedup and the largest
  difference of the outputs (float rounding only). Needs a checkout.
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

The book's benchmarks page replays a committed run, :data:`RECORD` (``make bench-record``: the default table
on a quiet machine, then every page under a competing CPU-bound process), read by :func:`load_record` and
put in words by :func:`speed_table` and :func:`goals_summary`;
the record's ``meta`` says when, where and at which commit it was measured.

The tanh trainability diagram met the 2 s goal only after the tanh MLP moments were tabulated in
``rho`` (Chebyshev, one table per ``q_1``; before that, a 48 x 48 Gauss-Hermite rule per grid point and
layer took ~1-2 minutes on 100 x 100 x 60).
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from typing import Callable

import torch

from ..stats._validate import check_int
from ._pages import bench_pages
from ._report import format_table, goals_summary, speed_table
from ._speed import (_load, bench_diagram, bench_forward, bench_grad, bench_ipr, bench_naive, forward_flops,
                     matmul_flops)

__all__ = [
    "run",
    "format_table",
    "speed_table",
    "goals_summary",
    "matmul_flops",
    "bench_forward",
    "bench_naive",
    "bench_ipr",
    "bench_diagram",
    "bench_grad",
    "bench_pages",
    "forward_flops",
    "RECORD",
    "load_record",
]

#: The committed run shown on the book's benchmarks page (package data).
RECORD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "records", "bench_record.json")


def load_record(path: str | None = None) -> dict:
    """The committed benchmark run :data:`RECORD` (or ``path``, a file written by ``--json``)."""
    with open(path or RECORD) as fh:
        return json.load(fh)


def _commit():
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=os.path.dirname(os.path.abspath(__file__)),
                             capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=os.path.dirname(os.path.abspath(__file__)), capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return (out.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")) if out.returncode == 0 else None


# ----------------------------------------------------------------------------- driver

def _meta(threads):
    return {"torch": torch.__version__, "python": platform.python_version(), "machine": platform.machine(),
            "processor": platform.processor() or platform.machine(), "cpu_count": os.cpu_count(),
            "torch_threads": threads, "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
            "loadavg_start": _load(), "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "commit": _commit()}


def run(*, tiny: bool = False, pages: bool = False, pages_twice: bool = False, pages_load: bool = False, only=None,
        threads: int | None = None,
        progress: Callable[[str], None] | None = None) -> dict:
    """Run the benchmarks; returns ``{"meta": {...}, "rows": [...]}``.

    ``tiny=True`` uses toy sizes (seconds; for tests and the book page); ``only`` is a subset of
    ``{"forward", "naive", "ipr", "diagram", "grad", "pages"}``. ``pages`` adds :func:`bench_pages`.
    """
    cpus = os.cpu_count() or 1
    threads = max(1, min(2, cpus)) if threads is None else check_int(threads, "threads", minimum=1, maximum=cpus)
    if pages_load and not (pages or pages_twice):
        raise ValueError("pages_load times pages beside a CPU-bound process: it needs pages=True or pages_twice=True")
    names = ["forward", "naive", "ipr", "diagram", "grad"] + (["pages"] if pages or pages_twice else [])
    if only is not None:
        bad = set(only) - set(names) - {"pages"}
        if bad:
            raise ValueError(f"only must name benchmarks among {sorted(set(names) | {'pages'})}; got {sorted(bad)}")
        names = [n for n in names + ["pages"] if n in only]
        names = list(dict.fromkeys(names))
    old_threads = torch.get_num_threads()   # set after every check: a refused call leaves the count as it was
    torch.set_num_threads(threads)
    meta = _meta(threads)
    rows = []
    t0 = time.perf_counter()
    try:
        for name in names:
            if progress:
                progress(name)
            if name == "forward":
                sizes = [dict(d=16, T=8, heads=2, depth=2, inits=2, samples=2)] if tiny else None
                # best of 7 rounds (50 ms each): bursts of load from other processes spare a round or two
                rows += bench_forward(sizes, repeats=1 if tiny else 7, matmul_n=128 if tiny else 1024)
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
                rows += bench_pages(twice=pages_twice, load=pages_load, progress=progress)
    finally:
        torch.set_num_threads(old_threads)
    meta["seconds"] = time.perf_counter() - t0
    meta["loadavg_end"] = _load()
    return {"meta": meta, "rows": rows}

