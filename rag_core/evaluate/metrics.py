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
How the pages of a passage that crosses pages are credited is ``page_credit``
(``rag_core.evaluate.page_credit``): by default they share its rank, and page metrics are expected values
over the orders of tied pages (McSherry and Najork 2008); with one page per rank they are ranx's.

Every query of the qrels counts in every average; a query with nothing retrieved or nothing
relevant scores 0. Building qrels from evidence is ``rag_core.evaluate.relevance``; logging is the tracking
module's job.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import numpy as np

from rag_core.evaluate.golden import GoldenSetError, load_golden
from rag_core.evaluate.metric_registry import CUTOFF, METRICS
from rag_core.evaluate.page_credit import DEFAULT_PAGE_CREDIT, PageGroups, as_scores, credit_rule, page_groups, tied_metric
from rag_core.evaluate.relevance import LEVELS, QrelsByLevel, collapse_ranking
from rag_core.records import Chunk, Document
from rag_core.retrieve.parent_child import pool_scores

if TYPE_CHECKING:
    from rag_core.config import RagConfig

# What ranks the runs of a sweep by default: the share of the evidence in the first 1,024 words of the
# ranking, which compares chunkings at an equal budget of text (docs/evaluation.md, "Which metric to
# trust"); a golden set without evidence text (page-only lines, BEIR) falls back to page nDCG@10.
DEFAULT_PRIMARY_METRIC = "evidence/recall@1024"
FALLBACK_PRIMARY_METRIC = "page/ndcg@10"


def default_primary_metric(golden: str | Path | None, folder: Path | None = None) -> str:
    """What ranks a sweep on `golden` (relative to `folder`) unless it says: the evidence at a budget when
    every line quotes its evidence (``DEFAULT_PRIMARY_METRIC``), else page nDCG@10, which needs no
    text; a golden set that is not a local file (an MLflow dataset) is taken to quote it."""
    path = Path(folder or ".") / str(golden) if golden is not None else None
    if path is None or not path.is_file():
        return DEFAULT_PRIMARY_METRIC
    try:
        queries = load_golden(path)
    except (GoldenSetError, OSError):
        return DEFAULT_PRIMARY_METRIC  # the sweep reports the problem where it reads the set
    quoted = all(query.evidence and all(item.text for item in query.evidence) for query in queries)
    return DEFAULT_PRIMARY_METRIC if quoted else FALLBACK_PRIMARY_METRIC


Runs = dict[str, dict[str, dict[str, float]]]  # level -> query id -> item -> score: a ranx run per level


@dataclass(frozen=True)
class RankingMetrics:
    averages: dict[str, float]  # "page/recall@5" -> mean over queries
    per_query: dict[str, dict[str, float]]  # query_id -> "page/recall@5" -> value
    # level -> query_id -> item -> 1 / rank: the rankings scored, in the shape of a ranx run (items that share
    # a rank, tied pages, share a score); the queries of `ranked` only
    runs: Runs = field(default_factory=dict)


def metric_names(ks: Iterable[int] = (5, 10)) -> list[str]:
    """The ranking metrics' names within a level, in report order: those with a cutoff at each k (recall@k,
    ndcg@k, hit_rate@k), then those without (mrr): every metric of the registry that a ranking level computes."""
    ranking = [metric for metric in METRICS.at("page") if metric.function is not None]
    return ([f"{metric.name}@{k}" for k in ks for metric in ranking if metric.parameter == CUTOFF]
            + [metric.name for metric in ranking if metric.parameter != CUTOFF])


def evaluate_rankings(
    qrels: QrelsByLevel, ranked: Mapping[str, Sequence[Chunk]], ks: Iterable[int] = (5, 10),
    pages: Mapping[str, PageGroups] | None = None, page_credit: str = DEFAULT_PAGE_CREDIT,
    documents: Mapping[str, Document] | None = None,
) -> RankingMetrics:
    """Score ranked chunks (query_id -> chunks, best first) against `qrels` at every level. The page
    level ranks the pages of `ranked` under `page_credit` (``majority`` needs the `documents`), or
    scores `pages` (query_id -> tie groups of page ids, best first: ``page_rankings``) when given.

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
    runs: Runs = {level: {} for level in LEVELS}
    for level in LEVELS:
        level_qrels = qrels.get(level, {})
        for qid in query_ids:
            if level == "page":
                groups = (list(pages.get(qid, ())) if pages is not None
                          else page_groups(ranked.get(qid, ()), page_credit, documents))
            else:
                groups = [[item] for item in collapse_ranking(ranked.get(qid, ()), level)]
            relevant = set(level_qrels.get(qid, {}))
            for name in names:
                per_query[qid][f"{level}/{name}"] = tied_metric(name, groups, relevant)
            if qid in ranked:
                runs[level][qid] = as_scores(groups)

    flat_names = list(per_query[query_ids[0]])
    averages = {name: float(np.mean([per_query[qid][name] for qid in query_ids])) for name in flat_names}
    return RankingMetrics(averages, per_query, runs)


def rank_pages(chunks: Sequence[Chunk], scores: Sequence[float], rule: str = "first", top_m: int = 2,
               rrf_k: int = 60, credit: str = "page_order", documents: Mapping[str, Document] | None = None,
               ) -> PageGroups:
    """Ranked chunks (best first) and their scores -> tie groups of page ids, best first, under the
    page `credit` (``rag_core.evaluate.page_credit``). ``first``: pages in order of first occurrence;
    ``max`` | ``sum`` | ``mean_top``: each page scored by pooling the scores of the chunks on it
    (``pool_scores``; a chunk that crosses pages counts on each), best first, equal scores in order of
    first occurrence; with ``tied`` credit, pages of equal score first found in one chunk share a rank.
    Scores that do not fall down the list (a re-ranked head above the fused tail: two scales) are
    replaced by reciprocal ranks ``1 / (rrf_k + rank)``."""
    if rule == "first":
        return page_groups(chunks, credit, documents)
    if len(scores) != len(chunks):
        raise ValueError(f"{len(chunks)} chunks but {len(scores)} scores")
    if any(later > earlier for earlier, later in zip(scores, scores[1:])):
        scores = [1.0 / (rrf_k + rank) for rank in range(1, len(chunks) + 1)]
    pages_of, tied = credit_rule(credit)
    by_page: dict[str, list[float]] = {}  # in order of first occurrence
    first_chunk: dict[str, int] = {}  # page -> position of the chunk it first occurs in
    for position, (chunk, score) in enumerate(zip(chunks, scores)):
        for page in pages_of(chunk, documents):
            by_page.setdefault(page, []).append(float(score))
            first_chunk.setdefault(page, position)
    pooled = {page: pool_scores(found, rule, top_m) for page, found in by_page.items()}
    order = {page: position for position, page in enumerate(by_page)}
    groups: PageGroups = []
    for page in sorted(by_page, key=lambda page: (-pooled[page], order[page])):
        last = groups[-1][-1] if groups else None
        if tied and last is not None and (pooled[last], first_chunk[last]) == (pooled[page], first_chunk[page]):
            groups[-1].append(page)
        else:
            groups.append([page])
    return groups


def page_rankings(rankings: Mapping[str, Sequence[Any]], config: RagConfig,
                  documents: Mapping[str, Document] | None = None) -> dict[str, PageGroups]:
    """query_id -> tie groups of page ids under the config's ``page_score`` and ``page_credit``, from
    each query's final ranking (hits with ``chunk`` and ``score``, best first): to ``max(metrics_k)``
    passages with ``first``, the whole ranking with a pooling rule."""
    depth = max(config.metrics_k) if config.page_score == "first" else None
    return {qid: rank_pages([hit.chunk for hit in hits[:depth]], [hit.score for hit in hits[:depth]],
                            config.page_score, config.page_top_m, config.rrf_k, config.page_credit, documents)
            for qid, hits in rankings.items()}


def query_metric(name: str, ranking: Sequence[str], relevant: set[str]) -> float:
    """One metric (``recall@5``, ``ndcg@10``, ``hit_rate@5``, ``mrr``) of one ranked list (best first,
    no duplicates) against the relevant ids; 0 when nothing is relevant or retrieved."""
    return tied_metric(name, [[item] for item in ranking], relevant)


def first_relevant_rank(ranked_ids: Sequence[str], relevant_ids: Iterable[str]) -> int | None:
    """1-based rank of the first relevant id in `ranked_ids`, or None when none is retrieved."""
    relevant = set(relevant_ids)
    return next((rank for rank, item_id in enumerate(ranked_ids, start=1) if item_id in relevant), None)


METRICS.declare("{stage}_p50_ms", ("latency",), "median time per query in a stage (total: every stage)",
                higher_is_better=False)
METRICS.declare("{stage}_p95_ms", ("latency",), "95th percentile of the time per query in a stage",
                higher_is_better=False)
METRICS.declare("{stage}_ms", ("latency",), "one query's time in a stage (total: every stage), a column of the per-query table",
                higher_is_better=False)


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
