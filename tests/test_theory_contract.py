"""The one contract of sp.theory (sigprop/theory.py's docstring), checked for every function sp.theory exports on its
baseline call from tests/test_api_fuzz.py:

* one wrapper (``sigprop.stats._validate.theory_function``) carries every function, and sigprop.theory refuses to
  import a function without it;
* deterministic: two calls give the same numbers (no random draws, no generator argument);
* float64 results whose kind follows the inputs: torch tensors in -> float64 tensors out (integer arrays keep their
  dtype) on the input's device, through tuples, named tuples, dicts and result dataclasses; otherwise Python floats
  for scalars and float64 numpy arrays for arrays -- except the covariance matrices built from sizes alone
  (``TENSOR_BUILDERS``), which the chapters hand to torch.linalg;
* a tensor that requires grad is refused (ValueError), never detached silently (issue 26, item 16; issue 37, item 4:
  eleven block and Gram functions detached, four returned numpy for tensors); a meta tensor is refused (it reached
  ``NotImplementedError: Cannot copy out of meta tensor``).
"""
import dataclasses
import inspect

import numpy as np
import pytest
import torch

import sigprop as sp
from test_api_fuzz import SPECS

th = sp.theory
#: Matrices built from sizes and scalars for the torch engine: float64 CPU tensors whatever the inputs.
TENSOR_BUILDERS = {"prefix_mean_factor", "compound_symmetry_covariance"}
ALL = sorted(th.__all__)


def _leaves(out):
    """Every number and array of a result: through tuples, lists, dicts and the array fields of dataclasses
    (their Python scalars are settings -- depth, thresholds, flags -- and not leaves)."""
    if isinstance(out, dict):
        return [x for v in out.values() for x in _leaves(v)]
    if isinstance(out, (tuple, list)):
        return [x for v in out for x in _leaves(v)]
    if dataclasses.is_dataclass(out):
        return [getattr(out, f.name) for f in dataclasses.fields(out)
                if isinstance(getattr(out, f.name), (np.ndarray, torch.Tensor))]
    return [out]


def _tensorised(spec):
    """The baseline call with every real argument (floats, float arrays, lists of floats) as a float64 tensor; None
    where no argument is real (sizes and configs only)."""
    def conv(v):
        if isinstance(v, bool) or isinstance(v, (int, np.integer)):
            return v, False
        if isinstance(v, (float, np.floating)):
            return torch.tensor(float(v), dtype=torch.float64), True
        if isinstance(v, np.ndarray) and v.dtype.kind == "f":
            return torch.from_numpy(v.copy()), True
        if isinstance(v, list) and v and all(isinstance(x, float) for x in v):
            return torch.tensor(v, dtype=torch.float64), True
        if isinstance(v, torch.Tensor) and v.is_floating_point():
            return v, True
        return v, False
    args = [conv(a) for a in spec.args]
    kwargs = {k: conv(v) for k, v in spec.kwargs.items()}
    if not any(t for _, t in args) and not any(t for _, t in kwargs.values()):
        return None
    return [a for a, _ in args], {k: v for k, (v, _) in kwargs.items()}


def _first_tensor(args, kwargs):
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor) and a.is_floating_point():
            return ("arg", i)
    for k, v in kwargs.items():
        if isinstance(v, torch.Tensor) and v.is_floating_point():
            return ("kw", k)
    return None


def _replace(args, kwargs, where, fn):
    args, kwargs = list(args), dict(kwargs)
    if where[0] == "arg":
        args[where[1]] = fn(args[where[1]])
    else:
        kwargs[where[1]] = fn(kwargs[where[1]])
    return args, kwargs


TENSORISED = {name: _tensorised(SPECS[name]) for name in ALL}
WITH_TENSORS = [name for name in ALL if TENSORISED[name] is not None]


def test_every_theory_function_passes_through_the_one_wrapper():
    assert len(ALL) >= 72
    assert all(getattr(getattr(th, n), "__sigprop_theory__", False) for n in ALL), \
        [n for n in ALL if not getattr(getattr(th, n), "__sigprop_theory__", False)]
    for name in ALL:
        assert "generator" not in inspect.signature(getattr(th, name)).parameters or name in {
            "gram_block_map", "iterate_gram_map"}, name   # the Gram maps integrate with a fixed seed (docstring)
    # every function has a baseline call, and all but those built from sizes alone take a tensor
    assert set(ALL) <= set(SPECS)
    assert len(WITH_TENSORS) >= len(ALL) - 8, sorted(set(ALL) - set(WITH_TENSORS))


def test_a_theory_function_without_the_wrapper_is_refused_at_import(monkeypatch):
    monkeypatch.setattr(th, "ipr", th.ipr.__wrapped__)
    with pytest.raises(RuntimeError, match="sp.theory functions without the contract .*: ipr"):
        th._enforce_contract()


@pytest.mark.parametrize("name", ALL)
def test_result_kinds_follow_the_inputs_and_calls_are_deterministic(name):
    spec = SPECS[name]
    first, second = spec.fn(*spec.args, **spec.kwargs), spec.fn(*spec.args, **spec.kwargs)
    torch_in = any(isinstance(a, torch.Tensor) for a in (*spec.args, *spec.kwargs.values()))
    for a, b in zip(_leaves(first), _leaves(second)):
        if isinstance(a, torch.Tensor):
            assert torch_in or name in TENSOR_BUILDERS, f"{name}: a tensor from non-tensor inputs"
            assert (a.dtype == torch.float64 or not a.is_floating_point()) and torch.equal(a, b), name
        elif isinstance(a, np.ndarray):
            assert not torch_in and a.dtype.kind in "fiub" and np.array_equal(a, b), name
            assert a.dtype == np.float64 or a.dtype.kind != "f", name
        else:
            assert isinstance(a, (float, int)) and not isinstance(a, bool) and a == b, (name, type(a))
            assert not torch_in or isinstance(a, int), f"{name}: a float from tensor inputs"


@pytest.mark.parametrize("name", WITH_TENSORS)
def test_tensors_in_give_float64_tensors_out(name):
    args, kwargs = TENSORISED[name]
    out = SPECS[name].fn(*args, **kwargs)
    leaves = _leaves(out)
    assert leaves, name
    for leaf in leaves:
        assert isinstance(leaf, torch.Tensor), f"{name}: {type(leaf).__name__} from tensor inputs"
        assert leaf.dtype == torch.float64 or not leaf.is_floating_point(), (name, leaf.dtype)
        assert leaf.device.type == "cpu" and not leaf.requires_grad, name


@pytest.mark.parametrize("name", WITH_TENSORS)
def test_tensors_that_require_grad_are_refused(name):
    args, kwargs = TENSORISED[name]
    where = _first_tensor(args, kwargs)
    args, kwargs = _replace(args, kwargs, where, lambda t: t.detach().clone().requires_grad_())
    with pytest.raises(ValueError, match="requires grad, but sp.theory functions are not differentiable"):
        SPECS[name].fn(*args, **kwargs)


@pytest.mark.parametrize("name", WITH_TENSORS)
def test_meta_tensors_are_refused(name):
    args, kwargs = TENSORISED[name]
    where = _first_tensor(args, kwargs)
    args, kwargs = _replace(args, kwargs, where, lambda t: torch.empty_like(t, device="meta"))
    with pytest.raises(ValueError, match=r"is on the meta device \(a shape without values\)"):
        SPECS[name].fn(*args, **kwargs)


def test_numbers_given_as_tensors_that_require_grad_are_refused_too():
    beta = torch.tensor(2.0, requires_grad=True)
    for call in (lambda: th.ipr(beta), lambda: th.cross_overlap(beta, 16, 1.0, 0.3),
                 lambda: th.beta_xavier(d=8, d_k=8, T=torch.tensor(64.0, requires_grad=True)),
                 lambda: th.block_map(1.0, 0.3, beta=1.0, alpha_sa=torch.tensor([0.5, 1.0], requires_grad=True))):
        with pytest.raises(ValueError, match="requires grad"):
            call()


def test_a_tensor_anywhere_among_the_inputs_gives_tensors():
    # issue 37, item 4: a tensor alpha_sa (not q, p or beta) returned numpy
    out = th.block_map(1.0, 0.3, beta=1.0, alpha_sa=torch.tensor([0.5, 1.0]))
    assert all(isinstance(v, torch.Tensor) and v.dtype == torch.float64 and v.shape == (2,) for v in out)
    traj = th.iterate_gram_map(torch.eye(4, dtype=torch.float32), 2, sp.BlockConfig(d=8), samples=64)
    assert isinstance(traj.gram, torch.Tensor) and traj.gram.dtype == torch.float64 and traj.samples == 64
    assert isinstance(traj.mean_cosine(), torch.Tensor)
    diagram = th.trainability_diagram(torch.tensor([1.0, 2.0]), [0.5], depth=2)
    assert diagram.phase.dtype == torch.int64 and diagram.depth == 2
