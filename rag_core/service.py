"""The front door for ingesting and querying: what ``rag-pipeline ingest`` and ``query`` do, as plain
functions that notebooks, the demo and tests call too.

``ingest_directory`` reads a folder into the document store and builds the indexes for a
configuration; ``open_pipeline`` opens the store's corpus for querying; ``answer_query`` retrieves
and answers (a ``QueryResult``, whose ``as_json`` is what ``query --json`` prints). Their text for a
person is ``rag_core.workbench.reports.text``; flags and exit codes are ``rag_core.cli``.

An ingest holds the store's ingest lock (``<store>/ingest.lock``) from start to end, and registers
its documents only after their indexes are built: a killed ingest leaves the store as it was
(what it had embedded stays in the cache), and queries, which never wait for the lock, always see a
registered corpus whose indexes exist. A store that is a file is bad input (exit 2); a store that
cannot be written is a ``StoreError`` naming the path and the cause (exit 1).
An ingest of a folder reconciles the store with it: a registered document whose file was in that
folder and is gone (deleted, renamed, replaced by a folder) is removed from the registry and so from
every index built afterwards (the indexes are keyed by the corpus), unless ``keep_missing``; a
rename is a removal and an addition. Documents ingested from other folders are left alone, and so
is a file that is still there but cannot be read now (its last good version stays); a file whose id
the store holds for a different file of another folder that still exists (``A/alpha.txt`` stored,
``B/alpha.txt`` read: both ``alpha.txt``) is skipped with the reason, never replacing it. A store
folder that holds a store's file names but no ingest wrote (``store_check.foreign_folder``) is
refused before anything. The report
says how many were removed (``removed``) and which (``removed_documents``). What an interrupted
ingest staged and never registered is deleted by the next one (``cleaned_bytes``).
Left out: waiting for an ingest before querying (queries see the last complete one), evaluation
(``rag_core.workbench.execution.evaluation``).
"""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import sqlite3
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rag_core.config import RagConfig
from rag_core.doc_ids import escape_controls
from rag_core.errors import BadInput, StoreError
from rag_core.generate.answer import Answer, answer_question
from rag_core.generate.sentences import pipeline_scorer
from rag_core.ingest.corpus import Corpus, DocumentStore, exclusive_lock, store_corpus, write_json_atomic
from rag_core.ingest.files import IngestResult, Skipped, read_documents
from rag_core.records import Document
from rag_core.retrieve.embedding import EMBED_BACKENDS
from rag_core.retrieve.pipeline import Pipeline, Retrieval
from rag_core.retrieve.retrievers import uses_embedder
from rag_core.retrieve.store_check import (ONNX_EXPORT_DELETED, STORE_MARKERS, check_store, foreign_folder, is_store,
                                           repair_store)

log = logging.getLogger(__name__)


@contextmanager
def store_access(store_dir: Path):
    """Check that `store_dir` can be a store; turn OS and SQLite failures inside it into a StoreError."""
    if store_dir.exists() and not store_dir.is_dir():
        raise BadInput(f"`store_dir` {store_dir} is a file, not a folder: give a folder for the index store")
    try:
        yield
    except (OSError, sqlite3.Error) as exc:
        if not _is_store_failure(exc, store_dir):
            raise
        where = getattr(exc, "filename", None) or store_dir
        cause = getattr(exc, "strerror", None) or str(exc)
        if getattr(exc, "errno", None) == errno.EFBIG:
            cause += " (over the file-size limit: see ulimit -f)"
        raise StoreError(f"cannot use the store {store_dir}: {where}: {cause}") from None


_STORE_ERRNOS = {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.ENOTDIR, errno.EFBIG}


def _is_store_failure(exc: Exception, store_dir: Path) -> bool:
    """SQLite (the cache) or a file operation under the store, or one no input file explains."""
    if isinstance(exc, sqlite3.Error):
        return True
    filename = os.path.abspath(str(getattr(exc, "filename", None) or "/"))
    return filename.startswith(os.path.abspath(store_dir)) or getattr(exc, "errno", None) in _STORE_ERRNOS


def ingest_directory(input_dir: Path, store_dir: Path, config: RagConfig, progress: bool = False,
                     keep_missing: bool = False) -> dict[str, Any]:
    """Read `input_dir` into the store and build the indexes for `config`. Returns the ingest report
    (the ``ingest --json`` object). Bad files are skipped and reported; when nothing could be read,
    the store is left untouched. Documents whose file in `input_dir` is gone are removed unless
    `keep_missing` (see the module docstring)."""
    if not input_dir.exists():
        raise FileNotFoundError(f"input folder not found: {input_dir}")
    with store_access(store_dir):
        if foreign := foreign_folder(store_dir):
            raise BadInput(f"`store_dir` {store_dir} holds {', '.join(foreign)} but no ingest wrote it (no "
                           f"{' or '.join(STORE_MARKERS)}): give a new or empty folder for the store; nothing was changed")
        started = time.perf_counter()
        result = read_documents(input_dir, progress=progress, extract_tables=config.extract_tables,
                                cache_dir=store_dir / "extracted")
        report: dict[str, Any] = {"documents_read": len(result.documents),
                                  "skipped": [asdict(item) for item in result.skipped], "store": str(store_dir),
                                  "seconds": {"extraction": round(time.perf_counter() - started, 3)}}
        if not result.documents and not (store_dir / "documents").exists():
            return {**report, "documents": 0, "chunks": 0, "added": 0}  # nothing to do: create no store
        store_dir.mkdir(parents=True, exist_ok=True)
        with exclusive_lock(store_dir / "ingest.lock", on_wait=f"waiting for another ingest into {store_dir} ..."):
            documents = DocumentStore(store_dir)
            report.update(repair_store(store_dir))  # damaged documents, Chroma, cache, manifests, ONNX exports
            report["cleaned_bytes"] = documents.clean_staged() + _clean_stale_temporaries(store_dir)
            stored = documents.corpus()
            result = _refuse_clashes(stored, input_dir, result)
            report.update(documents_read=len(result.documents), skipped=[asdict(item) for item in result.skipped])
            gone = [] if keep_missing or not result.documents else _gone(stored, input_dir, result)
            report.update(removed=len(gone), removed_documents=gone)
            return _ingest_locked(result.documents, store_dir, config, progress, report, gone)


STALE_TEMPORARY_S = 600  # a temporary index file this old belongs to no running build


def _clean_stale_temporaries(store_dir: Path) -> int:
    """Delete the temporary files and folders an interrupted index build left under ``chunks/``
    (``.tmp-*``, ``*.tmp``) once older than ``STALE_TEMPORARY_S`` (a query may be building one now);
    return the bytes freed."""
    freed, now = 0, time.time()
    for path in [*store_dir.glob("chunks/*/.tmp-*"), *store_dir.glob("chunks/*/*.tmp")]:
        try:
            if now - path.lstat().st_mtime < STALE_TEMPORARY_S:
                continue
            files = [path] if not path.is_dir() else [item for item in path.rglob("*") if item.is_file()]
            freed += sum(item.lstat().st_size for item in files)
            shutil.rmtree(path) if path.is_dir() else path.unlink()
        except OSError:  # gone meanwhile
            continue
    return freed


def _refuse_clashes(stored: Corpus, input_path: Path, result: IngestResult) -> IngestResult:
    """`result` less the documents whose id the store holds for another file, outside this input
    folder, that still exists (``A/alpha.txt`` stored, ``B/alpha.txt`` read: both are ``alpha.txt``);
    those are skipped with the reason, so the other folder's document is never replaced. No clash: a
    stored file that is gone (its folder was moved or renamed: the new file replaces it), or one with
    the same bytes (a copy of the folder, with a copy of the store: the same document)."""
    folder = os.path.realpath(input_path if input_path.is_dir() else input_path.parent)
    by_id, kept, clashes = stored.by_id, [], []
    for document in result.documents:
        other = by_id.get(document.doc_id)
        if other is not None and other.content_hash != document.content_hash and other.source \
                and other.source != document.source and not Path(other.source).is_relative_to(folder) \
                and os.path.lexists(other.source):
            clashes.append(Skipped(document.doc_id, (
                f"the store already holds {document.doc_id} from another folder ({escape_controls(other.source)}); "
                "not replaced: ingest the two folders into different --store folders, or their common parent "
                "folder (ids then keep the folder)")))
        else:
            kept.append(document)
    return IngestResult(kept, [*result.skipped, *clashes]) if clashes else result


def _gone(stored: Corpus, input_dir: Path, result: Any) -> list[str]:
    """Registered documents whose file was below `input_dir` and is no longer there (neither read nor
    skipped by this ingest); only for a folder (a single file given as input removes nothing)."""
    if not input_dir.is_dir():
        return []
    folder, seen = os.path.realpath(input_dir), {doc.doc_id for doc in result.documents}
    seen |= {item.path for item in result.skipped}
    return sorted(doc.doc_id for doc in stored.documents
                  if doc.doc_id not in seen and doc.source and Path(doc.source).is_relative_to(folder))


def _ingest_locked(read: list[Document], store_dir: Path, config: RagConfig, progress: bool,
                   report: dict[str, Any], removed: list[str]) -> dict[str, Any]:
    """Stage the documents read, build their indexes, and only then register them (and drop the
    `removed` ones)."""
    documents = DocumentStore(store_dir)
    corpus = documents.stage(read, removed)
    report["documents"] = len(corpus)
    if not len(corpus):
        documents.commit(read, removed)
        report.update(chunks=0, added=0)
        return report
    previous_ids = _active_chunk_ids(store_dir)
    pipeline = Pipeline(config, corpus, store_dir, progress=progress)
    stats = pipeline.build()
    _export_again(pipeline, report)
    chunk_ids = [chunk.id for chunk in pipeline.index.chunks]
    documents.commit(read, removed)
    write_json_atomic(store_dir / "active.json", {"chunking_key": pipeline.index.chunking_key})
    report.update(
        chunks=len(chunk_ids),
        added=len(set(chunk_ids) - previous_ids),
        embedded=stats.embedded,
        embed_model_used=pipeline.index.embedder.name_used if uses_embedder(config) else None,
        truncated=stats.truncated,
        # dense search: units longer than the model's window, vectors embedded (windows), text never read (first)
        truncated_share=stats.truncated / stats.chunks if stats.chunks else 0.0,
        dense_vectors=stats.windows, unread_share=stats.unread_share,
    )
    # each stage's wall time in this run (0 where nothing was done: chunks, vectors or indexes reused)
    report["seconds"].update({name: round(value, 3) for name, value in (
        ("chunking", stats.chunk_seconds), ("embedding", stats.embed_seconds),
        ("vector_upserts", stats.upsert_seconds), ("bm25", stats.bm25_seconds))})
    return report


def repair_indexes(store_dir: Path, config: RagConfig, check_only: bool = False,
                   progress: bool = False) -> dict[str, Any]:
    """``rag-pipeline repair``: check every store file; unless `check_only`, repair them
    (``store_check.repair_store``, as every ingest does) and rebuild the indexes of `config` over the
    stored documents (their chunks, BM25 index and dense collection, from the embedding cache),
    without reading any input folder. Returns ``damaged`` (one line per damaged file found) and,
    when repairing, what ``repair_store`` did and the rebuilt index's ``chunks``."""
    if not (store_dir / "documents").is_dir():
        raise BadInput(f"no store at {store_dir} (no documents/ folder): give the folder an ingest wrote")
    if not is_store(store_dir):
        raise BadInput(f"no store at {store_dir} (no {' or '.join(STORE_MARKERS)}, which every ingest leaves): "
                       "give the folder an ingest wrote; nothing was changed")
    with store_access(store_dir):
        found = [str(exc) for exc in check_store(store_dir)]
        report: dict[str, Any] = {"store": str(store_dir), "damaged": found}
        if check_only:
            return report
        with exclusive_lock(store_dir / "ingest.lock", on_wait=f"waiting for an ingest into {store_dir} ..."):
            report.update(repair_store(store_dir, thorough=True))
            report["cleaned_bytes"] = DocumentStore(store_dir).clean_staged() + _clean_stale_temporaries(store_dir)
            pipeline = Pipeline(config, store_corpus(store_dir), store_dir, progress=progress)
            stats = pipeline.build()
            _export_again(pipeline, report)
            write_json_atomic(store_dir / "active.json", {"chunking_key": pipeline.index.chunking_key})
        report.update(documents=len(pipeline.corpus), chunks=len(pipeline.index.chunks), embedded=stats.embedded,
                      remaining=[str(exc) for exc in check_store(store_dir)])
        return report


def _export_again(pipeline: Pipeline, report: dict[str, Any]) -> None:
    """When the repair deleted a damaged ONNX export and the embedding model runs on ONNX, export it
    again now (a build whose chunks were all in the cache would not: the next query would)."""
    config = pipeline.config
    if (any(ONNX_EXPORT_DELETED in line for line in report.get("repaired", ()))
            and uses_embedder(config) and "quantize" in EMBED_BACKENDS.get(config.embed_backend).options):
        pipeline.index.embedder.embed_query("export")


def _active_chunk_ids(store_dir: Path) -> set[str]:
    """The chunk ids of the last ingest's index (for the report's ``added``); empty when its files
    are missing or damaged (this ingest writes them again)."""
    try:
        chunking_key = json.loads((store_dir / "active.json").read_text())["chunking_key"]
        with (store_dir / "chunks" / str(chunking_key) / "chunks.jsonl").open() as lines:
            return {json.loads(line)["id"] for line in lines}
    except (OSError, ValueError, KeyError, TypeError):  # missing, damaged, of the wrong type
        return set()


def open_pipeline(store_dir: Path, config: RagConfig, progress: bool = True) -> Pipeline:
    """A pipeline over the store's registered corpus. Indexes these settings have not built yet are
    built on first use, and announced here: only an ingest builds them silently."""
    pipeline = Pipeline(config, store_corpus(store_dir), store_dir, progress=progress)
    if not (pipeline.index.dir / "chunks.jsonl").exists():
        log.warning("no index of the store's %d document(s) for these chunking settings yet: building it now "
                    "(run ingest with the same settings to build it ahead)", len(pipeline.corpus))
    return pipeline


@dataclass(frozen=True)
class QueryResult:
    retrieval: Retrieval
    answer: Answer
    embedder_startup: dict[str, Any] = field(default_factory=dict)  # Embedder.startup: runtime, import/load/first call ms

    def as_json(self) -> dict[str, Any]:
        answer = self.answer
        return {
            "query": self.retrieval.query,
            "answer": answer.text,
            "mode": answer.mode,
            "model": answer.model,
            "sources": list(answer.sources),
            "usage": answer.usage,
            "warning": answer.warning,
            "passages": [
                {
                    "id": hit.chunk.id, "source": hit.chunk.doc_id, "page_start": hit.chunk.page_start,
                    "page_end": hit.chunk.page_end, "text": hit.chunk.text,
                    "scores": {stage: {"rank": s.rank, "score": s.score} for stage, s in hit.stages.items()},
                }
                for hit in self.retrieval.hits
            ],
            "latency_ms": self.retrieval.latency_ms,
            "filter": self.retrieval.filter or None,
            "routed_documents": [{"source": item.id, "score": item.score} for item in self.retrieval.routed],
            "expansion": self.retrieval.expansion,
        }


def answer_query(question: str, store_dir: Path, config: RagConfig, use_llm: bool = True,
                 where: dict[str, Any] | None = None) -> QueryResult:
    if not question.strip():
        raise BadInput("the question is empty: give it in quotes, e.g. rag-pipeline query \"What is ...?\"")
    with store_access(store_dir):
        pipeline = open_pipeline(store_dir, config)
        retrieval = pipeline.retrieve(question, where=where)
    answer = answer_question(question, retrieval.hits, config, use_llm=use_llm,  # extractive: by the loaded models
                             sentence_scorer=pipeline_scorer(pipeline), documents=pipeline.corpus.by_id)
    return QueryResult(retrieval, answer, pipeline.index.embedder_startup)
