"""``chunk_unit``: chunk sizes and overlap counted in the embedding model's tokens, here a stand-in
counter (a word of n letters is ceil(n / 3) tokens) so that the expected spans can be worked out by hand."""

from __future__ import annotations

import math

import pytest

from rag_core.config import RagConfig
from rag_core.ingest.chunkers import chunker_key, count_words, make_chunker
from rag_core.ingest.chunkers.recursive import chunk_document
from rag_core.records import Document


def tokens(text: str) -> int:
    return sum(math.ceil(len(word) / 3) for word in text.split())


def _doc(text: str) -> Document:
    return Document.from_pages("d.txt", [text], "hash")


def test_chunks_hold_at_most_chunk_size_tokens_not_words():
    # words of 1, 2 and 3 tokens: "aaaaaaaaa" is 3 tokens, "bbbb" 2, "c" 1
    text = "aaaaaaaaa bbbb c. aaaaaaaaa bbbb c. aaaaaaaaa bbbb c."
    chunks = chunk_document(_doc(text), 6, 0, count=tokens)
    assert [chunk.text for chunk in chunks] == ["aaaaaaaaa bbbb c.", "aaaaaaaaa bbbb c.", "aaaaaaaaa bbbb c."]
    assert all(tokens(chunk.text) == 6 for chunk in chunks)
    # counted in words, 6 words hold two sentences
    assert [chunk.text for chunk in chunk_document(_doc(text), 6, 0)] == [
        "aaaaaaaaa bbbb c. aaaaaaaaa bbbb c.", "aaaaaaaaa bbbb c."]


def test_overlap_repeats_the_last_words_that_fit_in_overlap_tokens():
    text = "aaa bbb ccc dddddd eee fff ggg hhh"  # 1, 1, 1, 2, 1, 1, 1, 1 tokens
    chunks = chunk_document(_doc(text), 5, 3, count=tokens)
    # "aaa bbb ccc dddddd" is 5 tokens; its last words within 3 tokens: "ccc dddddd" (3), then + "eee fff" = 5;
    # that chunk's last words within 3 tokens: "eee fff" (2; "dddddd eee fff" is 4), then + "ggg hhh" = 4
    assert [chunk.text for chunk in chunks] == ["aaa bbb ccc dddddd", "ccc dddddd eee fff", "eee fff ggg hhh"]
    assert all(tokens(chunk.text) <= 5 for chunk in chunks)


def test_tokens_need_a_counter_and_join_the_chunking_key():
    config = RagConfig(chunk_unit="tokens", chunk_size=128, overlap=16)
    with pytest.raises(ValueError, match="token counter"):
        make_chunker(config)
    assert make_chunker(config, tokens).count is tokens
    assert make_chunker(RagConfig()).count is count_words
    assert chunker_key(config) == {"chunk_size": 128, "overlap": 16, "per_page": False, "chunk_unit": "tokens",
                                   "tokenizer": config.embed_model}
    assert chunker_key(RagConfig()) == {"chunk_size": 512, "overlap": 64, "per_page": False}  # as before
