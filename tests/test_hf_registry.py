"""Coverage enumerated, not listed by hand (issue 32): every text and vision family of the installed transformers
(tests/hf_registry.py), built at tiny sizes, is probed and read, and each ends as *read and proved* (sp.read_init's
replay within its tolerance), *refused* with a ValueError that names why, or *not buildable* at tiny sizes (its
constructor's error, or too many parameters) -- never another exception, never a prediction without a proof.

The committed tests/records/hf_registry_transformers<major>.json lists every family with its status and message
(``python tests/hf_registry.py --record``; the other major's record from its environment, tests/test_transformers_
major.py). Under the recorded transformers version every status must equal the record's, so a family that starts or
stops being read is seen; under another version (new families, changed modeling code) no family may raise, and the
families the book is built on must be read and proved.
"""
import json

import pytest

transformers = pytest.importorskip("transformers")
import hf_registry as R  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

#: Read and proved under both majors (issue 32's named list; issue 33's families with QK-norm, sandwich norms and
#: soft-caps; issue 34's with ALiBi, windows and mixtures of experts).
BUILT_FOR = ("llama", "qwen2", "mistral", "gpt_neox", "vit", "bert", "roberta", "gpt2", "deit", "stablelm", "gemma",
             "granite", "olmo", "phi3", "qwen3", "olmo2", "gemma2", "gemma3_text", "bloom", "falcon", "mixtral",
             "qwen3_moe")


@pytest.fixture(scope="module")
def table():
    return {n: R.classify(n) for n in R.families()}


def test_every_family_is_read_refused_or_not_buildable(table):
    errors = {n: e for n, e in table.items() if R.status(e) == "error"}
    assert not errors, "raised something other than a clear refusal:\n" + "\n".join(
        f"{n}: probe {e['probe']} | read {e['read']}" for n, e in errors.items())
    for n, e in table.items():
        if R.status(e) == "refused" and not e["read"].startswith("proved"):
            assert len(e["read"]) > len("refused: ") + 20, (n, e["read"])   # a refusal says why


def test_the_families_the_book_uses_are_read_and_proved(table):
    missing = {n: table[n]["read"] for n in BUILT_FOR if n in table and R.status(table[n]) != "read"}
    assert not missing, missing
    assert set(BUILT_FOR) <= set(table), sorted(set(BUILT_FOR) - set(table))


def test_statuses_equal_the_record(table):
    if not R.RECORD.exists():
        pytest.skip(f"no record for transformers {R.MAJOR}.x: python tests/hf_registry.py --record")
    record = json.loads(R.RECORD.read_text())
    if record["transformers"] != transformers.__version__:
        pytest.skip(f"the record is of transformers {record['transformers']}, this is {transformers.__version__}: "
                    "the other two tests hold; re-record to compare statuses")
    moved = {n: (R.status(e), R.status(record["families"][n])) for n, e in table.items()
             if n in record["families"] and R.status(e) != R.status(record["families"][n])}
    assert not moved, f"statuses changed (now, recorded): {moved}; re-record with python tests/hf_registry.py --record"
