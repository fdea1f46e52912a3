"""The built-in chunkers beside recursive (fixed, sentences, semantic, cluster, structure) against hand-built
texts: fixed windows counted by hand, no sentence cut, the semantic boundary where the topic changes, the
cluster segmentation against a brute-force optimum, sections never merged, exact offsets and pages for
every chunker. Embeddings come from a stand-in (``TopicEmbedder``: a text's vector counts its words of
each topic); tests/test_chunkers_embedding.py runs the real model."""

from __future__ import annotations

import itertools
import random
import re

import numpy as np
import pytest

from rag_core.components import ConfigError
from rag_core.config import RagConfig
from rag_core.ingest.chunkers import CHUNKERS, count_words, make_chunker
from rag_core.ingest.chunkers.cluster import centred_similarity, optimal_segmentation
from rag_core.ingest.chunkers.fixed import fixed_windows
from rag_core.ingest.chunkers.semantic import boundaries
from rag_core.ingest.chunkers.sentences import pack_sentences
from rag_core.ingest.sections import document_sections, markdown_headings, section_at
from rag_core.ingest.sentence_split import split_sentences
from rag_core.records import Document

BUILT_IN = ("fixed", "sentences", "semantic", "cluster", "structure")
TOPICS = ({"cat", "cats", "kitten", "fur", "purrs", "whiskers"}, {"stock", "shares", "market", "price", "dividend", "bonds"})
CAT = ["The cat purrs on the warm mat.", "A kitten chases the cat around.", "Soft fur covers every cat here.",
       "The cat cleans its whiskers slowly.", "Each kitten purrs when fed.", "The old cat sleeps on fur."]
STOCK = ["The stock market fell on Monday.", "Shares of the stock lost value.", "The price of bonds rose again.",
         "A dividend was paid on the shares.", "The market closed with stock gains.", "Bonds and shares traded flat."]


class TopicEmbedder:
    """A stand-in embedding model: a text's vector counts its words of each topic (plus a small constant, so
    that no vector is zero). Records the texts it was asked for."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def embed_documents(self, texts):
        self.asked += texts
        rows = [[sum(word in topic for word in re.findall(r"[a-z]+", text.lower())) for topic in TOPICS] + [1e-6]
                for text in texts]
        return np.array(rows, dtype=np.float32), None

    def token_offsets(self, texts):  # tokens: runs of at most three letters or one other character
        return [[match.span() for match in re.finditer(r"[A-Za-z]{1,3}|[^\sA-Za-z]", text)] for text in texts]


def chunker(name: str, embedder=None, count=None, **settings):
    return make_chunker(RagConfig(chunker=name, **settings), count, embedder or TopicEmbedder())


def texts(chunks) -> list[str]:
    return [chunk.text for chunk in chunks]


@pytest.fixture
def book() -> Document:
    """Three pages of sentences of known topics, one paragraph break per page."""
    pages = [" ".join(CAT[:4]) + "\n\n" + " ".join(CAT[4:]), " ".join(STOCK[:3]) + "\n\n" + " ".join(STOCK[3:]),
             "# Notes\n\nThe cat and the market. " + " ".join(CAT[:2])]
    return Document.from_pages("book.pdf", pages, "h", page_headings=[(3, 0, "# Notes")])


# --- the contract, for every chunker -----------------------------------------------------------
@pytest.mark.parametrize("name", BUILT_IN)
@pytest.mark.parametrize("per_page", [False, True])
def test_offsets_and_pages_are_exact_for_every_chunker(book, name, per_page):
    chunks = chunker(name, chunk_size=12, overlap=3, per_page=per_page, cluster_piece_size=6).chunk_corpus([book])
    assert len(chunks) >= 3
    for chunk in chunks:
        assert chunk.text == book.text[chunk.char_start:chunk.char_end] and chunk.text == chunk.text.strip()
        pages = {book.page_at(offset) for offset in range(chunk.char_start, chunk.char_end)}
        assert (chunk.page_start, chunk.page_end) == (min(pages), max(pages))
        if per_page:
            assert chunk.page_start == chunk.page_end
    covered = {offset for chunk in chunks for offset in range(chunk.char_start, chunk.char_end)}
    assert all(offset in covered for offset, char in enumerate(book.text) if not char.isspace())


def test_every_built_in_is_registered_with_what_it_reads_and_a_version():
    for name in BUILT_IN:
        options = CHUNKERS.get(name).options
        assert options["version"] == "1"
        assert set(options["reads"]) <= {"chunk_size", "overlap", "chunk_unit", "per_page"}
    assert "overlap" not in CHUNKERS.get("semantic").options["reads"]
    assert "overlap" not in CHUNKERS.get("cluster").options["reads"]
    assert "embed_model" in CHUNKERS.get("semantic").options["uses"]


def test_a_chunker_that_embeds_is_not_made_without_the_model_and_plain_ones_are():
    with pytest.raises(ValueError, match="semantic.*embedding model"):
        make_chunker(RagConfig(chunker="semantic"))
    assert make_chunker(RagConfig(chunker="sentences")).count is count_words  # (name, config) as before


# --- fixed ---------------------------------------------------------------------------------------
def test_fixed_windows_by_hand():
    document = Document.from_pages("w.txt", ["w0 w1 w2  w3\nw4 w5 w6 w7 w8 w9"], "h")
    assert texts(chunker("fixed", chunk_size=4, overlap=1).chunk(document)) == [
        "w0 w1 w2  w3", "w3\nw4 w5 w6", "w6 w7 w8 w9"]
    assert texts(chunker("fixed", chunk_size=4, overlap=0).chunk(document)) == ["w0 w1 w2  w3", "w4 w5 w6 w7", "w8 w9"]
    assert texts(chunker("fixed", chunk_size=5, overlap=2).chunk(document)) == [
        "w0 w1 w2  w3\nw4", "w3\nw4 w5 w6 w7", "w6 w7 w8 w9"]
    assert fixed_windows([(0, 1), (2, 3)], 3, 0) == [(0, 3)]
    with pytest.raises(ValueError):
        fixed_windows([(0, 1)], 2, 2)


def test_fixed_windows_of_tokens_cut_inside_words():
    document = Document.from_pages("t.txt", ["Alphabet soup, hot."], "h")  # tokens: Alp hab et sou p , hot .
    cut = chunker("fixed", count=lambda text: len(TopicEmbedder().token_offsets([text])[0]), chunk_size=3, overlap=1,
                  chunk_unit="tokens")
    assert texts(cut.chunk(document)) == ["Alphabet", "et soup", "p, hot", "hot."]


# --- sentences -----------------------------------------------------------------------------------
def test_sentences_are_packed_whole_with_whole_sentences_repeated():
    sentences = ["One two three.", "Four five six seven.", "Eight nine.", "Ten eleven twelve thirteen fourteen.", "Fifteen."]
    document = Document.from_pages("s.txt", [" ".join(sentences)], "h")
    # sizes 3, 4, 2, 5, 1 words; chunk 7: [3+4], [2+5], [1]; overlap 2 repeats "Eight nine." (2) before the 5
    assert texts(chunker("sentences", chunk_size=7, overlap=0).chunk(document)) == [
        "One two three. Four five six seven.", "Eight nine. Ten eleven twelve thirteen fourteen.", "Fifteen."]
    assert texts(chunker("sentences", chunk_size=7, overlap=4).chunk(document)) == [
        "One two three. Four five six seven.", "Four five six seven. Eight nine.",
        "Eight nine. Ten eleven twelve thirteen fourteen.", "Fifteen."]  # the 5-word sentence holds more than 4
    assert texts(chunker("sentences", chunk_size=7, overlap=1).chunk(document))[1] == \
        "Eight nine. Ten eleven twelve thirteen fourteen."  # no last sentence of 1 word or fewer: none repeated


def test_a_sentence_longer_than_the_size_is_split_as_recursive_splits_it():
    document = Document.from_pages("l.txt", ["Short one. A b c d e f g h i j k l. Last words here."], "h")
    assert texts(chunker("sentences", chunk_size=5, overlap=2).chunk(document)) == [
        "Short one.", "A b c d e", "d e f g h", "g h i j k", "j k l.", "Last words here."]


def test_no_sentence_is_ever_cut_when_each_fits():
    rng = random.Random(3)
    words = "alpha beta gamma delta epsilon zeta eta theta".split()
    pages = [" ".join(" ".join(rng.choice(words) for _ in range(rng.randint(2, 9))) + "." for _ in range(30))
             for _ in range(3)]
    document = Document.from_pages("r.pdf", pages, "h")
    sentence_starts = {start for start, _ in split_sentences(document.text)}
    sentence_ends = {end for _, end in split_sentences(document.text)}
    for size, overlap in [(9, 0), (20, 5), (40, 12)]:
        chunks = chunker("sentences", chunk_size=size, overlap=overlap).chunk_corpus([document])
        assert all(c.char_start in sentence_starts and c.char_end in sentence_ends for c in chunks)
        assert all(count_words(c.text) <= size for c in chunks)
        assert [c.char_start for c in chunks] == sorted({c.char_start for c in chunks})  # advancing


def test_pack_sentences_counts_with_the_given_unit():
    text = "aaaa bb. cc. dddddd."
    spans = split_sentences(text)
    assert pack_sentences(text, spans, 10, 0, count=len) == [(0, 8), (9, 20)]  # characters: 8 (+ 3 > 10), 3 + 7


# --- semantic ------------------------------------------------------------------------------------
def test_semantic_cuts_where_the_topic_changes():
    document = Document.from_pages("topics.txt", [" ".join(CAT + STOCK)], "h")
    for buffer in (0, 1, 2):
        chunks = chunker("semantic", chunk_size=200, semantic_buffer=buffer).chunk(document)
        assert texts(chunks) == [" ".join(CAT), " ".join(STOCK)], buffer


def test_semantic_groups_neighbouring_sentences_and_splits_at_the_maximum():
    document = Document.from_pages("topics.txt", [" ".join(CAT + STOCK)], "h")
    embedder = TopicEmbedder()
    chunks = chunker("semantic", embedder, chunk_size=20, overlap=0, semantic_buffer=1).chunk(document)
    assert embedder.asked[0] == " ".join(CAT[:2]) and embedder.asked[1] == " ".join(CAT[:3])  # buffer 1: i-1..i+1
    assert len(embedder.asked) == 12
    # the CAT segment (36 words) exceeds 20: whole sentences up to 20 words, then the rest
    assert texts(chunks)[:2] == [" ".join(CAT[:3]), " ".join(CAT[3:])]
    assert all(count_words(text) <= 20 for text in texts(chunks))


def test_boundaries_use_numpy_percentile_with_linear_interpolation():
    distances = np.array([0.0] * 8 + [0.106, 0.2, 0.106])
    # 95th percentile of 11 values: rank 9.5 of the sorted ones, halfway between 0.106 and 0.2 = 0.153
    assert boundaries(distances, 95).tolist() == [False] * 9 + [True, False]
    assert boundaries(distances, 50).tolist() == [False] * 8 + [True] * 3  # above the median 0
    assert boundaries(np.zeros(0), 95).tolist() == []


# --- cluster -------------------------------------------------------------------------------------
def brute_force(matrix: np.ndarray, sizes, max_size: int, region_starts=()) -> tuple[list[tuple[int, int]], float]:
    """Every way to cut 0..n-1 into runs, scored by summing each run's block entry by entry."""
    n, best = len(sizes), (None, -np.inf)
    for cuts in itertools.product([False, True], repeat=n - 1):
        starts = [0] + [i + 1 for i, cut in enumerate(cuts) if cut]
        runs = [(a, b - 1) for a, b in zip(starts, starts[1:] + [n])]
        if any(start in region_starts and start not in starts for start in range(1, n)):
            continue
        if any(b > a and sum(sizes[a:b + 1]) > max_size for a, b in runs):
            continue
        total = sum(matrix[i][j] for a, b in runs for i in range(a, b + 1) for j in range(a, b + 1))
        if total > best[1] + 1e-12:
            best = (runs, total)
    return best


@pytest.mark.parametrize("seed", range(12))
def test_cluster_segmentation_equals_the_brute_force_optimum(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 10))
    vectors = rng.normal(size=(n, 4)) + (np.arange(n) // 3)[:, None]  # runs of three alike pieces, roughly
    matrix = centred_similarity(vectors)
    sizes = [int(size) for size in rng.integers(1, 6, size=n)]
    max_size = int(rng.integers(3, 14))
    region_starts = [int(rng.integers(1, n))] if seed % 3 == 0 else []
    expected, total = brute_force(matrix, sizes, max_size, region_starts)
    found = optimal_segmentation(matrix, sizes, max_size, region_starts)
    assert found == expected
    assert sum(matrix[a:b + 1, a:b + 1].sum() for a, b in found) == pytest.approx(total)


@pytest.mark.parametrize("seed", range(6))
def test_the_segmentation_is_optimal_for_any_symmetric_matrix(seed):
    rng = np.random.default_rng(100 + seed)
    n = 8
    half = rng.normal(size=(n, n))
    matrix = half + half.T  # a diagonal that is not 0 counts once per run, pairs twice
    sizes = [int(size) for size in rng.integers(1, 4, size=n)]
    expected, total = brute_force(matrix, sizes, 7)
    assert optimal_segmentation(matrix, sizes, 7) == expected


def test_centred_similarity_by_hand():
    vectors = np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 3.0]])
    # cosines: (0,1) 0, (0,2) and (1,2) 1/sqrt(2); mean of the three pairs sqrt(2)/3
    cosine = 1 / np.sqrt(2)
    mean = 2 * cosine / 3
    expected = np.array([[0, -mean, cosine - mean], [-mean, 0, cosine - mean], [cosine - mean, cosine - mean, 0]])
    assert centred_similarity(vectors) == pytest.approx(expected)


def test_cluster_keeps_alike_pieces_together_up_to_the_size():
    document = Document.from_pages("topics.txt", [" ".join(CAT[:3] + STOCK[:3] + CAT[3:])], "h")
    embedder = TopicEmbedder()
    chunks = chunker("cluster", embedder, chunk_size=24, overlap=0, cluster_piece_size=7).chunk(document)
    assert texts(chunks) == [" ".join(CAT[:3]), " ".join(STOCK[:3]), " ".join(CAT[3:])]
    assert embedder.asked == CAT[:3] + STOCK[:3] + CAT[3:]  # one sentence (6-7 words) per piece of <= 7 words
    small = chunker("cluster", chunk_size=13, overlap=0, cluster_piece_size=7).chunk(document)
    assert all(count_words(text) <= 13 for text in texts(small)) and len(small) == 6


def test_a_piece_larger_than_the_chunk_is_refused():
    with pytest.raises(ConfigError, match="cluster_piece_size must be <= chunk_size"):
        RagConfig(chunker="cluster", chunk_size=40, overlap=0, cluster_piece_size=50)
    RagConfig(chunker="recursive", chunk_size=40, overlap=0, cluster_piece_size=50)  # not cluster: no matter


# --- structure -----------------------------------------------------------------------------------
GUIDE = """Intro line before any heading.

# Guide
The guide starts here.
## Limits
### Rate limit
Each key may send 600 requests per minute. Bursts of 50 are allowed.
```
# not a heading inside code
```
## Errors ##
Error 429 means too many requests.
"""


def test_markdown_headings_levels_paths_and_code_fences():
    assert [(level, title) for _, level, title in markdown_headings(GUIDE)] == [
        (1, "Guide"), (2, "Limits"), (3, "Rate limit"), (2, "Errors")]
    document = Document.from_pages("guide.md", [GUIDE], "h")
    sections = document_sections(document)
    assert [section.title for section in sections] == ["", "Guide", "Guide > Limits", "Guide > Limits > Rate limit",
                                                       "Guide > Errors"]
    assert section_at(sections, GUIDE.index("600")).title == "Guide > Limits > Rate limit"
    assert section_at(sections, GUIDE.index("429")).title == "Guide > Errors"


def test_structure_never_merges_two_sections():
    document = Document.from_pages("guide.md", [GUIDE], "h")
    chunks = chunker("structure", chunk_size=100, overlap=0).chunk(document)
    assert texts(chunks) == [
        "Intro line before any heading.", "# Guide\nThe guide starts here.", "## Limits",
        "### Rate limit\nEach key may send 600 requests per minute. Bursts of 50 are allowed.\n```\n"
        "# not a heading inside code\n```", "## Errors ##\nError 429 means too many requests."]
    sections = document_sections(document)
    for size, overlap in [(5, 0), (8, 3), (100, 10)]:
        for chunk in chunker("structure", chunk_size=size, overlap=overlap).chunk(document):
            assert section_at(sections, chunk.char_start) == section_at(sections, chunk.char_end - 1)
            assert count_words(chunk.text) <= size


def test_pdf_sections_come_from_its_headings_one_level():
    pages = ["Overview\nThe service stores queues.", "Limits\nEach key may send 600 requests.\nErrors\nCodes follow."]
    headings = [(1, 0, "Overview"), (2, 0, "Limits"), (2, pages[1].index("Errors"), "Errors")]
    document = Document.from_pages("api.pdf", pages, "h", page_headings=headings)
    assert [s.title for s in document_sections(document)] == ["Overview", "Limits", "Errors"]
    assert texts(chunker("structure", chunk_size=50, overlap=0).chunk(document)) == [
        "Overview\nThe service stores queues.", "Limits\nEach key may send 600 requests.", "Errors\nCodes follow."]


def test_the_section_path_is_offered_as_chunk_context():
    from rag_core.ingest.corpus import Corpus
    from rag_core.retrieve.context import indexed_texts

    document = Document.from_pages("guide.md", [GUIDE], "h", title="API guide")
    chunks = chunker("structure", chunk_size=100, overlap=0).chunk(document)
    found = indexed_texts(chunks, Corpus.of([document]), "title_section_path")
    assert [text[:-len(chunk.text)] for text, chunk in zip(found, chunks)] == [
        "API guide\n\n", "API guide\nGuide\n\n", "API guide\nGuide > Limits\n\n",
        "API guide\nGuide > Limits > Rate limit\n\n", "API guide\nGuide > Errors\n\n"]
    assert all(text.endswith(chunk.text) for text, chunk in zip(found, chunks))
    pdf = Document.from_pages("api.pdf", ["Intro text.", "Limits\nSix hundred a minute."], "h", title="API",
                              page_headings=[(2, 0, "Limits")])
    [first, second] = chunker("structure", chunk_size=10, overlap=0).chunk(pdf)
    assert indexed_texts([first, second], Corpus.of([pdf]), "title_section_path") == [
        "API\n\nIntro text.", "API\nLimits\n\nLimits\nSix hundred a minute."]  # a PDF's path: its heading alone
