"""The vector store contract: named collections of normalised embeddings, searched by cosine similarity.

``VectorStore`` is the small interface the dense retriever uses, so a server (Chroma in client/server
mode, Qdrant) or a plugin's store can replace the embedded default (``rag_core.retrieve.vector_stores``
picks one from the ``vector_store`` setting). Writes are upserts by chunk id, so writing the same
chunks twice adds nothing, and ``missing`` tells which chunks an interrupted write did not store.
``search`` takes an optional ``where``: metadata every hit must match, applied by the store before
ranking; each key holds one value (equality) or a list (any of them), and all keys must match. Hits
are ``ScoredId`` with the cosine similarity as score, best first.

A store class is registered with ``from_location(location, store_dir, timeout_s)``, which opens it
for a parsed ``vector_store`` setting (``VectorStoreLocation``) and the index store's folder.
Left out: deletion of single items.
"""

from __future__ import annotations

from typing import Mapping, Protocol, Sequence

import numpy as np

from rag_core.records import ScoredId

# metadata key -> the value it must have, or the values it may have
Where = Mapping[str, "str | int | Sequence[str | int]"]


class VectorStore(Protocol):
    def count(self, collection: str) -> int: ...

    def upsert(self, collection: str, ids: Sequence[str], vectors: np.ndarray,
               metadatas: Sequence[Mapping[str, str | int]], texts: Sequence[str]) -> None: ...

    def search(self, collection: str, vector: np.ndarray, k: int,
               where: Where | None = None) -> list[ScoredId]: ...

    def missing(self, collection: str, ids: Sequence[str]) -> list[str]: ...  # of `ids`, those not stored, in order
