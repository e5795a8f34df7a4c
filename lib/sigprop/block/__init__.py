"""The random transformer block: its parts, each with its forward and its Gaussian map (``_components``:
activations, MLP, normalisation, residual layouts; ``_attention``: projections, grouped-query heads, RoPE,
biases; ``_kernels``: the activations' Gaussian kernels), its configuration (``_config``), the random network
(``_network``), its maps at T -> infinity and finite T (``_map``), the whole token Gram matrix through a block
(``_gram``), the cosine through depth, theory and Monte Carlo (``_depth``), trainability diagrams
(``_trainability``) and the gradients of its weights (``_gradients``).

The names below are this folder's interface to the rest of sigprop (the models that read, reuse or train a
block); readers use the flat ``sp.*`` and ``sp.theory.*`` namespaces.
"""
from ._components import (
    ACTIVATIONS as ACTIVATIONS, LAYER_NORM as LAYER_NORM, RMS_NORM as RMS_NORM, Activation as Activation,
    Normalisation as Normalisation, activation_from_hf as activation_from_hf, normalisation as normalisation,
)
from ._attention import alibi_slopes as alibi_slopes
from ._config import BlockConfig as BlockConfig, Norm as Norm
from ._gram import check_gram as check_gram, iterate_gram_map as iterate_gram_map
from ._map import iterate_block_map as iterate_block_map
from ._network import (
    TransformerParams as TransformerParams, apply_block as apply_block, expected_shapes as expected_shapes,
    forward_reference as forward_reference, sample_transformer as sample_transformer,
    transformer_forward as transformer_forward,
)
