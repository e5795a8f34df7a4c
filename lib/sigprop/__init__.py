"""sigprop: signal propagation in transformers at initialisation.

A small library behind the sigprop book: random transformers and their analytic maps side by side,
a batched Monte Carlo engine with standard errors, and a ledger of the quantitative claims of four
documents (Noci et al. 2022; Bao, Hataya & Karakida 2024; Giorlandino & Goldt 2025; Aghajanyan 2025).

Flat namespace: ``import sigprop as sp``; analytic maps live in ``sp.theory``, published settings in
``sp.presets``, the ledger in ``sigprop.claims`` (``python -m sigprop.claims``). Every public name is
re-exported explicitly below, from the private module of the random object or concept it belongs to
(CONTRIBUTING.md: "where does my formula go"); ``tests/test_namespace.py`` keeps this list and the
modules' ``__all__`` equal.
"""
from __future__ import annotations

__version__ = "0.1.0"

from .stats._config import (
    Profile as Profile, profile as profile, set_profile as set_profile, pick as pick,
    default_device as default_device, as_device as as_device, float64_device as float64_device,
    widest_float as widest_float, threads_for as threads_for,
)
from .stats._random import as_generator as as_generator
from .stats._validate import TOL as TOL
from .stats._estimate import Estimate as Estimate, estimate as estimate
from .stats._agreement import (
    CurveAgreement as CurveAgreement, curve_agreement as curve_agreement,
    min_initialisations as min_initialisations,
)
from .stats._montecarlo import monte_carlo as monte_carlo, progress_bar as progress_bar
from .course._checkers import check_function as check_function, CheckFailed as CheckFailed
from .course._style import use_book_style as use_book_style
from .stats._measures import (
    token_overlaps as token_overlaps, cosine_matrix as cosine_matrix, mean_cosine as mean_cosine,
    attention_ipr as attention_ipr, attention_entropy as attention_entropy,
    cross_token_covariance as cross_token_covariance, stable_rank as stable_rank,
)
from .inputs._tokens import (
    gaussian_tokens as gaussian_tokens, equicorrelated_tokens as equicorrelated_tokens,
    orthogonal_tokens as orthogonal_tokens, random_walk_tokens as random_walk_tokens,
    exact_equicorrelated_tokens as exact_equicorrelated_tokens,
)
from .inputs._language import (
    MarkovSource as MarkovSource, MaskedTask as MaskedTask, TextCorpus as TextCorpus,
    load_text_corpus as load_text_corpus,
)
from .attention._rem import mc_rem_moments as mc_rem_moments
from .attention._capped import mc_capped_ipr as mc_capped_ipr
from .attention._cross import mc_cross_overlap as mc_cross_overlap
from .attention._layer import (
    self_attention as self_attention, layer_norm as layer_norm, attention_weights as attention_weights,
    sample_scores as sample_scores, mc_attention_layer as mc_attention_layer,
    AttentionLayerStats as AttentionLayerStats,
)
from .attention._ipr import mc_attention_ipr as mc_attention_ipr, mc_ipr_finite_width as mc_ipr_finite_width
from .attention._query_gradient import (
    query_jacobian_sq_norm as query_jacobian_sq_norm, mc_rem_query_grad_sq_norm as mc_rem_query_grad_sq_norm,
)
from .block._config import BlockConfig as BlockConfig
from .block._attention import alibi_slopes as alibi_slopes
from .block._network import (
    TransformerParams as TransformerParams, sample_transformer as sample_transformer,
    transformer_forward as transformer_forward,
)
from .block._depth import CosineCurve as CosineCurve, mc_cosine_vs_depth as mc_cosine_vs_depth
from .block._map import Overlaps as Overlaps, BlockTrajectory as BlockTrajectory
from .block._gram import GramTrajectory as GramTrajectory, GramStep as GramStep
from .block._trainability import (
    TrainabilityDiagram as TrainabilityDiagram, TRAINABLE as TRAINABLE, RANK_COLLAPSE as RANK_COLLAPSE,
    ENTROPY_COLLAPSE as ENTROPY_COLLAPSE, PHASE_NAMES as PHASE_NAMES,
)
from .models._training import (
    TrainingRun as TrainingRun, train_masked_lm as train_masked_lm, masked_lm_init as masked_lm_init,
)
from .models._lm import LMConfig as LMConfig, TinyLM as TinyLM, fit as fit
from .models._probe import probe as probe, ProbeResult as ProbeResult
from .models._adapter import BlockAdapter as BlockAdapter
from .models._montecarlo import mc_model_cosine as mc_model_cosine, at_width as at_width
from .models._real import read_init as read_init, ModelInit as ModelInit
from .models._reinit import reinitialise as reinitialise
from .models._replay import Replay as Replay
from .attention._uniform import (
    gram_sum as gram_sum, uniform_self_attention as uniform_self_attention,
    ratio_correlation as ratio_correlation,
)
from .stats._fits import (
    fit_power_law as fit_power_law, fit_gap as fit_gap, extrapolate as extrapolate,
    fit_inverse_width as fit_inverse_width, GapFit as GapFit, Extrapolation as Extrapolation,
    InverseWidthFit as InverseWidthFit,
)
from .attention._gradients import (
    attention_jacobian_sq_norms as attention_jacobian_sq_norms,
    softmax_param_grad_sq_norms as softmax_param_grad_sq_norms, loss_grad_sq_norms as loss_grad_sq_norms,
)
from .block._gradients import transformer_layer_grad_sq_norms as transformer_layer_grad_sq_norms
from .attention._localisation import (
    spectral_qk_matrix as spectral_qk_matrix, anisotropic_sigma as anisotropic_sigma,
    last_query_logits as last_query_logits, linearised_softmax_argument as linearised_softmax_argument,
    piecewise_linear_softmax as piecewise_linear_softmax, propagation_indicator as propagation_indicator,
    qk_traces as qk_traces, qk_norms as qk_norms, qk_gradient_terms as qk_gradient_terms,
)
from .attention._locater import (
    locater_penalty as locater_penalty, locater_gradients as locater_gradients, qk_eigen_stats as qk_eigen_stats,
)
from .attention._covariance_mc import (
    common_mode_energy as common_mode_energy, pearson as pearson,
    total_covariance_terms as total_covariance_terms, logit_subspace_split as logit_subspace_split,
    ValueCorrelation as ValueCorrelation, mc_value_correlation as mc_value_correlation,
    covariance_matrix as covariance_matrix,
)

from . import presets as presets  # noqa: E402
from . import theory as theory  # noqa: E402
from . import _deprecated  # noqa: E402


def __getattr__(name):
    """Old names (``sigprop._deprecated.RENAMED``) still work, with a DeprecationWarning."""
    return _deprecated.lookup(_deprecated.RENAMED, "sigprop", name)


__all__ = [
    "Profile", "profile", "set_profile", "pick", "default_device", "as_device", "float64_device",
    "widest_float", "threads_for", "as_generator", "TOL", "Estimate", "estimate", "CurveAgreement",
    "curve_agreement", "min_initialisations", "monte_carlo", "progress_bar", "check_function", "CheckFailed",
    "use_book_style", "token_overlaps", "cosine_matrix", "mean_cosine", "attention_ipr", "attention_entropy",
    "cross_token_covariance", "stable_rank", "gaussian_tokens", "equicorrelated_tokens", "orthogonal_tokens",
    "random_walk_tokens", "exact_equicorrelated_tokens", "MarkovSource", "MaskedTask", "TextCorpus",
    "load_text_corpus", "mc_cross_overlap", "mc_rem_moments", "mc_capped_ipr", "self_attention", "layer_norm",
    "attention_weights", "sample_scores", "mc_attention_layer", "AttentionLayerStats", "mc_attention_ipr",
    "mc_ipr_finite_width", "query_jacobian_sq_norm", "mc_rem_query_grad_sq_norm", "BlockConfig", "alibi_slopes",
    "TransformerParams",
    "sample_transformer", "transformer_forward", "mc_cosine_vs_depth", "CosineCurve", "Overlaps",
    "BlockTrajectory", "GramTrajectory", "GramStep", "TrainabilityDiagram",
    "TRAINABLE", "RANK_COLLAPSE", "ENTROPY_COLLAPSE", "PHASE_NAMES", "TrainingRun", "train_masked_lm",
    "masked_lm_init", "LMConfig", "TinyLM", "fit", "probe", "ProbeResult", "read_init", "reinitialise",
    "ModelInit", "Replay", "BlockAdapter", "mc_model_cosine", "at_width",
    "gram_sum", "uniform_self_attention", "ratio_correlation", "fit_power_law", "fit_gap", "extrapolate",
    "fit_inverse_width", "GapFit", "Extrapolation", "InverseWidthFit",
    "attention_jacobian_sq_norms", "softmax_param_grad_sq_norms", "loss_grad_sq_norms",
    "transformer_layer_grad_sq_norms", "spectral_qk_matrix", "anisotropic_sigma", "last_query_logits",
    "linearised_softmax_argument", "piecewise_linear_softmax", "propagation_indicator", "qk_traces",
    "qk_norms", "qk_gradient_terms", "locater_penalty", "locater_gradients", "qk_eigen_stats",
    "common_mode_energy", "pearson", "total_covariance_terms", "logit_subspace_split", "ValueCorrelation",
    "mc_value_correlation", "covariance_matrix", "presets", "theory"
]
