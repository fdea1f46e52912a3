"""What the CLI commands do, as plain functions that notebooks and tests can call too.

``ingest_directory`` reads a folder into the document store and builds the indexes for a
configuration; ``open_pipeline`` opens the store's corpus for querying; ``answer_query`` retrieves
and answers. Formatting for the terminal lives here as well, so the CLI stays a thin layer of flags.

An ingest holds the store's ingest lock (``<store>/ingest.lock``) from start to end, and registers
its documents only after their indexes are built: a killed ingest leaves the store as it was
(what it had embedded stays in the cache), and queries, which never wait for the lock, always see a
registered corpus whose indexes exist. A store that is a file is bad input (exit 2); a store that
cannot be written is a ``StoreError`` naming the path and the cause (exit 1).
Left out: removing documents from a store, waiting for an ingest before querying (queries see the
last complete one).
"""

from __future__ import annotations

import errno
import json
import logging
import os
import sqlite3
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rag_core.config import RagConfig
from rag_core.ingest.corpus import Corpus, DocumentStore, exclusive_lock, write_json_atomic
from rag_core.ingest.files import read_documents
from rag_core.retrieve.pipeline import Pipeline, Retrieval, shown_stages
from rag_core.retrieve.retrievers import retriever_choices, uses_embedder
from rag_core.records import Document


class BadInput(Exception):
    """The user's input is wrong; the message says what to do (exit code 2)."""


class EmptyStore(BadInput):
    """No documents have been ingested into the store yet."""


class StoreError(Exception):
    """The store cannot be read or written (permissions, read-only or full disk): exit code 1."""


log = logging.getLogger(__name__)


@contextmanager
def store_access(store_dir: Path):
    """Check that `store_dir` can be a store; turn OS and SQLite failures inside it into a StoreError."""
    if store_dir.exists() and not store_dir.is_dir():
        raise BadInput(f"--store {store_dir} is a file, not a folder: give a folder for the index store")
    try:
        yield
    except (OSError, sqlite3.Error) as exc:
        if not _is_store_failure(exc, store_dir):
            raise
        where = getattr(exc, "filename", None) or store_dir
        cause = getattr(exc, "strerror", None) or str(exc)
        raise StoreError(f"cannot use the store {store_dir}: {where}: {cause}") from None


_STORE_ERRNOS = {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.ENOTDIR}


def _is_store_failure(exc: Exception, store_dir: Path) -> bool:
    """SQLite (the cache) or a file operation under the store, or one no input file explains."""
    if isinstance(exc, sqlite3.Error):
        return True
    filename = os.path.abspath(str(getattr(exc, "filename", None) or "/"))
    return filename.startswith(os.path.abspath(store_dir)) or getattr(exc, "errno", None) in _STORE_ERRNOS


def ingest_directory(input_dir: Path, store_dir: Path, config: RagConfig, progress: bool = False) -> dict[str, Any]:
    """Read `input_dir` into the store and build the indexes for `config`. Returns the ingest report
    (the ``ingest --json`` object). Bad files are skipped and reported; when nothing could be read,
    the store is left untouched."""
    if not input_dir.exists():
        raise FileNotFoundError(f"input folder not found: {input_dir}")
    with store_access(store_dir):
        result = read_documents(input_dir, progress=progress, extract_tables=config.extract_tables,
                                cache_dir=store_dir / "extracted")
        report: dict[str, Any] = {"documents_read": len(result.documents),
                                  "skipped": [asdict(item) for item in result.skipped], "store": str(store_dir)}
        if not result.documents and not (store_dir / "documents").exists():
            return {**report, "documents": 0, "chunks": 0, "added": 0}  # nothing to do: create no store
        store_dir.mkdir(parents=True, exist_ok=True)
        with exclusive_lock(store_dir / "ingest.lock", on_wait=f"waiting for another ingest into {store_dir} ..."):
            return _ingest_locked(result.documents, store_dir, config, progress, report)


def _ingest_locked(read: list[Document], store_dir: Path, config: RagConfig, progress: bool,
                   report: dict[str, Any]) -> dict[str, Any]:
    """Stage the documents read, build their indexes, and only then register them."""
    documents = DocumentStore(store_dir)
    corpus = documents.stage(read)
    report["documents"] = len(corpus)
    if not len(corpus):
        report.update(chunks=0, added=0)
        return report
    previous_ids = _active_chunk_ids(store_dir)
    pipeline = Pipeline(config, corpus, store_dir, progress=progress)
    stats = pipeline.build()
    chunk_ids = [chunk.id for chunk in pipeline.index.chunks]
    documents.commit(read)
    write_json_atomic(store_dir / "active.json", {"chunking_key": pipeline.index.chunking_key})
    report.update(
        chunks=len(chunk_ids),
        added=len(set(chunk_ids) - previous_ids),
        embedded=stats.embedded,
        embed_model_used=pipeline.index.embedder.name_used if uses_embedder(config) else None,
        truncated=stats.truncated,
    )
    return report


def _active_chunk_ids(store_dir: Path) -> set[str]:
    active = store_dir / "active.json"
    if not active.exists():
        return set()
    chunks = store_dir / "chunks" / json.loads(active.read_text())["chunking_key"] / "chunks.jsonl"
    if not chunks.exists():
        return set()
    with chunks.open() as lines:
        return {json.loads(line)["id"] for line in lines}


def store_corpus(store_dir: Path) -> Corpus:
    corpus = DocumentStore(store_dir).corpus()
    if not len(corpus):
        raise EmptyStore(
            f"no documents in the store {store_dir}. Ingest some first: "
            f"rag-pipeline ingest --input ./documents" + (f" --store {store_dir}" if str(store_dir) != ".rag_store" else "")
        )
    return corpus


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
    answer: Any  # rag_core.generate.answer.Answer

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
    from rag_core.generate.answer import answer_question

    if not question.strip():
        raise BadInput("the question is empty: give it in quotes, e.g. rag-pipeline query \"What is ...?\"")
    with store_access(store_dir):
        pipeline = open_pipeline(store_dir, config)
        retrieval = pipeline.retrieve(question, where=where)
    answer = answer_question(question, retrieval.hits, config, use_llm=use_llm)
    return QueryResult(retrieval, answer)


def format_answer(result: QueryResult) -> str:
    answer = result.answer
    lines = [answer.text.rstrip()]
    if answer.warning:
        lines += ["", f"note: {answer.warning}"]
    if answer.sources:
        lines += ["", "Sources:"] + [f"  {source}" for source in answer.sources]
    meta = f"mode: {answer.mode}"
    if answer.model:
        meta += f", model: {answer.model}"
    if answer.usage:
        meta += f", tokens: {answer.usage.get('input_tokens')} in / {answer.usage.get('output_tokens')} out"
    lines += ["", meta]
    return "\n".join(lines)


def format_explain(result: QueryResult, config: RagConfig | None = None) -> str:
    """A table: each final passage's rank and score at every stage it went through."""
    stages = shown_stages(result.retrieval)
    header = f"{'#':>2}  {'passage':<40}" + "".join(f"{stage:>16}" for stage in stages)
    rows = [header, "-" * len(header)]
    for position, hit in enumerate(result.retrieval.hits, start=1):
        label = f"{hit.chunk.doc_id} p{hit.chunk.page_start}" + (
            f"-{hit.chunk.page_end}" if hit.chunk.page_end != hit.chunk.page_start else "")
        cells = []
        for stage in stages:
            score = hit.stages.get(stage)
            ran = stage in result.retrieval.stages
            cells.append(f"{f'#{score.rank} {score.score:.4g}' if score else ('-' if ran else 'off'):>16}")
        rows.append(f"{position:>2}  {label[:40]:<40}" + "".join(cells))
    latency = ", ".join(f"{name} {ms:.1f} ms" for name, ms in result.retrieval.latency_ms.items())
    rows += ["", "(rank and score per stage; '-' = not in that stage's list, 'off' = stage not run)",
             f"latency: {latency}"]
    if result.retrieval.filter:
        rows.append(f"filter: {result.retrieval.filter} (applied before ranking)")
    if result.retrieval.routed:
        rows.append("routed to: " + ", ".join(f"#{rank} {item.id} ({item.score:.3g})"
                                             for rank, item in enumerate(result.retrieval.routed, start=1)))
    elif config is not None and config.route_docs:
        rows.append("routing: not applied, the question names no document (route_when named): every document searched")
    rows += explain_retrieval_settings(result.retrieval, config)
    return "\n".join(rows)


def explain_retrieval_settings(retrieval: Retrieval, config: RagConfig | None) -> list[str]:
    """Lines on fusion, query expansion and parent-child chunks, when they differ from plain retrieval."""
    lines: list[str] = []
    fused = len(retrieval.retrievers) > 1
    weights = [choice.weight for choice in retriever_choices(config)] if config is not None and fused else []
    if config is not None and fused and (config.fusion != "rrf" or any(weight is not None for weight in weights)):
        shown = ",".join(f"{w:g}" for w in weights if w is not None) or "equal"
        norm = "" if config.fusion == "rrf" else f", {config.fusion_norm} normalisation"
        lines.append(f"fusion: {config.fusion}{norm}, weights ({', '.join(retrieval.retrievers)}) {shown}")
    expansion = retrieval.expansion
    if expansion.get("method") == "rm3":
        terms = ", ".join(f"{term} {weight:.3f}" for term, weight in expansion.get("terms", {}).items())
        lines.append(f"query expansion rm3 (BM25 query as weighted terms): {terms or 'no feedback documents'}")
    elif expansion.get("method") == "multi_query":
        lines.append(f"query expansion multi_query ({expansion['model']}, {expansion['input_tokens']} tokens in / "
                     f"{expansion['output_tokens']} out); rephrasings, each retrieved and fused with RRF:")
        lines += [f"  {n}. {text}" for n, text in enumerate(expansion["queries"], start=1)]
    elif expansion.get("method") == "hyde":
        lines.append(f"query expansion hyde ({expansion['model']}, {expansion['input_tokens']} tokens in / "
                     f"{expansion['output_tokens']} out); hypothetical passage embedded with the query:")
        lines.append("  " + " ".join((expansion.get("passage") or "(empty)").split())[:300])
    if retrieval.child_ranking:
        lines.append(f"parent-child: {len(retrieval.child_ranking)} child chunks ranked, collapsed to their parents "
                     "(each at its best child's rank); the passages above are the parents")
    return [""] + lines if lines else []


def known_failure(exc: Exception) -> tuple[str, int] | None:
    """(readable message, exit code) for failures the user can act on; None for bugs (tracebacks)."""
    from rag_core.evaluate.golden import GoldenSetError
    from rag_core.api_keys import redact
    from rag_core.generate.llm import LLMError
    from rag_core.retrieve.models import ModelLoadError
    from rag_core.retrieve.vector_stores.errors import VectorStoreError

    from rag_core.ingest.extraction import ExtractionError
    from rag_core.ingest.metadata import MetadataError
    from rag_core.retrieve.filters import FilterError

    if isinstance(exc, (BadInput, GoldenSetError, FilterError, MetadataError, ExtractionError)):
        return str(exc), 2
    if isinstance(exc, (ModelLoadError, StoreError, VectorStoreError)):
        return str(exc), 1
    if type(exc).__name__ == "ClusterUnavailable":  # rag_core.workbench.ray_executor (imports ray)
        return str(exc), 1
    if isinstance(exc, LLMError):
        return redact(str(exc)), 1
    return None
