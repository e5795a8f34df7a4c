"""``python -m sigprop.claims [--document NAME] [--json FILE]``: run the ledger, print a table."""
from __future__ import annotations

import argparse
import json
import sys

from . import DOCUMENTS, run


def _table(results) -> str:
    head = f"{'id':44s} {'status':10s} {'stated':>11s} {'measured':>11s} {'stderr':>9s} {'tol':>9s}  source"
    lines = [head, "-" * len(head)]
    for r in results:
        flag = "" if r.status == r.expected else f"  (expected {r.expected})"
        lines.append(f"{r.id:44s} {r.status:10s} {r.stated:11.4g} {r.measured:11.4g} {r.stderr:9.2g} "
                     f"{r.tolerance:9.2g}  {r.document}: {r.source}{flag}")
    counts = {s: sum(r.status == s for r in results) for s in ("reproduced", "deviates", "erratum")}
    lines.append(f"{len(results)} claims: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sigprop.claims", description=__doc__)
    parser.add_argument("--document", choices=DOCUMENTS, help="only this document's claims")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON ('-' for stdout)")
    args = parser.parse_args(argv)
    results = run(args.document, progress=sys.stderr.isatty())
    if args.json == "-":
        json.dump([r.as_json() for r in results], sys.stdout, indent=1)
        print()
    else:
        print(_table(results))
        if args.json:
            with open(args.json, "w") as fh:
                json.dump([r.as_json() for r in results], fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
