"""What goes into a random transformer: token sequences (Gaussian, equicorrelated, orthogonal,
random-walk) and the synthetic languages the small language models are trained on."""
from ._language import MarkovSource as MarkovSource, MaskedTask as MaskedTask
from ._tokens import (
    equicorrelated_tokens as equicorrelated_tokens, exact_equicorrelated_tokens as exact_equicorrelated_tokens,
)
