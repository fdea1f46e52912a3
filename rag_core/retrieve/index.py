"""The indexes of one (corpus, chunking): its chunks, a dense collection per embedding model and a
BM25 index per BM25 setting, built on first use and reused afterwards.

Store layout (``<store>/``)::

    chunks/<chunking key>/chunks.jsonl           one Chunk per line
    chunks/<chunking key>/dense-<model key>.json manifest of a complete dense collection
                                                 (the key covers the vector store unless it is the
                                                 embedded default, so backends never share one)
    chunks/<chunking key>/bm25-<settings key>/   a saved BM25Index (+ metadata.json: each document's metadata)
    chroma/                                      the ChromaDB store (collection "dense-<key>"), or
                                                 the server / Qdrant folder of setting vector_store
    cache.sqlite                                 embeddings and cross-encoder scores

Only what a retrieval mode needs is built: ``bm25`` never loads an embedding model. ``BuildStats``
counts the work done, so sweeps can show that no chunking was embedded twice.

The corpus is first given the configuration's extraction and metadata (``prepare_corpus``); with
``chunk_context`` the dense and BM25 indexes hold the contextual text (``rag_core.retrieve.context``)
and their keys say so. Both searches take the documents a filter or routing keeps (``doc_ids``).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from rag_core.ingest.extraction import prepare_corpus
from rag_core.ingest.metadata import metadata_fields
from rag_core.retrieve.bm25 import BM25Index
from rag_core.retrieve.context import CONTEXT_VERSION, indexed_texts
from rag_core.retrieve.cache import ScoreCache
from rag_core.ingest.chunking import chunk_corpus
from rag_core.config import RagConfig
from rag_core.ingest.corpus import Corpus, umask_mode, write_json_atomic
from rag_core.retrieve.embed import Embedder
from rag_core.records import Chunk, ScoredId
from rag_core.retrieve.vector_backends import manifest_key, open_vector_store
from rag_core.retrieve.vectorstore import VectorStore


@dataclass
class BuildStats:
    chunks: int = 0
    children: int = 0  # child chunks searched (parent-child retrieval, child_size > 0)
    chunk_seconds: float = 0.0
    chunkings_built: int = 0  # 1 when this call chunked the corpus, 0 when chunks were reused
    embedded: int = 0  # chunks embedded by the model (cache misses)
    embed_cache_hits: int = 0
    embed_seconds: float = 0.0
    truncated: int = 0  # chunks longer than the embedding model reads
    max_seq_length: int = 0
    bm25_seconds: float = 0.0
    upsert_seconds: float = 0.0  # writing the vectors into the vector store
    upserted: int = 0  # chunks written to the vector store (those it lacked)

    def as_metrics(self) -> dict[str, float]:
        metrics = {f"index/{name}": float(value) for name, value in asdict(self).items()}
        if self.chunks:
            metrics["index/truncated_share"] = self.truncated / self.chunks
        if self.embed_seconds > 0 and self.embedded:
            metrics["index/embed_chunks_per_s"] = self.embedded / self.embed_seconds
        return metrics


def _key(*parts: object) -> str:
    return hashlib.sha1(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass
class Index:
    store_dir: Path
    corpus: Corpus
    config: RagConfig
    progress: bool = False
    cache: ScoreCache | None = None
    vector_store: VectorStore | None = None  # default: the config's vector_store (ChromaDB under <store>/chroma)
    embedder: Embedder | None = None  # default: the configured model, through the store's cache
    stats: BuildStats = field(default_factory=BuildStats)

    def __post_init__(self) -> None:
        self.store_dir = Path(self.store_dir)
        self.corpus = prepare_corpus(self.corpus, self.config.extract_tables, self.config.metadata_pattern,
                                     self.store_dir / "extracted")
        if self.cache is None:
            self.cache = ScoreCache(self.store_dir / "cache.sqlite")
        self.chunking_key = _key(self.corpus.fingerprint, self.config.chunking_key())
        self.dir = self.store_dir / "chunks" / self.chunking_key
        self._chunks: list[Chunk] | None = None
        cfg = self.config
        if self.embedder is None:  # loads nothing until it embeds
            self.embedder = Embedder(cfg.embed_model, cfg.embed_batch_size, self.cache, cfg.model_fallback, self.progress,
                                     backend=cfg.embed_backend, export_dir=self.store_dir / "onnx")
        context = () if cfg.chunk_context == "none" else (cfg.chunk_context, CONTEXT_VERSION)
        self.context_key = _key(*context) if context else ""  # "" keeps the keys of stores built before
        self.bm25_key = _key(cfg.bm25_backend, cfg.tokenizer, cfg.bm25_k1, cfg.bm25_b, *context)
        self._collection: str | None = None
        self._bm25: BM25Index | None = None

    # --- chunks ---------------------------------------------------------------------------
    @property
    def chunks(self) -> list[Chunk]:
        if self._chunks is None:
            self._chunks = self._load_or_build_chunks()
            self.stats.chunks = len(self._chunks)
            self._chunk_by_id = {chunk.id: chunk for chunk in self._chunks}
            self._children, self._parent_of = self._child_chunks(self._chunks)
            self._chunk_by_id.update((child.id, child) for child in self._children)
            self.stats.children = len(self._children)
        return self._chunks

    def _child_chunks(self, parents: list[Chunk]) -> tuple[list[Chunk], dict[str, str]]:
        """Children of `parents` (parent-child retrieval, ``child_size`` > 0), and child id -> parent id."""
        if not self.config.child_size:
            return [], {}
        from rag_core.retrieve.parent_child import child_chunks

        return child_chunks(parents, self.corpus.by_id, self.config.child_size)

    @property
    def parent_of(self) -> dict[str, str]:
        """Child id -> parent chunk id (empty without ``child_size``)."""
        self.chunks
        return self._parent_of

    @property
    def search_chunks(self) -> list[Chunk]:
        """What the retrievers index and search: the chunks, or their children with ``child_size``."""
        return self._children if self.chunks and self.config.child_size else self.chunks

    @property
    def chunk_by_id(self) -> dict[str, Chunk]:
        """Chunks (and children, with ``child_size``) by id."""
        self.chunks
        return self._chunk_by_id

    def _load_or_build_chunks(self) -> list[Chunk]:
        path = self.dir / "chunks.jsonl"
        if path.exists():
            with path.open() as lines:
                return [Chunk(**json.loads(line)) for line in lines]
        started = time.perf_counter()
        chunks = chunk_corpus(self.corpus.documents, self.config.chunk_size, self.config.overlap, self.config.per_page)
        self.stats.chunk_seconds = time.perf_counter() - started
        self.stats.chunkings_built = 1
        self.dir.mkdir(parents=True, exist_ok=True)
        temp = path.with_suffix(".tmp")
        temp.write_text("".join(json.dumps(asdict(chunk)) + "\n" for chunk in chunks))
        temp.replace(path)
        return chunks

    # --- dense ----------------------------------------------------------------------------
    def ensure_dense(self) -> None:
        if self._collection is not None:
            return
        chunks = self.search_chunks
        if self.vector_store is None:  # before loading the model: a server that is down fails at once
            self.vector_store = open_vector_store(self.config.vector_store, self.store_dir,
                                                  self.config.vector_store_timeout_s)
        model = self.embedder.cache_name  # the model's name, plus the backend when not plain torch
        store_key = manifest_key(self.config.vector_store)  # None: the embedded default, keyed as before
        manifest_path, collection = self._dense_names(model)
        manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else None
        stored = self.vector_store.count(collection)
        if manifest is None or stored != len(chunks):
            texts = self.indexed_texts()
            # An interrupted write (a server that died mid-ingest) is completed, not written again.
            todo = set(self.vector_store.missing(collection, [chunk.id for chunk in chunks])) if stored else None
            writes = [i for i, chunk in enumerate(chunks) if todo is None or chunk.id in todo]
            if self.progress and writes:
                print(f"Embedding {len(writes)} chunks with {model} ...", file=sys.stderr, flush=True)
            vectors, embed_stats = self.embedder.embed_documents([texts[i] for i in writes])
            started = time.perf_counter()
            if writes:
                self.vector_store.upsert(
                    collection, [chunks[i].id for i in writes], vectors,
                    [{**self._document_metadata(chunks[i].doc_id), "doc_id": chunks[i].doc_id,
                      "page_start": chunks[i].page_start, "page_end": chunks[i].page_end} for i in writes],
                    [texts[i] for i in writes],
                )
            self.stats.upsert_seconds = time.perf_counter() - started
            self.stats.upserted = len(writes)
            # Written only now, after a complete upsert: a failed one leaves no manifest, and a re-run completes it.
            manifest = {"model": model, "collection": collection, "chunks": len(chunks),
                        "vector_store": str(store_key or "chroma"), "upsert_seconds": self.stats.upsert_seconds,
                        "max_seq_length": self.embedder.max_seq_length,
                        "truncated": self.embedder.count_truncated(texts),
                        "embed_seconds": embed_stats.seconds, "embedded": embed_stats.embedded}
            write_json_atomic(manifest_path, manifest)
            self.stats.embedded = embed_stats.embedded
            self.stats.embed_cache_hits = embed_stats.cache_hits
            self.stats.embed_seconds = embed_stats.seconds
        self.stats.truncated = manifest["truncated"]
        self.stats.max_seq_length = manifest["max_seq_length"]
        self._collection = collection

    def _dense_names(self, model: str) -> tuple[Path, str]:
        """(manifest path, collection name) of the dense index of embedding model `model` (its cache name)."""
        context = (self.context_key,) if self.context_key else ()
        store_key = manifest_key(self.config.vector_store)
        store = () if store_key is None else (store_key,)
        return self.dir / f"dense-{_key(model, *context, *store)}.json", f"dense-{_key(self.chunking_key, model, *context)}"

    def dense_built(self, models: Sequence[str]) -> bool:
        """Whether a complete dense index of one of `models` (embedding cache names) is in the store, so
        that nothing would be embedded; loads no model (a search's cost estimate asks before running)."""
        return any(self._dense_names(model)[0].exists() for model in models)

    def dense_search(self, query: str, depth: int, doc_ids: Sequence[str] | None = None,
                     vector=None) -> tuple[list[ScoredId], float]:
        """Hits (only from `doc_ids` when given) and the query-embedding time in ms (0 when `vector`,
        the query's embedding, is given)."""
        self.ensure_dense()
        started = time.perf_counter()
        if vector is None:
            vector = self.embedder.embed_query(query)
        embed_ms = (time.perf_counter() - started) * 1000
        where = {"doc_id": list(doc_ids)} if doc_ids is not None else None
        return self.vector_store.search(self._collection, vector, depth, where=where), embed_ms

    def indexed_texts(self) -> list[str]:
        """What each searched chunk (a child with ``child_size``) is embedded and BM25-indexed with
        (``chunk_context``)."""
        return indexed_texts(self.search_chunks, self.corpus, self.config.chunk_context)

    def _document_metadata(self, doc_id: str) -> dict[str, str]:
        """A document's metadata for the vector store (``doc_id`` and chunk fields are set after)."""
        if not hasattr(self, "_metadata_by_doc"):
            self._metadata_by_doc = {doc.doc_id: metadata_fields(doc) for doc in self.corpus.documents}
        return self._metadata_by_doc[doc_id]

    # --- BM25 -----------------------------------------------------------------------------
    def ensure_bm25(self) -> BM25Index:
        if self._bm25 is None:
            cfg = self.config
            directory = self.dir / f"bm25-{self.bm25_key}"
            if directory.exists():
                self._bm25 = BM25Index.load(directory)
            else:
                started = time.perf_counter()
                index = BM25Index(backend=cfg.bm25_backend, tokenizer=cfg.tokenizer, k1=cfg.bm25_k1, b=cfg.bm25_b)
                index.index([chunk.id for chunk in self.search_chunks], self.indexed_texts())
                temp = Path(tempfile.mkdtemp(dir=self.dir, prefix=".tmp-bm25-"))
                temp.chmod(umask_mode(0o777))  # mkdtemp's 0700 would keep a team out of a shared store
                index.save(temp)
                (temp / "metadata.json").write_text(json.dumps(  # what filters match, next to the index
                    {doc.doc_id: metadata_fields(doc) for doc in self.corpus.documents}))
                try:
                    temp.rename(directory)
                except OSError:  # built by another process meanwhile
                    shutil.rmtree(temp, ignore_errors=True)
                self.stats.bm25_seconds = time.perf_counter() - started
                self._bm25 = index
        return self._bm25

    def bm25_mask(self, doc_ids: Sequence[str] | None) -> np.ndarray | None:
        """Which BM25 entries belong to `doc_ids` (None: no restriction)."""
        if doc_ids is None:
            return None
        allowed, ids, chunk_by_id = set(doc_ids), self.ensure_bm25().ids, self.chunk_by_id
        return np.fromiter((chunk_by_id[item].doc_id in allowed for item in ids), dtype=bool, count=len(ids))

    def bm25_search(self, query: str, depth: int, doc_ids: Sequence[str] | None = None) -> list[ScoredId]:
        """The best `depth` chunks; with `doc_ids`, only chunks of those documents are scored and ranked."""
        return self.ensure_bm25().retrieve(query, depth, allowed=self.bm25_mask(doc_ids))

    def build(self) -> BuildStats:
        """Build everything the configured mode needs (and the re-ranker's model, if any)."""
        self.chunks
        if self.config.mode in ("dense", "hybrid"):
            self.ensure_dense()
        if self.config.mode in ("bm25", "hybrid"):
            self.ensure_bm25()
        return self.stats
