"""The book quotes the claims ledger through the ``{ledger}`` role, never by hand.

Every ``{ledger}`id[:field]``` reference in the book (markdown pages and notebook markdown cells)
resolves in the committed record (``sigprop/claims/records/<document>.json``, checked against a fresh run by
``tests/test_claims.py``), and the errata pages hold no hand-typed "value ± SE" pair: such a pair would be a
copy of a ledger number that can drift from it.
"""
import json
import pathlib
import re

import pytest

from sigprop import claims

ROOT = pathlib.Path(__file__).resolve().parents[1]
ROLE = re.compile(r"\{ledger\}`([^`]+)`")
#: a number, "±", a number: what a measurement with its standard error looks like when typed by hand
PM = re.compile(r"\d[\d.]*\s*(?:±|\\pm)\s*\d")


def _texts():
    for path in sorted((ROOT / "book").rglob("*.md")) + sorted((ROOT / "chapters").rglob("*.md")):
        yield path, path.read_text()
    for path in sorted((ROOT / "book").rglob("*.ipynb")) + sorted((ROOT / "chapters").rglob("*.ipynb")):
        if "assignments" in path.parts or ".ipynb_checkpoints" in path.parts:
            continue
        cells = json.loads(path.read_text())["cells"]
        yield path, "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def test_every_reference_resolves():
    record = claims.load_record()
    bad = []
    for path, text in _texts():
        for ref in ROLE.findall(text):
            id, _, field = ref.partition(":")
            try:
                claims.quote(id.strip(), field.strip() or "measured", record=record)
            except (KeyError, ValueError) as exc:
                bad.append(f"{path.relative_to(ROOT)}: {ref}: {exc}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("path", sorted((ROOT / "book" / "errata").glob("*.md")), ids=lambda p: p.name)
def test_errata_pages_quote_the_ledger(path):
    text = ROLE.sub("QUOTED", path.read_text())
    typed = [m.group(0) for m in PM.finditer(text)]
    assert not typed, f"{path.name}: hand-typed value ± SE, quote the ledger instead: {typed}"


def test_quote_formats():
    record = {"x": claims.ClaimResult("x", "noci2022", "-", "-", 12.0, 17.0712, 0.2871, 1.1, "erratum", "erratum",
                                      17.33, "", 0.1)}
    assert claims.quote("x", record=record) == "17.07 ± 0.29"
    assert claims.quote("x", "stated", record=record) == "12.00"
    assert claims.quote("x", "corrected", record=record) == "17.33"
    assert claims.quote("x", "status", record=record) == "erratum"
    with pytest.raises(KeyError):
        claims.quote("y", record=record)
    with pytest.raises(ValueError, match="field"):
        claims.quote("x", "median", record=record)
