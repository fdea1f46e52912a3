"""ChromaDB store: upserts are idempotent, scores are cosine similarities (checked with numpy)."""

from __future__ import annotations

import numpy as np

from rag_core.retrieve.vectorstore import ChromaVectorStore


def test_upsert_twice_adds_nothing_and_search_returns_cosine(tmp_path):
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(50, 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = [f"c{i}" for i in range(50)]
    store = ChromaVectorStore(tmp_path / "chroma")
    metadata = [{"doc_id": "d.pdf", "page_start": 1, "page_end": 1}] * 50
    store.upsert("dense-test", ids, vectors, metadata, [f"text {i}" for i in range(50)])
    store.upsert("dense-test", ids, vectors, metadata, [f"text {i}" for i in range(50)])
    assert store.count("dense-test") == 50

    query = vectors[7] + 0.1 * vectors[3]
    query /= np.linalg.norm(query)
    expected = vectors @ query
    top = np.argsort(-expected)[:5]
    hits = ChromaVectorStore(tmp_path / "chroma").search("dense-test", query, 5)  # reopened from disk
    assert [hit.id for hit in hits] == [ids[i] for i in top]
    assert np.allclose([hit.score for hit in hits], expected[top], atol=1e-5)


def test_collections_are_separate(tmp_path):
    store = ChromaVectorStore(tmp_path / "chroma")
    store.upsert("dense-a", ["x"], np.ones((1, 4), np.float32) / 2, [{"doc_id": "a"}], ["a"])
    assert store.count("dense-a") == 1
    assert store.count("dense-b") == 0


def test_where_filters_before_ranking(tmp_path):
    """The nearest vectors belong to another company: a filter still returns k hits, all matching."""
    rng = np.random.default_rng(5)
    vectors = rng.normal(size=(40, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = [f"c{i}" for i in range(40)]
    metadata = [{"doc_id": f"d{i % 4}.pdf", "company": "3M" if i % 4 == 0 else "AMD", "year": 2018 + i % 2}
                for i in range(40)]
    store = ChromaVectorStore(tmp_path / "chroma")
    store.upsert("dense-f", ids, vectors, metadata, ids)
    query = vectors[1]  # an AMD vector
    wanted = [i for i in range(40) if metadata[i]["company"] == "3M" and metadata[i]["year"] == 2018]
    expected = sorted(wanted, key=lambda i: -float(vectors[i] @ query))[:3]
    hits = store.search("dense-f", query, 3, where={"company": "3M", "year": 2018})
    assert [hit.id for hit in hits] == [ids[i] for i in expected]
    assert [hit.id for hit in store.search("dense-f", query, 2, where={"company": "AMD"})][0] == "c1"
    any_of = store.search("dense-f", query, 40, where={"doc_id": ["d0.pdf", "d2.pdf"]})
    assert sorted(hit.id for hit in any_of) == sorted(ids[i] for i in range(40) if i % 2 == 0)
