"""Stages return records (issue 32 item 4): routing a ``Routed``, each search a ``Searched``, the
first stage ``Candidates`` assembled from them, re-ranking a ``Reranked``; a retriever's ``build``
returns its ``BuildStats``, which the index adds up. BM25 only: no model is loaded."""

from __future__ import annotations

import pytest

from rag_core.config import RagConfig
from rag_core.ingest.corpus import Corpus
from rag_core.records import Document
from rag_core.retrieve.build_stats import BuildStats
from rag_core.retrieve.candidates import Routed, Searched, summed
from rag_core.retrieve.index import Index
from rag_core.retrieve.pipeline import Pipeline
from rag_core.retrieve.retrievers import Query
from rag_core.retrieve.retrievers.bm25 import BM25Retriever

TEXTS = {
    "cats": "cats purr and sleep on warm windows all afternoon",
    "dogs": "dogs bark at the mail carrier and chase the ball",
    "fish": "fish swim in the tank and the water filter hums",
}


@pytest.fixture
def corpus() -> Corpus:
    return Corpus.of([Document.from_pages(f"{name}.txt", [text], name) for name, text in TEXTS.items()])


def _config(**settings) -> RagConfig:
    return RagConfig(**{"mode": "bm25", "rerank_depth": 0, "tokenizer": "whitespace", "chunk_size": 50, "overlap": 0,
                        **settings})


def test_summed_adds_a_stage_measured_twice_in_the_order_stages_first_ran():
    total = summed([{"embed_query": 1.0, "route": 2.0}, {"bm25": 3.0, "embed_query": 0.5}, {"fusion": 1.0, "bm25": 1.0}])
    assert total == {"embed_query": 1.5, "route": 2.0, "bm25": 4.0, "fusion": 1.0}
    assert list(total) == ["embed_query", "route", "bm25", "fusion"]
    assert summed([]) == {}


def test_build_stats_add_counts_and_keep_the_largest_size():
    stats = BuildStats(chunks=3, embedded=2, embed_seconds=0.5, max_seq_length=128, pages=4, page_windows=6)
    returned = stats.add(BuildStats(embedded=5, embed_seconds=0.25, max_seq_length=256, pages=4, page_windows=5,
                                    page_embedded=7))
    assert returned is stats
    assert (stats.chunks, stats.embedded, stats.embed_seconds, stats.page_embedded) == (3, 7, 0.75, 7)
    assert (stats.max_seq_length, stats.pages, stats.page_windows) == (256, 4, 6)  # sizes, not sums


def test_bm25_build_returns_its_seconds_and_the_index_adds_them(tmp_path, corpus):
    index = Index(tmp_path, corpus, _config())
    stats = index.build()
    assert stats is index.stats and stats.bm25_seconds > 0 and stats.chunks == 3
    loaded = BM25Retriever("bm25", index.config, index.resources).build(index.chunk_set)  # saved: loaded, not built
    assert isinstance(loaded, BuildStats) and loaded == BuildStats()
    again = Index(tmp_path, corpus, _config())
    assert again.build().bm25_seconds == 0.0 and again.stats.chunkings_built == 0


def test_a_search_returns_its_record_and_the_candidates_assemble_it(tmp_path, corpus):
    pipeline = Pipeline(_config(mode="bm25,page_bm25"), corpus, tmp_path)
    stage = pipeline.first_stage
    searched = stage._search(Query("cats purr"), 5, None)
    assert isinstance(searched, Searched)
    assert set(searched.ranked) == {"bm25", "page_bm25", "fused"}
    assert pipeline.index.chunk_by_id[searched.ranked["fused"][0].id].doc_id == "cats.txt"
    assert list(searched.latency_ms) == ["bm25", "page_bm25", "fusion"]
    assert searched.stage_latency == {"bm25": ("bm25",), "page_bm25": ("page_bm25",)}
    assert set(searched.info) == {"page_units/page_bm25"}  # which page each chunk came from, for --explain
    within = stage._search(Query("cats purr"), 5, ["dogs.txt"])  # only one document's chunks
    assert {pipeline.index.chunk_by_id[hit.id].doc_id for hit in within.ranked["fused"]} <= {"dogs.txt"}

    result = pipeline.retrieve("cats purr")
    assert list(result.latency_ms) == ["bm25", "page_bm25", "fusion"]  # no rerank (rerank_depth 0)
    assert result.stage_latency == searched.stage_latency and result.work == {"candidates_reused": 0}


def test_routing_returns_the_documents_it_kept_and_its_time(tmp_path, corpus):
    pipeline = Pipeline(_config(route_docs=1), corpus, tmp_path)
    routed = pipeline.first_stage._route(Query("fish swim in the tank"), None)
    assert isinstance(routed, Routed)
    assert routed.doc_ids == [routed.documents[0].id] == ["fish.txt"]
    assert list(routed.latency_ms) == ["route"]  # BM25 routing: no query embedding
    unrouted = Pipeline(_config(), corpus, tmp_path).first_stage._route(Query("fish"), ["dogs.txt"])
    assert unrouted == Routed([], ["dogs.txt"])  # no routing: the filter's documents, no time
    result = pipeline.retrieve("fish swim in the tank")
    assert list(result.latency_ms)[0] == "route" and [item.id for item in result.routed] == ["fish.txt"]
