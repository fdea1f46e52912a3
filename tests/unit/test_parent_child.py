"""Parent-child chunks: children are exact spans inside their parent, parents collapse by hand to their
best child's rank, the BM25 pipeline returns parents ranked as an independent child index says, and
evaluation reports child-level metrics next to the parent level."""

from __future__ import annotations

import pytest

from rag_core.config import ConfigError, RagConfig
from rag_core.evaluate.evaluator import evaluate_config
from rag_core.evaluate.golden import Evidence, GoldenQuery
from rag_core.ingest.chunkers.recursive import chunk_document
from rag_core.ingest.corpus import Corpus
from rag_core.records import Document, ScoredId
from rag_core.retrieve.bm25 import BM25Index
from rag_core.retrieve.parent_child import child_chunks, collapse_to_parents
from rag_core.retrieve.index import chunking_settings
from rag_core.retrieve.pipeline import Pipeline

WORDS = [f"w{i}" for i in range(40)]
PAGES = [
    " ".join(WORDS[:20]) + ". Revenue grew in fiscal 2019 to 12 million dollars.",
    "The balance sheet lists inventory and receivables. " + " ".join(WORDS[20:]),
    "Operating cash flow was 5 million dollars; cash from operations rose. " + " ".join(WORDS[:15]),
]


@pytest.fixture
def corpus() -> Corpus:
    return Corpus.of([Document.from_pages("report.txt", PAGES, "h1"),
                      Document.from_pages("other.txt", ["inventory counts and w3 w4 w5 " * 3], "h2")])


def test_collapse_to_parents_by_hand():
    children = [ScoredId("c3", 9.0), ScoredId("c1", 8.0), ScoredId("c4", 7.0), ScoredId("c2", 6.0), ScoredId("c5", 5.0)]
    parent_of = {"c1": "A", "c2": "A", "c3": "B", "c4": "B", "c5": "C"}
    assert collapse_to_parents(children, parent_of) == [ScoredId("B", 9.0), ScoredId("A", 8.0), ScoredId("C", 5.0)]
    assert collapse_to_parents(children, parent_of, depth=2) == [ScoredId("B", 9.0), ScoredId("A", 8.0)]


def test_children_are_spans_inside_their_parent(corpus):
    document = corpus.by_id["report.txt"]
    parents = chunk_document(document, chunk_size=30, overlap=5)
    children, parent_of = child_chunks(parents, corpus.by_id, child_size=8)
    by_id = {parent.id: parent for parent in parents}
    assert len(children) > len(parents) and set(parent_of.values()) == set(by_id)
    for child in children:
        parent = by_id[parent_of[child.id]]
        assert parent.char_start <= child.char_start < child.char_end <= parent.char_end
        assert child.text == document.text[child.char_start:child.char_end]
        assert len(child.text.split()) <= 8
        assert child.page_start == document.page_at(child.char_start)
    # Every word of every parent is in one of its children (children do not overlap inside a parent).
    for parent in parents:
        words = [w for c in children if parent_of[c.id] == parent.id for w in c.text.split()]
        assert words == parent.text.split()


def test_bm25_pipeline_returns_parents_ranked_by_best_child(corpus, tmp_path):
    config = RagConfig(mode="bm25", rerank_depth=0, chunk_size=30, overlap=5, child_size=8, tokenizer="simple")
    pipeline = Pipeline(config, corpus, tmp_path)
    query = "cash from operations inventory"
    result = pipeline.retrieve(query)
    index = pipeline.index
    # Independent: a BM25 index over the children alone, collapsed by hand.
    independent = BM25Index(tokenizer="simple")
    independent.index([c.id for c in index.search_chunks], [c.text for c in index.search_chunks])
    child_hits = independent.retrieve(query, 10_000)
    assert [c.id for c in result.child_ranking] == [hit.id for hit in child_hits]
    expected, seen = [], set()
    for hit in child_hits:
        parent = index.parent_of[hit.id]
        if parent not in seen:
            seen.add(parent)
            expected.append((parent, hit.score))
    assert [(hit.chunk.id, pytest.approx(hit.score)) for hit in result.ranking] == expected[: config.retrieve_depth]
    assert {hit.chunk.id for hit in result.ranking} <= {chunk.id for chunk in index.chunks}  # parents only
    assert len({hit.chunk.id for hit in result.ranking}) == len(result.ranking)  # no duplicates


def test_child_level_metrics_next_to_parent_level(corpus, tmp_path):
    config = RagConfig(mode="bm25", rerank_depth=0, chunk_size=30, overlap=5, child_size=8, tokenizer="simple")
    queries = [GoldenQuery("q1", "operating cash flow", None,
                           (Evidence("report.txt", 3, "Operating cash flow was 5 million dollars"),))]
    report = evaluate_config(config, corpus, queries, tmp_path)
    retrieval = report.retrievals["q1"]
    relevant_children = [c for c in retrieval.child_ranking if "Operating cash flow" in c.text or "5 million" in c.text]
    first = next(rank for rank, c in enumerate(retrieval.child_ranking, 1) if c in relevant_children)
    assert report.metrics["child/mrr"] == pytest.approx(1 / first)
    assert report.metrics["page/hit_rate@5"] == 1.0
    assert "chunk/recall@5" in report.metrics and report.metrics["index/children"] > report.metrics["index/chunks"]


def test_child_size_setting():
    with pytest.raises(ConfigError, match="child_size"):
        RagConfig(chunk_size=100, child_size=100)
    assert chunking_settings(RagConfig(child_size=128))["child_size"] == 128
    assert "child_size" not in chunking_settings(RagConfig())  # stores made before the setting keep their keys
