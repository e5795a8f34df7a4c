import numpy as np
import pytest
import torch

import sigprop as sp


def ref(x, a=1.0):
    return a * torch.as_tensor(x) ** 2


CASES = [dict(x=torch.arange(4.0)), dict(x=torch.linspace(-1, 1, 5), a=2.0)]


def test_passes_on_correct_function(capsys):
    assert sp.check_function(lambda x, a=1.0: a * x * x, ref, CASES)
    assert "all 2 cases" in capsys.readouterr().out


@pytest.mark.parametrize("user, match", [
    (lambda x, a=1.0: 2 * a * x * x, "constant factor: yours = 2"),
    (lambda x, a=1.0: (a * x * x)[:-1], "expected shape"),
    (lambda x, a=1.0: None, "returned None"),
    (lambda x, a=1.0: 1 / 0, "raised ZeroDivisionError"),
    (lambda x, a=1.0: a * x * x + (x == x.max()).float(), "first mismatch at index"),
])
def test_explains_failures(user, match):
    with pytest.raises(sp.CheckFailed, match=match):
        sp.check_function(user, ref, CASES, quiet=True)


def test_checker_validates_cases():
    with pytest.raises(ValueError, match="at least one"):
        sp.check_function(lambda: 0, ref, [])
    with pytest.raises(TypeError, match="dict of keyword arguments"):
        sp.check_function(lambda x: x, ref, [np.zeros(2)])
