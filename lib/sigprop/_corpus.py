"""Real text, optionally: a local file or WikiText-2 where a network exists.

Every experiment in the book trains on :class:`sigprop.MarkovSource` data (generated, with a
known entropy rate), because nothing may be downloaded when the book is built. To rerun a
training page on real text, load a corpus with :func:`load_text_corpus`:

* a path to a local text file (e.g. WikiText-2's ``wiki.train.tokens``), tokenised by
  whitespace (``level="word"``) or by character (``level="char"``);
* ``"wikitext-2"``, which needs the Hugging Face ``datasets`` package and a network, and
  raises a clear error otherwise.

The result's :meth:`TextCorpus.sample` draws training windows like ``MarkovSource.sample``.
"""
from __future__ import annotations

import collections
import dataclasses
import enum
import pathlib

import torch

from ._random import as_generator
from ._validate import check_int, check_option

__all__ = ["TextCorpus", "load_text_corpus"]

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
        start = torch.randint(0, len(self.ids) - T + 1, (n,), generator=g)
        return self.ids[start[:, None] + torch.arange(T)]


def _tokenise(text: str, level: Level, max_vocab: int) -> TextCorpus:
    tokens = text.split() if level is Level.WORD else list(text)
    if not tokens:
        raise ValueError("the corpus is empty")
    common = [t for t, _ in collections.Counter(tokens).most_common(max_vocab - 1)]
    vocab = (UNK, *common)
    index = {t: i for i, t in enumerate(vocab)}
    ids = torch.tensor([index.get(t, 0) for t in tokens], dtype=torch.long)
    return TextCorpus(ids, vocab)


def load_text_corpus(source: str | pathlib.Path, *, level: str = "word", max_vocab: int = 10_000,
                     split: str = "train") -> TextCorpus:
    """Load and tokenise real text: a local file path, or ``"wikitext-2"`` (needs ``datasets`` and a network).

    Words (or characters) outside the ``max_vocab - 1`` most frequent map to ``<unk>`` (id 0).
    """
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
