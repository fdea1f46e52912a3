"""The dense retriever: chunk embeddings (``embed_model`` on ``embed_backend``, through the store's
embedding cache) in the configured vector store, searched by cosine similarity with the query's
embedding (``Query.vector``: computed once per query, shared with document routing).

A collection holds one (chunking, model, chunk context): ``dense-<key>``. Next to the chunks, a
manifest ``dense-<key>.json`` (the key also covers the vector store unless it is the embedded
default, so backends never share one) says the collection is complete; it is written only after a
complete upsert, so an interrupted write (a server that died mid-ingest) is completed by the next run,
not written again. A filter reaches the vector store as ``where doc_id in [...]``.

Search is exact by default (``dense_search: auto``: exact up to ``dense_exact_max`` chunks; ``exact``;
``approximate``): every stored vector is scored and the list ordered by (score, chunk id)
(``rag_core.retrieve.vector_stores.exact``), so two builds of one store and two processes return the
same lists, which an approximate HNSW graph does not. Above the threshold the store's approximate
search is used, its ties ordered by id, and the first ``ANN_SAMPLE`` queries are also searched
exactly to measure its recall (``ann_recall``, logged as ``dense/ann_recall``).
Left out: several embedding models fused inside one retriever (register two retrievers instead).
"""

from __future__ import annotations

import sys
from pathlib import Path
import time
from typing import Any, Sequence

from rag_core.errors import DamagedStore
from rag_core.ingest.corpus import write_json_atomic
from rag_core.retrieve.retrievers.base import ChunkSet, Query, Ranked, Resources, Retriever, digest_key
from rag_core.retrieve.retrievers.dense_matrix import read_matrix, write_matrix
from rag_core.retrieve.store_check import check_chroma, manifest_or_none, read_manifest
from rag_core.retrieve.vector_stores import manifest_key
from rag_core.retrieve.vector_stores.exact import ExactSearch, by_score_then_id

ANN_SAMPLE = 20  # queries searched exactly too when search is approximate, to measure its recall


def search_mode(config: Any, chunks: int) -> str:
    """``exact`` or ``approximate``: what ``dense_search`` means for a collection of `chunks` chunks."""
    if config.dense_search == "auto":
        return "exact" if chunks <= config.dense_exact_max else "approximate"
    return config.dense_search


def manifest_name(model: str, context_key: Any, vector_store: str) -> str:
    """``dense-<key>``: the name of the manifest of embedding model `model` (its cache name) under a
    chunk context and a vector store; the manifest's presence says the collection is complete."""
    context = (context_key,) if context_key else ()
    store_key = manifest_key(vector_store)
    return f"dense-{digest_key(model, *context, *(() if store_key is None else (store_key,)))}"


class DenseRetriever(Retriever):
    def __init__(self, name: str, config: Any, resources: Resources) -> None:
        super().__init__(name, config, resources)
        self.collection: str | None = None
        self.vector_store: Any = None
        self.mode = ""  # exact | approximate, once built
        self.exact: ExactSearch | None = None
        self._chunks: ChunkSet | None = None
        self._reference: ExactSearch | None = None  # exact search to measure approximate search against
        self.ann_overlap: list[float] = []  # approximate search: recall@depth of each sampled query

    @property
    def embedder(self) -> Any:
        return self.resources.embedder

    def manifest_name(self, chunks: ChunkSet) -> str:
        """The manifest's name: the model as used (after any fallback, with its backend), the chunk
        context and the vector store (unless it is the embedded default, keyed as before)."""
        return manifest_name(self.embedder.cache_name, chunks.context_key, self.config.vector_store)

    def cache_key(self, chunks: ChunkSet) -> str:
        """The manifest's name and the search mode (exact and approximate lists differ)."""
        return f"{self.manifest_name(chunks)}-{search_mode(self.config, len(chunks.chunks))}"

    def manifest_path(self, chunks: ChunkSet) -> Path:
        """``dense-<key>.json`` in the chunking's folder: the collection's manifest."""
        return chunks.folder / f"{self.manifest_name(chunks)}.json"

    def collection_name(self, chunks: ChunkSet) -> str:
        """``dense-<key>``: the collection of (chunking, the model as used with its backend, chunk context)."""
        context = (chunks.context_key,) if chunks.context_key else ()
        return f"dense-{digest_key(chunks.chunking_key, self.embedder.cache_name, *context)}"

    def build(self, chunks: ChunkSet) -> None:
        if self.collection is not None or self._open_matrix(chunks):
            return
        if self.vector_store is None:  # before loading the model: a server that is down fails at once
            self.vector_store = self.resources.open_vector_store()
        stats, embedder = self.resources.stats, self.embedder
        model = embedder.cache_name  # the model's name, plus the backend when not plain torch
        manifest_path = self.manifest_path(chunks)
        collection = self.collection_name(chunks)
        manifest = manifest_or_none(manifest_path, self.resources.store_dir)  # damaged: rebuilt, with a warning
        stored = self.vector_store.count(collection)
        if manifest is None or stored != len(chunks.chunks):
            texts = chunks.texts
            # An interrupted write (a server that died mid-ingest) is completed, not written again.
            todo = set(self.vector_store.missing(collection, chunks.ids)) if stored else None
            writes = [i for i, chunk in enumerate(chunks.chunks) if todo is None or chunk.id in todo]
            if self.resources.progress and writes:
                print(f"Embedding {len(writes)} chunks with {model} ...", file=sys.stderr, flush=True)
            vectors, embed_stats = embedder.embed_documents([texts[i] for i in writes])
            started = time.perf_counter()
            if writes:
                self.vector_store.upsert(
                    collection, [chunks.chunks[i].id for i in writes], vectors,
                    [{**chunks.doc_metadata[chunks.chunks[i].doc_id], "doc_id": chunks.chunks[i].doc_id,
                      "page_start": chunks.chunks[i].page_start, "page_end": chunks.chunks[i].page_end} for i in writes],
                    [texts[i] for i in writes],
                )
            stats.upsert_seconds = time.perf_counter() - started
            stats.upserted = len(writes)
            store_key = manifest_key(self.config.vector_store)
            # Written only now, after a complete upsert: a failed one leaves no manifest, and a re-run completes it.
            manifest = {"model": model, "collection": collection, "chunks": len(chunks.chunks),
                        "vector_store": str(store_key or "chroma"), "upsert_seconds": stats.upsert_seconds,
                        "max_seq_length": embedder.max_seq_length, "truncated": embedder.count_truncated(texts),
                        "embed_seconds": embed_stats.seconds, "embedded": embed_stats.embedded}
            write_json_atomic(manifest_path, manifest)
            embedder.prepare_queries()
            stats.embedded = embed_stats.embedded
            stats.embed_cache_hits = embed_stats.cache_hits
            stats.embed_seconds = embed_stats.seconds
        stats.truncated = manifest["truncated"]
        stats.max_seq_length = manifest["max_seq_length"]
        self.collection = collection
        self._chunks = chunks
        self.mode = search_mode(self.config, len(chunks.chunks))
        if self.mode == "exact":
            self.exact = self._exact_index(chunks)
            if read_matrix(manifest_path, manifest, chunks) is None:
                write_matrix(manifest_path, manifest, self.exact)

    def _open_matrix(self, chunks: ChunkSet) -> bool:
        """Exact search from the matrix file beside a complete collection's manifest, opening no vector
        store (``dense_matrix``); False when search is approximate or the file is missing or stale."""
        if search_mode(self.config, len(chunks.chunks)) != "exact":
            return False
        manifest_path = self.manifest_path(chunks)
        try:  # a damaged manifest is named and rebuilt by ``build``
            manifest = read_manifest(manifest_path, self.resources.store_dir)
        except (OSError, DamagedStore):
            return False
        if manifest.get("collection") != self.collection_name(chunks):
            return False
        found = read_matrix(manifest_path, manifest, chunks)
        if found is None:
            return False
        check_chroma(self.resources.store_dir)  # the matrix is Chroma's copy: a damaged store is named, not read around
        self.resources.stats.truncated = manifest["truncated"]
        self.resources.stats.max_seq_length = manifest["max_seq_length"]
        self.collection, self._chunks, self.mode, self.exact = manifest["collection"], chunks, "exact", found
        return True

    def _exact_index(self, chunks: ChunkSet) -> ExactSearch:
        """The collection's vectors as stored (a store with ``vectors``), else from the embedding cache."""
        if hasattr(self.vector_store, "vectors"):
            found = ExactSearch.from_store(self.vector_store, self.collection)
            if len(found) == len(chunks.chunks) and set(found.ids) == set(chunks.ids):
                return found
        vectors, _ = self.embedder.embed_documents(chunks.texts)
        return ExactSearch(chunks.ids, vectors, [chunk.doc_id for chunk in chunks.chunks])

    def search(self, query: Query, depth: int, allowed_doc_ids: Sequence[str] | None = None) -> Ranked:
        started = time.perf_counter()
        vector, embed_ms = query.vector()
        if self.exact is not None:
            hits = self.exact.search(vector, depth, allowed_doc_ids)
        else:
            where = {"doc_id": list(allowed_doc_ids)} if allowed_doc_ids is not None else None
            hits = by_score_then_id(self.vector_store.search(self.collection, vector, depth, where=where), depth)
        search_ms = (time.perf_counter() - started) * 1000 - embed_ms
        if self.exact is None and len(self.ann_overlap) < ANN_SAMPLE and hits:
            self._measure_ann(vector, depth, allowed_doc_ids, hits)
        return Ranked(hits, {"embed_query": embed_ms, "vector_search": search_ms})

    def _measure_ann(self, vector: Any, depth: int, allowed_doc_ids: Sequence[str] | None, hits: list) -> None:
        """Recall of the approximate list against the exact one (not part of the query's latency)."""
        if self._reference is None:
            self._reference = self._exact_index(self._chunks)
        exact = {hit.id for hit in self._reference.search(vector, depth, allowed_doc_ids)}
        if exact:
            self.ann_overlap.append(len(exact & {hit.id for hit in hits}) / len(exact))

    @property
    def ann_recall(self) -> float | None:
        """Mean recall of approximate search against exact search over the sampled queries (None: exact search)."""
        return sum(self.ann_overlap) / len(self.ann_overlap) if self.ann_overlap else None

    def metrics(self) -> dict[str, float]:
        """``<name>/ann_recall``: approximate search's recall against exact search (only when approximate)."""
        return {} if self.ann_recall is None else {f"{self.name}/ann_recall": self.ann_recall}

    def models_used(self) -> dict[str, str]:
        return {"embed_model_used": self.embedder.name_used, "embed_backend_used": self.embedder.backend_used}
