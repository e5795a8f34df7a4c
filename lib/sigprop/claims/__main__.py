"""``python -m sigprop.claims [--document NAME ...] [--claim ID ...] [--json FILE] [--record]``: run the ledger.

``--record`` rewrites the committed record (``sigprop/claims/records/<document>.json``, of the documents run, each
row with the provenance of this run) that the book quotes; run it (``make ledger``, or with ``--document``) after
changing a claim, and commit it. With ``--claim`` only those claims run, and ``--record`` rewrites only their rows
(a new or changed claim), keeping the record's other rows with the provenance they were recorded with.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys

from ..experiments._provenance import provenance
from ..stats._validate import check_output_path
from . import DOCUMENTS, Status, fragile, record_path, registry, run, run_one, write_record


def _table(results) -> str:
    head = f"{'id':44s} {'status':18s} {'stated':>11s} {'measured':>11s} {'stderr':>9s} {'tol':>9s}  source"
    lines = [head, "-" * len(head)]
    for r in results:
        flag = "" if r.status == r.expected else f"  (expected {r.expected})"
        lines.append(f"{r.id:44s} {r.status:18s} {r.stated:11.4g} {r.measured:11.4g} {r.stderr:9.2g} "
                     f"{r.tolerance:9.2g}  {r.document}: {r.source}{flag}")
    counts = {s.value: sum(r.status == s.value for r in results) for s in Status}
    lines.append(f"{len(results)} claims: " + ", ".join(f"{v} {k}" for k, v in counts.items() if v))
    lines += [f"status could change on another machine: {msg}" for msg in map(fragile, results) if msg]
    return "\n".join(lines)


def _writable(path) -> pathlib.Path:
    """Check, before any work and creating nothing, that ``path`` can be written (its folder exists and is
    writable; issue 37, item 10: opening it to check left an empty file when the run then stopped)."""
    try:
        check_output_path(str(path), "--json")
    except ValueError as exc:
        raise SystemExit(f"python -m sigprop.claims: {exc}") from None
    return pathlib.Path(path)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sigprop.claims", description=__doc__.splitlines()[0])
    parser.add_argument("--document", choices=DOCUMENTS, nargs="+", help="only these documents' claims")
    parser.add_argument("--claim", metavar="ID", nargs="+",
                        help="only these claims (with --record: rewrite only their rows of the record)")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON ('-' for stdout)")
    parser.add_argument("--record", action="store_true",
                        help="rewrite the committed record sigprop/claims/records/<document>.json of the documents run")
    args = parser.parse_args(argv)
    if args.json is not None and not args.json.strip():
        parser.error("--json needs a file name ('-' for stdout); got an empty string")   # issue 26, item 15
    out = _writable(args.json) if args.json and args.json != "-" else None
    docs = DOCUMENTS if args.document is None else tuple(d for d in DOCUMENTS if d in args.document)
    chosen = None
    if args.claim is not None:
        known = {c.id: c.document for c in registry()}
        unknown = sorted(set(args.claim) - set(known))
        if unknown:
            raise SystemExit(f"python -m sigprop.claims: no claim {unknown} in the ledger")
        elsewhere = sorted(f"{i} (of {known[i]})" for i in args.claim if known[i] not in docs)
        if elsewhere:
            raise SystemExit(f"python -m sigprop.claims: --claim {', '.join(elsewhere)} is not a claim of --document "
                             f"{' '.join(docs)}; drop --document or name that document")
        chosen = set(args.claim)
        docs = tuple(d for d in docs if d in {known[i] for i in chosen})
    records = [_writable(record_path(d)) for d in docs] if args.record else []
    command = "python -m sigprop.claims " + " ".join(sys.argv[1:] if argv is None else argv)
    prov = provenance(command)            # before the run writes anything: the commit and code it ran
    if chosen is None:
        results = [r for d in docs for r in run(d, progress=sys.stderr.isatty())]
    else:
        results = [run_one(c) for d in docs for c in registry(d) if c.id in chosen]
    rows = [r.as_json() for r in results]
    if args.json == "-":
        json.dump(rows, sys.stdout, indent=1)
        print()
    else:
        print(_table(results))
    if out is not None:
        out.write_text(json.dumps(rows, indent=1) + "\n")
    for doc, path in zip(docs, records):
        order = None if chosen is None else [c.id for c in registry(doc)]
        write_record(results, doc, provenance=prov, path=path, order=order)
    return 0


if __name__ == "__main__":
    sys.exit(main())
