"""Numbers in one form (``bm25_numbers``): hand-written strings and their expected tokens, and BM25
finding a document by a number written another way."""

from __future__ import annotations

import json

import pytest

from rag_core.retrieve.bm25 import BM25Index, BM25LoadError
from rag_core.retrieve.tokenizer import get_tokenizer, with_numbers

STEM = with_numbers(get_tokenizer("stem"))
SIMPLE = with_numbers(get_tokenizer("simple"))


@pytest.mark.parametrize("text, tokens", [
    ("Revenue was $1,234.50 in 2019", ["revenu", "1234.5", "2019"]),
    ("1,234.5", ["1234.5"]),
    ("1234.50", ["1234.5"]),
    ("(1,234)", ["1234", "-1234"]),
    ("$(1,234)", ["1234", "-1234"]),
    ("-1,234", ["1234", "-1234"]),
    ("\u22121,234", ["1234", "-1234"]),  # the minus sign
    ("$1.2 billion", ["1.2", "billion", "1200000000"]),
    ("$1.2bn", ["1.2", "billion", "1200000000"]),
    ("1,200 million", ["1200", "million", "1200000000"]),
    ("1,200,000,000", ["1200000000"]),
    ("$10k", ["10", "thousand", "10000"]),
    ("\u20ac2.5m", ["2.5", "million", "2500000"]),
    ("0.75 trillion", ["0.75", "trillion", "750000000000"]),
    ("12.5%", ["12.5"]),
    ("5.0", ["5"]),
])
def test_number_forms(text, tokens):
    assert STEM(text) == tokens


@pytest.mark.parametrize("text, tokens", [
    ("QM-4021 error", ["qm", "4021", "error"]),  # a hyphen after a letter is no minus sign
    ("2019-12-31", ["2019", "12", "31"]),  # a date: no negatives
    ("v2.1.3 at 10.0.0.1", ["v2", "1", "3", "at", "10", "0", "0", "1"]),  # versions, addresses: as before
    ("1,23", ["1", "23"]),  # not a thousands separator
    ("3rd place", ["3rd", "place"]),
    ("10k run", ["10k", "run"]),  # a single-letter scale needs a currency sign
    ("US$5m", ["us", "5m"]),  # "$" inside a word is no currency sign
    ("f(1) = 2", ["f", "1", "2"]),  # a parenthesis after a letter is a call, not a negative
    ("1.2 billions", ["1.2", "billions"]),  # not a scale word: the number alone, "billions" a word
])
def test_what_is_not_rewritten(text, tokens):
    assert SIMPLE(text) == tokens


def test_text_between_numbers_goes_through_the_tokenizer():
    assert STEM("The running costs were $3,000 and (450) in the Americas") == (
        get_tokenizer("stem")("The running costs were") + ["3000"] + ["450", "-450"]
        + get_tokenizer("stem")("in the Americas"))


def test_without_numbers_the_tokenizer_is_unchanged():
    assert get_tokenizer("stem")("$1,234.5 (1,234) $1.2 billion") == ["1", "234", "5", "1", "234", "1", "2", "billion"]


@pytest.mark.parametrize("query, expected", [
    ("1,234", "thousands"), ("1234", "thousands"), ("(1,234)", "thousands"),
    ("1.2 billion", "billion"), ("$1,200,000,000", "billion"), ("1,200 million", "billion"),
])
def test_bm25_finds_a_number_written_another_way(query, expected):
    index = BM25Index(tokenizer="stem", numbers=True)
    docs = {"thousands": "operating loss of (1,234) in the year",
            "billion": "revenue reached $1.2bn",
            "other": "headcount grew to 4,321 people"}
    index.index(list(docs), list(docs.values()))
    assert [hit.id for hit in index.retrieve(query, k=3)][:1] == [expected]
    plain = BM25Index(tokenizer="stem")
    plain.index(list(docs), list(docs.values()))
    if query == "1234":  # without numbers it shares no token with its document
        assert expected not in [hit.id for hit in plain.retrieve(query, k=3)]


def test_numbers_round_trip_and_are_checked_on_load(tmp_path):
    index = BM25Index(tokenizer="simple", numbers=True)
    index.index(["a", "b"], ["sales 1,234", "costs 99"])
    index.save(tmp_path)
    meta = json.loads((tmp_path / "bm25_meta.json").read_text())
    assert meta["numbers"] is True and meta["numbers_version"] == 1
    loaded = BM25Index.load(tmp_path, numbers=True)
    assert loaded.retrieve("1234", k=2) == index.retrieve("1234", k=2) != []
    with pytest.raises(BM25LoadError, match="numbers=True"):
        BM25Index.load(tmp_path, numbers=False)
    (tmp_path / "bm25_meta.json").write_text(json.dumps({**meta, "numbers_version": 0}))
    with pytest.raises(BM25LoadError, match="numbers_version 0"):
        BM25Index.load(tmp_path)


def test_an_index_without_numbers_keeps_the_meta_of_before(tmp_path):
    index = BM25Index(tokenizer="simple")
    index.index(["a"], ["sales"])
    index.save(tmp_path)
    meta = json.loads((tmp_path / "bm25_meta.json").read_text())
    assert "numbers" not in meta and "numbers_version" not in meta
    assert BM25Index.load(tmp_path, numbers=False).settings.numbers is False


def test_the_bm25_key_changes_only_with_numbers_on(tmp_path):
    from rag_core.config import RagConfig
    from rag_core.retrieve.retrievers.base import ChunkSet, digest_key
    from rag_core.retrieve.retrievers.bm25 import BM25Retriever

    chunks = ChunkSet([], tmp_path, "k")
    off = BM25Retriever("bm25", RagConfig(mode="bm25"), None).cache_key(chunks)
    on = BM25Retriever("bm25", RagConfig(mode="bm25", bm25_numbers=True), None).cache_key(chunks)
    assert off == f"bm25-{digest_key('bm25s', 'stem', 1.5, 0.75)}"  # the key of stores built before the setting
    assert on == f"bm25-{digest_key('bm25s', 'stem', 1.5, 0.75, ('numbers', 1))}" != off
