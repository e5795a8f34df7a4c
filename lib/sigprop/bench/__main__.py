"""``python -m sigprop.bench [--json FILE] [--pages | --pages-twice] [--tiny] [--only NAME ...]``.

Prints the benchmark table of issue 9 (see :mod:`sigprop.bench`); ``--json FILE`` also writes it.
The default run (no ``--pages``) takes a few minutes on two CPU cores.
"""
from __future__ import annotations

import argparse
import json
import sys

from ..stats._validate import check_output_path, threads_argument as _threads
from . import format_table, run


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sigprop.bench", description=__doc__.splitlines()[0])
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON to FILE")
    ap.add_argument("--tiny", action="store_true", help="toy sizes (seconds): a smoke test")
    ap.add_argument("--pages", action="store_true", help="also execute every book page and time it (slow)")
    ap.add_argument("--pages-twice", action="store_true",
                    help="execute every page in reverse order, then again in order (slower)")
    ap.add_argument("--load", action="store_true",
                    help="with --pages: run a CPU-bound process on two threads beside the pages (a busy machine)")
    ap.add_argument("--only", nargs="+", choices=["forward", "naive", "ipr", "diagram", "grad", "pages"],
                    help="run only these benchmarks")
    ap.add_argument("--threads", type=_threads, default=None, help="torch threads (default min(2, cpu count))")
    args = ap.parse_args(argv)
    if args.load and not (args.pages or args.pages_twice):
        ap.error("--load times pages beside a CPU-bound process: it needs --pages or --pages-twice")
    if args.json:  # check the output path before the (long) run, creating nothing
        try:
            check_output_path(args.json, "--json")
        except ValueError as exc:
            ap.error(str(exc))
    result = run(tiny=args.tiny, pages=args.pages, pages_twice=args.pages_twice, pages_load=args.load, only=args.only,
                 threads=args.threads, progress=lambda name: print(f"[bench] {name} ...", file=sys.stderr, flush=True))
    result["meta"]["command"] = " ".join(["python -m sigprop.bench", *(sys.argv[1:] if argv is None else argv)])
    print(format_table(result))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
