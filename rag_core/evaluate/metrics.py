"""Retrieval metrics at chunk, page and document level, plus latency percentiles.

Metric names are flat, as logged to MLflow: ``chunk/recall@5``, ``page/ndcg@10``, ``doc/hit_rate@5``,
``doc/mrr``, ``latency/rerank_p95_ms``. Relevance is binary (nDCG as in Järvelin & Kekäläinen,
"Cumulated gain-based evaluation of IR techniques", 2002). MRR looks at the whole ranked list it is given.

The definitions are ranx's (``ranx.evaluate`` with ``recall@k``, ``ndcg@k``, ``hit_rate@k``, ``mrr``),
and the tests check every value against ranx on random rankings. They are computed here, in a few
lines of Python, because ranx compiles numba code in every new process (3-6 s, 40 s in a new
environment): more than a whole ``eval`` of a BM25 run. ranx stays the tool for significance tests
(``rag_core.workbench.reports.compare``).

Page level ranks pages: by default (``page_score: first``) the pages of the ranked chunks in order of
first occurrence; with ``max``, ``sum`` or ``mean_top`` (the mean of the best ``page_top_m``) each page
is scored by pooling the scores of the chunks ranked on it (``rank_pages``), over the whole final ranking.

Every query of the qrels counts in every average; a query with nothing retrieved or nothing
relevant scores 0. Building qrels from evidence is ``rag_core.evaluate.relevance``; logging is the tracking
module's job.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import numpy as np

from rag_core.evaluate.relevance import LEVELS, QrelsByLevel, collapse_ranking, page_item_id
from rag_core.records import Chunk
from rag_core.retrieve.parent_child import pool_scores

if TYPE_CHECKING:
    from rag_core.config import RagConfig

DEFAULT_PRIMARY_METRIC = "page/ndcg@10"  # what ranks runs by default: page level is comparable across chunk sizes; nDCG rewards order


@dataclass(frozen=True)
class RankingMetrics:
    averages: dict[str, float]  # "page/recall@5" -> mean over queries
    per_query: dict[str, dict[str, float]]  # query_id -> "page/recall@5" -> value


def metric_names(ks: Iterable[int] = (5, 10)) -> list[str]:
    """ranx metric names, in report order: recall@k, ndcg@k, hit_rate@k for each k, then mrr."""
    return [f"{metric}@{k}" for k in ks for metric in ("recall", "ndcg", "hit_rate")] + ["mrr"]


def evaluate_rankings(
    qrels: QrelsByLevel, ranked: Mapping[str, Sequence[Chunk]], ks: Iterable[int] = (5, 10),
    pages: Mapping[str, Sequence[str]] | None = None,
) -> RankingMetrics:
    """Score ranked chunks (query_id -> chunks, best first) against `qrels` at every level; with
    `pages` (query_id -> page ids, best first: ``page_rankings``) the page level scores those instead
    of the pages of `ranked` in order of first occurrence.

    A query of the qrels missing from `ranked` counts as nothing retrieved. Queries in `ranked`
    without qrels are an error: they would silently drop out of the averages otherwise.
    """
    names = metric_names(sorted(set(ks)))
    query_ids = list(dict.fromkeys(qid for level in LEVELS for qid in qrels.get(level, {})))
    if not query_ids:
        raise ValueError("no queries to evaluate: the qrels are empty")
    unjudged = [qid for qid in ranked if qid not in query_ids]
    if unjudged:
        raise ValueError(f"ranked results for queries without qrels: {', '.join(unjudged[:5])}")

    per_query: dict[str, dict[str, float]] = {qid: {} for qid in query_ids}
    for level in LEVELS:
        level_qrels = qrels.get(level, {})
        for qid in query_ids:
            if level == "page" and pages is not None:
                ranking = list(pages.get(qid, ()))
            else:
                ranking = collapse_ranking(ranked.get(qid, ()), level)
            relevant = set(level_qrels.get(qid, {}))
            for name in names:
                per_query[qid][f"{level}/{name}"] = query_metric(name, ranking, relevant)

    flat_names = list(per_query[query_ids[0]])
    averages = {name: float(np.mean([per_query[qid][name] for qid in query_ids])) for name in flat_names}
    return RankingMetrics(averages, per_query)


def rank_pages(chunks: Sequence[Chunk], scores: Sequence[float], rule: str = "first", top_m: int = 2,
               rrf_k: int = 60) -> list[str]:
    """Ranked chunks (best first) and their scores -> ranked page ids. ``first``: pages in order of
    first occurrence (``collapse_ranking``); ``max`` | ``sum`` | ``mean_top``: each page scored by
    pooling the scores of the chunks on it (``pool_scores``; a chunk that crosses pages counts on each),
    best first, ties in order of first occurrence. Scores that do not fall down the list (a re-ranked
    head above the fused tail: two scales) are replaced by reciprocal ranks ``1 / (rrf_k + rank)``."""
    if rule == "first":
        return collapse_ranking(chunks, "page")
    if len(scores) != len(chunks):
        raise ValueError(f"{len(chunks)} chunks but {len(scores)} scores")
    if any(later > earlier for earlier, later in zip(scores, scores[1:])):
        scores = [1.0 / (rrf_k + rank) for rank in range(1, len(chunks) + 1)]
    by_page: dict[str, list[float]] = {}  # in order of first occurrence
    for chunk, score in zip(chunks, scores):
        for page in range(chunk.page_start, chunk.page_end + 1):
            by_page.setdefault(page_item_id(chunk.doc_id, page), []).append(float(score))
    pooled = {page: pool_scores(found, rule, top_m) for page, found in by_page.items()}
    order = {page: position for position, page in enumerate(by_page)}
    return sorted(by_page, key=lambda page: (-pooled[page], order[page]))


def page_rankings(rankings: Mapping[str, Sequence[Any]], config: RagConfig) -> dict[str, list[str]] | None:
    """query_id -> ranked page ids under the config's ``page_score`` from each query's whole final
    ranking (hits with ``chunk`` and ``score``, best first); None with ``first`` (the pages of the
    scored chunks, in order of first occurrence, as before)."""
    rule = getattr(config, "page_score", "first")
    if rule == "first":
        return None
    return {qid: rank_pages([hit.chunk for hit in hits], [hit.score for hit in hits], rule, config.page_top_m,
                            config.rrf_k)
            for qid, hits in rankings.items()}


def query_metric(name: str, ranking: Sequence[str], relevant: set[str]) -> float:
    """One metric (``recall@5``, ``ndcg@10``, ``hit_rate@5``, ``mrr``) of one ranked list (best first,
    no duplicates) against the relevant ids; 0 when nothing is relevant or retrieved."""
    if not relevant or not ranking:
        return 0.0
    metric, _, cutoff = name.partition("@")
    top = ranking[: int(cutoff)] if cutoff else ranking
    ranks = [rank for rank, item in enumerate(top, start=1) if item in relevant]
    if metric == "recall":
        return len(ranks) / len(relevant)
    if metric == "hit_rate":
        return float(bool(ranks))
    if metric == "mrr":
        return 1.0 / ranks[0] if ranks else 0.0
    if metric == "ndcg":
        ideal = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(len(relevant), int(cutoff)) + 1))
        return sum(1.0 / math.log2(rank + 1) for rank in ranks) / ideal
    raise ValueError(f"unknown metric {name!r}; valid: recall@K, ndcg@K, hit_rate@K, mrr")


def first_relevant_rank(ranked_ids: Sequence[str], relevant_ids: Iterable[str]) -> int | None:
    """1-based rank of the first relevant id in `ranked_ids`, or None when none is retrieved."""
    relevant = set(relevant_ids)
    return next((rank for rank, item_id in enumerate(ranked_ids, start=1) if item_id in relevant), None)


def latency_summary(samples_ms: Mapping[str, Sequence[float]]) -> dict[str, float]:
    """stage -> samples (ms) => ``latency/{stage}_p50_ms`` and ``_p95_ms`` (linear interpolation).

    Stages without samples are left out (MLflow cannot plot NaN).
    """
    summary: dict[str, float] = {}
    for stage, samples in samples_ms.items():
        if len(samples) == 0:
            continue
        p50, p95 = np.percentile(np.asarray(samples, dtype=float), [50, 95], method="linear")
        summary[f"latency/{stage}_p50_ms"] = float(p50)
        summary[f"latency/{stage}_p95_ms"] = float(p95)
    return summary
