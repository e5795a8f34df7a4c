"""Old public names (issue 24's renames) keep working as deprecated aliases, listed once in sigprop/_deprecated.py."""
import pytest

import sigprop as sp
from sigprop import _deprecated


@pytest.mark.parametrize("old", sorted(_deprecated.RENAMED))
def test_flat_aliases_warn_and_return_the_new_function(old):
    new, obj = _deprecated.RENAMED[old]
    with pytest.warns(DeprecationWarning, match=f"sigprop.{old} is deprecated: use sigprop.{new}"):
        assert getattr(sp, old) is obj
    assert getattr(sp, new) is obj and new in sp.__all__ and old not in sp.__all__


@pytest.mark.parametrize("old", sorted(_deprecated.RENAMED_THEORY))
def test_theory_aliases_warn_and_return_the_new_function(old):
    new, obj = _deprecated.RENAMED_THEORY[old]
    with pytest.warns(DeprecationWarning, match=f"sigprop.theory.{old} is deprecated"):
        assert getattr(sp.theory, old) is obj
    assert getattr(sp.theory, new) is obj and new in sp.theory.__all__


def test_unknown_names_still_raise_attribute_error():
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        sp.no_such_name  # noqa: B018
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        sp.theory.no_such_name  # noqa: B018


def test_the_naming_rule():
    # Monte Carlo functions are mc_X (no *_mc, *_rem suffixes left), squared norms *_sq_norm(s)
    for name in sp.__all__:
        assert not name.endswith(("_mc", "_rem")), name
    assert "query_jacobian_norm" not in sp.__all__ and "query_grad_norm" not in sp.theory.__all__
