"""The orchestrator end to end on the sample corpus: every stage, checked against independent
computations (RRF by hand from the stage ranks, cosine similarity straight from the model)."""

from __future__ import annotations

import collections
import re

import numpy as np
import pytest

from conftest import STAND_IN_RERANKER

from rag_core.config import RagConfig
from rag_core.service import open_pipeline

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def hybrid(sample_store):
    return open_pipeline(sample_store, RagConfig(rerank_model=STAND_IN_RERANKER), progress=False)


@pytest.fixture(scope="module")
def rare_identifier(hybrid):
    """An identifier (error code, config key) in exactly one document, with a BM25 token that no other
    document has: the case where keyword search must beat paraphrase."""
    from rag_core.retrieve.tokenizer import get_tokenizer

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


def test_dense_scores_are_cosine_similarities_from_the_model(hybrid, copy_of_sample_store):
    query = "Which encryption protects data at rest?"
    model = hybrid.index.embedder.loaded.model
    # torch (fp32) to 1e-4; the default bf16 (documents in bf16, cosine >= 0.9999 to fp32) to 2e-3.
    # On a copy: the torch index is a second dense manifest, which the shared sample store must not gain.
    for backend, tolerance in (("torch", 1e-4), (RagConfig().embed_backend, 2e-3)):
        # first: one vector per chunk, the text as the model reads it (windows: tests/test_dense_windows.py)
        config = RagConfig(mode="dense", rerank_depth=0, embed_backend=backend, dense_pooling="first")
        result = open_pipeline(copy_of_sample_store, config, progress=False).retrieve(query)
        top = result.hits[:3]
        vectors = model.encode([query] + [hit.chunk.text for hit in top], normalize_embeddings=True)
        expected = vectors[1:] @ vectors[0]
        assert np.allclose([hit.score for hit in top], expected, atol=tolerance), backend
        assert set(result.stages) == {"dense", "fused"}


def test_bm25_mode_loads_no_embedding_model_and_finds_exact_identifiers(sample_store, rare_identifier):
    token, doc_id = rare_identifier
    pipeline = open_pipeline(sample_store, RagConfig(mode="bm25", rerank_depth=0), progress=False)
    result = pipeline.retrieve(token)
    assert pipeline.index.embedder._loaded is None
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
    config = RagConfig(rerank_depth=6, rerank_model=STAND_IN_RERANKER)
    first = open_pipeline(sample_store, config, progress=False)
    query = "Which headers tell a client how close it is to the rate limit?"
    candidates = [first.index.chunk_by_id[item.id].text for item in first.candidates(query)[0].ranked["fused"][:6]]
    scored = first.reranker.score(query, candidates)
    assert (scored.pairs_scored, scored.cache_hits) == (6, 0)
    again = open_pipeline(sample_store, config, progress=False).reranker.score(query, candidates)  # as a new process
    assert (again.pairs_scored, again.cache_hits) == (0, 6) and again.scores == scored.scores
    # Latency reports the model's cost even from the cache, so runs compare whatever was cached.
    assert scored.model_seconds == pytest.approx(scored.computed_seconds) and again.computed_seconds == 0
    assert again.model_seconds == pytest.approx(scored.model_seconds)
    after = open_pipeline(sample_store, config, progress=False).retrieve(query)
    assert after.work["rerank_cache_hits"] == 6 and after.latency_ms["rerank"] >= scored.model_seconds * 1000 > 0
    direct = first.reranker.loaded.model.predict([(query, text) for text in candidates])
    assert np.allclose(scored.scores, direct, atol=1e-5)


def test_ranking_continues_below_the_reranked_head_in_fused_order(hybrid):
    config = RagConfig(rerank_depth=4, k=3, rerank_model=STAND_IN_RERANKER)
    result = open_pipeline(hybrid.index.store_dir, config, progress=False).retrieve("How do I rotate an API key?")
    fused = [hit.chunk.id for hit in result.stages["fused"]]
    ranking = [hit.chunk.id for hit in result.ranking]
    assert sorted(ranking[:4]) == sorted(fused[:4]) and ranking[:4] == [h.chunk.id for h in result.stages["rerank"]]
    assert ranking[4:] == fused[4:]  # below the re-ranked head: the fused order
    assert [hit.chunk.id for hit in result.hits] == ranking[:3]


def test_rerank_fusion_rrf_fuses_the_reranked_head_with_the_first_stage_order_by_hand(hybrid):
    query = "How do I rotate an API key?"
    config = RagConfig(rerank_depth=6, rrf_k=2, rerank_model=STAND_IN_RERANKER, rerank_fusion="rrf")
    result = open_pipeline(hybrid.index.store_dir, config, progress=False).retrieve(query)
    fused = [hit.chunk.id for hit in result.stages["fused"]]
    reranked = [hit.chunk.id for hit in result.stages["rerank"]]
    score = {item: 1 / (2 + reranked.index(item) + 1) + 1 / (2 + fused.index(item) + 1) for item in reranked}
    expected = sorted(reranked, key=lambda item: -score[item])  # ties: the re-ranker's order (first seen)
    ranking = [hit.chunk.id for hit in result.ranking]
    assert ranking[:6] == expected and ranking[6:] == fused[6:]
    plain = open_pipeline(hybrid.index.store_dir, config.replace(rerank_fusion="none"), progress=False).retrieve(query)
    assert [hit.chunk.id for hit in plain.ranking[:6]] == reranked  # none: the re-ranker's order


def test_candidates_are_reused_when_only_k_or_rerank_depth_change(sample_store):
    query = "Which plan raises the webhook retry limit?"
    first = open_pipeline(sample_store, RagConfig(k=3, rerank_depth=0, retrieve_depth=17), progress=False).retrieve(query)
    second = open_pipeline(sample_store, RagConfig(k=7, rerank_depth=0, retrieve_depth=17), progress=False).retrieve(query)
    other = open_pipeline(sample_store, RagConfig(k=7, rerank_depth=0, retrieve_depth=18), progress=False).retrieve(query)
    assert (first.work["candidates_reused"], second.work["candidates_reused"], other.work["candidates_reused"]) == (0, 1, 0)
    assert [h.chunk.id for h in second.ranking] == [h.chunk.id for h in first.ranking]
    assert second.latency_ms == first.latency_ms  # the latency measured when they were computed


def test_an_unloadable_cross_encoder_turns_reranking_off_announced_and_recorded(sample_store, tmp_path, caplog):
    missing = str(tmp_path / "no-such-cross-encoder")
    pipeline = open_pipeline(sample_store, RagConfig(rerank_depth=5, rerank_model=missing), progress=False)
    result = pipeline.retrieve("How do I rotate an API key?")
    assert "rerank" not in result.stages and "rerank" not in result.latency_ms
    announced = [record for record in caplog.records if "re-ranking is off" in record.getMessage()]
    assert len(announced) == 1 and announced[0].levelname == "WARNING" and missing in announced[0].getMessage()
    used = pipeline.models_used()["rerank_model_used"]
    assert used.startswith("none (unavailable: ") and "random" not in used
