"""The indexes of one (corpus, chunking): its chunks, and an index per configured retriever (a dense
collection per embedding model, a BM25 index per BM25 setting, a plugin retriever's own), built on
first use and reused afterwards.

Store layout (``<store>/``)::

    chunks/<chunking key>/chunks.jsonl           one Chunk per line
    chunks/<chunking key>/chunking.json          what the key holds (settings, code versions), to say why
                                                 a chunking is made again
    chunks/<chunking key>/dense-<model key>.json manifest of a complete dense collection
                                                 (the key covers the vector store unless it is the
                                                 embedded default, so backends never share one)
    chunks/<chunking key>/bm25-<settings key>/   a saved BM25Index (+ metadata.json: each document's metadata)
    chunks/<chunking key>/<retriever key>...     what another retriever keeps, under its cache_key
    chroma/                                      the ChromaDB store (collection "dense-<key>"), or
                                                 the server / Qdrant folder of setting vector_store
    cache.sqlite                                 embeddings and cross-encoder scores

Constructing an index does no work: the corpus is given the configuration's extraction and metadata
(``prepare_corpus``), chunked by the configured chunker, and each retriever built, when first asked
for. Only what the configured retrievers need is built: ``bm25`` never loads an embedding model.
``BuildStats`` counts the work done, so sweeps can show that no chunking was embedded twice. With
``chunk_context`` the retrievers index the contextual text (``rag_core.retrieve.context``) and their
keys say so; with ``child_size`` they index children of the chunks (``rag_core.retrieve.parent_child``).

The store's names and the stage column (``rag_core.components.stages``): the names of format 1 spell out
the settings they hold (``STORE_FORMAT_1``: the chunking key, each built-in retriever's key), and stay so,
so that every store built before keeps its names and nothing in it is built again or lost. Every other
setting that applies, built-in or a plugin's, joins them by its stage (``stages.unheld``): one of the
stages up to ``ingest`` joins the chunking key (a new folder), one up to ``index`` joins the key of each
retriever it applies to (``key_context``: ``ChunkSet.context``, which every retriever's key holds). So a
new setting is covered by declaring its stage, and a store never reads an index built with another value:
a config that sets one gets its own names, and builds them.

A chunker's key holds only the common settings it reads (``reads=``), the settings it uses (``uses=``: the
embedding model of ``semantic`` and ``cluster``, as loaded: offline the packaged MiniLM, not the configured
name) and its code version (a plugin's source hash, or a declared version; ``unheld``, since format 1 held
none). A chunking made again because only a code version changed says so (``chunking.json``, the record
beside the chunks, is compared with those of the other chunkings of the corpus).
Left out: migrating names (a format-1 name is the name; there is no second format to read).
"""

from __future__ import annotations

import functools
import json
import logging
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from rag_core.components.faults import calling
from rag_core.components.registry import VERSION_PREFIX
from rag_core.components.stages import unheld
from rag_core.ingest.chunkers import CHUNKERS, chunker_key, make_chunker
from rag_core.ingest.corpus import Corpus
from rag_core.ingest.extraction import prepare_corpus
from rag_core.ingest.metadata import metadata_fields
from rag_core.records import Chunk
from rag_core.retrieve.build_stats import BuildStats
from rag_core.retrieve.cache import ScoreCache
from rag_core.retrieve.context import CONTEXT_VERSION, indexed_texts
from rag_core.retrieve.embedding.embedder import Embedder
from rag_core.retrieve.models import embedder_source
from rag_core.retrieve.parent_child import child_chunks
from rag_core.retrieve.retrievers import (RETRIEVERS, ChunkSet, Resources, Retriever, context_key, digest_key,
                                          retriever_choices)
from rag_core.retrieve.retrievers.dense import manifest_name, windows_key
from rag_core.retrieve.vector_stores import open_vector_store
from rag_core.writes import write_json_atomic

if TYPE_CHECKING:
    from rag_core.components.config_fields import ConfigFields

log = logging.getLogger(__name__)

# The settings the store's names of format 1 hold, each where its code spells it out: the chunking
# key (chunker_key, child_size; extract_tables, table_text and metadata_pattern through the corpus
# fingerprint), the chunk context (Index.context), the built-in retrievers' keys (mode: which ones),
# the model as loaded (embed_model, embed_backend, model_fallback), and plugins (what is loaded changes
# nothing until chosen). Frozen: a setting declared since joins the names by its stage instead.
STORE_FORMAT_1 = frozenset({
    "plugins", "chunk_size", "overlap", "chunk_unit", "per_page", "chunker", "child_size", "extract_tables",
    "table_text", "chunk_context", "metadata_pattern", "mode", "bm25_backend", "tokenizer", "bm25_k1", "bm25_b",
    "bm25_numbers", "dense_pooling", "dense_stride", "embed_model", "embed_backend", "model_fallback",
    "vector_store"})


def chunking_settings(config: ConfigFields, model_used: Callable[[], str] | None = None) -> dict[str, Any]:
    """What decides the chunks a chunking key covers: the settings the chunker reads (``chunker_key``),
    ``child_size`` when on (with the unit it counts in), the settings the chunker uses that format 1's names
    held elsewhere (the embedding model as loaded: `model_used()`, else as configured), and the settings and
    code versions of the stages up to ``ingest`` that format 1 does not hold (a plugin chunker's own); all
    but the first only when there are any, so the keys of existing stores stay as they were."""
    key = chunker_key(config)
    if config.child_size:
        key["child_size"] = config.child_size
        if config.chunk_unit == "tokens" and "tokenizer" not in key:  # children counted in tokens, whatever cuts
            key.update(chunk_unit="tokens", tokenizer=config.embed_model)
    uses = CHUNKERS.get(config.chunker).options.get("uses", ()) if config.chunker in CHUNKERS else ()
    for name in uses:
        if name in STORE_FORMAT_1 and name not in key:
            key[name] = model_used() if name == "embed_model" and model_used is not None else getattr(config, name)
    key.update(unheld(config, "ingest", STORE_FORMAT_1))
    return key


def rechunked_because(store_dir: Path, record: dict[str, Any]) -> str | None:
    """Why a chunking with this `record` (``chunking.json``) is made although the store holds one of the
    same corpus and settings: the code versions that differ (``chunker 'mine': code version a -> b``); None
    when no other chunking of the store differs from it only in code versions."""
    plain = lambda settings: {k: v for k, v in settings.items() if not k.startswith(VERSION_PREFIX)}  # noqa: E731
    for path in sorted(store_dir.glob("chunks/*/chunking.json")):
        try:
            other = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(other, dict) or other.get("corpus") != record["corpus"] or \
                plain(other.get("settings", {})) != plain(record["settings"]) or other["settings"] == record["settings"]:
            continue
        names = sorted({k for k in (*other["settings"], *record["settings"]) if k.startswith(VERSION_PREFIX)})
        changes = [f"{_component_named(name)}: code version {other['settings'].get(name, 'none')} -> "
                   f"{record['settings'].get(name, 'none')}"
                   for name in names if other["settings"].get(name) != record["settings"].get(name)]
        return f"{'; '.join(changes)} (the earlier code's chunks stay in chunks/{path.parent.name})"
    return None


def _component_named(version_name: str) -> str:
    kind, _, name = version_name[len(VERSION_PREFIX):].partition(" ")
    return f"{kind} {name!r}"


class Index:
    def __init__(self, store_dir: str | Path, corpus: Corpus, config: ConfigFields, progress: bool = False,
                 cache: ScoreCache | None = None, vector_store: Any = None, embedder: Embedder | None = None) -> None:
        """Records what to index; reads, chunks and builds nothing until asked. `cache`, `vector_store`
        and `embedder` replace the store's own (tests pass small real ones)."""
        self.store_dir = Path(store_dir)
        self.source_corpus = corpus
        self.config = config
        self.progress = progress
        self.stats = BuildStats()
        self._cache = cache
        self._vector_store = vector_store
        self._embedder = embedder
        self._chunks: list[Chunk] | None = None
        self._retrievers: dict[str, Retriever] = {}
        self._retriever_chunks: dict[str, ChunkSet] = {}
        # part of every retriever's key: what prefixes the indexed text (none: (), the keys of before)
        self.context = () if config.chunk_context == "none" else (config.chunk_context, CONTEXT_VERSION)

    # --- shared resources, made on first use ----------------------------------------------------
    @functools.cached_property
    def corpus(self) -> Corpus:
        """The corpus with this configuration's extraction (tables) and metadata."""
        return prepare_corpus(self.source_corpus, self.config.extract_tables, self.config.metadata_pattern,
                              self.store_dir / "extracted", self.config.table_text)

    @functools.cached_property
    def chunking_settings(self) -> dict[str, Any]:
        """What the chunking key holds (``chunking_settings``, the model as loaded)."""
        return chunking_settings(self.config, lambda: self.embed_model_used)

    @functools.cached_property
    def chunking_key(self) -> str:
        return digest_key(self.corpus.fingerprint, self.chunking_settings)

    @property
    def embed_model_used(self) -> str:
        """The embedding model as it loads (the offline fallback's name when it falls back): known without
        loading it where that is certain (``models.embedder_source``), else the model's (loaded now)."""
        if self._embedder is None:
            source = embedder_source(self.config.embed_model, self.config.model_fallback)
            if source is not None:
                return source.used
        return self.embedder.name_used

    @property
    def dir(self) -> Path:
        return self.store_dir / "chunks" / self.chunking_key

    @property
    def cache(self) -> ScoreCache:
        if self._cache is None:
            self._cache = ScoreCache(self.store_dir / "cache.sqlite")
        return self._cache

    @property
    def embedder(self) -> Embedder:
        """The configured embedding model (loads nothing until it embeds)."""
        if self._embedder is None:
            cfg = self.config
            self._embedder = Embedder(cfg.embed_model, cfg.embed_batch_size, self.cache, cfg.model_fallback,
                                      self.progress, backend=cfg.embed_backend, export_dir=self.store_dir / "onnx")
        return self._embedder

    @property
    def _count_tokens(self) -> Any:
        """``chunk_unit: tokens``: the embedding model's token counter (else None: sizes count words)."""
        return self.embedder.count_tokens if self.config.chunk_unit == "tokens" else None

    @property
    def embedder_startup(self) -> dict[str, Any]:
        """The embedding model's start-up cost in this process (``Embedder.startup``); {} when not used."""
        return dict(self._embedder.startup) if self._embedder is not None else {}

    @property
    def vector_store(self) -> Any:
        """The configured vector store (opened on first use)."""
        if self._vector_store is None:
            self._vector_store = open_vector_store(self.config.vector_store, self.store_dir,
                                                   self.config.vector_store_timeout_s)
        return self._vector_store

    @functools.cached_property
    def resources(self) -> Resources:
        return Resources(self.store_dir, self.cache, self.embedder, lambda: self.vector_store, self.progress)

    # --- chunks ---------------------------------------------------------------------------
    @property
    def chunks(self) -> list[Chunk]:
        if self._chunks is None:
            self._chunks = self._load_or_build_chunks()
            self.stats.chunks = len(self._chunks)
            self._chunk_by_id = {chunk.id: chunk for chunk in self._chunks}
            self._children, self._parent_of = (child_chunks(self._chunks, self.corpus.by_id, self.config.child_size,
                                                            self._count_tokens)
                                               if self.config.child_size else ([], {}))
            self._chunk_by_id.update((child.id, child) for child in self._children)
            self.stats.children = len(self._children)
        return self._chunks

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
            try:
                with path.open(encoding="utf-8") as lines:
                    chunks = [Chunk(**json.loads(line)) for line in lines]
                missing = {doc.doc_id for doc in self.corpus.documents if doc.text.strip()} - {c.doc_id for c in chunks}
                if not missing:
                    return chunks
                raise ValueError("empty" if not chunks else f"no chunk of {len(missing)} document(s)")
            except (ValueError, TypeError, RecursionError) as exc:  # truncated, empty, wrong JSON type: derived, rebuilt
                log.warning("the store's file %s was damaged (%s); rebuilding it from the documents", path,
                            str(exc)[:80] or type(exc).__name__)
        record = {"corpus": self.corpus.fingerprint, "settings": json.loads(json.dumps(self.chunking_settings,
                                                                                     default=str))}
        why = rechunked_because(self.store_dir, record)
        if why:
            log.warning("[rag] chunking again: %s", why)
        started = time.perf_counter()
        chunks = make_chunker(self.config, self._count_tokens, self.embedder).chunk_corpus(self.corpus.documents)
        self.stats.chunk_seconds = time.perf_counter() - started
        self.stats.chunkings_built = 1
        self.dir.mkdir(parents=True, exist_ok=True)
        temp = path.with_suffix(".tmp")
        temp.write_text("".join(json.dumps(asdict(chunk)) + "\n" for chunk in chunks))
        temp.replace(path)
        write_json_atomic(self.dir / "chunking.json", record)
        return chunks

    def dense_built(self, models: Sequence[str]) -> bool:
        """Whether a complete dense index of one of `models` (embedding cache names) is in the store, so
        that nothing would be embedded; loads no model (a search's cost estimate asks before running)."""
        context = context_key(self.key_context("dense"))
        return any((self.dir / f"{manifest_name(model, context, self.config.vector_store, windows_key(self.config))}"
                                f".json").exists()
                   for model in models)

    def indexed_texts(self) -> list[str]:
        """What each searched chunk (a child with ``child_size``) is indexed with (``chunk_context``)."""
        return indexed_texts(self.search_chunks, self.corpus, self.config.chunk_context)

    @functools.cached_property
    def chunk_set(self) -> ChunkSet:
        """What the retrievers index."""
        return ChunkSet(self.search_chunks, self.dir, self.chunking_key, self.context, self.indexed_texts,
                        {doc.doc_id: metadata_fields(doc) for doc in self.corpus.documents}, self.corpus)

    def key_context(self, name: str) -> tuple:
        """What the key of retriever `name` holds besides its own settings (``ChunkSet.context``): the chunk
        context, then the settings up to ``index`` that apply to it and that neither format 1 nor its own
        key holds (the default ``cache_key`` holds its settings and those it uses; one written by the
        retriever is given them here too); () for every config of format 1."""
        held = STORE_FORMAT_1
        if RETRIEVERS.load(name).cache_key is Retriever.cache_key:
            held = held | {setting for setting, _ in RETRIEVERS.get(name).key(self.config)[1:]}
        return (*self.context, *unheld(self.config, "index", held, {"retriever": (name,)}))

    def retriever_chunks(self, name: str) -> ChunkSet:
        """What retriever `name` indexes: ``chunk_set``, with its ``key_context`` (made once)."""
        if name not in self._retriever_chunks:
            context = self.key_context(name)
            self._retriever_chunks[name] = self.chunk_set if context == self.context else replace(self.chunk_set,
                                                                                                  context=context)
        return self._retriever_chunks[name]

    # --- retrievers -----------------------------------------------------------------------
    def retriever(self, name: str) -> Retriever:
        """The retriever registered as `name`, built over this index's chunks (once)."""
        if name not in self._retrievers:
            retriever = RETRIEVERS.load(name)(name, self.config, self.resources)
            with calling(RETRIEVERS.get(name), "build"):
                built = retriever.build(self.retriever_chunks(name))
            if isinstance(built, BuildStats):  # what it did (None: nothing to report)
                self.stats.add(built)
            self._retrievers[name] = retriever
        return self._retrievers[name]

    def build(self, retrievers: Sequence[str] | None = None) -> BuildStats:
        """Chunk, and build each of `retrievers` (names; default: those of the config's ``mode``)."""
        self.chunks
        for name in retrievers if retrievers is not None else [choice.name for choice in retriever_choices(self.config)]:
            self.retriever(name)
        return self.stats
