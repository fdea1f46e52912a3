"""RM3 query expansion: the expansion weights by hand on a tiny corpus, the expanded BM25 query against
single-term BM25 scores, and the pipeline's ``query_expansion: rm3`` (BM25 mode, no model)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from rag_core.config import ConfigError, RagConfig
from rag_core.ingest.corpus import Corpus
from rag_core.records import Document
from rag_core.retrieve.bm25 import BM25Index
from rag_core.retrieve.pipeline import Pipeline
from rag_core.retrieve.expansion.rm3 import expansion_weights, rm3_search

TEXTS = {
    "d1": "cat dog dog fish",
    "d2": "cat bird",
    "d3": "dog bone bone",
    "d4": "fish tank water",
}


@pytest.fixture
def index() -> BM25Index:
    bm25 = BM25Index(tokenizer="whitespace")
    bm25.index(list(TEXTS), list(TEXTS.values()))
    return bm25


def test_expansion_weights_by_hand():
    # Feedback scores 3 and 1 -> document weights 3/4, 1/4.
    # P(w|R): cat 3/4*1/4 + 1/4*1/2 = 5/16, dog 3/4*2/4 = 6/16, fish 3/4*1/4 = 3/16, bird 1/4*1/2 = 2/16.
    # Top 2 terms: dog 6/16, cat 5/16 -> renormalised dog 6/11, cat 5/11.
    # RM3 with lambda 1/2 and the query "cat": cat 1/2*1 + 1/2*5/11 = 8/11, dog 1/2*6/11 = 3/11.
    weights = expansion_weights(["cat"], [(["cat", "dog", "dog", "fish"], 3.0), (["cat", "bird"], 1.0)],
                                fb_terms=2, original_weight=0.5)
    assert list(weights) == ["cat", "dog"]
    assert weights["cat"] == pytest.approx(float(Fraction(8, 11)))
    assert weights["dog"] == pytest.approx(float(Fraction(3, 11)))


def test_expansion_weight_zero_and_one():
    feedback = [(["a", "b"], 2.0), (["b", "c"], 2.0)]
    only_feedback = expansion_weights(["a"], feedback, fb_terms=3, original_weight=0.0)
    # P(w|R): a 1/4, b 1/2, c 1/4
    assert only_feedback == pytest.approx({"b": 0.5, "a": 0.25, "c": 0.25})
    assert expansion_weights(["a", "a", "z"], feedback, fb_terms=3, original_weight=1.0) == pytest.approx(
        {"a": 2 / 3, "z": 1 / 3, "b": 0.0, "c": 0.0})


def test_rm3_search_weights_and_scores(index):
    result = rm3_search(index, TEXTS.__getitem__, "cat", depth=10, fb_docs=2, fb_terms=3, original_weight=0.5)
    # BM25 "cat" finds d2 (shorter) then d1; their scores weight the feedback.
    feedback = index.retrieve("cat", 2)
    assert [hit.id for hit in feedback] == ["d2", "d1"]
    expected = expansion_weights(["cat"], [(TEXTS[h.id].split(), h.score) for h in feedback], 3, 0.5)
    # d2 weighs more (higher score): P(w|R) ranks cat, bird (d2 only), dog (d1 only, twice) above fish.
    assert set(expected) == {"cat", "bird", "dog"}
    assert result.weights == pytest.approx(expected)
    # Each document's score is the weighted sum of its single-term BM25 scores.
    single = {term: {hit.id: hit.score for hit in index.retrieve(term, 10)} for term in expected}
    for hit in result.hits:
        assert hit.score == pytest.approx(sum(w * single[t].get(hit.id, 0.0) for t, w in expected.items()), rel=1e-6)
    scores = [hit.score for hit in result.hits]
    assert scores == sorted(scores, reverse=True)
    # The expansion reaches d3, which lacks the query term, through the feedback term "dog".
    assert [hit.id for hit in result.hits] == ["d2", "d1", "d3"]


def test_rm3_in_the_bm25_pipeline(tmp_path):
    corpus = Corpus.of([Document.from_pages(f"{name}.txt", [text], name) for name, text in TEXTS.items()])
    config = RagConfig(mode="bm25", rerank_depth=0, tokenizer="whitespace", chunk_size=50, overlap=0,
                       query_expansion="rm3", rm3_docs=2, rm3_terms=3)
    pipeline = Pipeline(config, corpus, tmp_path)
    result = pipeline.retrieve("cat")
    assert result.expansion["method"] == "rm3"
    assert set(result.expansion["terms"]) == {"cat", "bird", "dog"}
    plain = Pipeline(config.replace(query_expansion="none"), corpus, tmp_path).retrieve("cat")
    assert [hit.chunk.doc_id for hit in plain.hits] == ["d2.txt", "d1.txt"]
    assert [hit.chunk.doc_id for hit in result.ranking] == ["d2.txt", "d1.txt", "d3.txt"]  # d3 through "dog"
    assert "bm25" in result.latency_ms


def test_rm3_settings_are_checked():
    with pytest.raises(ConfigError, match="rm3_weight"):
        RagConfig(rm3_weight=1.5)
    with pytest.raises(ConfigError, match="rm3_docs"):
        RagConfig(rm3_docs=0)
    with pytest.raises(ConfigError, match="query_expansion rm3 .* needs mode bm25 or hybrid"):
        RagConfig(mode="dense", query_expansion="rm3")
    with pytest.raises(ConfigError, match="query_expansion must be one of"):
        RagConfig(query_expansion="magic")


def test_rm3_under_a_filter_takes_feedback_and_results_from_the_allowed_documents_only(tmp_path):
    corpus = Corpus.of([Document.from_pages(f"{name}.txt", [text], name) for name, text in TEXTS.items()])
    config = RagConfig(mode="bm25", rerank_depth=0, tokenizer="whitespace", chunk_size=50, overlap=0,
                       query_expansion="rm3", rm3_docs=2, rm3_terms=3)
    result = Pipeline(config, corpus, tmp_path).retrieve("cat", where={"doc_id": ["d1.txt", "d3.txt", "d4.txt"]})
    # d2, the best "cat" document, is filtered out before feedback: d1 is the only feedback document,
    # so P(w|R) is d1's term distribution (cat 1/4, dog 2/4, fish 1/4) and the weights follow by hand:
    # cat 1/2 + 1/2 * 1/4 = 5/8, dog 1/2 * 2/4 = 1/4, fish 1/2 * 1/4 = 1/8.
    assert result.expansion["terms"] == pytest.approx({"cat": 5 / 8, "dog": 1 / 4, "fish": 1 / 8})
    assert [hit.chunk.doc_id for hit in result.ranking] == ["d1.txt", "d3.txt", "d4.txt"]
    assert result.filter
