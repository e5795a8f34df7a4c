"""Languages: the token streams the book trains on, generated (a Markov chain) or read (a text file).

* :class:`MarkovSource` -- a random first-order Markov chain over ``vocab`` symbols with a known
  entropy rate, the training corpus of every experiment in the book (nothing is downloaded).
* :class:`MaskedTask` -- BERT-style masked-token prediction on a Markov language, with the exact
  Bayes floor (forward-backward) and the context-free floor (Giorlandino & Goldt 2025, App. C.1, in
  miniature; used by :func:`sigprop.train_masked_lm`).
* :func:`load_text_corpus` -- real text, optionally: a local file or WikiText-2 where a network exists.
  Every experiment in the book trains on generated data, because nothing may be downloaded when the
  book is built; to rerun a training page on real text, load a corpus here. A path to a local text
  file (e.g. WikiText-2's ``wiki.train.tokens``) is tokenised by whitespace (``level="word"``) or by
  character (``level="char"``); ``"wikitext-2"`` needs the Hugging Face ``datasets`` package and a
  network, and raises a clear error otherwise. :meth:`TextCorpus.sample` draws training windows like
  :meth:`MarkovSource.sample`.
"""
from __future__ import annotations

import collections
import dataclasses
import enum
import pathlib

import numpy as np
import torch
import torch.nn.functional as F

from ..stats._random import as_generator, draw_seed
from ..stats._validate import check_int, check_option, check_positive, check_range

__all__ = ["MarkovSource", "MaskedTask", "TextCorpus", "load_text_corpus"]


#: Largest vocabulary of a :class:`MarkovSource` (dense transition matrix, 128 MiB at this size).
VOCAB_MAX = 4096


class MarkovSource:
    """A random first-order Markov chain over ``vocab`` symbols with a known entropy rate.

    ``MarkovSource(vocab, *, concentration=0.3, generator=None)``. Rows of the transition
    matrix are Dirichlet(``concentration``) draws: small concentration gives a predictable
    language (low entropy), large gives a near-uniform one. ``entropy_rate`` (nats per token)
    is the best achievable cross-entropy of any model, so ``exp(entropy_rate)`` is the best
    achievable perplexity.
    """

    def __init__(self, vocab: int, *, concentration: float = 0.3, generator=None):
        vocab = check_int(vocab, "vocab", minimum=2)
        if vocab > VOCAB_MAX:
            raise ValueError(f"vocab must be <= {VOCAB_MAX} (the transition matrix is a dense vocab x vocab array: "
                             f"{vocab**2 * 8 / 2**20:.0f} MiB and an O(vocab^3) solve); got {vocab}")
        check_positive(concentration, "concentration")
        rng = np.random.default_rng(draw_seed(as_generator(generator)))
        P = rng.dirichlet(np.full(vocab, float(concentration)), size=vocab)
        P = np.clip(P, 1e-12, None)
        P /= P.sum(1, keepdims=True)
        # stationary distribution: pi (P - I) = 0 with sum(pi) = 1, i.e. (P^T - I + 1 1^T) pi = 1
        pi = np.linalg.solve(P.T - np.eye(vocab) + 1.0, np.ones(vocab))
        pi = np.abs(pi) / np.abs(pi).sum()
        self._P = torch.as_tensor(P, device=torch.device("cpu"))
        self._pi = torch.as_tensor(pi, device=torch.device("cpu"))

    @property
    def transition(self) -> torch.Tensor:
        """(vocab, vocab) float64 transition matrix (a copy)."""
        return self._P.clone()

    @property
    def stationary(self) -> torch.Tensor:
        """(vocab,) float64 stationary distribution (a copy)."""
        return self._pi.clone()

    @property
    def vocab(self) -> int:
        return int(self._P.shape[0])

    @property
    def entropy_rate(self) -> float:
        """H = -sum_i pi_i sum_j P_ij log P_ij (nats per token)."""
        P = self._P
        return float(-(self._pi * (P * P.log()).sum(1)).sum())

    def sample(self, n: int, T: int, *, generator=None) -> torch.Tensor:
        """``(n, T)`` int64 sequences started from the stationary distribution."""
        n = check_int(n, "n", minimum=1)
        T = check_int(T, "T", minimum=1)
        g = as_generator(generator)
        out = torch.empty(n, T, dtype=torch.long, device=g.device)
        out[:, 0] = torch.multinomial(self._pi.float().to(g.device), n, replacement=True, generator=g)
        P = self._P.float().to(g.device)
        for t in range(1, T):  # loop over positions, batched over sequences
            out[:, t] = torch.multinomial(P[out[:, t - 1]], 1, generator=g).squeeze(1)
        return out


@dataclasses.dataclass(frozen=True)
class MaskedTask:
    """Masked-token prediction on sequences of length ``T`` from ``source`` (``[MASK]`` id = ``vocab``)."""

    source: MarkovSource
    T: int
    mask_prob: float = 0.15

    def __post_init__(self):
        if not isinstance(self.source, MarkovSource):
            raise TypeError(f"source must be a MarkovSource; got {type(self.source).__name__}")
        check_int(self.T, "T", minimum=2)
        check_range(self.mask_prob, "mask_prob", 0.0, 1.0)
        if self.mask_prob == 0.0:
            raise ValueError("mask_prob must be > 0 (no masked token, no loss)")

    @property
    def vocab(self) -> int:
        return self.source.vocab

    @property
    def mask_id(self) -> int:
        return self.source.vocab

    def sample(self, n: int, *, generator=None):
        """``(inputs, targets, mask)``, each ``(n, T)``: masked inputs, clean tokens, bool mask.

        At least one position per sequence is masked (a sequence without one would carry no loss).
        """
        n = check_int(n, "n", minimum=1)
        g = as_generator(generator)
        targets = self.source.sample(n, self.T, generator=g)
        mask = torch.rand(n, self.T, generator=g, device=g.device) < self.mask_prob
        forced = torch.randint(self.T, (n,), generator=g, device=g.device)
        mask[~mask.any(1), forced[~mask.any(1)]] = True
        return targets.masked_fill(mask, self.mask_id), targets, mask

    def unigram_loss(self) -> float:
        """Entropy of the stationary distribution (nats): the best loss without context."""
        pi = self.source.stationary
        return float(-(pi * pi.log()).sum())

    def bayes_loss(self, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``(n,)`` mean over masked positions of ``-log p(x_t | visible tokens)``, exact.

        Forward-backward on the chain with "emission" 1 at the observed symbol of a visible
        position and 1 everywhere at a masked one; messages are renormalised at every step.
        """
        P, pi = self.source.transition, self.source.stationary                 # float64
        n, T = targets.shape
        onehot = F.one_hot(targets, self.vocab).double()                       # (n, T, V)
        emit = torch.where(mask[..., None], torch.ones_like(onehot), onehot)
        fwd = torch.empty_like(emit)
        bwd = torch.ones_like(emit)
        a = pi * emit[:, 0]
        fwd[:, 0] = a / a.sum(-1, keepdim=True)
        for t in range(1, T):   # loop over positions, batched over sequences
            a = (fwd[:, t - 1] @ P) * emit[:, t]
            fwd[:, t] = a / a.sum(-1, keepdim=True)
        for t in range(T - 2, -1, -1):
            b = (emit[:, t + 1] * bwd[:, t + 1]) @ P.T
            bwd[:, t] = b / b.sum(-1, keepdim=True)
        post = fwd * bwd
        post = post / post.sum(-1, keepdim=True)
        nll = -(post * onehot).sum(-1).log()                                   # (n, T)
        return (nll * mask).sum(1) / mask.sum(1)


UNK = "<unk>"


class Level(str, enum.Enum):
    WORD = "word"
    CHAR = "char"


@dataclasses.dataclass(frozen=True)
class TextCorpus:
    """A token-id stream and its vocabulary (``vocab[i]`` is the string of id ``i``)."""

    ids: torch.Tensor  # (N,) int64
    vocab: tuple[str, ...]

    def sample(self, n: int, T: int, *, generator=None) -> torch.Tensor:
        """``(n, T)`` windows starting at uniformly random positions."""
        n = check_int(n, "n", minimum=1)
        T = check_int(T, "T", minimum=1)
        if T > len(self.ids):
            raise ValueError(f"T must be <= the corpus length {len(self.ids)}; got {T}")
        g = as_generator(generator)
        start = torch.randint(0, len(self.ids) - T + 1, (n,), generator=g, device=self.ids.device)
        return self.ids[start[:, None] + torch.arange(T, device=self.ids.device)]


def _tokenise(text: str, level: Level, max_vocab: int) -> TextCorpus:
    tokens = text.split() if level is Level.WORD else list(text)
    if not tokens:
        raise ValueError("the corpus is empty")
    common = [t for t, _ in collections.Counter(tokens).most_common(max_vocab - 1)]
    vocab = (UNK, *common)
    index = {t: i for i, t in enumerate(vocab)}
    ids = torch.tensor([index.get(t, 0) for t in tokens], dtype=torch.long, device=torch.device("cpu"))
    return TextCorpus(ids, vocab)


def load_text_corpus(source: str | pathlib.Path, *, level: str = "word", max_vocab: int = 10_000,
                     split: str = "train") -> TextCorpus:
    """Load and tokenise real text: a local file path, or ``"wikitext-2"`` (needs ``datasets`` and a network).

    Words (or characters) outside the ``max_vocab - 1`` most frequent map to ``<unk>`` (id 0).
    """
    if not isinstance(source, (str, pathlib.Path)) or not str(source).strip():  # issue 26, item 16: None reached open()
        raise TypeError(f"source must be a text file path or 'wikitext-2'; got {source!r}")
    lv = check_option(level, Level, "level")
    max_vocab = check_int(max_vocab, "max_vocab", minimum=2)
    if str(source).lower() in ("wikitext-2", "wikitext2"):
        try:
            import datasets  # optional dependency
        except ImportError:
            raise RuntimeError("loading 'wikitext-2' needs the `datasets` package (pip install datasets) and a "
                               "network; or pass the path of a local copy of wiki.train.tokens") from None
        try:
            data = datasets.load_dataset("wikitext", "wikitext-2-raw-v1", split=split)
        except Exception as exc:  # offline, blocked, or a changed hub: say so plainly
            raise RuntimeError(f"could not load WikiText-2 ({type(exc).__name__}: {exc}); this needs a network. "
                               "Use sp.MarkovSource, or a local text file path") from exc
        return _tokenise("\n".join(data["text"]), lv, max_vocab)
    path = pathlib.Path(source)
    if not path.is_file():
        raise FileNotFoundError(f"source must be a text file path or 'wikitext-2'; no file at {str(path)!r}")
    return _tokenise(path.read_text(encoding="utf-8"), lv, max_vocab)
