"""A hybrid evaluation scores each fused retriever's own list as if that retriever ran alone (loads the
embedding model, so it lives outside the unit tier)."""

from __future__ import annotations

import pytest
from sweep_fixtures import tiny_corpus  # noqa: F401 - fixture

from rag_core.config import RagConfig
from rag_core.evaluate.evaluator import evaluate_config
from rag_core.evaluate.golden import load_golden
from rag_core.evaluate.relevance import LEVELS
from rag_core.ingest.corpus import Corpus
from rag_core.ingest.files import read_documents


def test_each_fused_retriever_is_scored_alone_as_if_it_ran_alone(tiny_corpus, tmp_path):  # noqa: F811
    """``dense/page/recall@5``, ``bm25/...``: a hybrid run scores each retriever's own list, and each equals
    what a run of that retriever alone reports (no re-ranking: its list is then the final ranking)."""
    corpus = Corpus.of(read_documents(tiny_corpus.documents).documents)
    queries = load_golden(tiny_corpus.golden, doc_ids=corpus.by_id)
    base = RagConfig(rerank_depth=0, chunk_size=12, overlap=0, metrics_k=(3, 10))
    hybrid = evaluate_config(base, corpus, queries, tmp_path)
    for name in ("dense", "bm25"):
        alone = evaluate_config(base.replace(mode=name), corpus, queries, tmp_path)
        assert f"{name}/page/recall@3" not in alone.metrics  # one retriever: its list is the final one
        for level in LEVELS:
            for metric in ("recall@3", "ndcg@10", "mrr"):
                assert hybrid.metrics[f"{name}/{level}/{metric}"] == pytest.approx(alone.metrics[f"{level}/{metric}"])
        rows = {row["query_id"]: row for row in hybrid.per_query}
        for row in alone.per_query:
            assert rows[row["query_id"]][f"{name}/page/recall@3"] == pytest.approx(row["page/recall@3"])
