"""``python -m sigprop.experiments {regimes,finite-size} ...``: run an experiment and write its record.

* ``regimes [--size demo|quick|record|full] [--out FILE] [--threads N] [--device cpu|cuda] [--only I ...]``: the
  training regimes of Giorlandino & Goldt 2025, Fig. 1(f) and Fig. 5 (``._regimes``); ``--only`` re-trains the
  regimes of those indices and replaces them in the record ``--out``, with their own provenance.
* ``finite-size [--case NAME ...] [--size quick|record|full] [--out-dir DIR] [--threads N]``: the
  finite-size ladders of every comparison of the chapter (``._finite_size``), one file
  ``finite_size_<case>_<size>.json`` per case. The output folder is checked before any work.
* ``noci-fig10 [--out FILE]``: the width ladder of Noci et al. 2022, Fig. 10 (``._noci_fig10``; about
  5 CPU-minutes on one thread).
* ``locater [--out FILE] [--threads N]``: LocATER against none over training seeds, Bao et al. 2024, Sec. 7
  (``._locater``; about a minute).
* ``aghajanyan-sec9 [--out FILE] [--threads N]``: the Section 9 stand-in of Aghajanyan 2025 over training seeds
  (``._aghajanyan_sec9``; about half a minute).
* ``hf-families [--out FILE] [--family NAME ...]``: today's HF families' predictions against Monte Carlo of the HF models themselves
  (``._hf_families``; a few CPU-minutes; needs transformers).
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time

import torch

from . import _aghajanyan_sec9, _hf_families, _locater
from ._finite_size import CASES, SIZES, record_name, run_case, save
from ._noci_fig10 import run as run_fig10
from ._regimes import SIZES as REGIME_SIZES
from ._regimes import REGIMES, run_regimes, save_record
from ..stats._validate import threads_argument as _threads


def _writable_dir(path: str) -> pathlib.Path:
    p = pathlib.Path(path)
    if not p.is_dir():
        raise SystemExit(f"python -m sigprop.experiments: --out-dir {path!r} is not an existing folder")
    probe = p / ".sigprop-write-test"
    try:
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise SystemExit(f"python -m sigprop.experiments: cannot write in {path!r}: {exc.strerror}") from None
    return p


def _writable_file(path: str) -> pathlib.Path:
    """``path`` can be written (checked without creating it: a run that stops early leaves no empty file)."""
    p = pathlib.Path(path)
    folder = p.parent if str(p.parent) else pathlib.Path(".")
    if not path or p.is_dir():
        raise SystemExit(f"python -m sigprop.experiments: {path!r} is not a file name")
    if not folder.is_dir():
        raise SystemExit(f"python -m sigprop.experiments: cannot write {path!r}: no folder {str(folder)!r}")
    if not os.access(p if p.exists() else folder, os.W_OK):
        raise SystemExit(f"python -m sigprop.experiments: cannot write {path!r}: permission denied")
    return p




def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    ap = argparse.ArgumentParser(prog="python -m sigprop.experiments", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="experiment", required=True)
    reg = sub.add_parser("regimes", help="training regimes of Fig. 1(f) and Fig. 5")
    reg.add_argument("--size", choices=sorted(REGIME_SIZES), default="record")
    reg.add_argument("--out", default=None, help="JSON file (default gg2025_regimes_<size>.json)")
    reg.add_argument("--threads", type=_threads, default=None, help="torch threads on CPU")
    reg.add_argument("--device", choices=["cpu", "cuda"], default=None, help="default: cuda when available")
    reg.add_argument("--only", type=int, nargs="+", choices=range(len(REGIMES)), default=None,
                     help="train only these regimes (indices into REGIMES) and replace them in --out, an existing record")
    fs = sub.add_parser("finite-size", help="finite-size ladders of the chapter's comparisons")
    fs.add_argument("--case", nargs="+", choices=sorted(CASES), default=None, help="default: every case")
    fs.add_argument("--size", choices=SIZES, default="record")
    fs.add_argument("--out-dir", default=".", help="folder for finite_size_<case>_<size>.json (default: .)")
    fs.add_argument("--threads", type=_threads, default=1, help="torch threads (default 1)")
    hf = sub.add_parser("hf-families", help="HF families' predictions against their own Monte Carlo")
    hf.add_argument("--out", default=str(_hf_families.RECORD), help="JSON file to write (default: the committed record)")
    hf.add_argument("--family", nargs="+", choices=sorted(_hf_families.FAMILIES), default=None,
                    help="re-run only these families, replacing theirs in --out")
    nf = sub.add_parser("noci-fig10", help="width ladder of Noci et al. 2022, Fig. 10")
    nf.add_argument("--out", default="noci2022_fig10_finite_size.json", help="JSON file to write")
    for name, module in (("locater", _locater), ("aghajanyan-sec9", _aghajanyan_sec9)):
        one = sub.add_parser(name, help=module.__doc__.splitlines()[0])
        one.add_argument("--out", default=f"{module.RECORD}.json", help="JSON file to write")
        one.add_argument("--threads", type=_threads, default=None, help="torch threads")
    args = ap.parse_args(argv)
    command = "python -m sigprop.experiments " + " ".join(argv)

    if args.experiment == "regimes":
        out = pathlib.Path(args.out or f"gg2025_regimes_{args.size}.json")
        if args.only and not out.is_file():
            raise SystemExit(f"python -m sigprop.experiments: --only replaces regimes in an existing record; no {out}")
        if args.device == "cuda" and not torch.cuda.is_available():
            raise SystemExit("python -m sigprop.experiments: --device cuda but CUDA is not available on this machine; "
                             "use --device cpu")
        out = _writable_file(str(out))
        if args.threads:
            torch.set_num_threads(args.threads)
        device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
        picked = REGIMES if args.only is None else [REGIMES[i] for i in args.only]
        runs = run_regimes(args.size, regimes=picked, device=device)
        save_record(runs, str(out), size=args.size, command=command, update=args.only is not None)
        for label, r in runs.items():
            print(f"{label:40s} final loss {r.eval_loss[-1].mean():.3f} (seeds {r.eval_loss[-1].round(3)}), "
                  f"{r.seconds:.0f} s")
        print("written", out)
        return 0

    if args.experiment in ("locater", "aghajanyan-sec9"):
        out = _writable_file(args.out)
        if args.threads:
            torch.set_num_threads(args.threads)
        module = _locater if args.experiment == "locater" else _aghajanyan_sec9
        result = module.run(command=command, progress=lambda msg: print(msg, flush=True))
        out.write_text(json.dumps(result, indent=1) + "\n")
        print("written", out)
        return 0

    if args.experiment == "hf-families":
        out = _writable_file(args.out)
        record = _hf_families.run(out, families=args.family)
        for e in record["entries"]:
            print(f"{e['family']:9s} {str(e['scale']):8s} curve p = {e['p']:.4f} max |z| = {e['max_abs_z']:.2f}")
        print("written", out)
        return 0

    if args.experiment == "noci-fig10":
        out = _writable_file(args.out)
        result = run_fig10(command=command, progress=True)
        out.write_text(json.dumps(result, indent=1) + "\n")
        fit = result["ladder"]["fit"]
        print(f"gap(d) = a/d + b: a = {fit['a']:.3f} ± {fit['a_se']:.3f}, b = {fit['b']:+.4f} ± {fit['b_se']:.4f} "
              f"(chi2 {fit['chi2']:.2f} on {fit['dof']} dof, p = {fit['p']:.2f}); written {out}")
        return 0

    folder = _writable_dir(args.out_dir)
    torch.set_num_threads(args.threads)
    for name in args.case or sorted(CASES):
        c0 = time.process_time()
        record = run_case(name, args.size)
        path = folder / f"{record_name(name, args.size)}.json"
        save(record, path, command=command, seconds=time.process_time() - c0)
        print("written", path, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
