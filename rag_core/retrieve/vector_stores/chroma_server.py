"""ChromaDB in client/server mode: the collections of ``ChromaVectorStore`` kept by a Chroma server.

The server is ChromaDB's own: ``chroma run --path DIR --host HOST --port PORT`` (``vector_store``
``chroma+http://HOST:PORT``). The server is checked at once (its heartbeat), so a wrong address fails
before any work, and every request has a timeout (chromadb's HTTP client waits forever by default).
Refused connections, timeouts and a server that dies mid-upsert are ``VectorStoreError``s; what was
upserted stays on the server and the next upsert by chunk id completes it.
Left out: TLS, authentication headers, tenants and databases other than Chroma's defaults.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from rag_core.records import ScoredId
from rag_core.retrieve.vector_stores.base import Where
from rag_core.retrieve.vector_stores.chroma import ChromaVectorStore
from rag_core.retrieve.vector_stores.errors import INCOMPLETE_HINT, server_calls


class ChromaServerStore(ChromaVectorStore):
    def __init__(self, host: str, port: int, timeout_s: float = 60.0):
        import chromadb
        import httpx

        self.url = f"http://{host}:{port}"
        self.timeout_s = timeout_s
        self._hint = (f"Is the server running? Start one with: chroma run --path DIR --host {host} --port {port} "
                      f"(or use `vector_store` chroma, the embedded store).")
        with self._calls("connecting"):
            httpx.get(f"{self.url}/api/v2/heartbeat", timeout=timeout_s).raise_for_status()
            client = chromadb.HttpClient(host=host, port=port, settings=chromadb.Settings(anonymized_telemetry=False))
        # chromadb's client has no timeout setting: give its httpx session one (None, the default, waits forever).
        session = getattr(getattr(client, "_server", None), "_session", None)
        if session is not None:
            session.timeout = httpx.Timeout(timeout_s)
        super().__init__(client=client)

    @classmethod
    def from_location(cls, location: Any, store_dir: Path, timeout_s: float) -> "ChromaServerStore":
        return cls(location.host, location.port, timeout_s)

    def _calls(self, operation: str, hint: str | None = None):
        return server_calls(f"the Chroma server at {self.url}", operation, self.timeout_s, hint or self._hint)

    def count(self, collection: str) -> int:
        with self._calls("counting"):
            return super().count(collection)

    def upsert(self, collection: str, ids: Sequence[str], vectors: np.ndarray,
               metadatas: Sequence[Mapping[str, str | int]], texts: Sequence[str]) -> None:
        with self._calls("upserting", INCOMPLETE_HINT):
            super().upsert(collection, ids, vectors, metadatas, texts)

    def missing(self, collection: str, ids: Sequence[str]) -> list[str]:
        with self._calls("listing stored ids"):
            return super().missing(collection, ids)

    def search(self, collection: str, vector: np.ndarray, k: int, where: Where | None = None) -> list[ScoredId]:
        with self._calls("searching"):
            return super().search(collection, vector, k, where)
