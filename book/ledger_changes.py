"""What changed in the claims ledger between two versions: for the CHANGELOG.

The ledger's committed record is ``lib/sigprop/claims/records/<document>.json`` (``make ledger``): one row per
claim with its ``status``. This script reads two record sets -- at a git ref (a release tag such as
``v0.1.0``) or in the working tree -- and writes, in Markdown, every claim added or removed and every status
that changed, then the status counts of the newer set::

    python book/ledger_changes.py                  # latest tag v* -> working tree (the Unreleased section)
    python book/ledger_changes.py --since v0.1.0   # a given tag -> working tree
    python book/ledger_changes.py --since v0.1.0 --until v0.2.0
    python book/ledger_changes.py --counts [--until v0.1.0]   # the status counts alone

``tests/test_release.py`` checks the diff on record sets made up for it and in a scratch git repository,
and that ``CHANGELOG.md``'s counts for each tagged version are those of the tag's record.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
RECORDS = "lib/sigprop/claims/records"


def _git(root: pathlib.Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout


def records(ref: str | None = None, root: pathlib.Path = ROOT) -> dict[str, dict]:
    """``{claim id: row}`` of every record file at git ``ref`` (None: the working tree), in file order."""
    if ref is None:
        texts = [path.read_text() for path in sorted((root / RECORDS).glob("*.json"))]
    else:
        names = _git(root, "ls-tree", "--name-only", f"{ref}:{RECORDS}").split()
        texts = [_git(root, "show", f"{ref}:{RECORDS}/{name}") for name in sorted(n for n in names if n.endswith(".json"))]
    # a document's record is a list of rows; the folder also keeps measurements that rows replay (a width ladder)
    rows = [row for data in map(json.loads, texts) if isinstance(data, list) for row in data]
    return {row["id"]: row for row in rows}


def latest_tag(root: pathlib.Path = ROOT) -> str | None:
    """The newest release tag ``v*`` reachable from HEAD, or None."""
    try:
        return _git(root, "describe", "--tags", "--abbrev=0", "--match", "v*").strip() or None
    except subprocess.CalledProcessError:
        return None


def changes(old: dict[str, dict], new: dict[str, dict]) -> list[tuple[str, str | None, str | None]]:
    """``(claim id, old status, new status)`` for every claim added (old None), removed (new None) or whose
    status changed; claims in ``new``'s order, then the removed ones in ``old``'s."""
    out = [(cid, old[cid]["status"] if cid in old else None, row["status"]) for cid, row in new.items()
           if cid not in old or old[cid]["status"] != row["status"]]
    return out + [(cid, row["status"], None) for cid, row in old.items() if cid not in new]


def _order(found, canonical) -> list[str]:
    """``found`` in the library's order (``canonical``), anything it does not know after, sorted."""
    return [x for x in canonical if x in found] + sorted(set(found) - set(canonical))


def counts(rows: dict[str, dict]) -> dict[str, dict[str, int]]:
    """``{document: {status: claims}}``, documents and statuses in the ledger's order
    (``sigprop.claims.DOCUMENTS`` and ``Status``)."""
    from sigprop.claims import DOCUMENTS, Status

    out: dict[str, dict[str, int]] = {}
    for row in rows.values():
        doc = out.setdefault(row["document"], {})
        doc[row["status"]] = doc.get(row["status"], 0) + 1
    statuses = _order({s for doc in out.values() for s in doc}, [s.value for s in Status])
    return {d: {s: out[d][s] for s in statuses if s in out[d]} for d in _order(out, DOCUMENTS)}


def counts_table(rows: dict[str, dict]) -> str:
    """The status counts as a Markdown table (one row per document, one column per status, and totals)."""
    by_doc = counts(rows)
    from sigprop.claims import Status

    statuses = _order({s for doc in by_doc.values() for s in doc}, [s.value for s in Status])
    lines = ["| document | " + " | ".join(statuses) + " | claims |", "| --- |" + " ---: |" * (len(statuses) + 1)]
    for document, doc in by_doc.items():
        lines.append(f"| {document} | " + " | ".join(str(doc.get(s, 0)) for s in statuses)
                     + f" | {sum(doc.values())} |")
    total = [sum(doc.get(s, 0) for doc in by_doc.values()) for s in statuses]
    lines.append("| all | " + " | ".join(map(str, total)) + f" | {sum(total)} |")
    return "\n".join(lines)


def markdown(old: dict[str, dict], new: dict[str, dict], since: str, until: str) -> str:
    """The ledger part of a CHANGELOG section: the changes from ``since`` to ``until``, then the counts."""
    found = changes(old, new)
    lines = [f"Ledger status changes ({since} -> {until}):", ""]
    if not found:
        lines.append("- no claim added or removed, no status changed")
    for cid, before, after in found:
        if before is None:
            lines.append(f"- `{cid}`: new claim, **{after}**")
        elif after is None:
            lines.append(f"- `{cid}`: removed (was {before})")
        else:
            lines.append(f"- `{cid}`: {before} -> **{after}**")
    return "\n".join(lines + ["", f"Statuses at {until}:", "", counts_table(new)]) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--since", help="the older record set: a git ref (default: the latest tag v*)")
    parser.add_argument("--until", help="the newer record set: a git ref (default: the working tree)")
    parser.add_argument("--counts", action="store_true", help="print the status counts of --until alone")
    args = parser.parse_args(argv)
    for name in ("since", "until"):   # a bad ref was git's traceback (issue 37, item 10)
        ref = getattr(args, name)
        if ref is not None and subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], cwd=ROOT,
                                              capture_output=True).returncode != 0:
            parser.error(f"--{name} {ref!r} is not a commit or tag of this repository")
    new = records(args.until)
    until = args.until or "working tree"
    if args.counts:
        print(counts_table(new))
        return 0
    since = args.since or latest_tag()
    if since is None:
        print("no release tag v* yet: the ledger's statuses now are", file=sys.stderr)
        print(counts_table(new))
        return 0
    print(markdown(records(since), new, since, until), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
