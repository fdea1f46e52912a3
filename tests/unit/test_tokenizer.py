"""Tokenizers: hand-written expected tokens, and the two Snowball implementations agree."""

from __future__ import annotations

import sys

import pytest

import rag_core.retrieve.tokenizer as tokenizer_module
from rag_core.retrieve.tokenizer import ENGLISH_STOP_WORDS, TOKENIZERS, get_tokenizer

ERROR_TEXT = "Error QM-4021: the max_inflight_batches setting is Running."
WORDS = "running generously retrieval indexes batches arguing cities organization fluently dying".split()


@pytest.fixture
def fresh_stemmer_cache():
    """Forget the chosen stemmer and cached stems before and after a test that swaps stemmers."""
    tokenizer_module._stem_word_function.cache_clear()
    tokenizer_module.stem.cache_clear()
    yield
    tokenizer_module._stem_word_function.cache_clear()
    tokenizer_module.stem.cache_clear()


def test_registry_names():
    assert list(TOKENIZERS) == ["stem", "simple", "whitespace"]


def test_unknown_name_lists_valid_names():
    with pytest.raises(ValueError, match="stem, simple, whitespace"):
        get_tokenizer("porter")


def test_stem_tokenizer_on_identifiers_and_stop_words():
    tokens = get_tokenizer("stem")(ERROR_TEXT)
    assert tokens == ["error", "qm", "4021", "max", "inflight", "batch", "set", "run"]


def test_simple_tokenizer_keeps_stop_words_and_inflections():
    tokens = get_tokenizer("simple")(ERROR_TEXT)
    assert tokens == ["error", "qm", "4021", "the", "max", "inflight", "batches", "setting", "is", "running"]


def test_whitespace_tokenizer_only_splits():
    tokens = get_tokenizer("whitespace")(ERROR_TEXT)
    assert tokens == ["Error", "QM-4021:", "the", "max_inflight_batches", "setting", "is", "Running."]


def test_digits_and_numbers_are_kept():
    assert get_tokenizer("stem")("600 requests per minute, v2.1") == ["600", "request", "per", "minut", "v2", "1"]


def test_ligatures_and_case_are_normalised():
    # "ﬁ" (U+FB01) is what PDF extractors often give for "fi".
    assert get_tokenizer("simple")("Conﬁguration FILE") == ["configuration", "file"]
    assert get_tokenizer("stem")("Conﬁguration") == get_tokenizer("stem")("configuration")


def test_stop_word_list_is_the_fixed_nltk_set():
    assert len(ENGLISH_STOP_WORDS) == 179
    assert {"the", "of", "with", "not", "what", "how", "which", "who"} <= ENGLISH_STOP_WORDS
    assert get_tokenizer("stem")("What is the capital of Australia?") == ["capit", "australia"]


def test_empty_text():
    for name in TOKENIZERS:
        assert get_tokenizer(name)("  \n ") == []


def test_pystemmer_and_snowballstemmer_agree():
    stemmer_c = pytest.importorskip("Stemmer").Stemmer("english")
    # snowballstemmer.stemmer() hands out PyStemmer when installed: take its pure-Python class.
    stemmer_py = pytest.importorskip("snowballstemmer.english_stemmer").EnglishStemmer()
    assert stemmer_c.stemWords(WORDS) == stemmer_py.stemWords(WORDS)
    assert stemmer_py.stemWords(WORDS)[:3] == ["run", "generous", "retriev"]


def test_falls_back_to_snowballstemmer(monkeypatch, fresh_stemmer_cache):
    pytest.importorskip("snowballstemmer")
    monkeypatch.setitem(sys.modules, "Stemmer", None)  # import Stemmer now raises ImportError
    monkeypatch.delitem(sys.modules, "snowballstemmer")  # re-import it as if PyStemmer were absent
    stem_word = tokenizer_module._stem_word_function()
    assert type(stem_word.__self__).__module__.startswith("snowballstemmer")
    assert get_tokenizer("stem")("running cities") == ["run", "citi"]


def test_no_stemmer_installed_says_what_to_install(monkeypatch, fresh_stemmer_cache):
    monkeypatch.setitem(sys.modules, "Stemmer", None)
    monkeypatch.setitem(sys.modules, "snowballstemmer", None)
    with pytest.raises(ImportError, match="pip install PyStemmer"):
        get_tokenizer("stem")("running")
