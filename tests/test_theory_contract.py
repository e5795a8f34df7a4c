"""The one contract of sp.theory (sigprop/theory.py's docstring), checked for every theory function of the
stats/attention folders on its baseline call from tests/test_api_fuzz.py:

* deterministic: two calls give the same numbers (no random draws, no generator argument);
* float64 results whose kind follows the inputs: torch tensors in -> float64 tensors out; otherwise Python floats
  for scalars and float64 numpy arrays for arrays -- except the covariance matrices built from sizes alone
  (``TENSOR_BUILDERS``), which the chapters hand to torch.linalg;
* a tensor that requires grad is refused (ValueError), never detached silently (issue 26, item 16).
"""
import inspect

import numpy as np
import pytest
import torch

import sigprop as sp
from test_api_fuzz import SPECS

th = sp.theory
#: Matrices built from sizes and scalars for the torch engine: float64 CPU tensors whatever the inputs.
TENSOR_BUILDERS = {"prefix_mean_factor", "compound_symmetry_covariance"}
MINE = sorted(n for n in th.__all__ if getattr(th, n).__module__.split(".")[1] in ("attention", "stats"))


def _leaves(out):
    if isinstance(out, dict):
        return [x for v in out.values() for x in _leaves(v)]
    if isinstance(out, (tuple, list)):
        return [x for v in out for x in _leaves(v)]
    return [out]


def test_every_theory_function_of_these_folders_is_checked():
    assert MINE and all(getattr(getattr(th, n), "__sigprop_theory__", False) for n in MINE), \
        [n for n in MINE if not getattr(getattr(th, n), "__sigprop_theory__", False)]
    for name in MINE:
        assert "generator" not in inspect.signature(getattr(th, name)).parameters, name


@pytest.mark.parametrize("name", MINE)
def test_result_kinds_follow_the_inputs_and_calls_are_deterministic(name):
    spec = SPECS[name]
    first, second = spec.fn(*spec.args, **spec.kwargs), spec.fn(*spec.args, **spec.kwargs)
    torch_in = any(isinstance(a, torch.Tensor) for a in (*spec.args, *spec.kwargs.values()))
    for a, b in zip(_leaves(first), _leaves(second)):
        if isinstance(a, torch.Tensor):
            assert torch_in or name in TENSOR_BUILDERS, f"{name}: a tensor from non-tensor inputs"
            assert a.dtype == torch.float64 and torch.equal(a, b), name
        elif isinstance(a, np.ndarray):
            assert not torch_in and a.dtype == np.float64 and np.array_equal(a, b), name
        else:
            assert isinstance(a, (float, int)) and not isinstance(a, bool) and a == b, (name, type(a))
            assert not torch_in or isinstance(a, int), f"{name}: a float from tensor inputs"


@pytest.mark.parametrize("name", [n for n in MINE if any(isinstance(a, torch.Tensor) for a in SPECS[n].args)])
def test_tensors_that_require_grad_are_refused(name):
    spec = SPECS[name]
    args = [a.detach().clone().requires_grad_() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
            for a in spec.args]
    with pytest.raises(ValueError, match="requires grad, but sp.theory functions are not differentiable"):
        spec.fn(*args, **spec.kwargs)


def test_numbers_given_as_tensors_that_require_grad_are_refused_too():
    beta = torch.tensor(2.0, requires_grad=True)
    for call in (lambda: th.ipr(beta), lambda: th.cross_overlap(beta, 16, 1.0, 0.3),
                 lambda: th.beta_xavier(d=8, d_k=8, T=torch.tensor(64.0, requires_grad=True))):
        with pytest.raises(ValueError, match="requires grad"):
            call()
