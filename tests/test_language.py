import pytest
import torch

import sigprop as sp


def test_local_text_file_word_and_char(tmp_path):
    f = tmp_path / "tiny.txt"
    f.write_text("the cat sat on the mat . the end")
    words = sp.load_text_corpus(f, max_vocab=4)
    # "the" is most frequent; ties keep first-seen order; the rest map to <unk> (id 0)
    assert words.vocab == ("<unk>", "the", "cat", "sat")
    assert words.ids.tolist() == [1, 2, 3, 0, 1, 0, 0, 1, 0]
    chars = sp.load_text_corpus(f, level="char")
    assert "".join(chars.vocab[i] for i in chars.ids.tolist()) == f.read_text()
    batch = chars.sample(5, 7, generator=0)
    assert batch.shape == (5, 7) and torch.equal(batch, chars.sample(5, 7, generator=0))


def test_bad_sources(tmp_path):
    with pytest.raises(FileNotFoundError, match="no file at"):
        sp.load_text_corpus(tmp_path / "missing.txt")
    with pytest.raises(ValueError, match="level must be one of"):
        sp.load_text_corpus(tmp_path / "missing.txt", level="byte")
    (tmp_path / "empty.txt").write_text("   ")
    with pytest.raises(ValueError, match="empty"):
        sp.load_text_corpus(tmp_path / "empty.txt")


def test_wikitext_without_network_says_so(monkeypatch):
    import builtins
    real_import = builtins.__import__

    def no_datasets(name, *args, **kwargs):
        if name == "datasets":
            raise ImportError("no datasets here")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_datasets)
    with pytest.raises(RuntimeError, match="needs the `datasets` package"):
        sp.load_text_corpus("wikitext-2")


def test_load_text_corpus_refuses_what_is_not_a_path():
    # issue 26, item 16: None reached open() deep inside pathlib
    for bad in (None, 3, "", "   ", b"file"):
        with pytest.raises(TypeError, match="source must be a text file path or 'wikitext-2'"):
            sp.load_text_corpus(bad)
