"""Issue 51: a re-ranker receives the chunks (text, pages, metadata, heading), not only their texts.
``BaseReranker.score_passages(query, passages)`` is what the pipeline calls; its default gives a re-ranker
that implements ``score(query, texts)`` the texts, so those keep working, and one that reads the page or the
section needs no edit of rag_core. Here a plugin that prefers early pages re-orders BM25's candidates by page."""

from __future__ import annotations

import pytest

from rag_core.components.faults import ComponentFault
from rag_core.config import RagConfig
from rag_core.ingest.corpus import Corpus
from rag_core.records import Document
from rag_core.retrieve.pipeline import Pipeline
from rag_core.retrieve.rerank import RERANKERS, BaseReranker, RerankPassage, RerankScores

# Three pages; the query's words are densest on the last page, so BM25 ranks it first.
PAGES = ["Intro. The solar panel warranty covers defects.",
         "Details. Solar panel output falls with heat; the panel warranty is ten years.",
         "Claims. Solar panel warranty claims: send the solar panel serial and the warranty card."]
CORPUS = Corpus.of([Document.from_pages("manual.txt", PAGES, "hash-manual", page_headings=[(2, 0, "Details"),
                                                                                          (3, 0, "Claims")])])
QUERY = "solar panel warranty"


class FirstPages(BaseReranker):
    """Reads the page: earlier pages first (what a re-ranker for front matter might do)."""
    model_name = "first_pages"
    seen: list[RerankPassage] = []

    def score_passages(self, query, passages):
        FirstPages.seen = list(passages)
        return RerankScores.computed([-float(passage.page_start) for passage in passages], 0.0)


class Shortest(BaseReranker):
    """Reads the text only (the contract of before): shorter first."""
    model_name = "shortest"

    def score(self, query, texts):
        return RerankScores.computed([-float(len(text)) for text in texts], 0.0)


class NotABase:
    """A re-ranker that does not subclass BaseReranker: it has score(query, texts) only."""
    model_name = "plain"

    @classmethod
    def from_config(cls, config, cache, store_dir):
        return cls()

    def unavailable(self):
        return None

    name_used = "plain"

    def score(self, query, texts):
        return RerankScores.computed([float(len(text)) for text in texts], 0.0)


class Neither(BaseReranker):
    model_name = "neither"


def ranked_pages(name, tmp_path, **settings):
    config = RagConfig(**{"mode": "bm25", "chunk_size": 12, "overlap": 0, "rerank_depth": 3, "reranker": name, "k": 3,
                          **settings})
    retrieval = Pipeline(config, CORPUS, tmp_path).retrieve(QUERY)
    return [hit.chunk.page_start for hit in retrieval.ranking], retrieval


@pytest.fixture
def rerankers(isolated_components):
    for name, target in (("first_pages", FirstPages), ("shortest", Shortest), ("plain", NotABase),
                         ("neither", Neither)):
        RERANKERS.register(name, target)


def test_a_reranker_that_reads_pages_needs_no_edit_of_rag_core(rerankers, tmp_path):
    bm25, _ = ranked_pages("first_pages", tmp_path, rerank_depth=0)
    pages, retrieval = ranked_pages("first_pages", tmp_path)
    assert bm25[0] == 3 and sorted(bm25[:3]) != bm25[:3]  # BM25 alone puts the claims page first
    assert pages[:3] == sorted(bm25[:3])  # the re-ranked head is in page order
    passage = FirstPages.seen[0]
    assert passage.chunk == retrieval.stages["fused"][0].chunk and passage.text == passage.chunk.text
    assert (passage.doc_id, passage.page_start, passage.page_end) == ("manual.txt", 3, 3)
    assert passage.heading == "Claims" and passage.metadata["doc_id"] == "manual.txt"


def test_a_reranker_of_texts_keeps_working(rerankers, tmp_path):
    _, retrieval = ranked_pages("shortest", tmp_path)
    head = [len(hit.chunk.text) for hit in retrieval.stages["rerank"]]
    assert head == sorted(head) and len(head) == 3
    _, plain = ranked_pages("plain", tmp_path)  # not a BaseReranker: given texts, as before
    longest = [len(hit.chunk.text) for hit in plain.stages["rerank"]]
    assert longest == sorted(longest, reverse=True)


def test_a_reranker_that_implements_neither_is_named(rerankers, tmp_path):
    with pytest.raises(ComponentFault, match="neither") as caught:
        ranked_pages("neither", tmp_path)
    assert "score(query, texts)" in str(caught.value) and "score_passages" in str(caught.value)
