"""The indexes of one (corpus, chunking): its chunks, a dense collection per embedding model and a
BM25 index per BM25 setting, built on first use and reused afterwards.

Store layout (``<store>/``)::

    chunks/<chunking key>/chunks.jsonl           one Chunk per line
    chunks/<chunking key>/dense-<model key>.json manifest of a complete dense collection
    chunks/<chunking key>/bm25-<settings key>/   a saved BM25Index
    chroma/                                      the ChromaDB store (collection "dense-<key>")
    cache.sqlite                                 embeddings and cross-encoder scores

Only what a retrieval mode needs is built: ``bm25`` never loads an embedding model. ``BuildStats``
counts the work done, so sweeps can show that no chunking was embedded twice.
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

from rag_core.retrieve.bm25 import BM25Index
from rag_core.retrieve.cache import ScoreCache
from rag_core.ingest.chunking import chunk_corpus
from rag_core.config import RagConfig
from rag_core.ingest.corpus import Corpus, umask_mode, write_json_atomic
from rag_core.retrieve.embed import Embedder
from rag_core.records import Chunk, ScoredId
from rag_core.retrieve.vectorstore import ChromaVectorStore, VectorStore


@dataclass
class BuildStats:
    chunks: int = 0
    chunk_seconds: float = 0.0
    chunkings_built: int = 0  # 1 when this call chunked the corpus, 0 when chunks were reused
    embedded: int = 0  # chunks embedded by the model (cache misses)
    embed_cache_hits: int = 0
    embed_seconds: float = 0.0
    truncated: int = 0  # chunks longer than the embedding model reads
    max_seq_length: int = 0
    bm25_seconds: float = 0.0

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
    vector_store: VectorStore | None = None  # default: ChromaDB embedded under <store>/chroma
    embedder: Embedder | None = None  # default: the configured model, through the store's cache
    stats: BuildStats = field(default_factory=BuildStats)

    def __post_init__(self) -> None:
        self.store_dir = Path(self.store_dir)
        if self.cache is None:
            self.cache = ScoreCache(self.store_dir / "cache.sqlite")
        self.chunking_key = _key(self.corpus.fingerprint, self.config.chunking_key())
        self.dir = self.store_dir / "chunks" / self.chunking_key
        self._chunks: list[Chunk] | None = None
        cfg = self.config
        if self.embedder is None:  # loads nothing until it embeds
            self.embedder = Embedder(cfg.embed_model, cfg.embed_batch_size, self.cache, cfg.model_fallback, self.progress,
                                     backend=cfg.embed_backend, export_dir=self.store_dir / "onnx")
        self.bm25_key = _key(cfg.bm25_backend, cfg.tokenizer, cfg.bm25_k1, cfg.bm25_b)
        self._collection: str | None = None
        self._bm25: BM25Index | None = None

    # --- chunks ---------------------------------------------------------------------------
    @property
    def chunks(self) -> list[Chunk]:
        if self._chunks is None:
            self._chunks = self._load_or_build_chunks()
            self.stats.chunks = len(self._chunks)
            self._chunk_by_id = {chunk.id: chunk for chunk in self._chunks}
        return self._chunks

    @property
    def chunk_by_id(self) -> dict[str, Chunk]:
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
        chunks = self.chunks
        model = self.embedder.cache_name  # the model's name, plus the backend when not plain torch
        manifest_path = self.dir / f"dense-{_key(model)}.json"
        collection = f"dense-{_key(self.chunking_key, model)}"
        if self.vector_store is None:
            self.vector_store = ChromaVectorStore(self.store_dir / "chroma")
        manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else None
        if manifest is None or self.vector_store.count(collection) != len(chunks):
            texts = [chunk.text for chunk in chunks]
            if self.progress:
                print(f"Embedding {len(chunks)} chunks with {model} ...", file=sys.stderr, flush=True)
            vectors, embed_stats = self.embedder.embed_documents(texts)
            self.vector_store.upsert(
                collection, [chunk.id for chunk in chunks], vectors,
                [{"doc_id": c.doc_id, "page_start": c.page_start, "page_end": c.page_end} for c in chunks], texts,
            )
            manifest = {"model": model, "collection": collection, "chunks": len(chunks),
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

    def dense_search(self, query: str, depth: int) -> tuple[list[ScoredId], float]:
        """Hits and the query-embedding time in ms."""
        self.ensure_dense()
        started = time.perf_counter()
        vector = self.embedder.embed_query(query)
        embed_ms = (time.perf_counter() - started) * 1000
        return self.vector_store.search(self._collection, vector, depth), embed_ms

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
                index.index([chunk.id for chunk in self.chunks], [chunk.text for chunk in self.chunks])
                temp = Path(tempfile.mkdtemp(dir=self.dir, prefix=".tmp-bm25-"))
                temp.chmod(umask_mode(0o777))  # mkdtemp's 0700 would keep a team out of a shared store
                index.save(temp)
                try:
                    temp.rename(directory)
                except OSError:  # built by another process meanwhile
                    shutil.rmtree(temp, ignore_errors=True)
                self.stats.bm25_seconds = time.perf_counter() - started
                self._bm25 = index
        return self._bm25

    def bm25_search(self, query: str, depth: int) -> list[ScoredId]:
        return self.ensure_bm25().retrieve(query, depth)

    def build(self) -> BuildStats:
        """Build everything the configured mode needs (and the re-ranker's model, if any)."""
        self.chunks
        if self.config.mode in ("dense", "hybrid"):
            self.ensure_dense()
        if self.config.mode in ("bm25", "hybrid"):
            self.ensure_bm25()
        return self.stats
