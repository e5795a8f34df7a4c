"""The random transformer block: its configuration, sampler and forward pass (``_network``, fast
kernel ``_fast``), its Gaussian maps at T -> infinity and finite T (``_map``), the whole token Gram
matrix through a block (``_gram``), trainability diagrams (``_trainability``) and the gradients of its
weights (``_gradients``).

The names below are this folder's interface to the rest of sigprop (the models that read or reuse a
block); readers use the flat ``sp.*`` and ``sp.theory.*`` namespaces.
"""
from ._gram import iterate_gram_map as iterate_gram_map
from ._map import iterate_block_map as iterate_block_map
from ._network import (
    BlockConfig as BlockConfig, Norm as Norm, TransformerParams as TransformerParams, apply_block as apply_block,
    forward_reference as forward_reference, sample_transformer as sample_transformer,
    transformer_forward as transformer_forward,
)
