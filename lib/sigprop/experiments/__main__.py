"""``python -m sigprop.experiments regimes [--size quick|record|full] [--out FILE] [--threads N]``."""
from __future__ import annotations

import argparse
import sys

import torch

from ._regimes import SIZES, run_regimes, save_record


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sigprop.experiments", description=__doc__.splitlines()[0])
    ap.add_argument("experiment", choices=["regimes"])
    ap.add_argument("--size", choices=sorted(SIZES), default="record")
    ap.add_argument("--out", default=None, help="JSON file (default gg2025_regimes_<size>.json)")
    ap.add_argument("--threads", type=int, default=None, help="torch threads on CPU")
    ap.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    runs = run_regimes(args.size, device=device)
    out = args.out or f"gg2025_regimes_{args.size}.json"
    save_record(runs, out, size=args.size, command="python -m sigprop.experiments " + " ".join(argv or sys.argv[1:]))
    for label, r in runs.items():
        print(f"{label:40s} final loss {r.eval_loss[-1].mean():.3f} (seeds {r.eval_loss[-1].round(3)}), "
              f"{r.seconds:.0f} s")
    print("written", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
