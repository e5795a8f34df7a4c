import os

import pytest
import torch

# The suite is sized for the quick profile on CPU, whatever machine runs it.
os.environ.setdefault("SIGPROP_PROFILE", "quick")
os.environ.setdefault("SIGPROP_DEVICE", "cpu")

#: z for Monte Carlo tests: |MC - theory| <= Z * SE. With ~100 such comparisons per run, z = 4
#: keeps the family-wise false-alarm rate below 1% (two-sided P(|Z| > 4) = 6e-5 each).
Z = 4.0


@pytest.fixture(autouse=True)
def _threads():
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    yield


@pytest.fixture
def one_thread():
    """One torch thread for the test (``pytestmark = pytest.mark.usefixtures("one_thread")``): tiny tensors."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
