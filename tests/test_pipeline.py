"""The orchestrator end to end on the sample corpus: every stage, checked against independent
computations (RRF by hand from the stage ranks, cosine similarity straight from the model)."""

from __future__ import annotations

import collections
import re

import numpy as np
import pytest

from rag_core.config import RagConfig
from rag_core.service import open_pipeline

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def hybrid(sample_store):
    return open_pipeline(sample_store, RagConfig(), progress=False)


@pytest.fixture(scope="module")
def rare_identifier(hybrid):
    """An identifier (error code, config key) in exactly one document, with a BM25 token that no other
    document has: the case where keyword search must beat paraphrase."""
    from rag_core.tokenizer import get_tokenizer

    tokenize = get_tokenizer("stem")
    docs_with_token = collections.defaultdict(set)  # BM25 token -> doc ids
    docs_with_identifier = collections.defaultdict(set)  # identifier -> doc ids
    for doc in hybrid.corpus.documents:
        for token in tokenize(doc.text):
            docs_with_token[token].add(doc.doc_id)
        for identifier in re.findall(r"\b[A-Z]{2,5}-\d{3,5}\b|\b[a-z]+(?:_[a-z]+){2,}\b", doc.text):
            docs_with_identifier[identifier].add(doc.doc_id)
    candidates = sorted(
        identifier for identifier, docs in docs_with_identifier.items()
        if len(docs) == 1 and any(docs_with_token[token] == docs for token in tokenize(identifier))
    )
    assert candidates, "the sample corpus should hold identifiers unique to one document"
    identifier = candidates[0]
    return identifier, next(iter(docs_with_identifier[identifier]))


def test_hybrid_runs_every_stage_and_fuses_by_hand(hybrid):
    result = hybrid.retrieve("How should a client back off when it is rate limited?")
    assert set(result.stages) == {"dense", "bm25", "fused", "rerank"}
    assert len(result.hits) == 5
    assert len(result.stages["dense"]) == 20 and 0 < len(result.stages["bm25"]) <= 20
    ranks = {stage: {hit.chunk.id: rank for rank, hit in enumerate(result.stages[stage], 1)} for stage in ("dense", "bm25")}
    for hit in result.stages["fused"]:
        expected = sum(1 / (60 + r[hit.chunk.id]) for r in ranks.values() if hit.chunk.id in r)
        assert hit.stages["fused"].score == pytest.approx(expected)
    fused_scores = [hit.score for hit in result.stages["fused"]]
    assert fused_scores == sorted(fused_scores, reverse=True)
    # Re-ranking re-orders the top rerank_depth fused candidates by cross-encoder score.
    top_fused = {hit.chunk.id for hit in result.stages["fused"][:20]}
    assert {hit.chunk.id for hit in result.stages["rerank"]} == top_fused
    rerank_scores = [hit.stages["rerank"].score for hit in result.hits]
    assert rerank_scores == sorted(rerank_scores, reverse=True)
    assert [hit.chunk.id for hit in result.hits] == [hit.chunk.id for hit in result.stages["rerank"][:5]]
    assert set(result.latency_ms) == {"embed_query", "vector_search", "bm25", "fusion", "rerank"}


def test_dense_scores_are_cosine_similarities_from_the_model(hybrid):
    query = "Which encryption protects data at rest?"
    result = open_pipeline(hybrid.index.store_dir, RagConfig(mode="dense", rerank_depth=0), progress=False).retrieve(query)
    model = hybrid.index.embedder.loaded.model
    top = result.hits[:3]
    vectors = model.encode([query] + [hit.chunk.text for hit in top], normalize_embeddings=True)
    expected = vectors[1:] @ vectors[0]
    assert np.allclose([hit.score for hit in top], expected, atol=1e-4)
    assert set(result.stages) == {"dense", "fused"}


def test_bm25_mode_loads_no_embedding_model_and_finds_exact_identifiers(sample_store, rare_identifier):
    token, doc_id = rare_identifier
    pipeline = open_pipeline(sample_store, RagConfig(mode="bm25", rerank_depth=0), progress=False)
    result = pipeline.retrieve(token)
    assert pipeline.index._embedder is None
    assert set(result.stages) == {"bm25", "fused"}
    assert any(hit.chunk.doc_id == doc_id and token in hit.chunk.text for hit in result.hits[:3])


def test_each_chunking_gets_its_own_index_and_is_built_once(copy_of_sample_store):
    config = RagConfig(chunk_size=128, overlap=16, rerank_depth=0)
    first = open_pipeline(copy_of_sample_store, config, progress=False)
    stats = first.build()
    assert stats.chunkings_built == 1 and stats.embedded > 0
    assert all(len(chunk.text.split()) <= 128 for chunk in first.index.chunks)
    again = open_pipeline(copy_of_sample_store, config, progress=False).build()
    assert again.chunkings_built == 0 and again.embedded == 0
    default = open_pipeline(copy_of_sample_store, RagConfig(rerank_depth=0), progress=False)
    assert default.index.chunking_key != first.index.chunking_key
    assert default.build().embedded == 0


def test_cross_encoder_scores_are_cached_per_query_and_passage(sample_store):
    config = RagConfig(rerank_depth=6)
    first = open_pipeline(sample_store, config, progress=False)
    query = "Which headers tell a client how close it is to the rate limit?"
    before = first.retrieve(query)
    assert first.reranker.pairs_scored + first.reranker.cache_hits == 6
    second = open_pipeline(sample_store, config, progress=False)  # a new process would see the same cache
    after = second.retrieve(query)
    assert (second.reranker.pairs_scored, second.reranker.cache_hits) == (0, 6)
    # Latency reports the model's cost even from the cache, so runs compare whatever was cached.
    assert first.reranker.model_seconds == pytest.approx(first.reranker.last_compute_seconds)
    assert second.reranker.last_compute_seconds == 0
    assert second.reranker.model_seconds == pytest.approx(first.reranker.model_seconds)
    assert after.latency_ms["rerank"] >= second.reranker.model_seconds * 1000 > 0
    assert [h.chunk.id for h in after.hits] == [h.chunk.id for h in before.hits]
    direct = first.reranker.loaded.model.predict([(query, hit.chunk.text) for hit in before.hits])
    assert np.allclose([hit.stages["rerank"].score for hit in before.hits], direct, atol=1e-5)
