"""Retrieval metrics through ``ranx``, at chunk, page and document level, plus latency percentiles.

Metric names are flat, as logged to MLflow: ``chunk/recall@5``, ``page/ndcg@10``, ``doc/hit_rate@5``,
``doc/mrr``, ``latency/rerank_p95_ms``. Relevance is binary, so ranx's nDCG (Burges gain
``2^rel - 1``) equals the Järvelin form. MRR looks at the whole ranked list it is given.

Every query of the qrels counts in every average. ranx cannot score a query with nothing
retrieved or nothing relevant (its ``Run``/``Qrels`` drop or reject them), so such queries are scored
0 here, explicitly, instead of being skipped. Building qrels from evidence is ``rag_core.relevance``;
logging is the tracking module's job.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import numpy as np

from rag_core.records import Chunk
from rag_core.relevance import LEVELS, QrelsByLevel, collapse_ranking


@dataclass(frozen=True)
class EvalResult:
    averages: dict[str, float]  # "page/recall@5" -> mean over queries
    per_query: dict[str, dict[str, float]]  # query_id -> "page/recall@5" -> value


def metric_names(ks: Iterable[int] = (5, 10)) -> list[str]:
    """ranx metric names, in report order: recall@k, ndcg@k, hit_rate@k for each k, then mrr."""
    return [f"{metric}@{k}" for k in ks for metric in ("recall", "ndcg", "hit_rate")] + ["mrr"]


def evaluate_rankings(
    qrels: QrelsByLevel, ranked: Mapping[str, Sequence[Chunk]], ks: Iterable[int] = (5, 10)
) -> EvalResult:
    """Score ranked chunks (query_id -> chunks, best first) against `qrels` at every level.

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
        # query_id -> item_id -> 1/rank: strictly decreasing, so ranx sees exactly our order
        run = {qid: _reciprocal_rank_scores(collapse_ranking(ranked.get(qid, ()), level)) for qid in query_ids}
        scorable = [qid for qid in query_ids if run[qid] and level_qrels.get(qid)]
        scores = _ranx_scores({qid: level_qrels[qid] for qid in scorable}, {qid: run[qid] for qid in scorable}, names)
        for qid in query_ids:
            for name in names:
                per_query[qid][f"{level}/{name}"] = scores.get(name, {}).get(qid, 0.0)

    flat_names = list(per_query[query_ids[0]])
    averages = {name: float(np.mean([per_query[qid][name] for qid in query_ids])) for name in flat_names}
    return EvalResult(averages, per_query)


def _reciprocal_rank_scores(item_ids: Sequence[str]) -> dict[str, float]:
    return {item_id: 1.0 / rank for rank, item_id in enumerate(item_ids, start=1)}


def _ranx_scores(
    qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]], names: list[str]
) -> dict[str, dict[str, float]]:
    """metric name -> query_id -> value, from ranx; {} when no query can be scored."""
    if not run:
        return {}
    from ranx import Qrels, Run, evaluate  # numba compiles on first import: keep it off the import path

    ranx_run = Run(run)
    with warnings.catch_warnings():
        # ranx hashes item ids to uint64 and reads them as int64; harmless, but noisy.
        warnings.filterwarnings("ignore", message=".*unsafe cast from uint64 to int64.*")
        evaluate(Qrels(qrels), ranx_run, names, save_results_in_run=True)
    return {name: {qid: float(value) for qid, value in ranx_run.scores[name].items()} for name in names}


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
