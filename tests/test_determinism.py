"""Reproducible dense retrieval (issue 17 item 3, issue 20 item 5): the same vectors must give the same hits,
in the same order, in every build of a store and in every process; equal scores are ordered by chunk id.

These fail today (measured on FinanceBench filings stores: 9-16 of 200 top-20 lists differ between two builds,
up to 3 between processes; HNSW recall@20 0.993-0.997). ChromaDB's HNSW graph differs from
one build to the next (even from the same vectors in the same order, one thread), and a store keeps the last
records (below Chroma's ``sync_threshold`` of 1,000, or every record of a smaller store) only in its log,
which each new process inserts into its in-memory graph again, differently. Ties come back in insertion
order. They are marked ``xfail(strict=True)``: they turn into failures (XPASS) once dense search used for
evaluation is exact (or deterministic) with ties broken by id, and the marks must then go.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from rag_core.retrieve.vector_stores.chroma import ChromaVectorStore

COLLECTION = "dense-determinism"
VECTORS, QUERIES, DEPTH = 900, 30, 20  # 900 < Chroma's sync_threshold: the whole graph is rebuilt from the log


def _unit(rng: np.random.Generator, rows: int) -> np.ndarray:
    matrix = rng.standard_normal((rows, 384)).astype(np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def vectors() -> tuple[list[str], np.ndarray, np.ndarray]:
    rng = np.random.default_rng(17)
    return [f"chunk-{i:05d}" for i in range(VECTORS)], _unit(rng, VECTORS), _unit(rng, QUERIES)


def _store(folder, ids: list[str], matrix: np.ndarray) -> ChromaVectorStore:
    store = ChromaVectorStore(folder)
    store.upsert(COLLECTION, ids, matrix, [{"doc_id": "d.txt"}] * len(ids), [""] * len(ids))
    return store


def _exact(ids: list[str], matrix: np.ndarray, query: np.ndarray) -> list[str]:
    scores = matrix @ query
    return [ids[i] for i in sorted(range(len(ids)), key=lambda i: (-scores[i], ids[i]))[:DEPTH]]


@pytest.mark.slow  # a store of 900 vectors (and 3 processes): ~25 s of CPU
@pytest.mark.xfail(strict=True, raises=AssertionError, reason="Chroma's HNSW graph is built anew, differently, in each build; "
                                       "dense search for evaluation is not exact")
def test_two_builds_of_the_same_vectors_give_the_same_hits(vectors, tmp_path):
    ids, matrix, queries = vectors
    first, second = _store(tmp_path / "a", ids, matrix), _store(tmp_path / "b", ids, matrix)
    differing = [q for q, query in enumerate(queries)
                 if [hit.id for hit in first.search(COLLECTION, query, DEPTH)]
                 != [hit.id for hit in second.search(COLLECTION, query, DEPTH)]]
    assert differing == []


@pytest.mark.slow  # a store of 900 vectors (and 3 processes): ~25 s of CPU
@pytest.mark.xfail(strict=True, raises=AssertionError, reason="records below Chroma's sync_threshold live in its log and each process "
                                       "inserts them into its in-memory HNSW graph again, differently")
def test_the_same_store_gives_the_same_hits_in_every_process(vectors, tmp_path):
    ids, matrix, queries = vectors
    _store(tmp_path / "store", ids, matrix)
    np.save(tmp_path / "queries.npy", queries)
    code = ("import json, sys, numpy as np; from rag_core.retrieve.vector_stores.chroma import ChromaVectorStore; "
            "store = ChromaVectorStore(sys.argv[1]); "
            f"print(json.dumps([[hit.id for hit in store.search({COLLECTION!r}, q, {DEPTH})] for q in np.load(sys.argv[2])]))")
    runs = [json.loads(subprocess.run([sys.executable, "-c", code, str(tmp_path / "store"), str(tmp_path / "queries.npy")],
                                      capture_output=True, text=True, check=True).stdout) for _ in range(3)]
    assert runs[1] == runs[0] and runs[2] == runs[0]


@pytest.mark.slow  # a store of 900 vectors (and 3 processes): ~25 s of CPU
@pytest.mark.xfail(strict=True, raises=AssertionError, reason="approximate search: HNSW misses some of the exact top 20 (recall 0.69 at "
                                       "5,000 random vectors, 0.997 on 2,085 filings chunks)")
def test_dense_hits_are_the_exact_nearest_neighbours(vectors, tmp_path):
    ids, matrix, queries = vectors
    store = _store(tmp_path / "store", ids, matrix)
    assert [[hit.id for hit in store.search(COLLECTION, query, DEPTH)] for query in queries] == \
        [_exact(ids, matrix, query) for query in queries]


@pytest.mark.xfail(strict=True, raises=AssertionError, reason="equal scores come back in insertion order, not by chunk id, so the order "
                                       "of ingest decides ties")
def test_equal_scores_are_ordered_by_chunk_id(tmp_path):
    rng = np.random.default_rng(3)
    matrix = _unit(rng, 10)
    twin = matrix[0]
    ids = [f"other-{i}" for i in range(1, 10)] + ["twin-c", "twin-a", "twin-b"]
    store = _store(tmp_path / "store", ids, np.vstack([matrix[1:], twin, twin, twin]))
    hits = store.search(COLLECTION, twin, 3)
    assert len({hit.score for hit in hits}) == 1  # an exact tie
    assert [hit.id for hit in hits] == ["twin-a", "twin-b", "twin-c"]
