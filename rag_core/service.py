"""What the CLI commands do, as plain functions that notebooks and tests can call too.

``ingest_directory`` reads a folder into the document store and builds the indexes for a
configuration; ``open_pipeline`` opens the store's corpus for querying; ``answer_query`` retrieves
and answers. Formatting for the terminal lives here as well, so the CLI stays a thin layer of flags.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rag_core.config import RagConfig
from rag_core.ingest.corpus import Corpus, DocumentStore, write_json_atomic
from rag_core.ingest.files import read_documents
from rag_core.retrieve.pipeline import STAGES, Pipeline, Retrieval


class BadInput(Exception):
    """The user's input is wrong; the message says what to do (exit code 2)."""


class EmptyStore(BadInput):
    """No documents have been ingested into the store yet."""


def ingest_directory(input_dir: Path, store_dir: Path, config: RagConfig, progress: bool = False) -> dict[str, Any]:
    """Read `input_dir` into the store and build the indexes for `config`. Returns the ingest report
    (the ``ingest --json`` object). Bad files are skipped and reported; when nothing could be read,
    the store is left untouched."""
    if not input_dir.exists():
        raise FileNotFoundError(f"input folder not found: {input_dir}")
    result = read_documents(input_dir, progress=progress)
    skipped = [asdict(item) for item in result.skipped]
    report: dict[str, Any] = {"documents_read": len(result.documents), "skipped": skipped, "store": str(store_dir)}
    documents = DocumentStore(store_dir)
    if result.documents:
        documents.add(result.documents)
    corpus = documents.corpus()
    report["documents"] = len(corpus)
    if not len(corpus):
        report.update(chunks=0, added=0)
        return report
    previous_ids = _active_chunk_ids(store_dir)
    pipeline = Pipeline(config, corpus, store_dir, progress=progress)
    stats = pipeline.build()
    chunk_ids = [chunk.id for chunk in pipeline.index.chunks]
    write_json_atomic(store_dir / "active.json", {"chunking_key": pipeline.index.chunking_key})
    report.update(
        chunks=len(chunk_ids),
        added=len(set(chunk_ids) - previous_ids),
        embedded=stats.embedded,
        embed_model_used=pipeline.index.embedder.name_used if config.mode != "bm25" else None,
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
    return Pipeline(config, store_corpus(store_dir), store_dir, progress=progress)


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
        }


def answer_query(question: str, store_dir: Path, config: RagConfig, use_llm: bool = True) -> QueryResult:
    from rag_core.generate.answer import answer_question

    pipeline = open_pipeline(store_dir, config)
    retrieval = pipeline.retrieve(question)
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


def format_explain(result: QueryResult) -> str:
    """A table: each final passage's rank and score at every stage it went through."""
    header = f"{'#':>2}  {'passage':<40}" + "".join(f"{stage:>16}" for stage in STAGES)
    rows = [header, "-" * len(header)]
    for position, hit in enumerate(result.retrieval.hits, start=1):
        label = f"{hit.chunk.doc_id} p{hit.chunk.page_start}" + (
            f"-{hit.chunk.page_end}" if hit.chunk.page_end != hit.chunk.page_start else "")
        cells = []
        for stage in STAGES:
            score = hit.stages.get(stage)
            ran = stage in result.retrieval.stages
            cells.append(f"{f'#{score.rank} {score.score:.4g}' if score else ('-' if ran else 'off'):>16}")
        rows.append(f"{position:>2}  {label[:40]:<40}" + "".join(cells))
    latency = ", ".join(f"{name} {ms:.1f} ms" for name, ms in result.retrieval.latency_ms.items())
    rows += ["", "(rank and score per stage; '-' = not in that stage's list, 'off' = stage not run)",
             f"latency: {latency}"]
    return "\n".join(rows)


def known_failure(exc: Exception) -> tuple[str, int] | None:
    """(readable message, exit code) for failures the user can act on; None for bugs (tracebacks)."""
    from rag_core.evaluate.golden import GoldenSetError
    from rag_core.generate.llm import LLMError, redact
    from rag_core.retrieve.models import ModelLoadError

    if isinstance(exc, (BadInput, GoldenSetError)):
        return str(exc), 2
    if isinstance(exc, ModelLoadError):
        return str(exc), 1
    if isinstance(exc, LLMError):
        return redact(str(exc)), 1
    return None
