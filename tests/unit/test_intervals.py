"""Bootstrap intervals (rag_core.workbench.statistics.intervals): equal to scipy's percentile bootstrap with the same
generator, hand-checked tiny cases, and the table columns and text they become."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from rag_core.workbench.reports.compare import comparison_table
from rag_core.workbench.statistics.holdout import split_queries
from rag_core.workbench.statistics.intervals import bootstrap_interval, metric_interval, shown_with_intervals

VALUES = np.random.default_rng(3).uniform(0, 1, 30)


@pytest.mark.parametrize("seed", [0, 11])
def test_interval_equals_scipys_percentile_bootstrap(seed):
    interval = bootstrap_interval(VALUES, seed=seed, resamples=1000)
    reference = stats.bootstrap((VALUES,), np.mean, n_resamples=1000, method="percentile", confidence_level=0.95,
                                rng=np.random.default_rng(seed), vectorized=True)
    assert interval.low == pytest.approx(reference.confidence_interval.low, abs=1e-12)
    assert interval.high == pytest.approx(reference.confidence_interval.high, abs=1e-12)
    assert interval.estimate == pytest.approx(VALUES.mean()) and interval.low < VALUES.mean() < interval.high


def test_interval_of_a_median_equals_scipys():
    interval = bootstrap_interval(VALUES * 100, statistic="p50")
    reference = stats.bootstrap((VALUES * 100,), np.median, n_resamples=1000, method="percentile",
                                rng=np.random.default_rng(0), vectorized=True)
    assert (interval.low, interval.high) == pytest.approx(tuple(reference.confidence_interval), abs=1e-9)
    assert interval.estimate == pytest.approx(np.median(VALUES * 100))


def test_hand_checked_tiny_cases():
    # every draw of identical values has the same mean
    same = bootstrap_interval([0.4, 0.4, 0.4])
    assert (same.estimate, same.low, same.high) == pytest.approx((0.4, 0.4, 0.4))
    # two queries scoring 0 and 1: a draw's mean is 0 (p = 1/4), 0.5 (1/2) or 1 (1/4); with 1000 draws the
    # 2.5th and 97.5th percentiles fall inside the runs of 0s and of 1s
    both = bootstrap_interval([0.0, 1.0])
    assert (both.estimate, both.low, both.high) == (0.5, 0.0, 1.0)
    # [0, 0, 1]: mean 1 needs three 1s (p = 1/27 = 3.7% > 2.5%): high is 1; mean 0 has p = 8/27: low is 0
    third = bootstrap_interval([0.0, 0.0, 1.0])
    assert (third.low, third.high) == (0.0, 1.0) and third.estimate == pytest.approx(1 / 3)
    assert str(bootstrap_interval([0.652, 0.652])) == "0.652 [0.652, 0.652]"


def test_tune_and_holdout_metrics_resample_their_part_only():
    ids = [f"q{i}" for i in range(10)]
    per_query = pd.DataFrame({"query_id": ids, "page/ndcg@10": np.linspace(0, 0.9, 10)})
    split = split_queries(ids, 0.4, seed=2)
    held_out = per_query.set_index("query_id").loc[list(split.held_out), "page/ndcg@10"]
    interval = metric_interval(per_query, "holdout/page/ndcg@10", split)
    assert interval == bootstrap_interval(held_out.to_numpy())
    assert metric_interval(per_query, "holdout/page/ndcg@10", None) is None  # no split, no part
    assert metric_interval(per_query, "doc/mrr", split) is None  # not in the per-query table


def test_the_comparison_table_carries_intervals_and_shows_them_as_text():
    runs = pd.DataFrame([
        {"run_id": "a", "status": "FINISHED", "chunk_size": 256, "page/ndcg@10": 0.5, "latency/total_p50_ms": 12.0},
        {"run_id": "b", "status": "FINISHED", "chunk_size": 512, "page/ndcg@10": 0.75, "latency/total_p50_ms": 20.0},
    ])
    per_query = {"a": pd.DataFrame({"query_id": ["1", "2"], "page/ndcg@10": [0.0, 1.0], "latency/total_ms": [10.0, 14.0]}),
                 "b": pd.DataFrame({"query_id": ["1", "2"], "page/ndcg@10": [0.5, 1.0], "latency/total_ms": [19.0, 21.0]})}
    table = comparison_table(runs, "page/ndcg@10", ["chunk_size"], ["latency/total_p50_ms"], per_query=per_query)
    assert list(table.columns) == ["rank", "chunk_size", "page/ndcg@10", "page/ndcg@10 ci_low", "page/ndcg@10 ci_high",
                                   "latency/total_p50_ms", "latency/total_p50_ms ci_low", "latency/total_p50_ms ci_high",
                                   "status", "run_id"]
    assert list(table["run_id"]) == ["b", "a"]
    assert (table["page/ndcg@10 ci_low"].iloc[1], table["page/ndcg@10 ci_high"].iloc[1]) == (0.0, 1.0)
    assert (table["latency/total_p50_ms ci_low"].iloc[0], table["latency/total_p50_ms ci_high"].iloc[0]) == (19.0, 21.0)
    shown = shown_with_intervals(table)
    assert list(shown.columns) == ["rank", "chunk_size", "page/ndcg@10", "latency/total_p50_ms", "status", "run_id"]
    assert shown["page/ndcg@10"].iloc[1] == "0.500 [0.000, 1.000]"
    assert shown["latency/total_p50_ms"].iloc[0] == "20.0 [19.0, 21.0]"
