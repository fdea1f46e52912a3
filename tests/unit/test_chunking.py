"""Recursive chunking: exact offsets, word limits, overlap, page spans, separator preference."""

from __future__ import annotations

import random

import pytest

from rag_core.ingest.chunkers import count_words
from rag_core.ingest.chunkers.recursive import chunk_document
from rag_core.records import Document

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()


@pytest.fixture
def long_document() -> Document:
    rng = random.Random(7)
    pages = []
    for _ in range(4):
        paragraphs = []
        for _ in range(rng.randint(2, 5)):
            sentences = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 25))) + "." for _ in range(rng.randint(1, 8))]
            paragraphs.append(" ".join(sentences))
        pages.append("\n\n".join(paragraphs))
    return Document.from_pages("docs/long.pdf", pages, "hash")


@pytest.mark.parametrize("size,overlap", [(20, 0), (50, 10), (128, 32), (1000, 64)])
def test_offsets_reproduce_text_and_sizes_hold(long_document, size, overlap):
    chunks = chunk_document(long_document, size, overlap)
    assert chunks
    for chunk in chunks:
        assert chunk.text == long_document.text[chunk.char_start : chunk.char_end]
        assert count_words(chunk.text) <= size
        assert chunk.doc_id == "docs/long.pdf"
    # Every word of the document is in some chunk, and chunks advance through the text.
    starts = [chunk.char_start for chunk in chunks]
    assert starts == sorted(starts) and len(set(starts)) == len(starts)
    covered = set()
    for chunk in chunks:
        covered.update(range(chunk.char_start, chunk.char_end))
    assert all(i in covered for i, ch in enumerate(long_document.text) if not ch.isspace())


def test_overlap_repeats_the_tail_of_the_previous_chunk():
    sentences = [f"Sentence {i} has exactly six words." for i in range(12)]  # 6 words each
    doc = Document.from_pages("a.txt", [" ".join(sentences)], "h")
    chunks = chunk_document(doc, chunk_size=18, overlap=6)
    # Pieces are sentences of 6 words: 3 per chunk, and each chunk repeats the last sentence before it.
    assert [count_words(c.text) for c in chunks][:3] == [18, 18, 18]
    assert chunks[0].text == " ".join(sentences[0:3])
    assert chunks[1].text == " ".join(sentences[2:5])
    assert chunks[2].text == " ".join(sentences[4:7])
    no_overlap = chunk_document(doc, chunk_size=18, overlap=0)
    assert no_overlap[1].text == " ".join(sentences[3:6])
    assert len(no_overlap) == 4


def test_paragraphs_are_kept_whole_when_they_fit():
    first = "First paragraph " + "word " * 30
    second = "Second paragraph " + "word " * 30
    doc = Document.from_pages("p.md", [first.strip() + "\n\n" + second.strip()], "h")
    chunks = chunk_document(doc, chunk_size=40, overlap=0)
    assert [c.text for c in chunks] == [first.strip(), second.strip()]


def test_page_spans_on_a_multi_page_document():
    pages = ["one " * 30, "two " * 30, "three " * 30]
    doc = Document.from_pages("book.pdf", [p.strip() for p in pages], "h")
    chunks = chunk_document(doc, chunk_size=45, overlap=0)
    # Whole text is one paragraph per page; pages join with a blank line, so the paragraph split
    # gives three 30-word pieces, merged greedily: [page1], [page2], [page3] (30+30 > 45).
    assert [(c.page_start, c.page_end) for c in chunks] == [(1, 1), (2, 2), (3, 3)]
    big = chunk_document(doc, chunk_size=60, overlap=0)
    assert [(c.page_start, c.page_end) for c in big] == [(1, 2), (3, 3)]
    for chunk in big:
        assert {doc.page_at(i) for i in range(chunk.char_start, chunk.char_end)} == set(range(chunk.page_start, chunk.page_end + 1))


def test_per_page_never_crosses_pages():
    doc = Document.from_pages("book.pdf", ["a " * 10, "b " * 10], "h")
    assert [(c.page_start, c.page_end) for c in chunk_document(doc, 60, 0)] == [(1, 2)]
    per_page = chunk_document(doc, 60, 0, per_page=True)
    assert [(c.page_start, c.page_end, c.text.split()[0]) for c in per_page] == [(1, 1, "a"), (2, 2, "b")]


def test_ids_are_deterministic_and_unique(long_document):
    first = chunk_document(long_document, 50, 10)
    again = chunk_document(long_document, 50, 10)
    assert [c.id for c in first] == [c.id for c in again]
    assert len({c.id for c in first}) == len(first)
    other_doc = Document(doc_id="other.pdf", text=long_document.text, page_starts=long_document.page_starts, content_hash="x")
    assert not {c.id for c in first} & {c.id for c in chunk_document(other_doc, 50, 10)}


def test_overlap_must_be_smaller_than_size():
    with pytest.raises(ValueError):
        chunk_document(Document.from_pages("x", ["a b c"], "h"), 5, 5)


def test_overlap_applies_when_pieces_are_whole_paragraphs():
    first = " ".join(f"a{i}" for i in range(40))
    second = " ".join(f"b{i}" for i in range(40))
    doc = Document.from_pages("p.md", [first + "\n\n" + second], "h")
    chunks = chunk_document(doc, chunk_size=50, overlap=10)
    assert [c.text for c in chunks] == [first, " ".join(f"a{i}" for i in range(30, 40)) + "\n\n" + second]
    # The repeated words start at a sentence start when one is among them.
    doc = Document.from_pages("s.md", ["x " * 35 + "End here. Tail words follow now" + "\n\n" + "y " * 40], "h")
    second_chunk = chunk_document(doc, chunk_size=50, overlap=10)[1]
    assert second_chunk.text.startswith("Tail words follow now")


def test_the_import_path_of_before_still_gives_the_chunker_contract():
    """Plugins written before chunkers had a package import from rag_core.ingest.chunking."""
    from rag_core.ingest import chunkers, chunking
    from rag_core.ingest.chunkers import recursive

    assert chunking.CHUNKERS is chunkers.CHUNKERS and chunking.Chunker is chunkers.Chunker
    assert chunking.span_chunk is chunkers.span_chunk and chunking.chunk_document is recursive.chunk_document
    assert set(chunking.__all__) <= set(dir(chunking))
