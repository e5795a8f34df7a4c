"""One attention layer and one attention row, each beside its theory: the REM of a softmax row
(``_rem``), the random attention layer and its (q, p) map (``_layer``), its IPR at large T (``_ipr``),
query gradients (``_query_gradient``, ``_gradients``), uniform attention (``_uniform``), Bao et al.'s
localisation and LocATER (``_localisation``, ``_locater``), Aghajanyan's cross-token covariance
(``_covariance``, ``_covariance_mc``) and the dictionary between the documents' logit scalings
(``_dictionary``).

The names below are this folder's interface to the rest of sigprop (the block network and its maps);
readers use the flat ``sp.*`` and ``sp.theory.*`` namespaces.
"""
from ._dictionary import (
    beta_equivalent as beta_equivalent, glorot_variance as glorot_variance, logit_variance as logit_variance,
    qk_variance_for_beta as qk_variance_for_beta,
)
from ._layer import (
    CrossOverlap as CrossOverlap, attention_map_kernel as attention_map_kernel, attention_weights as attention_weights,
    mix_values as mix_values, normalise_tokens as normalise_tokens, normalise_tokens_ as normalise_tokens_,
)
from ._rem import ipr_limit as ipr_limit, rem_quadrature as rem_quadrature
