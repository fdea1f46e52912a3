"""Qdrant as the vector store: qdrant-client's local mode in a folder, or a Qdrant server.

Same contract as ``ChromaVectorStore``: cosine similarity scores, upserts by chunk id, ``where`` as
payload filters (a value: ``MatchValue``; a list: ``MatchAny``; all keys must match). Qdrant point
ids are integers or UUIDs, so a chunk id becomes the UUID5 of the chunk id (deterministic: the same
chunk always lands on the same point) and the chunk id itself is kept in the payload (``chunk_id``,
next to the metadata and the text as ``document``). A collection is created on the first upsert with
the vectors' dimension and cosine distance. Local mode searches exactly (brute force); a server
uses its HNSW index once a collection outgrows its indexing threshold.

Local mode locks its folder: one process at a time (a second one gets a ``VectorStoreError``; run a
Qdrant server for parallel sweep workers). Server failures (refused, timeout, connection lost, HTTP
errors) are ``VectorStoreError``s, as for the Chroma server.
Left out: API keys and TLS (Qdrant Cloud), gRPC, named vectors, payload indexes for faster filtering.
"""

from __future__ import annotations

import math
import uuid
from pathlib import Path
from typing import Any, Mapping, Sequence
from urllib.parse import urlsplit

import numpy as np

from rag_core.records import ScoredId
from rag_core.retrieve.vector_stores.base import Where
from rag_core.retrieve.vector_stores.errors import INCOMPLETE_HINT, VectorStoreError, server_calls

_UPSERT_BATCH = 256
CHUNK_ID_KEY, TEXT_KEY = "chunk_id", "document"  # payload keys next to the chunk's metadata


def point_id(chunk_id: str) -> str:
    """Qdrant's id for a chunk: a UUID5 of the chunk id, the same in every process."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"rag-chunk:{chunk_id}"))


class QdrantVectorStore:
    def __init__(self, *, path: str | Path | None = None, url: str | None = None, timeout_s: float = 60.0):
        try:
            from qdrant_client import QdrantClient
        except ImportError:
            raise VectorStoreError("the qdrant vector store needs qdrant-client: pip install qdrant-client") from None
        self.timeout_s = timeout_s
        if path is not None:
            self.server, self._hint = f"the Qdrant local store {path}", ""
            try:
                self._client = QdrantClient(path=str(path))
            except RuntimeError as exc:  # "already accessed by another instance of Qdrant client"
                raise VectorStoreError(f"cannot open {self.server}: {exc} (Qdrant's local mode allows one process "
                                       f"at a time)") from None
        else:
            self.server = f"the Qdrant server at {url}"
            self._hint = (f"Is the server running? Start one with: docker run -p {urlsplit(url).port or 6333}:6333 "
                          f"qdrant/qdrant (or use `vector_store` qdrant:PATH, the local mode).")
            self._client = QdrantClient(url=url, timeout=max(1, math.ceil(timeout_s)), check_compatibility=False)
        self._existing: set[str] = set()

    @classmethod
    def from_location(cls, location: Any, store_dir: Path, timeout_s: float) -> "QdrantVectorStore":
        """``qdrant:PATH`` (local mode; a relative PATH is under the store) or ``qdrant+http://HOST:PORT``."""
        if location.kind == "qdrant":
            return cls(path=Path(store_dir) / location.path)
        return cls(url=location.url, timeout_s=timeout_s)

    def _calls(self, operation: str, hint: str | None = None):
        return server_calls(self.server, operation, self.timeout_s, hint or self._hint)

    def _exists(self, collection: str) -> bool:
        if collection not in self._existing and self._client.collection_exists(collection):
            self._existing.add(collection)
        return collection in self._existing

    def count(self, collection: str) -> int:
        with self._calls("counting"):
            return self._client.count(collection, exact=True).count if self._exists(collection) else 0

    def upsert(self, collection: str, ids: Sequence[str], vectors: np.ndarray,
               metadatas: Sequence[Mapping[str, str | int]], texts: Sequence[str]) -> None:
        from qdrant_client import models

        vectors = np.asarray(vectors, dtype=np.float32)
        with self._calls("upserting", INCOMPLETE_HINT):
            if not self._exists(collection):
                self._client.create_collection(collection, vectors_config=models.VectorParams(
                    size=int(vectors.shape[1]), distance=models.Distance.COSINE))
                self._existing.add(collection)
            for start in range(0, len(ids), _UPSERT_BATCH):
                end = start + _UPSERT_BATCH
                points = [models.PointStruct(id=point_id(chunk_id), vector=vector.tolist(),
                                             payload={**metadata, CHUNK_ID_KEY: chunk_id, TEXT_KEY: text})
                          for chunk_id, vector, metadata, text
                          in zip(ids[start:end], vectors[start:end], metadatas[start:end], texts[start:end])]
                self._client.upsert(collection, points, wait=True)

    def missing(self, collection: str, ids: Sequence[str]) -> list[str]:
        stored: set[str] = set()
        with self._calls("listing stored ids"):
            if not self._exists(collection):
                return list(ids)
            for start in range(0, len(ids), _UPSERT_BATCH):
                points = self._client.retrieve(collection, [point_id(id_) for id_ in ids[start:start + _UPSERT_BATCH]],
                                               with_payload=[CHUNK_ID_KEY], with_vectors=False)
                stored.update(point.payload[CHUNK_ID_KEY] for point in points)
        return [id_ for id_ in ids if id_ not in stored]

    def search(self, collection: str, vector: np.ndarray, k: int, where: Where | None = None) -> list[ScoredId]:
        with self._calls("searching"):
            if not self._exists(collection):
                return []
            result = self._client.query_points(
                collection, query=np.asarray(vector, dtype=np.float32).tolist(), limit=k,
                query_filter=qdrant_filter(where), with_payload=[CHUNK_ID_KEY],
            )
        # Qdrant's cosine score is the cosine similarity itself.
        return [ScoredId(point.payload[CHUNK_ID_KEY], float(point.score)) for point in result.points]


def qdrant_filter(where: Where | None):
    """Qdrant's payload filter for ``where``: every key must match one value or any of a list."""
    if not where:
        return None
    from qdrant_client import models

    return models.Filter(must=[
        models.FieldCondition(key=key, match=models.MatchAny(any=list(value)) if isinstance(value, (list, tuple))
                              else models.MatchValue(value=value))
        for key, value in sorted(where.items())
    ])
