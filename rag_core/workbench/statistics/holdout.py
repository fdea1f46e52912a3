"""Held-out queries: a sweep's golden queries split once into tuning and held-out queries.

A sweep file with ``holdout: 0.3`` (and ``holdout_seed: 7``; 0 when left out) holds out
``round(0.3 * n)`` of its n queries (at least one, and at least one left for tuning). The split is
deterministic and does not depend on the order of the golden file: the held-out queries are those
whose ``sha256("<seed>:<query id>")`` is smallest. Adding queries to a golden set therefore moves
few of the old ones between the parts.

Each point is still evaluated on every query; its per-query values (the ``per_query.csv`` every
run logs) are then averaged over each part and logged beside the all-query metrics, with the
part as a prefix: ``tune/page/ndcg@10`` and ``holdout/page/ndcg@10``.
Left out: stratified or repeated splits (cross-validation); LLM-judge scores (averaged over judged
answers only); choosing the winner (``honest``); keeping the split on the sweep's parent run
(``sweep_report``).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable

from rag_core.config import ConfigError

if TYPE_CHECKING:
    import pandas as pd

PARTS = ("tune", "holdout")  # metric prefixes: tuning queries, held-out queries
QUERY_LEVELS = ("chunk", "page", "doc", "context", "evidence")  # per-query metrics whose run metric is their mean over all queries


@dataclass(frozen=True)
class QuerySplit:
    """A golden set's query ids split into tuning and held-out queries."""
    fraction: float
    seed: int
    tuning: tuple[str, ...]  # query ids, in golden-set order
    held_out: tuple[str, ...]

    def ids(self, part: str) -> tuple[str, ...]:
        return {"tune": self.tuning, "holdout": self.held_out}[part]

    def as_dict(self) -> dict[str, Any]:
        return {"fraction": self.fraction, "seed": self.seed, "tuning": list(self.tuning), "held_out": list(self.held_out)}


def check_holdout(fraction: Any, seed: Any, where: str) -> tuple[float | None, int]:
    """(fraction, seed) from a sweep file, checked: a fraction strictly between 0 and 1, an integer seed."""
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ConfigError(f"{where}: holdout_seed must be an integer, got {seed!r}")
    if fraction is None:
        if seed is not None:
            raise ConfigError(f"{where}: holdout_seed is given without holdout (the share of queries to hold out)")
        return None, 0
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction < 1:
        raise ConfigError(f"{where}: holdout must be a share of the queries between 0 and 1 (e.g. 0.3), got {fraction!r}")
    return float(fraction), int(seed or 0)


def split_queries(query_ids: Iterable[str], fraction: float, seed: int = 0) -> QuerySplit:
    """Hold out round(fraction * n) of the n queries (at least 1, at most n - 1), chosen by a seeded hash."""
    ids = list(dict.fromkeys(query_ids))
    if len(ids) < 2:
        raise ConfigError(f"holdout needs at least 2 queries (one to tune on, one to hold out); the golden set has {len(ids)}")
    n_held_out = min(max(round(fraction * len(ids)), 1), len(ids) - 1)
    key = lambda query_id: hashlib.sha256(f"{seed}:{query_id}".encode()).hexdigest()  # noqa: E731
    held_out = set(sorted(ids, key=key)[:n_held_out])
    return QuerySplit(fraction, seed, tuple(q for q in ids if q not in held_out), tuple(q for q in ids if q in held_out))


def query_metric_columns(per_query: "pd.DataFrame") -> list[str]:
    """The per-query columns that are metrics averaged over queries (``page/ndcg@10``, ``context/recall``)."""
    return [column for column in per_query.columns
            if column.split("/", 1)[0] in QUERY_LEVELS and "/" in column and per_query[column].dtype.kind in "fiub"]


def part_metrics(per_query: "pd.DataFrame", split: QuerySplit) -> dict[str, float]:
    """``tune/<metric>`` and ``holdout/<metric>``: the mean of every query metric over each part."""
    table = per_query.assign(query_id=per_query["query_id"].astype(str)).set_index("query_id")
    metrics = {}
    for part in PARTS:
        rows = table.loc[[query_id for query_id in split.ids(part) if query_id in table.index]]
        for column in query_metric_columns(per_query):
            value = float(rows[column].mean()) if len(rows) else math.nan
            if math.isfinite(value):
                metrics[f"{part}/{column}"] = value
    return metrics


def split_of(metric: str) -> tuple[str | None, str]:
    """``tune/page/ndcg@10`` -> ("tune", "page/ndcg@10"); ``page/ndcg@10`` -> (None, "page/ndcg@10")."""
    part, _, rest = metric.partition("/")
    return (part, rest) if part in PARTS and rest else (None, metric)
