"""Evaluating one configuration: ranking metrics at a fixed depth whatever k is, and context metrics
that describe the k passages, checked by hand from the retrieved chunks and the qrels."""

from __future__ import annotations

import pytest
from sweep_fixtures import tiny_corpus  # noqa: F401 - fixture

from rag_core.config import RagConfig
from rag_core.ingest.corpus import Corpus
from rag_core.evaluate.evaluator import evaluate_config
from rag_core.evaluate.golden import load_golden
from rag_core.ingest.files import read_documents
from rag_core.evaluate.relevance import LEVELS


@pytest.fixture(scope="module")
def tiny_reports(tiny_corpus, tmp_path_factory):  # noqa: F811
    corpus = Corpus.of(read_documents(tiny_corpus.documents).documents)
    queries = load_golden(tiny_corpus.golden, doc_ids=corpus.by_id)
    store = tmp_path_factory.mktemp("store")
    base = RagConfig(mode="bm25", rerank_depth=0, chunk_size=12, overlap=0, metrics_k=(3, 10))
    return {k: evaluate_config(base.replace(k=k), corpus, queries, store) for k in (1, 4)}


def test_ranking_metrics_do_not_depend_on_k(tiny_reports):
    one, four = tiny_reports[1].metrics, tiny_reports[4].metrics
    for level in LEVELS:
        for name in ("recall@3", "ndcg@10", "hit_rate@10", "mrr"):
            assert one[f"{level}/{name}"] == four[f"{level}/{name}"]
    retrievals = tiny_reports[1].retrievals.values()
    assert all(len(retrieval.hits) == 1 for retrieval in retrievals)
    assert max(len(retrieval.ranking) for retrieval in retrievals) > 1  # scored beyond k (BM25 returns matches only)


def test_context_metrics_describe_the_k_passages(tiny_reports):
    for k, report in tiny_reports.items():
        recalls, precisions, words = [], [], []
        for row in report.per_query:
            relevant = set(report.qrels["chunk"][row["query_id"]])
            given = [hit.chunk for hit in report.retrievals[row["query_id"]].hits]
            assert 0 < len(given) <= k  # BM25 returns matching chunks only
            found = len([chunk for chunk in given if chunk.id in relevant])
            recalls.append(found / len(relevant))
            precisions.append(found / len(given))
            words.append(sum(len(chunk.text.split()) for chunk in given))
            assert row["context/recall"] == pytest.approx(recalls[-1])
        assert report.metrics["context/recall"] == pytest.approx(sum(recalls) / len(recalls))
        assert report.metrics["context/precision"] == pytest.approx(sum(precisions) / len(precisions))
        assert report.metrics["context/words"] == pytest.approx(sum(words) / len(words))
    # more passages: more words and at least as much recall
    assert tiny_reports[4].metrics["context/words"] > tiny_reports[1].metrics["context/words"]
    assert tiny_reports[4].metrics["context/recall"] >= tiny_reports[1].metrics["context/recall"]


def test_the_per_query_table_shows_only_the_stages_that_ran(tiny_reports):
    row = tiny_reports[1].per_query[0]
    assert "first_relevant_bm25" in row and "first_relevant_final" in row
    assert "first_relevant_rerank" not in row and "first_relevant_dense" not in row
