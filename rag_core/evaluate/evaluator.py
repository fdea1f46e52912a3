"""Evaluate one configuration on a golden set: every query through the pipeline, metrics at chunk,
page and document level, latency per stage, index statistics, and a per-query table that says at
which stage the first relevant chunk was found or lost.

Ranking metrics (Recall@K, nDCG@K, hit rate, MRR) score the pipeline's final ranking to depth
max(``metrics_k``), whatever ``k`` is: the re-ranked head, then the fused order below it. So nDCG@10 is
computed on ten passages and compares with published figures. ``k`` is the number of passages given
to the LLM; the ``context/*`` metrics describe those k passages: ``context/recall`` (share of the
query's relevant chunks among them), ``context/precision`` (share of them that are relevant) and
``context/words`` (their total length), which is what the ``k`` setting trades. The ``evidence/*``
metrics compare chunkings at an equal budget of text: the share of the evidence in the ranking's
first B words of each ``context_budgets`` (``rag_core.evaluate.evidence_budget``).
With parent-child chunks (``child_size``), ``child/*`` metrics score the fused child ranking against
child-level relevance, next to the parent (returned) level; LLM query expansion adds
``expansion/input_tokens`` and ``expansion/output_tokens`` per query and an ``expansion`` latency stage.
Answers are optional: with the ``answers`` setting, ``judge=True`` or ``oracle=True`` every query is answered
and the answers scored by the metrics that need no LLM, judged by the LLM with ``judge``, and answered again
from the golden evidence with ``oracle`` (``rag_core.evaluate.answers``). Logging to MLflow is
``rag_core.workbench.tracking.tracker``'s job.
Left out: graded relevance (evidence is binary).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from rag_core.config import RagConfig
from rag_core.evaluate.answer_scoring import AnswerContext
from rag_core.evaluate.answers import evaluate_answers
from rag_core.evaluate.evidence_budget import evidence_metrics
from rag_core.evaluate.golden import GoldenQuery
from rag_core.evaluate.metric_registry import METRICS
from rag_core.evaluate.metrics import (RankingMetrics, Runs, evaluate_rankings, first_relevant_rank,
                                     latency_summary, page_rankings)
from rag_core.evaluate.relevance import QrelsByLevel, build_qrels, evidence_as_pages
from rag_core.ingest.corpus import Corpus
from rag_core.progress import progress as progress_bar
from rag_core.records import Chunk, Document
from rag_core.generate.sentences import pipeline_scorer
from rag_core.retrieve.filters import describe
from rag_core.retrieve.pipeline import Pipeline, Retrieval
from rag_core.retrieve.rerank.cross_encoder import CrossEncoderReranker
from rag_core.retrieve.retrievers import uses_embedder



@dataclass
class EvalReport:
    metrics: dict[str, float]  # flat names: "page/recall@5", "latency/bm25_p50_ms", "index/chunks"
    per_query: list[dict[str, Any]]  # one row per query
    params: dict[str, str]  # every setting, the models actually used, corpus and golden fingerprints
    retrievals: dict[str, Retrieval] = field(default_factory=dict)  # query id -> its retrieval
    qrels: QrelsByLevel = field(default_factory=dict)  # level -> query id -> relevant item -> 1
    ranked: dict[str, list[Chunk]] = field(default_factory=dict)  # query id -> the chunks scored, best first
    started_ns: dict[str, int] = field(default_factory=dict)  # query id -> when its retrieval began (epoch ns)
    runs: Runs = field(default_factory=dict)  # the rankings scored, a ranx run per level (tied pages share a score)


def golden_fingerprint(queries: Sequence[GoldenQuery]) -> str:
    digest = hashlib.sha256()
    for query in queries:
        digest.update(repr((query.id, query.query, query.evidence, query.relevant_ids)
                           + ((query.filter,) if query.filter else ())).encode())
    return digest.hexdigest()[:16]


def evaluate_config(
    config: RagConfig,
    corpus: Corpus,
    queries: Sequence[GoldenQuery],
    store_dir: str | Path,
    *,
    judge: bool = False,
    oracle: bool = False,
    progress: bool = False,
    read_seconds: float = 0.0,
    on_query: Callable[[int, int], None] | None = None,
    where: Mapping[str, Any] | None = None,
) -> EvalReport:
    """Run `queries` through the pipeline for `config` and measure it. `read_seconds` is the time it
    took to read the corpus, counted in the ingestion time. `where` filters every query that has no
    ``filter`` of its own. Answers (the ``answers`` setting, `judge`, `oracle`): see the module docstring."""
    pipeline = Pipeline(config, corpus, Path(store_dir), progress=progress)
    started = time.perf_counter()
    stats = pipeline.build(load_reranker=True)
    build_seconds = time.perf_counter() - started
    judged = queries
    if any(doc.text != pipeline.corpus.by_id[doc.doc_id].text for doc in corpus.documents):
        judged = evidence_as_pages(queries, corpus.by_id)  # evidence texts were copied from the plain text (tables)
    corpus = pipeline.corpus  # as these settings extract it (tables) and describe it (metadata)
    qrels = build_qrels(judged, corpus.by_id, pipeline.index.chunks)
    run = run_queries(pipeline, queries, where, progress, on_query)
    metrics, per_query, runs = ranking_metrics(config, queries, judged, corpus, pipeline, qrels, run.retrievals)
    metrics.update(latency_summary(run.latency))
    metrics.update(stats.as_metrics())
    metrics.update(pipeline.retriever_metrics())
    metrics["index/documents"] = float(len(corpus))
    metrics["index/ingest_seconds"] = read_seconds + build_seconds
    metrics["eval/queries"] = float(len(queries))
    metrics.update(work_metrics(run.retrievals, run.latency))

    rows = [trace_row(query, run.retrievals[query.id], qrels["chunk"][query.id], per_query[query.id])
            for query in queries]
    params_extra: dict[str, str] = {}
    if config.answers or judge or oracle:
        context = answer_context(pipeline, qrels, corpus)
        answer_metrics, answer_rows = evaluate_answers(queries, run.retrievals, config, context, judge=judge,
                                                       oracle=oracle, progress=progress)
        metrics.update(answer_metrics)
        for row, extra in zip(rows, answer_rows):
            row.update(extra)
        if context.similarity_model:
            params_extra["answer_similarity_model"] = context.similarity_model
    params = {
        **config.as_params(),
        **pipeline.models_used(),
        "corpus_fingerprint": corpus.fingerprint,
        "golden_fingerprint": golden_fingerprint(queries),
        "queries": str(len(queries)),
        **params_extra,
    }
    if where:
        params["filter"] = describe(where)
    depth = max(config.metrics_k)
    ranked = {qid: [hit.chunk for hit in retrieval.ranking[:depth]] for qid, retrieval in run.retrievals.items()}
    return EvalReport(metrics, rows, params, run.retrievals, qrels, ranked, run.started_ns, runs)


def answer_context(pipeline: Pipeline, qrels: QrelsByLevel, corpus: Corpus) -> AnswerContext:
    """What answering and scoring read from the loaded pipeline: the extractive answer's scorer (as ``query``
    chooses sentences), the evidence pages, and the models it loaded already (none loaded for this)."""
    config, encode, model, cross = pipeline.config, None, None, None
    if uses_embedder(config):
        embedder = pipeline.index.embedder
        encoder = embedder.query_encoder
        encode, model = (lambda texts: encoder.encode(list(texts), "document", embedder.batch_size)), embedder.name_used
    reranker = pipeline.reranker if config.rerank_depth > 0 else None
    if isinstance(reranker, CrossEncoderReranker):
        cross = lambda query, texts: reranker.score(query, texts).scores  # noqa: E731
    return AnswerContext(corpus.by_id, {qid: list(pages) for qid, pages in qrels["page"].items()},
                         pipeline_scorer(pipeline), encode, model, cross)


@dataclass
class QueryRun:
    """Every query's retrieval, when each began, and the latency samples of each stage."""

    retrievals: dict[str, Retrieval] = field(default_factory=dict)  # query id -> its retrieval
    started_ns: dict[str, int] = field(default_factory=dict)  # query id -> when its retrieval began (epoch ns)
    latency: dict[str, list[float]] = field(default_factory=dict)  # stage -> samples in ms ("total": whole query)


def run_queries(pipeline: Pipeline, queries: Sequence[GoldenQuery], where: Mapping[str, Any] | None,
                progress: bool, on_query: Callable[[int, int], None] | None) -> QueryRun:
    """Retrieve for each query (its own ``filter``, else `where`), in order."""
    run = QueryRun()
    iterator = progress_bar(queries, progress, "Evaluating", unit="query")
    for position, query in enumerate(iterator, start=1):
        run.started_ns[query.id] = time.time_ns()
        retrieval = pipeline.retrieve(query.query, where=dict(query.filter) or where)
        run.retrievals[query.id] = retrieval
        for stage, ms in retrieval.latency_ms.items():
            run.latency.setdefault(stage, []).append(ms)
        run.latency.setdefault("total", []).append(sum(retrieval.latency_ms.values()))  # all stages of the query
        if on_query:
            on_query(position, len(queries))
    return run


def ranking_metrics(config: RagConfig, queries: Sequence[GoldenQuery], judged: Sequence[GoldenQuery], corpus: Corpus,
                    pipeline: Pipeline, qrels: QrelsByLevel, retrievals: dict[str, Retrieval],
                    ) -> tuple[dict[str, float], dict[str, dict[str, float]], Runs]:
    """(averaged metrics, per-query metrics, the final ranking as scored at each level): the final ranking's, the k
    passages' (``context/*``), the evidence at each budget (`judged`: the queries as relevance reads
    them), each fused retriever's alone, the child level's and query expansion's."""
    depth = max(config.metrics_k)
    ranked = {qid: [hit.chunk for hit in retrieval.ranking[:depth]] for qid, retrieval in retrievals.items()}
    pages = page_rankings({qid: retrieval.ranking for qid, retrieval in retrievals.items()}, config,
                          corpus.by_id)  # page_score, page_credit
    result = evaluate_rankings(qrels, ranked, config.metrics_k, pages=pages)
    context = {query.id: context_metrics(retrievals[query.id], qrels["chunk"][query.id]) for query in queries}
    for qid, values in context.items():
        result.per_query[qid].update(values)
    metrics = dict(result.averages)
    evidence, evidence_per_query = evidence_metrics(
        judged, corpus.by_id, {qid: [hit.chunk for hit in retrieval.ranking] for qid, retrieval in retrievals.items()},
        config.context_budgets, config.metrics_k)
    metrics.update(evidence)
    for qid, values in evidence_per_query.items():
        result.per_query[qid].update(values)
    for name, alone in retriever_metrics(qrels, retrievals, depth, config, corpus.by_id).items():
        metrics.update({f"{name}/{metric}": value for metric, value in alone.averages.items()})
        for qid, values in alone.per_query.items():
            result.per_query[qid].update({f"{name}/{metric}": value for metric, value in values.items()})
    if config.child_size:  # parent-child: the searched children, scored against child-level qrels too
        child = child_level_metrics(queries, corpus, pipeline.index.search_chunks, retrievals, config.metrics_k)
        metrics.update(child.averages)
        for qid, values in child.per_query.items():
            result.per_query[qid].update(values)
    metrics.update(expansion_metrics(retrievals.values()))
    metrics.update({name: sum(values[name] for values in context.values()) / len(context) for name in CONTEXT_METRICS})
    return metrics, result.per_query, result.runs


def work_metrics(retrievals: Mapping[str, Retrieval], latency: Mapping[str, list[float]]) -> dict[str, float]:
    """What the queries reused and computed: candidates from this process, re-rank pairs from the cache."""
    work = {name: sum(retrieval.work.get(name, 0) for retrieval in retrievals.values())
            for name in ("candidates_reused", "rerank_pairs_scored", "rerank_cache_hits")}
    metrics = {"retrieval/candidates_reused": float(work["candidates_reused"]),
               "retrieval/candidates_computed": float(len(retrievals) - work["candidates_reused"])}
    if "rerank" in latency:
        metrics["rerank/pairs_scored"] = float(work["rerank_pairs_scored"])
        metrics["rerank/cache_hits"] = float(work["rerank_cache_hits"])
        metrics["rerank/model_seconds"] = sum(latency["rerank"]) / 1000  # the model's time, cached scores included
    return metrics


METRICS.declare("recall", ("context",), "share of the query's relevant chunks among the k passages given to the LLM",
                best=1.0)
METRICS.declare("precision", ("context",), "share of the k passages given to the LLM that are relevant", best=1.0)
METRICS.declare("words", ("context",), "words in the k passages given to the LLM (what k trades)",
                higher_is_better=False)
METRICS.declare("input_tokens", ("expansion",), "LLM query expansion: tokens in per query", higher_is_better=False,
                per_query=False)
METRICS.declare("output_tokens", ("expansion",), "LLM query expansion: tokens out per query", higher_is_better=False,
                per_query=False)
CONTEXT_METRICS = tuple(f"context/{metric.name}" for metric in METRICS.at("context"))  # recall, precision, words


def retriever_metrics(qrels: QrelsByLevel, retrievals: Mapping[str, Retrieval], depth: int,
                      config: RagConfig, documents: Mapping[str, Document]) -> dict[str, RankingMetrics]:
    """Each retriever's own list scored like the final ranking (``dense/page/recall@5``, ...), when
    several are fused: what a fusion would get from its best input alone, so one that drags shows."""
    names = next(iter(retrievals.values())).retrievers if retrievals else ()
    if len(names) < 2:
        return {}
    return {name: evaluate_rankings(qrels, {qid: [hit.chunk for hit in retrieval.stages.get(name, [])[:depth]]
                                            for qid, retrieval in retrievals.items()}, config.metrics_k,
                                    page_credit=config.page_credit, documents=documents)
            for name in names}


def child_level_metrics(queries: Sequence[GoldenQuery], corpus: Corpus, children: Sequence[Chunk],
                        retrievals: dict[str, Retrieval], ks: Sequence[int]) -> RankingMetrics:
    """``child/recall@5``, ...: the fused child ranking (before collapsing to parents) against the
    children relevant by the same rules as chunks (SPEC section 5)."""
    child_qrels = build_qrels(queries, corpus.by_id, children)["chunk"]
    depth = max(ks)
    ranked = {qid: retrieval.child_ranking[:depth] for qid, retrieval in retrievals.items()}
    result = evaluate_rankings({"chunk": child_qrels}, ranked, ks)
    rename = lambda values: {f"child/{name[len('chunk/'):]}": value  # noqa: E731
                             for name, value in values.items() if name.startswith("chunk/")}
    return RankingMetrics(rename(result.averages), {qid: rename(values) for qid, values in result.per_query.items()})


def expansion_metrics(retrievals: Iterable[Retrieval]) -> dict[str, float]:
    """LLM query expansion's tokens per query (as measured when the candidates were computed)."""
    used = [retrieval.expansion for retrieval in retrievals if "input_tokens" in retrieval.expansion]
    if not used:
        return {}
    return {f"expansion/{name}": sum(info[name] for info in used) / len(used)
            for name in ("input_tokens", "output_tokens")}


def context_metrics(retrieval: Retrieval, relevant: dict[str, int]) -> dict[str, float]:
    """What the k passages given to the LLM hold: the share of relevant chunks among them (recall),
    the share of them that are relevant (precision), and their length in words."""
    given = [hit.chunk for hit in retrieval.hits]
    found = sum(chunk.id in relevant for chunk in given)
    return {
        "context/recall": found / len(relevant) if relevant else 0.0,
        "context/precision": found / len(given) if given else 0.0,
        "context/words": float(sum(len(chunk.text.split()) for chunk in given)),
    }


def trace_row(query: GoldenQuery, retrieval: Retrieval, relevant: dict[str, int],
              query_metrics: dict[str, float]) -> dict[str, Any]:
    """One row of the per-query table: the first relevant chunk's rank at each stage, and where it
    was lost when the final list has none."""
    relevant_ids = set(relevant)
    final_ids = [hit.chunk.id for hit in retrieval.hits]
    first = {stage: first_relevant_rank([hit.chunk.id for hit in retrieval.stages[stage]], relevant_ids)
             for stage in retrieval.stages}  # the stages that ran, in pipeline order
    first["final"] = first_relevant_rank(final_ids, relevant_ids)
    row: dict[str, Any] = {"query_id": query.id, "query": query.query}
    # only the stages that ran: a run without re-ranking has no re-rank column
    row.update({f"first_relevant_{stage}": first[stage] for stage in first})
    row["outcome"] = _outcome(first, retrieval)
    row["top_sources"] = " | ".join(dict.fromkeys(f"{hit.chunk.doc_id} p{hit.chunk.page_start}" for hit in retrieval.hits))
    # per-query latency: the samples of latency/*_p50_ms and _p95_ms, for their bootstrap intervals
    row.update({f"latency/{stage}_ms": ms for stage, ms in retrieval.latency_ms.items()})
    row["latency/total_ms"] = sum(retrieval.latency_ms.values())
    row.update(query_metrics)
    return row


def _outcome(first: dict[str, int | None], retrieval: Retrieval) -> str:
    """found | not retrieved (no retriever had it) | cut before re-rank (fused below rerank_depth) |
    lost at re-rank | ranked below k (no re-ranking: fused below k)."""
    if first["final"] is not None:
        return "found"
    if not any(first.get(stage) for stage in retrieval.retrievers):
        return "not retrieved"
    if "rerank" in retrieval.stages:
        return "lost at re-rank" if first.get("rerank") else "cut before re-rank"
    return "ranked below k"

