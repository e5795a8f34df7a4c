"""The suite's policies: profile, device, thread count, and isolation of every test from every other.

* Profile and device: the quick profile on the CPU, whatever machine runs the suite.
* Threads: the suite runs on ``SIGPROP_TEST_THREADS`` torch threads (default ``min(2, CPUs)``: the 2-core CI
  machine), set once for the session and restored at its end. A test that needs another count uses the
  ``one_thread`` fixture (or sets and restores it itself).
* Isolation: no test may leave torch's global state changed -- threads, default dtype, deterministic-algorithm
  flags, float32 matmul precision, grad and inference mode, anomaly detection -- or sigprop's profile; the autouse
  fixture ``_isolated`` compares that state before and after every test (after the test's own fixtures are torn
  down), restores it, and fails the test at teardown, naming what changed. The global random number generators
  (torch's CPU and CUDA generators, NumPy's and Python's) are put back after every test: a test may draw from them
  (HuggingFace initialisers do), but cannot pass a changed state on, so no test's numbers depend on which tests ran
  before it.

Run the whole suite under another CPU kernel or thread count (README, "Reproducibility")::

    ATEN_CPU_CAPABILITY=default make test      # PyTorch's plainest CPU kernels
    SIGPROP_TEST_THREADS=1 make test-unit      # one torch thread
"""
import importlib.util
import os
import pathlib
import random
import sys

import numpy as np
import pytest
import torch

import sigprop as sp

# The suite is sized for the quick profile on CPU, whatever machine runs it.
os.environ.setdefault("SIGPROP_PROFILE", "quick")
os.environ.setdefault("SIGPROP_DEVICE", "cpu")

def load_script(name: str, path: pathlib.Path):
    """A script that is not in a package (book/*.py, .ci/*.py) imported by path as module ``name``, registered in
    sys.modules first (a dataclass looks its module up while it is defined)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


#: z for Monte Carlo tests: |MC - theory| <= Z * SE. With ~100 such comparisons per run, z = 4
#: keeps the family-wise false-alarm rate below 1% (two-sided P(|Z| > 4) = 6e-5 each).
Z = 4.0


def suite_threads() -> int:
    """The suite's torch thread count: ``SIGPROP_TEST_THREADS`` or ``min(2, CPUs)``."""
    value = os.environ.get("SIGPROP_TEST_THREADS", "")
    if value:
        if not value.isdigit() or int(value) < 1:
            raise pytest.UsageError(f"SIGPROP_TEST_THREADS must be a positive integer; got {value!r}")
        return int(value)
    return max(1, min(2, os.cpu_count() or 1))


def global_state() -> dict:
    """torch's (and sigprop's) global settings that a test must leave as it found them."""
    cuda = torch.backends.cuda.matmul
    return dict(threads=torch.get_num_threads(), default_dtype=torch.get_default_dtype(),
                deterministic=torch.are_deterministic_algorithms_enabled(),
                deterministic_warn_only=torch.is_deterministic_algorithms_warn_only_enabled(),
                float32_matmul_precision=torch.get_float32_matmul_precision(),
                cuda_matmul_allow_tf32=cuda.allow_tf32, cudnn_allow_tf32=torch.backends.cudnn.allow_tf32,
                cudnn_deterministic=torch.backends.cudnn.deterministic, cudnn_benchmark=torch.backends.cudnn.benchmark,
                grad_enabled=torch.is_grad_enabled(), inference_mode=torch.is_inference_mode_enabled(),
                anomaly_detection=torch.is_anomaly_enabled(), sigprop_profile=sp.profile())


def restore_state(state: dict) -> None:
    """Put back the settings of :func:`global_state` (grad and inference mode cannot be left on by a test that
    returned normally, so they are reported, not restored)."""
    torch.set_num_threads(state["threads"])
    torch.set_default_dtype(state["default_dtype"])
    torch.use_deterministic_algorithms(state["deterministic"], warn_only=state["deterministic_warn_only"])
    torch.set_float32_matmul_precision(state["float32_matmul_precision"])
    torch.backends.cuda.matmul.allow_tf32 = state["cuda_matmul_allow_tf32"]
    torch.backends.cudnn.allow_tf32 = state["cudnn_allow_tf32"]
    torch.backends.cudnn.deterministic = state["cudnn_deterministic"]
    torch.backends.cudnn.benchmark = state["cudnn_benchmark"]
    torch.set_grad_enabled(state["grad_enabled"])
    torch.autograd.set_detect_anomaly(state["anomaly_detection"])
    sp.set_profile(state["sigprop_profile"])


def rng_state() -> dict:
    """The global random number generators' states."""
    out = dict(torch=torch.get_rng_state(), numpy=np.random.get_state(), python=random.getstate())
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        out["cuda"] = torch.cuda.get_rng_state_all()
    return out


def restore_rng(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])
    if "cuda" in state:
        torch.cuda.set_rng_state_all(state["cuda"])


def changed(before: dict, after: dict) -> list[str]:
    return [f"{k}: {before[k]!r} -> {after[k]!r}" for k in before if after.get(k) != before[k]]


@pytest.fixture(scope="session", autouse=True)
def _suite_threads():
    """The thread policy, once for the session, restored at its end."""
    before = torch.get_num_threads()
    torch.set_num_threads(suite_threads())
    yield
    torch.set_num_threads(before)


@pytest.fixture(autouse=True)
def _isolated(_suite_threads):
    """Fails a test that leaves torch's global state changed; gives every test the same global RNG state."""
    state, rng = global_state(), rng_state()
    yield
    after = global_state()
    restore_rng(rng)
    if after != state:
        restore_state(state)
        pytest.fail("the test left global state changed (restore it, e.g. in a try/finally or a fixture): "
                    + "; ".join(changed(state, after)), pytrace=False)


@pytest.fixture
def one_thread():
    """One torch thread for the test (``pytestmark = pytest.mark.usefixtures("one_thread")``): tiny tensors."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
