"""Bootstrap confidence intervals over queries for the metrics of a comparison table.

A run's metric is a statistic of per-query values that the run logs in ``per_query.csv``: the mean
of ``page/ndcg@10`` over the queries, the median (p50) or p95 of ``latency/total_ms``. Its interval
is the percentile bootstrap (Efron & Tibshirani, "An Introduction to the Bootstrap", 1993, ch. 13):
draw the queries with replacement ``resamples`` times (one ``Generator.integers`` call of shape
resamples x queries, seeded), compute the statistic of each draw, and take the 2.5th and 97.5th
percentiles (linear interpolation). This is the scheme of ``scipy.stats.bootstrap(method="percentile")``
with the same generator, which the tests check it against. Metrics of a part of the queries
(``tune/...``, ``holdout/...``; see ``rag_core.workbench.statistics.holdout``) resample that part only.

In a table, each metric ``m`` gets two columns, ``m ci_low`` and ``m ci_high``, right after it;
``shown_with_intervals`` turns them into one column of text: ``0.652 [0.581, 0.720]``.
Left out: intervals for a difference between runs (``significance`` tests that), BCa intervals,
runs logged before per-query latency was (their latency metrics get no interval).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from rag_core.workbench.statistics.holdout import QuerySplit, split_of

if TYPE_CHECKING:
    import pandas as pd

RESAMPLES, SEED, LEVEL = 1000, 0, 0.95
LOW, HIGH = " ci_low", " ci_high"  # column suffixes
STATISTICS: dict[str, Callable] = {
    "mean": np.mean,
    "p50": np.median,
    "p95": lambda values, axis=None: np.percentile(values, 95, axis=axis),
}


@dataclass(frozen=True)
class Interval:
    estimate: float
    low: float
    high: float

    def __str__(self) -> str:
        return f"{number(self.estimate)} [{number(self.low)}, {number(self.high)}]"


def bootstrap_interval(values: Sequence[float], *, statistic: str = "mean", resamples: int = RESAMPLES,
                       seed: int = SEED, level: float = LEVEL) -> Interval:
    """The statistic of `values` and its percentile-bootstrap interval (NaN values are left out)."""
    data = np.asarray(values, dtype=float)
    data = data[~np.isnan(data)]
    if data.size == 0:
        raise ValueError("no values to bootstrap")
    function = STATISTICS[statistic]
    draws = data[np.random.default_rng(seed).integers(0, data.size, (resamples, data.size))]
    low, high = np.percentile(function(draws, axis=-1), [50 * (1 - level), 50 * (1 + level)])
    return Interval(float(function(data)), float(low), float(high))


def per_query_source(metric: str) -> tuple[str | None, str, str]:
    """(part or None, per-query column, statistic) behind a table metric:
    ``holdout/page/ndcg@10`` -> ("holdout", "page/ndcg@10", "mean");
    ``latency/total_p50_ms`` -> (None, "latency/total_ms", "p50")."""
    part, name = split_of(metric)
    for statistic in ("p50", "p95"):
        if name.startswith("latency/") and name.endswith(f"_{statistic}_ms"):
            return part, name[: -len(f"_{statistic}_ms")] + "_ms", statistic
    return part, name, "mean"


def metric_interval(per_query: "pd.DataFrame", metric: str, split: QuerySplit | None = None) -> Interval | None:
    """The interval of `metric` from one run's per-query table; None when the table lacks its values."""
    part, column, statistic = per_query_source(metric)
    if column not in per_query or (part is not None and split is None):
        return None
    rows = per_query
    if part is not None:
        by_id = per_query.set_index(per_query["query_id"].astype(str))
        rows = by_id.loc[[query_id for query_id in split.ids(part) if query_id in by_id.index]]
    values = rows[column].to_numpy(dtype=float)
    return bootstrap_interval(values, statistic=statistic) if (~np.isnan(values)).any() else None


def with_intervals(table: "pd.DataFrame", per_query: Mapping[str, "pd.DataFrame"], metrics: Iterable[str],
                   split: QuerySplit | None = None) -> "pd.DataFrame":
    """`table` (one row per run, a ``run_id`` column) with ``ci_low``/``ci_high`` columns after each of `metrics`
    (the table made once: a sweep's table holds every metric, and inserting columns one by one fragments it)."""
    import pandas as pd

    bounds: dict[str, tuple[list[float], list[float]]] = {}  # metric -> (lows, highs), one per run
    for metric in metrics:
        if metric not in table or metric in bounds:
            continue
        intervals = [metric_interval(per_query[run_id], metric, split) if run_id in per_query else None
                     for run_id in table["run_id"]]
        bounds[metric] = ([i.low if i else np.nan for i in intervals], [i.high if i else np.nan for i in intervals])
    columns: dict[str, Any] = {}
    for name in table.columns:
        columns[name] = table[name]  # a Series: its dtype kept (settings as nullable integers)
        if name in bounds:
            columns[name + LOW], columns[name + HIGH] = bounds[name]
    return pd.DataFrame(columns, index=table.index)


def shown_with_intervals(table: "pd.DataFrame") -> "pd.DataFrame":
    """Each metric with intervals as text, ``0.652 [0.581, 0.720]``; the interval columns dropped."""
    table = table.copy()
    for low in [column for column in table.columns if column.endswith(LOW)]:
        metric = low[: -len(LOW)]
        table[metric] = [("" if np.isnan(value) else number(value)) if np.isnan(lo) or np.isnan(hi)
                         else str(Interval(value, lo, hi))
                         for value, lo, hi in zip(table[metric].astype(float), table[low], table[metric + HIGH])]
        table = table.drop(columns=[low, metric + HIGH])
    return table


def load_per_query(run_ids: Iterable[str], tracking_uri: str | None = None) -> dict[str, "pd.DataFrame"]:
    """run id -> its logged ``per_query.csv`` (query ids as text); runs without one are left out."""
    import pandas as pd

    from rag_core.workbench.tracking.tracker import Tracker

    tracker, tables = Tracker.at(tracking_uri), {}
    with tempfile.TemporaryDirectory(prefix="rag-per-query-") as folder:
        for position, run_id in enumerate(run_ids):
            destination = Path(folder) / str(position)
            destination.mkdir()
            try:
                path = tracker.download(run_id, "per_query.csv", destination)
            except Exception:  # noqa: BLE001 - a run that failed before logging it: no intervals
                continue
            tables[run_id] = pd.read_csv(path, dtype={"query_id": str})
    return tables


def number(value: float) -> str:
    """0.652 for scores, 41.3 for milliseconds and other large values."""
    return f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}"
