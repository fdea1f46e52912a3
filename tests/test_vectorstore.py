"""The vector store contract, for every backend: upserts by chunk id are idempotent, scores are cosine
similarities (checked with numpy), a ``where`` filter is applied before ranking, ``missing`` names
the ids not stored. Chroma embedded and
Qdrant local run always; Chroma's own server (``chroma run``, started here) is slow-marked."""

from __future__ import annotations

import uuid

import numpy as np
import pytest

from rag_core.retrieve.vector_stores.qdrant import QdrantVectorStore, point_id
from rag_core.retrieve.vector_stores.chroma import ChromaVectorStore
from servers import chroma_server


@pytest.fixture(scope="module")
def chroma_server_url(tmp_path_factory):
    with chroma_server(tmp_path_factory.mktemp("chroma-server")) as server:
        yield server.url


@pytest.fixture(params=["chroma", "qdrant", pytest.param("chroma-server", marks=pytest.mark.slow)])
def open_store(request, tmp_path):
    """A function that opens (or reopens) one store of the backend; one store per test."""
    if request.param == "chroma":
        return lambda: ChromaVectorStore(tmp_path / "chroma")
    if request.param == "qdrant":
        return lambda: QdrantVectorStore(path=tmp_path / "qdrant")
    from rag_core.retrieve.vector_stores.chroma_server import ChromaServerStore

    port = int(request.getfixturevalue("chroma_server_url").rsplit(":", 1)[1])
    return lambda: ChromaServerStore("127.0.0.1", port)


def unit_vectors(count: int, dim: int, seed: int) -> np.ndarray:
    vectors = np.random.default_rng(seed).normal(size=(count, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_upsert_twice_adds_nothing_and_search_returns_cosine(open_store, request):
    collection = f"dense-upsert-{uuid.uuid4().hex[:8]}"  # the Chroma server is shared by the module's tests
    vectors = unit_vectors(50, 16, seed=3)
    ids = [f"c{i}" for i in range(50)]
    metadata = [{"doc_id": "d.pdf", "page_start": 1, "page_end": 1}] * 50
    store = open_store()
    store.upsert(collection, ids, vectors, metadata, [f"text {i}" for i in range(50)])
    del store  # Qdrant's local mode: one client per folder at a time
    store = open_store()  # a new client maps the same chunk ids to the same points
    store.upsert(collection, ids, vectors, metadata, [f"text {i}" for i in range(50)])
    assert store.count(collection) == 50

    query = vectors[7] + 0.1 * vectors[3]
    query /= np.linalg.norm(query)
    expected = vectors @ query
    top = np.argsort(-expected)[:5]
    hits = store.search(collection, query, 5)
    assert [hit.id for hit in hits] == [ids[i] for i in top]
    assert np.allclose([hit.score for hit in hits], expected[top], atol=1e-5)


def test_missing_lists_the_ids_not_stored_in_their_order(open_store):
    collection = f"dense-m-{uuid.uuid4().hex[:8]}"
    store = open_store()
    asked = ["c9", "new-1", "c0", "new-2"]
    assert store.missing(collection, asked) == asked  # no collection yet
    store.upsert(collection, [f"c{i}" for i in range(10)], unit_vectors(10, 4, seed=2), [{"doc_id": "d"}] * 10,
                 ["t"] * 10)
    assert store.missing(collection, asked) == ["new-1", "new-2"]
    assert store.missing(collection, []) == []


def test_collections_are_separate(open_store):
    store = open_store()
    first, second = (f"dense-{name}-{uuid.uuid4().hex[:8]}" for name in ("a", "b"))
    store.upsert(first, ["x"], np.ones((1, 4), np.float32) / 2, [{"doc_id": "a"}], ["a"])
    assert store.count(first) == 1
    assert store.count(second) == 0
    assert store.search(second, np.ones(4, np.float32) / 2, 3) == []


def test_where_filters_before_ranking(open_store):
    """The nearest vectors belong to another company: a filter still returns k hits, all matching."""
    collection = f"dense-f-{uuid.uuid4().hex[:8]}"
    vectors = unit_vectors(40, 8, seed=5)
    ids = [f"c{i}" for i in range(40)]
    metadata = [{"doc_id": f"d{i % 4}.pdf", "company": "3M" if i % 4 == 0 else "AMD", "year": 2018 + i % 2}
                for i in range(40)]
    store = open_store()
    store.upsert(collection, ids, vectors, metadata, ids)
    query = vectors[1]  # an AMD vector
    wanted = [i for i in range(40) if metadata[i]["company"] == "3M" and metadata[i]["year"] == 2018]
    expected = sorted(wanted, key=lambda i: -float(vectors[i] @ query))[:3]
    hits = store.search(collection, query, 3, where={"company": "3M", "year": 2018})
    assert [hit.id for hit in hits] == [ids[i] for i in expected]
    assert [hit.id for hit in store.search(collection, query, 2, where={"company": "AMD"})][0] == "c1"
    any_of = store.search(collection, query, 40, where={"doc_id": ["d0.pdf", "d2.pdf"]})
    assert sorted(hit.id for hit in any_of) == sorted(ids[i] for i in range(40) if i % 2 == 0)
    assert store.search(collection, query, 5, where={"company": "Intel"}) == []


def test_qdrant_points_are_uuids_that_keep_the_chunk_id_and_text(tmp_path):
    store = QdrantVectorStore(path=tmp_path / "qdrant")
    store.upsert("dense-p", ["report.pdf#p3-c7", "other"], unit_vectors(2, 4, seed=1),
                 [{"doc_id": "report.pdf", "page_start": 3}, {"doc_id": "o"}], ["the text", "t"])
    assert str(uuid.UUID(point_id("report.pdf#p3-c7"))) == point_id("report.pdf#p3-c7")  # a valid UUID
    assert point_id("report.pdf#p3-c7") != point_id("other")
    (point,) = store._client.retrieve("dense-p", [point_id("report.pdf#p3-c7")], with_payload=True)
    assert point.payload == {"doc_id": "report.pdf", "page_start": 3, "chunk_id": "report.pdf#p3-c7",
                             "document": "the text"}
