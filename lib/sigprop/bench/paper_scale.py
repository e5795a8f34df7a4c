"""``python -m sigprop.bench.paper_scale --out FILE [--device cuda] [--budget SECONDS] [--scale paper|tiny]``.

The documents' own sizes, once, on a GPU (issue 28): one command that

1. runs every chapter's Monte Carlo core at ``--size full`` (:mod:`sigprop.fullcheck`), one core at a time;
2. runs the claims ledger with Monte Carlo on the device (``SIGPROP_DEVICE``), and compares it with the
   committed CPU record row by row (same status; value within the combined uncertainty);
3. extends the finite-size ladders of :mod:`sigprop.experiments` (Fig. 1(e), Fig. 3, Fig. 4, beta = 3) to
   ``d = 1024`` and ``T = 8192``, as far as the time budget allows;
4. measures the batched forward pass as a fraction of the same GPU's dense matmul throughput at
   ``d = T = 1024`` in float32 and bfloat16 (the benchmarks' metric, :func:`sigprop.bench.forward_flops`);

and writes ONE JSON (device, versions, per-stage wall time and peak memory, each figure's agreement
statistic, ledger statuses, the ladders' data) after every stage, so that a run cut short keeps what it did.
Each stage runs against a share of ``--budget``; a stage past its share stops at its next step and says so.
``--scale tiny`` runs the same code at toy sizes (CPU, seconds), as ``tests/test_bench.py`` does.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import platform
import subprocess
import sys
import time
import traceback

import numpy as np
import torch

import sigprop as sp
from sigprop import claims, fullcheck
from sigprop.experiments import FINITE_SIZE_CASES as CASES
from sigprop.stats._validate import check_output_path

from ._speed import forward_flops

#: The ladders (case, axis, values, inits per rung): the finite-size study's cases, pushed to d = 1024 and
#: T = 8192. Block cases: d-ladder at the case's T, T-ladder at d = 256. Rungs run in this order, cheapest
#: first within each case, so a budget cut keeps whole small rungs.
LADDERS = {
    "paper": {
        "fig1e-post": dict(d=((128, 64), (256, 64), (512, 64), (1024, 64)), T=((256, 32), (1024, 32), (4096, 16), (8192, 16))),
        "stack-beta3": dict(d=((128, 64), (256, 64), (512, 64), (1024, 64)), T=((256, 32), (1024, 32), (4096, 16), (8192, 16))),
        "fig3-ipr": dict(d=((256, 200), (512, 200), (1024, 200)), T=((1024, 200), (8192, 200), (65536, 100))),
        "fig4-qgrad": dict(d=((256, 400), (512, 400), (1024, 200)), T=((512, 200), (2048, 100), (8192, 50))),
    },
    "tiny": {
        "fig1e-post": dict(d=((16, 16),), T=((16, 16),)),
        "stack-beta3": dict(d=((16, 16),), T=((16, 16),)),
        "fig3-ipr": dict(d=((16, 4),), T=((64, 4),)),
        "fig4-qgrad": dict(d=((16, 8),), T=((16, 8),)),
    },
}
#: d of the T-ladders (block and gradient cases) and T of the IPR d-ladder
T_LADDER_D = {"paper": 256, "tiny": 16}
IPR_T = {"paper": 16384, "tiny": 64}
#: The ledger: a fresh value agrees with the CPU record when |a - b| <= Z_RECORD * sqrt(se_a^2 + se_b^2)
#: (+ a float tolerance for exact rows); two independent draws differ by more than 4 combined SE with
#: probability 6e-5.
Z_RECORD = 4.0
FLOAT_RTOL = 1e-6


class _Budget:
    def __init__(self, seconds: float):
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()


def _peak_mb(device) -> float | None:
    if device.type == "cuda":
        return round(torch.cuda.max_memory_allocated(device) / 2**20, 1)
    return None


def _reset_peak(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)


# ----------------------------------------------------------------------------- 1. fullcheck


def stage_fullcheck(device, size, budget: _Budget, out_dir: str) -> list[dict]:
    """Each core in its own process (``python -m sigprop.fullcheck --only NAME``), stopped at the budget."""
    rows = []
    for name in fullcheck.CORES:
        if budget.left() <= 1:
            rows.append(dict(name=name, skipped="time budget spent"))
            continue
        path = os.path.join(out_dir, f".fullcheck-{name}.json")
        cmd = [sys.executable, "-m", "sigprop.fullcheck", "--device", device.type, "--size", size, "--only", name,
               "--json", path]
        t0, proc = time.perf_counter(), None
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=budget.left())
            with open(path) as fh:
                rows.append(json.load(fh)["checks"][0])
        except subprocess.TimeoutExpired:
            rows.append(dict(name=name, skipped=f"stopped after {time.perf_counter() - t0:.0f} s (time budget)"))
        except (OSError, ValueError, KeyError, IndexError):
            rows.append(dict(name=name, error=(proc.stderr or proc.stdout)[-2000:] if proc else "did not start"))
        finally:
            if os.path.exists(path):
                os.remove(path)
        print("fullcheck", name, rows[-1].get("seconds"), rows[-1].get("statistic", rows[-1].get("error",
              rows[-1].get("skipped"))), flush=True)
    return rows


# ----------------------------------------------------------------------------- 2. ledger on the device


def _agrees(fresh, old) -> dict:
    out = {"status_equal": fresh.status == old.status}
    se = math.hypot(fresh.stderr or 0.0, old.stderr or 0.0)
    a, b = fresh.measured, old.measured
    if a is None or b is None:
        out["value_agrees"] = (a is None) == (b is None)
        return out
    bound = Z_RECORD * se + FLOAT_RTOL * max(abs(a), abs(b), 1e-300)
    out.update(diff=a - b, bound=bound, value_agrees=abs(a - b) <= bound)
    return out


def stage_ledger(device, budget: _Budget) -> dict:
    os.environ["SIGPROP_DEVICE"] = device.type
    record = claims.load_record()
    rows = []
    for document in claims.DOCUMENTS:
        for c in claims.registry(document):
            if budget.left() <= 0:
                rows.append(dict(id=c.id, skipped="time budget spent"))
                continue
            t0 = time.perf_counter()
            try:
                r = claims.run_one(c)
            except Exception as exc:
                rows.append(dict(id=c.id, error=f"{type(exc).__name__}: {exc}"))
                continue
            row = dict(id=r.id, status=r.status, expected=r.expected, measured=r.measured, stderr=r.stderr,
                       seconds=round(time.perf_counter() - t0, 2))
            if r.id in record:
                row.update(record_status=record[r.id].status, record_measured=record[r.id].measured,
                           record_stderr=record[r.id].stderr, **_agrees(r, record[r.id]))
            rows.append(row)
    done = [r for r in rows if "status" in r]
    return dict(rows=rows, n=len(rows), run=len(done),
                unexpected=[r["id"] for r in done if r["status"] != r["expected"]],
                status_differs=[r["id"] for r in done if not r.get("status_equal", True)],
                value_differs=[r["id"] for r in done if not r.get("value_agrees", True)])


# ----------------------------------------------------------------------------- 3. ladders on the device


def _block_rung(case, d, T, inits, device, seed):
    p = case.params
    cfg = sp.BlockConfig.from_beta(p["beta"], T=T, d=d, norm=p["norm"], alpha_sa=p["alpha_sa"],
                                   **sp.presets.GG_APP_C1)
    chunk = max(1, min(inits, int(2**31 // (p["seqs"] * T * T * 4 * 3))))   # attention matrices ~ a few GB
    est = sp.mc_cosine_vs_depth(cfg, p["depth"], T=T, inits=inits, seqs=p["seqs"], rho0=p["rho0"],
                                generator=seed, device=device, chunk=chunk)
    raw = est.samples.double().cpu().numpy()                       # (inits, depth + 1)
    out = {}
    for key, kw in (("map_rem", dict(T=T)), ("map_inf", dict(T=T, limit=True))):
        q, pp = sp.theory.iterate_block_map(1.0, p["rho0"], p["depth"], cfg, **kw)
        gap = (raw - np.asarray(pp / q)[None])[:, 1:].mean(1)        # per network: mean gap over the blocks
        out[key] = dict(mean=float(gap.mean()), se=float(gap.std(ddof=1) / math.sqrt(len(gap))))
        res = sp.curve_agreement(raw[:, 1:], np.asarray(pp / q)[1:], level=1e-3, n_resamples=4999)
        out[key]["curve_p"] = float(res.p)
    out["last_cosine"] = dict(mean=float(raw[:, -1].mean()), se=float(raw[:, -1].std(ddof=1) / math.sqrt(len(raw))))
    return out


def _ipr_rung(case, d, T, inits, device, seed):
    betas = np.asarray(case.params["betas"], dtype=float)
    est = sp.mc_attention_ipr(betas, T=T, d=d, inits=inits, queries=case.params["queries"], generator=seed,
                              device=device, progress=False)
    raw = est.samples[..., 0].double().cpu().numpy()                 # (inits, betas)
    gap = raw - np.asarray(sp.theory.ipr_finite(betas, T))[None]
    return {f"beta={b:g}": dict(mean=float(gap[:, j].mean()), se=float(gap[:, j].std(ddof=1) / math.sqrt(len(gap))))
            for j, b in enumerate(betas)}


def _qgrad_rung(case, d, T, inits, device, seed):
    out = {}
    for j, b in enumerate(case.params["betas"]):
        est = sp.mc_rem_query_grad_sq_norm(b, T, d, inits, generator=seed + j, device=device, progress=False)
        th = float(sp.theory.rem_query_grad_sq_norm(b, T=T))
        out[f"beta={b:g}"] = dict(mean=float(est.mean) / th - 1.0, se=float(est.stderr) / th)
    return out


_RUNGS = {"blocks": _block_rung, "ipr": _ipr_rung, "qgrad": _qgrad_rung}


def stage_ladders(device, scale, budget: _Budget) -> dict:
    out = {}
    for name, lad in LADDERS[scale].items():
        case = CASES[name]
        rungs = []
        for axis in ("d", "T"):
            for value, inits in lad[axis]:
                if budget.left() <= 0:
                    rungs.append(dict(axis=axis, value=value, skipped="time budget spent"))
                    continue
                if axis == "d":
                    d, T = value, (IPR_T[scale] if case.kind == "ipr" else case.params["T"])
                else:
                    d, T = T_LADDER_D[scale], value
                _reset_peak(device)
                t0 = time.perf_counter()
                try:
                    metrics = _RUNGS[case.kind](case, d, T, inits, device, seed=case.seed * 7919 + value)
                except Exception as exc:
                    rungs.append(dict(axis=axis, d=d, T=T, inits=inits, error=f"{type(exc).__name__}: {exc}"))
                    print("ladder", name, axis, d, T, "ERROR", exc, flush=True)
                    continue
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
                rungs.append(dict(axis=axis, d=d, T=T, inits=inits, seconds=round(time.perf_counter() - t0, 2),
                                  peak_mb=_peak_mb(device), metrics=metrics))
                print("ladder", name, axis, f"d={d} T={T} inits={inits}", f"{rungs[-1]['seconds']} s", flush=True)
        out[name] = dict(source=case.source, title=case.title, primary=case.primary, rungs=rungs)
    return out


# ----------------------------------------------------------------------------- 4. forward vs dense matmul


def _best(fn, device, repeats=5) -> float:
    fn()
    best = math.inf
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        best = min(best, time.perf_counter() - t)
    return best


def stage_forward(device, scale) -> list[dict]:
    d, T, heads, depth, inits, samples, n_mm = ((1024, 1024, 8, 4, 4, 2, 8192) if scale == "paper"
                                                else (32, 32, 2, 2, 2, 2, 64))
    rows = []
    for dtype in (torch.float32, torch.bfloat16):
        if dtype == torch.bfloat16 and device.type == "cpu" and scale == "paper":
            continue
        g = torch.Generator(device=device).manual_seed(0)
        a = torch.randn(n_mm, n_mm, generator=g, device=device, dtype=dtype)
        b = torch.randn(n_mm, n_mm, generator=g, device=device, dtype=dtype)
        cfg = sp.BlockConfig.from_beta(1.0, T=T, d=d, heads=heads)
        params = sp.sample_transformer(cfg, depth, inits=inits, generator=0, device=device, dtype=dtype)
        x = sp.gaussian_tokens(inits, samples, T=T, d=d, generator=1, device=device, dtype=dtype)
        _reset_peak(device)
        with torch.no_grad():
            t_mm = _best(lambda: a @ b, device)
            t_fwd = _best(lambda: sp.transformer_forward(x, params, cfg), device)
        peak = 2 * n_mm**3 / t_mm
        achieved = forward_flops(cfg, depth, inits, samples, T) / t_fwd
        rows.append(dict(dtype=str(dtype).replace("torch.", ""), d=d, T=T, heads=heads, depth=depth, inits=inits,
                         samples=samples, matmul_n=n_mm, matmul_tflops=peak / 1e12, forward_tflops=achieved / 1e12,
                         fraction=achieved / peak, forward_s=t_fwd, peak_mb=_peak_mb(device)))
        print("forward", rows[-1], flush=True)
    return rows


# ----------------------------------------------------------------------------- driver


def _machine(device) -> dict:
    info = dict(date=time.strftime("%Y-%m-%d %H:%M:%S %Z"), torch=torch.__version__, cuda=torch.version.cuda,
                python=platform.python_version(), platform=platform.platform(), sigprop=sp.__version__,
                device=str(device), cpu_capability=torch.backends.cpu.get_cpu_capability())
    if device.type == "cuda":
        prop = torch.cuda.get_device_properties(device)
        info.update(device_name=prop.name, gpu_memory_gb=round(prop.total_memory / 2**30, 1),
                    multiprocessors=prop.multi_processor_count)
    info["commit"] = os.environ.get("SIGPROP_COMMIT")   # a copied tree has no git history: say it
    if info["commit"]:
        return info
    try:
        info["commit"] = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                                        cwd=os.path.dirname(__file__)).stdout.strip() or None
    except OSError:
        info["commit"] = None
    return info


#: The committed GPU runs (records/gpu/README.md says what each is)
GPU_RECORDS = pathlib.Path(__file__).parent / "records" / "gpu"


def load_gpu_record(name: str = "smoke_h100.json") -> dict:
    """A committed GPU run: ``smoke_h100.json`` (this script at ``--scale tiny`` on an H100) or a ledger run
    ``ledger_h100_{cpu,cuda,default}.json`` (the ledger on that machine's CPU, on CUDA, on the plainest CPU kernel)."""
    path = GPU_RECORDS / name
    if not path.is_file():
        raise ValueError(f"no GPU record {name!r}; the records are {sorted(p.name for p in GPU_RECORDS.glob('*.json'))}")
    return json.loads(path.read_text())


def ledger_shift(fresh: dict, base: dict) -> dict:
    """Two ledger runs of :func:`load_gpu_record` compared row by row: rows in both, rows with equal statuses, and
    the largest ``|a - b| / hypot(SE_a, SE_b)`` over rows with a standard error (exact rows: largest relative change)."""
    a = {r["id"]: r for r in fresh["rows"]}
    b = {r["id"]: r for r in base["rows"]}
    common = sorted(set(a) & set(b))
    z, rel = [0.0], [0.0]
    for i in common:
        se = math.hypot(a[i]["stderr"] or 0.0, b[i]["stderr"] or 0.0)
        diff = abs(a[i]["measured"] - b[i]["measured"]) if None not in (a[i]["measured"], b[i]["measured"]) else 0.0
        if se > 0:
            z.append(diff / se)
        elif diff:
            rel.append(diff / max(abs(b[i]["measured"]), 1e-300))
    return dict(rows=len(common), equal_status=sum(a[i]["status"] == b[i]["status"] for i in common),
                max_z=max(z), max_rel_exact=max(rel), errors=sorted(fresh.get("errors", {})))


#: share of the budget per stage (the ledger and the ladders take what the others leave)
SHARES = {"forward": 0.05, "fullcheck": 0.30, "ledger": 0.25, "ladders": 0.40}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sigprop.bench.paper_scale", description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="the JSON record to write (rewritten after every stage)")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--budget", type=float, default=480.0, help="seconds for the whole run (default 480)")
    ap.add_argument("--scale", choices=["paper", "tiny"], default="paper")
    ap.add_argument("--stages", nargs="+", choices=list(SHARES), default=list(SHARES))
    args = ap.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda but CUDA is not available (use --device cpu --scale tiny to try the script)")
    if not math.isfinite(args.budget) or args.budget <= 0:
        ap.error(f"--budget must be a positive number of seconds; got {args.budget}")
    try:   # writable before any work, creating nothing (a missing folder or a folder was a traceback: issue 37)
        check_output_path(args.out, "--out")
    except ValueError as exc:
        ap.error(str(exc))
    device = torch.device(args.device)
    size = "full" if args.scale == "paper" else "quick"
    record = dict(machine=_machine(device), scale=args.scale, budget_s=args.budget,
                  command="python -m sigprop.bench.paper_scale " + " ".join(sys.argv[1:] if argv is None else argv),
                  stages={})
    start = time.monotonic()
    for stage in args.stages:
        left = args.budget - (time.monotonic() - start)
        later = sum(SHARES[s] for s in args.stages[args.stages.index(stage):])
        budget = _Budget(max(0.0, left * SHARES[stage] / later))
        t0 = time.perf_counter()
        try:
            if stage == "forward":
                result = stage_forward(device, args.scale)
            elif stage == "fullcheck":
                result = stage_fullcheck(device, size, budget, os.path.dirname(os.path.abspath(args.out)))
            elif stage == "ledger":
                result = stage_ledger(device, budget)
            else:
                result = stage_ladders(device, args.scale, budget)
        except Exception as exc:
            result = dict(error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc()[-3000:])
        record["stages"][stage] = dict(seconds=round(time.perf_counter() - t0, 1), result=result)
        with open(args.out, "w") as fh:
            json.dump(record, fh, indent=1, default=float)
        print(f"stage {stage}: {record['stages'][stage]['seconds']} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
