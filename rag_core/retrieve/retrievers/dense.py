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
A unit (chunk, parent-child child) longer than the model's window is stored as overlapping token
windows (``rag_core.retrieve.windows``; ``dense_pooling`` max or mean_top2, ``dense_stride``), each a
vector with its unit's id in its metadata (``unit_id``), and its score is its windows' scores pooled
(``parent_child.pool_to_parents``): exact search scores every window, so pooling is exact too. The
windows of multi-window units are listed in the manifest, so a query process needs no tokenizer.
``dense_pooling: first`` stores one vector per unit (the model truncates): the keys of before windows.
Left out: several embedding models fused inside one retriever (register two retrievers instead).
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from rag_core.errors import DamagedStore
from rag_core.ingest.corpus import write_json_atomic
from rag_core.records import Chunk, ScoredId
from rag_core.retrieve.build_stats import BuildStats
from rag_core.retrieve.parent_child import pool_rows, pool_to_parents
from rag_core.retrieve.retrievers.base import ChunkSet, Query, Ranked, Resources, Retriever, digest_key
from rag_core.retrieve.retrievers.dense_matrix import read_matrix, write_matrix
from rag_core.retrieve.store_check import check_chroma, manifest_or_none, read_manifest
from rag_core.retrieve.vector_stores import manifest_key
from rag_core.retrieve.vector_stores.exact import ExactSearch, by_score_then_id
from rag_core.retrieve.windows import Window, WindowStats, default_stride, unread_warning, windows_of

if TYPE_CHECKING:
    from rag_core.components.config_fields import ConfigFields

ANN_SAMPLE = 20  # queries searched exactly too when search is approximate, to measure its recall
WINDOW_DEPTH = 4  # approximate search with windows: windows asked of the store per unit wanted
_WARNED: set[str] = set()  # collections whose unread-text warning this process logged
log = logging.getLogger(__name__)


def overshoot_note(config: ConfigFields, window: int, lengths: Sequence[int]) -> str | None:
    """A note when units counted in tokens (``chunk_size``, or ``child_size`` when set) are a little over the
    model's window: every unit longer than the window (`lengths`: each unit's tokens) is at most an eighth
    over, so each is embedded as two windows that nearly coincide, twice the work for a few tokens. Units
    of another kind (pages) are far longer, and get no note."""
    over = [length for length in lengths if length > window]
    if config.chunk_unit != "tokens" or not over or max(over) > window * 9 // 8:
        return None
    name = "child_size" if config.child_size else "chunk_size"
    return (f"{len(over)} units are at most {max(over) - window} tokens longer than the embedding model's window "
            f"({window} text tokens) and are embedded as 2 windows each; {name} {window} would embed each once")


def search_mode(config: ConfigFields, chunks: int) -> str:
    """``exact`` or ``approximate``: what ``dense_search`` means for a collection of `chunks` chunks."""
    if config.dense_search == "auto":
        return "exact" if chunks <= config.dense_exact_max else "approximate"
    return config.dense_search


def windows_key(config: ConfigFields) -> tuple:
    """What windows add to a collection's key: () without windows (``dense_pooling: first``, the keys
    of before), else the stride setting (pooling is applied at search time and shares the vectors)."""
    pooling = config.dense_pooling
    return () if pooling == "first" else (("windows", int(config.dense_stride)),)


def manifest_name(model: str, context_key: Any, vector_store: str, windows: tuple = ()) -> str:
    """``dense-<key>``: the name of the manifest of embedding model `model` (its cache name) under a
    chunk context, a vector store and a windowing (``windows_key``); the manifest's presence says the
    collection is complete."""
    context = (context_key,) if context_key else ()
    store_key = manifest_key(vector_store)
    return f"dense-{digest_key(model, *context, *(() if store_key is None else (store_key,)), *windows)}"


class DenseRetriever(Retriever):
    def __init__(self, name: str, config: ConfigFields, resources: Resources) -> None:
        super().__init__(name, config, resources)
        self.collection: str | None = None
        self.vector_store: Any = None
        self.mode = ""  # exact | approximate, once built
        self.exact: ExactSearch | None = None
        self._chunks: ChunkSet | None = None
        self._reference: ExactSearch | None = None  # exact search to measure approximate search against
        self.ann_overlap: list[float] = []  # approximate search: recall@depth of each sampled query
        self.pooling = config.dense_pooling
        self.windowed = self.pooling != "first"
        self.windows: dict[str, Window] = {}  # window id -> window, for units of several windows
        self.unit_of: dict[str, str] = {}  # window id -> unit id, for units of several windows
        self._unit_rows: Any = None  # exact search with windows: each row's unit (an index into _unit_names)
        self._unit_names: Any = None

    @property
    def embedder(self) -> Any:
        return self.resources.embedder

    def manifest_name(self, chunks: ChunkSet) -> str:
        """The manifest's name: the model as used (after any fallback, with its backend), the chunk
        context and the vector store (unless it is the embedded default, keyed as before)."""
        return manifest_name(self.embedder.cache_name, chunks.context_key, self.config.vector_store,
                             windows_key(self.config))

    def cache_key(self, chunks: ChunkSet) -> str:
        """The manifest's name, the search mode (exact and approximate lists differ) and the pooling."""
        pooling = f"-{self.pooling}" if self.windowed else ""
        return f"{self.manifest_name(chunks)}-{search_mode(self.config, len(chunks.chunks))}{pooling}"

    def index_key(self, chunks: ChunkSet) -> str:
        """The collection and its manifest (search mode and pooling are applied at search time)."""
        return f"{self.collection_name(chunks)}/{self.manifest_name(chunks)}"

    def manifest_path(self, chunks: ChunkSet) -> Path:
        """``dense-<key>.json`` in the chunking's folder: the collection's manifest."""
        return chunks.folder / f"{self.manifest_name(chunks)}.json"

    def collection_name(self, chunks: ChunkSet) -> str:
        """``dense-<key>``: the collection of (chunking, the model as used with its backend, chunk context)."""
        context = (chunks.context_key,) if chunks.context_key else ()
        return f"dense-{digest_key(chunks.chunking_key, self.embedder.cache_name, *context, *windows_key(self.config))}"

    def _searched(self, units: ChunkSet, windows: list[Window]) -> ChunkSet:
        """What the collection stores: `units`, or with windows one record per window (a unit that
        fits is its own window, id unchanged), each with its unit's document and pages."""
        self.windows = {window.id: window for window in windows if window.of > 1} if self.windowed else {}
        self.unit_of = {window.id: window.unit_id for window in self.windows.values()}
        if not self.windowed:
            return units
        by_id = {chunk.id: chunk for chunk in units.chunks}
        texts = dict(zip(units.ids, units.texts))
        records: list[Chunk] = []
        window_texts: list[str] = []
        for window in windows:
            unit, text = by_id[window.unit_id], texts[window.unit_id]
            if window.of == 1:  # the whole unit (a manifest lists only the windows of longer units)
                window = replace(window, char_start=0, char_end=len(text))
            # chunk_context's prefix: offsets into the document start after it; table_text's lines follow the text
            prefix = len(text) - len(unit.text) if text.endswith(unit.text) else max(0, text.find(unit.text))
            start = unit.char_start + min(len(unit.text), max(0, window.char_start - prefix))
            end = unit.char_start + min(len(unit.text), max(0, window.char_end - prefix))
            records.append(Chunk(window.id, unit.doc_id, unit.text[start - unit.char_start:end - unit.char_start],
                                 start, max(start, end), unit.page_start, unit.page_end))
            window_texts.append(text[window.char_start:window.char_end])
        return ChunkSet(records, units.folder, units.chunking_key, units.context, lambda: window_texts,
                        units.doc_metadata)

    def _windows_from_manifest(self, units: ChunkSet, manifest: dict[str, Any]) -> list[Window] | None:
        """The windows a complete manifest lists (units not listed fit in one window), or None when the
        manifest is not of these units."""
        if manifest.get("units", manifest.get("chunks")) != len(units.chunks):
            return None
        listed: dict[str, list] = {}
        for window_id, fields in manifest.get("windows", {}).items():
            listed.setdefault(fields[0], []).append(Window(window_id, *fields))
        windows: list[Window] = []
        for unit in units.chunks:
            windows += sorted(listed.get(unit.id, ()), key=lambda window: window.index) or [
                Window(unit.id, unit.id, 0, 1, 0, 0, 0, 0)]
        return windows

    def _report_windows(self, manifest: dict[str, Any], collection: str) -> BuildStats:
        """Build statistics from the manifest, and the unread-text warning (once per collection and process)."""
        found = manifest.get("window_stats")
        if not found:  # a manifest written before windows: its units' lengths were not measured
            return BuildStats(truncated=manifest["truncated"], max_seq_length=manifest["max_seq_length"],
                              windows=manifest["chunks"])
        measured = WindowStats(**found)
        warning = unread_warning(measured, self.pooling, manifest["max_seq_length"])
        if warning and collection not in _WARNED:
            _WARNED.add(collection)
            log.warning("%s", warning.removeprefix("warning: "))
        return BuildStats(truncated=manifest["truncated"], max_seq_length=manifest["max_seq_length"],
                          windows=measured.windows if self.windowed else measured.units,
                          unread_share=0.0 if self.windowed else measured.unread_share_first)

    def build(self, chunks: ChunkSet) -> BuildStats:
        """Opens the complete collection (or its matrix file), or embeds and writes what it lacks;
        returns what it did (vectors embedded and written, seconds, the manifest's window counts)."""
        if self.collection is not None:
            return BuildStats()
        opened = self._open_matrix(chunks)
        if opened is not None:
            return opened
        if self.vector_store is None:  # before loading the model: a server that is down fails at once
            self.vector_store = self.resources.open_vector_store()
        stats, embedder = BuildStats(), self.embedder
        model = embedder.cache_name  # the model's name, plus the backend when not plain torch
        manifest_path = self.manifest_path(chunks)
        collection = self.collection_name(chunks)
        manifest = manifest_or_none(manifest_path, self.resources.store_dir)  # damaged: rebuilt, with a warning
        stored = self.vector_store.count(collection)
        listed = self._windows_from_manifest(chunks, manifest) if manifest is not None else None
        if listed is None or stored != len(listed if self.windowed else chunks.chunks):
            units = chunks
            size = embedder.window_tokens
            offsets = embedder.token_offsets(units.texts, self.windowed)  # first: heads suffice to measure it
            stride = default_stride(size, int(getattr(self.config, "dense_stride", 0)))
            windows, window_stats = windows_of(units.ids, units.texts, offsets, size, stride)
            if self.windowed and (note := overshoot_note(self.config, size, [len(unit_offsets) for unit_offsets in offsets])):
                log.info("%s", note)
            chunks = self._searched(units, windows)
            texts = chunks.texts
            # An interrupted write (a server that died mid-ingest) is completed, not written again.
            todo = set(self.vector_store.missing(collection, chunks.ids)) if stored else None
            writes = [i for i, chunk in enumerate(chunks.chunks) if todo is None or chunk.id in todo]
            if self.resources.progress and writes:
                print(f"Embedding {len(writes)} {'windows of ' if self.windows else ''}chunks with {model} ...",
                      file=sys.stderr, flush=True)
            vectors, embed_stats = embedder.embed_documents([texts[i] for i in writes])
            started = time.perf_counter()
            if writes:
                self.vector_store.upsert(
                    collection, [chunks.chunks[i].id for i in writes], vectors,
                    [{**chunks.doc_metadata[chunks.chunks[i].doc_id], "doc_id": chunks.chunks[i].doc_id,
                      "page_start": chunks.chunks[i].page_start, "page_end": chunks.chunks[i].page_end,
                      **({"unit_id": self.unit_of.get(chunks.chunks[i].id, chunks.chunks[i].id)}
                         if self.windowed else {})}
                     for i in writes],
                    [texts[i] for i in writes],
                )
            stats.upsert_seconds = time.perf_counter() - started
            stats.upserted = len(writes)
            store_key = manifest_key(self.config.vector_store)
            # Written only now, after a complete upsert: a failed one leaves no manifest, and a re-run completes it.
            # "chunks": vectors stored (windows, with windows); "units": what they score;
            # "truncated": units longer than a window
            manifest = {"model": model, "collection": collection, "chunks": len(chunks.chunks),
                        "units": len(units.chunks),
                        "vector_store": str(store_key or "chroma"), "upsert_seconds": stats.upsert_seconds,
                        "max_seq_length": embedder.max_seq_length, "truncated": window_stats.longer,
                        "window_tokens": size, "window_stats": window_stats.as_dict(),
                        "embed_seconds": embed_stats.seconds, "embedded": embed_stats.embedded,
                        **({"windows": {window.id: [window.unit_id, window.index, window.of, window.char_start,
                                                    window.char_end, window.token_start, window.token_end]
                                        for window in self.windows.values()}} if self.windowed else {})}
            write_json_atomic(manifest_path, manifest)
            embedder.prepare_queries()
            stats.embedded = embed_stats.embedded
            stats.embed_cache_hits = embed_stats.cache_hits
            stats.embed_seconds = embed_stats.seconds
        else:
            units, chunks = chunks, self._searched(chunks, listed)
        stats.add(self._report_windows(manifest, collection))
        self.collection = collection
        self._chunks = chunks
        self.mode = search_mode(self.config, len(units.chunks))
        if self.mode == "exact":
            self.exact = self._exact_index(chunks)
            if read_matrix(manifest_path, manifest, chunks) is None:
                write_matrix(manifest_path, manifest, self.exact)
        return stats

    def _open_matrix(self, chunks: ChunkSet) -> BuildStats | None:
        """Exact search from the matrix file beside a complete collection's manifest, opening no vector
        store (``dense_matrix``): the manifest's statistics; None when search is approximate or the file
        is missing or stale."""
        if search_mode(self.config, len(chunks.chunks)) != "exact":
            return None
        manifest_path = self.manifest_path(chunks)
        try:  # a damaged manifest is named and rebuilt by ``build``
            manifest = read_manifest(manifest_path, self.resources.store_dir)
        except (OSError, DamagedStore):
            return None
        if manifest.get("collection") != self.collection_name(chunks):
            return None
        listed = self._windows_from_manifest(chunks, manifest)
        if listed is None:
            return None
        searched = self._searched(chunks, listed)
        found = read_matrix(manifest_path, manifest, searched)
        if found is None:
            return None
        check_chroma(self.resources.store_dir)  # the matrix is Chroma's copy: a damaged store is named, not read around
        stats = self._report_windows(manifest, manifest["collection"])
        self.collection, self._chunks, self.mode, self.exact = manifest["collection"], searched, "exact", found
        return stats

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
        # with windows: every window when exact (pooling is then exact), WINDOW_DEPTH per unit wanted otherwise
        wanted = depth if not self.windows else len(self.exact) if self.exact is not None else depth * WINDOW_DEPTH
        if self.exact is not None and self.windows:
            hits, best = self._pooled_exact(vector, depth, allowed_doc_ids)
            search_ms = (time.perf_counter() - started) * 1000 - embed_ms
            return Ranked(hits, {"embed_query": embed_ms, "vector_search": search_ms}, {"dense_windows": best})
        if self.exact is not None:
            hits = self.exact.search(vector, wanted, allowed_doc_ids)
        else:
            where = {"doc_id": list(allowed_doc_ids)} if allowed_doc_ids is not None else None
            hits = by_score_then_id(self.vector_store.search(self.collection, vector, wanted, where=where), wanted)
        info: dict[str, Any] = {}
        if self.windows:
            windows = hits
            hits = pool_to_parents(windows, self.unit_of, self.pooling, depth)
            info = {"dense_windows": self._matched(windows, {hit.id for hit in hits})}
        search_ms = (time.perf_counter() - started) * 1000 - embed_ms
        if self.exact is None and len(self.ann_overlap) < ANN_SAMPLE and hits:
            self._measure_ann(vector, depth, allowed_doc_ids, hits)
        return Ranked(hits, {"embed_query": embed_ms, "vector_search": search_ms}, info)

    def _pooled_exact(self, vector: Any, depth: int,
                      allowed_doc_ids: Sequence[str] | None) -> tuple[list[ScoredId], dict[str, str]]:
        """Exact search with windows: every window scored, pooled per unit (``pool_rows``), the best
        `depth` units by (score, unit id); and each multi-window unit's best window, for ``--explain``."""
        exact = self.exact
        if self._unit_rows is None:  # each row's unit, as an index into the units sorted by id
            units = np.asarray([self.unit_of.get(str(row_id), str(row_id)) for row_id in exact.ids], dtype=object)
            self._unit_names, self._unit_rows = np.unique(units.astype(str), return_inverse=True)
        scores, rows = exact.scores(vector), np.arange(len(exact))
        if allowed_doc_ids is not None:
            rows = np.flatnonzero(np.isin(exact.doc_ids, list(allowed_doc_ids)))
        units, pooled, best_rows = pool_rows(scores[rows], self._unit_rows[rows], self.pooling)
        top = np.lexsort((units, -pooled))[:depth]  # units are ranks of sorted ids: ties by id
        hits = [ScoredId(str(self._unit_names[units[i]]), float(pooled[i])) for i in top]
        best: dict[str, str] = {}
        for i in top:
            window = self.windows.get(str(exact.ids[rows[best_rows[i]]]))
            if window is not None:
                best[window.unit_id] = (f"window {window.index + 1} of {window.of} (tokens {window.token_start}-"
                                        f"{window.token_end}, score {float(scores[rows[best_rows[i]]]):.4g})")
        return hits, best

    def _matched(self, windows: Sequence[Any], units: set[str]) -> dict[str, str]:
        """Unit id -> which of its windows scored best (for ``--explain``), for the units of several windows."""
        matched: dict[str, str] = {}
        for hit in windows:  # best first: a unit's first window here is its best
            window = self.windows.get(hit.id)
            if window is not None and window.unit_id in units and window.unit_id not in matched:
                matched[window.unit_id] = (f"window {window.index + 1} of {window.of} (tokens {window.token_start}-"
                                           f"{window.token_end}, score {hit.score:.4g})")
        return matched

    def _measure_ann(self, vector: Any, depth: int, allowed_doc_ids: Sequence[str] | None, hits: list) -> None:
        """Recall of the approximate list against the exact one (not part of the query's latency)."""
        if self._reference is None:
            self._reference = self._exact_index(self._chunks)
        found = self._reference.search(vector, len(self._reference) if self.windows else depth, allowed_doc_ids)
        pooled = pool_to_parents(found, self.unit_of, self.pooling, depth) if self.windows else found
        exact = {hit.id for hit in pooled}
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
