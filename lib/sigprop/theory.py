"""Analytic maps (float64): ``sp.theory.<name>``.

The closed-form side of every random object in sigprop, each re-exported from the module that also
holds the object's sampler and Monte Carlo: the REM of an attention row (``beta_c``, ``ipr``,
``ipr_finite``, ``rem_moments``), the attention layer's maps, the block maps (Algorithms 1-3), the
trainability diagrams, and the chapters' maps (uniform attention, Bao's localisation, Aghajanyan's
covariances, the dictionary between the documents' scalings). ``tests/test_namespace.py`` keeps this list
and the modules' ``__theory__`` equal.

**The one contract** of every function here, enforced on every call by one wrapper,
``sigprop.stats._validate.theory_function``, that every function exported here passes through (this module refuses
to import otherwise), and checked for every function by ``tests/test_theory_contract.py``:

* deterministic: no random draws and no ``generator`` (a Monte Carlo is ``sp.mc_X``, beside its theory ``X``);
* computed in float64; inputs are Python or numpy numbers, numpy arrays or torch tensors, validated with
  expected-vs-got errors, and a value outside a formula's domain is refused, never returned as inf/NaN;
* the result's kind follows the inputs: any torch tensor in -> float64 tensors out (on that tensor's device, the
  CPU for Apple MPS); otherwise a Python ``float`` for a scalar and a float64 numpy array for an array (the two
  covariance matrices built from sizes alone, ``prefix_mean_factor`` and ``compound_symmetry_covariance``, are
  float64 CPU tensors: the chapters hand them to ``torch.linalg``);
* not differentiable: a tensor that requires grad is refused with a ValueError, never detached silently; a tensor
  on the meta device (no values) is refused too.
"""
from __future__ import annotations

from .attention._rem import (
    beta_c as beta_c, ipr as ipr, ipr_finite as ipr_finite, rem_moments as rem_moments,
)
from .attention._cross import cross_overlap as cross_overlap
from .attention._capped import capped_ipr as capped_ipr
from .attention._layer import (
    score_covariance as score_covariance, attention_map as attention_map, cosine_map as cosine_map,
)
from .attention._query_gradient import rem_query_grad_sq_norm as rem_query_grad_sq_norm
from .block._map import (
    block_map as block_map, iterate_block_map as iterate_block_map, mlp_map as mlp_map,
    relu_kernel as relu_kernel, activation_kernel as activation_kernel,
)
from .block._gram import (
    gram_block_map as gram_block_map, iterate_gram_map as iterate_gram_map, causal_ipr as causal_ipr,
)
from .block._depth import cosine_vs_depth as cosine_vs_depth
from .block._trainability import (
    trainability_diagram as trainability_diagram, critical_alpha_sa as critical_alpha_sa,
)
from .attention._uniform import (
    uniform_gram_sum as uniform_gram_sum, uniform_sq_norm as uniform_sq_norm,
    uniform_mean_correlation as uniform_mean_correlation, uniform_gram_sum_limit as uniform_gram_sum_limit,
    uniform_sq_norm_limit as uniform_sq_norm_limit,
    uniform_mean_correlation_limit as uniform_mean_correlation_limit, residual_scaling as residual_scaling,
    logit_second_moment as logit_second_moment, uniform_deviation as uniform_deviation,
)
from .attention._gradients import (
    value_grad_sq_norm as value_grad_sq_norm, query_grad_sq_norm as query_grad_sq_norm,
    input_grad_sq_norm as input_grad_sq_norm, input_grad_bound as input_grad_bound,
    value_grad_sq_norm_equicorrelated as value_grad_sq_norm_equicorrelated,
    query_grad_sq_norm_equicorrelated as query_grad_sq_norm_equicorrelated,
    query_value_log_ratio as query_value_log_ratio,
)
from .attention._localisation import (
    signal_propagation_moments as signal_propagation_moments,
    signal_propagation_moments_paper as signal_propagation_moments_paper, variance_profile as variance_profile,
    gaussian_propagation_probability as gaussian_propagation_probability, rho_theta as rho_theta,
    rho_theta_limit as rho_theta_limit, xi_eta as xi_eta, zhai_entropy_bound as zhai_entropy_bound,
    min_entropy_bound as min_entropy_bound, one_spike_entropy as one_spike_entropy,
)
from .attention._covariance import (
    witness_covariance as witness_covariance, prefix_mean_factor as prefix_mean_factor,
    small_alpha_correction as small_alpha_correction, quadratic_form_variance as quadratic_form_variance,
    compound_symmetry_covariance as compound_symmetry_covariance,
    compound_symmetry_rho_range as compound_symmetry_rho_range,
    compound_symmetry_variance as compound_symmetry_variance, common_mode_split as common_mode_split,
    common_mode_energy_of as common_mode_energy_of, uniform_attention_variances as uniform_attention_variances,
    l1_floor_constant as l1_floor_constant, shared_plus_noise_energy as shared_plus_noise_energy,
    conditional_cosine as conditional_cosine, logit_range as logit_range,
    overlap_lower_bound as overlap_lower_bound, cosine_lower_bound as cosine_lower_bound,
    residual_mixture_correlation as residual_mixture_correlation,
)
from . import _deprecated  # noqa: E402
from .attention._dictionary import (
    logit_variance as logit_variance, beta_equivalent as beta_equivalent,
    qk_variance_for_beta as qk_variance_for_beta, beta_xavier as beta_xavier, beta_bao as beta_bao,
    bao_self_logit_mean as bao_self_logit_mean, branch_from_skip as branch_from_skip,
    glorot_variance as glorot_variance,
)

__all__ = [
    "beta_c", "ipr", "ipr_finite", "rem_moments", "cross_overlap", "capped_ipr", "score_covariance", "attention_map",
    "cosine_map", "rem_query_grad_sq_norm", "block_map", "iterate_block_map", "mlp_map", "relu_kernel",
    "activation_kernel", "gram_block_map", "iterate_gram_map", "causal_ipr", "trainability_diagram",
    "cosine_vs_depth", "critical_alpha_sa", "uniform_gram_sum", "uniform_sq_norm", "uniform_mean_correlation",
    "uniform_gram_sum_limit", "uniform_sq_norm_limit", "uniform_mean_correlation_limit", "residual_scaling",
    "logit_second_moment", "uniform_deviation", "value_grad_sq_norm", "query_grad_sq_norm",
    "input_grad_sq_norm", "input_grad_bound", "value_grad_sq_norm_equicorrelated",
    "query_grad_sq_norm_equicorrelated", "query_value_log_ratio", "signal_propagation_moments",
    "signal_propagation_moments_paper", "variance_profile", "gaussian_propagation_probability", "rho_theta",
    "rho_theta_limit", "xi_eta", "zhai_entropy_bound", "min_entropy_bound", "one_spike_entropy",
    "witness_covariance", "prefix_mean_factor", "small_alpha_correction", "quadratic_form_variance",
    "compound_symmetry_covariance", "compound_symmetry_rho_range", "compound_symmetry_variance",
    "common_mode_split", "common_mode_energy_of", "uniform_attention_variances", "l1_floor_constant",
    "shared_plus_noise_energy", "conditional_cosine", "logit_range", "overlap_lower_bound",
    "cosine_lower_bound", "residual_mixture_correlation", "logit_variance", "beta_equivalent",
    "qk_variance_for_beta", "beta_xavier", "beta_bao", "bao_self_logit_mean", "branch_from_skip",
    "glorot_variance"
]


def _enforce_contract() -> None:
    """Every exported function carries the contract's wrapper (a module that adds a theory function without it fails
    here, at import, not silently at a user's call)."""
    unchecked = [name for name in __all__ if not getattr(globals()[name], "__sigprop_theory__", False)]
    if unchecked:
        raise RuntimeError(f"sp.theory functions without the contract (decorate them with "
                           f"sigprop.stats._validate.theory_function): {', '.join(unchecked)}")


_enforce_contract()


def __getattr__(name):
    """Old names (``sigprop._deprecated.RENAMED_THEORY``) still work, with a DeprecationWarning."""
    return _deprecated.lookup(_deprecated.RENAMED_THEORY, "sigprop.theory", name)
