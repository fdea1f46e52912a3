"""ChromaDB embedded on disk, the default vector store (``vector_store: chroma``): a ``PersistentClient``
under ``<store>/chroma``, one collection per (corpus, chunking, model), cosine distance.

Same contract as every store (``rag_core.retrieve.vector_stores.base.VectorStore``); servers that
fail raise ``rag_core.retrieve.vector_stores.errors.VectorStoreError`` (``chroma_server``).
Upserts (measured with benchmarks/vector_stores.py, 5,000 vectors of 384 dimensions): the chunk texts
are not sent to Chroma (the chunk store holds them and nothing reads them back from Chroma; Chroma
indexes every document for full-text search, a third of the upsert's CPU time), and vectors go in
batches of up to ``_WRITE_BATCH`` (Chroma's own limit permitting). Most of what remains is HNSW
construction (each batch's cost grows with the collection; random vectors, the benchmark's default,
are HNSW's worst case). Collections written before keep their documents.
Left out: deletion of single items.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from rag_core.records import ScoredId
from rag_core.retrieve.store_check import check_chroma
from rag_core.retrieve.vector_stores.base import Where
from rag_core.retrieve.vector_stores.exact import TIE_MARGIN, by_score_then_id

_UPSERT_BATCH = 1000  # ids per lookup in missing()
_WRITE_BATCH = 5000  # vectors per upsert call, at most the client's get_max_batch_size()


class ChromaVectorStore:
    """ChromaDB embedded on disk, one collection per (corpus, chunking, model), cosine distance.
    `client`: an already connected chromadb client (a server's, see ``chroma_server``) used instead."""

    def __init__(self, path: str | Path | None = None, client: Any = None):
        if client is None:
            import chromadb

            client = chromadb.PersistentClient(path=str(path), settings=chromadb.Settings(anonymized_telemetry=False))
        self.path = Path(path) if path is not None else None
        self._client = client
        self._collections: dict = {}

    @classmethod
    def from_location(cls, location: Any, store_dir: Path, timeout_s: float) -> "ChromaVectorStore":
        check_chroma(Path(store_dir))  # before Chroma writes its tables into an empty or foreign file
        return cls(Path(store_dir) / "chroma")

    def _collection(self, name: str):
        if name not in self._collections:
            self._collections[name] = self._client.get_or_create_collection(
                name, configuration={"hnsw": {"space": "cosine"}}, embedding_function=None
            )
        return self._collections[name]

    def count(self, collection: str) -> int:
        return self._collection(collection).count()

    def upsert(self, collection, ids, vectors, metadatas, texts) -> None:
        """Vectors and metadata by chunk id; `texts` are not stored (see the module's docstring)."""
        target = self._collection(collection)
        batch = min(_WRITE_BATCH, self._client.get_max_batch_size())
        for start in range(0, len(ids), batch):
            end = start + batch
            target.upsert(
                ids=list(ids[start:end]),
                embeddings=np.asarray(vectors[start:end], dtype=np.float32),
                metadatas=[dict(m) for m in metadatas[start:end]],
            )

    def missing(self, collection: str, ids: Sequence[str]) -> list[str]:
        target = self._collection(collection)
        stored: set[str] = set()
        for start in range(0, len(ids), _UPSERT_BATCH):
            stored.update(target.get(ids=list(ids[start:start + _UPSERT_BATCH]), include=[])["ids"])
        return [id_ for id_ in ids if id_ not in stored]

    def search(self, collection: str, vector: np.ndarray, k: int,
               where: Where | None = None) -> list[ScoredId]:
        """Approximate (HNSW) search; a few more than `k` are asked for, so equal scores at the cut are
        ordered by id, not by insertion order."""
        target = self._collection(collection)
        result = target.query(
            query_embeddings=np.asarray(vector, dtype=np.float32)[None, :],
            n_results=min(k + TIE_MARGIN, max(1, target.count())),
            where=chroma_where(where),
            include=["distances"],
        )
        # Chroma's cosine distance is 1 - cosine similarity.
        return by_score_then_id((ScoredId(id_, 1.0 - float(distance))
                                 for id_, distance in zip(result["ids"][0], result["distances"][0])), k)

    def vectors(self, collection: str) -> tuple[list[str], np.ndarray, list[str | None]]:
        """Every stored (id, vector, doc_id) of `collection`, as written (exact search reads these)."""
        found = self._collection(collection).get(include=["embeddings", "metadatas"])
        matrix = np.asarray(found["embeddings"], dtype=np.float32) if len(found["ids"]) else np.zeros((0, 0), np.float32)
        return list(found["ids"]), matrix, [(metadata or {}).get("doc_id") for metadata in found["metadatas"]]


def chroma_where(where: Where | None) -> dict | None:
    """Chroma's filter for ``where`` (one clause stands alone, several need $and)."""
    if not where:
        return None
    clauses = [{key: {"$in": list(value)} if isinstance(value, (list, tuple)) else value}
               for key, value in sorted(where.items())]
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}
