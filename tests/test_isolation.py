"""Isolation: no test leaves torch's global state changed, and the library never touches the global RNG.

``tests/conftest.py`` compares torch's global settings before and after every test and fails a test that changed
them; it puts the global random number generators back after every test. These tests run a small suite through
that conftest in a fresh process and check that it fails exactly the offending tests, and that sigprop's samplers
draw from their explicit generators only (STYLE.md: the library never touches global RNG state).
"""
import os
import pathlib
import subprocess
import sys
import xml.etree.ElementTree as ET

import torch

import sigprop as sp
from conftest import changed, global_state, restore_state, suite_threads

HERE = pathlib.Path(__file__).resolve().parent

INNER = '''
import torch

THREADS = {threads}
seen = {{}}


def test_leaves_threads_changed():
    torch.set_num_threads(THREADS + 1)


def test_leaves_default_dtype_changed():
    torch.set_default_dtype(torch.float64)


def test_leaves_matmul_precision_and_determinism_changed():
    torch.set_float32_matmul_precision("medium")
    torch.use_deterministic_algorithms(True)


def test_restores_what_it_changes():
    before = torch.get_num_threads()
    torch.set_num_threads(THREADS + 1)
    torch.set_num_threads(before)


def test_draws_from_the_global_rng():
    seen["first"] = torch.randn(4)


def test_seeds_the_global_rng():
    torch.manual_seed(12345)


def test_sees_the_same_global_rng_as_every_test():
    assert torch.equal(torch.randn(4), seen["first"])


def test_runs_on_the_suite_threads():
    assert torch.get_num_threads() == THREADS
'''


def test_the_conftest_fails_exactly_the_tests_that_leave_state_changed(tmp_path):
    (tmp_path / "conftest.py").write_text(
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('suite_conftest', {str(HERE / 'conftest.py')!r})\n"
        "module = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(module)\n"
        "_suite_threads, _isolated = module._suite_threads, module._isolated\n")
    (tmp_path / "test_inner.py").write_text(INNER.format(threads=suite_threads()))
    report = tmp_path / "report.xml"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}",
                           "test_inner.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"})  # CI's plugins: not here
    cases = {c.get("name"): c for c in ET.parse(report).getroot().iter("testcase")}
    failed = {name for name, c in cases.items() if c.find("error") is not None or c.find("failure") is not None}
    assert failed == {"test_leaves_threads_changed", "test_leaves_default_dtype_changed",
                      "test_leaves_matmul_precision_and_determinism_changed"}, proc.stdout + proc.stderr
    message = cases["test_leaves_default_dtype_changed"].find("error").get("message")
    assert "default_dtype: torch.float32 -> torch.float64" in message, message
    assert len(cases) == 8


def test_state_helpers_see_and_undo_each_change():
    before = global_state()
    try:
        torch.set_default_dtype(torch.float64)
        torch.set_num_threads(before["threads"] + 1)
        assert {c.split(":")[0] for c in changed(before, global_state())} == {"default_dtype", "threads"}
    finally:
        restore_state(before)
    assert global_state() == before


def test_samplers_leave_the_global_rng_alone():
    before = torch.get_rng_state()
    cfg = sp.BlockConfig.from_beta(0.5, T=8, d=16, norm="post")
    sp.mc_cosine_vs_depth(cfg, 2, T=8, inits=2, generator=0)
    sp.mc_attention_ipr([1.0], T=64, d=16, inits=2, queries=2, generator=0, device="cpu")
    sp.gaussian_tokens(2, T=4, d=8, generator=0)
    sp.TinyLM(sp.LMConfig(vocab=8, T=4, d=8), generator=0)
    assert torch.equal(torch.get_rng_state(), before), "a sampler drew from torch's global RNG"
