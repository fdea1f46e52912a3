"""A quality gate for CI: is a candidate configuration worse than the baseline on the same queries?

Both configurations are evaluated on the same golden-set queries (``rag_core.evaluate.evaluator``, run by
``rag_core.workbench.execution.gate_run``).
For each metric, per query, ``d_q = candidate_q - baseline_q``. The candidate fails on a metric when
it is worse than the baseline by more than ``margin`` with a one-sided paired t-test: H0 ``mean(d) >=
-margin`` against H1 ``mean(d) < -margin``, i.e. Student's t of ``d_q + margin`` with n - 1 degrees of
freedom, the lower tail (the paired t-test of ``rag_core.workbench.statistics.selection``, one-sided because a gate
only asks whether the change made things worse; ``scipy.stats.ttest_1samp(..., alternative="less")``
is its reference in the tests). Identical values on every query give p = 1; a constant shifted
difference, 0 when below zero and 1 otherwise. With several metrics the p-values are Holm-adjusted
(``selection.holm``), so the chance of failing a candidate that is no worse on any metric stays at most
``alpha``. The gate fails (exit 1) when any adjusted p-value is below ``alpha`` (0.05).
Each side's score is shown with its percentile-bootstrap 95% interval over queries, and the mean
difference with its own (``rag_core.workbench.statistics.intervals``; the scheme of ``rag_core.finetune.significance``,
which this layer does not import).
Each metric has a direction (``metric_direction``), read from the metric registry
(``rag_core.evaluate.metric_catalog``): higher is better for the retrieval, evidence, context, answer,
citation and judge scores; lower for latencies (``latency/*``), ``context/words`` and ``judge/failures``.
For a lower-is-better metric the test runs on ``baseline_q - candidate_q`` (the margin is in the metric's
unit: milliseconds for a latency); the difference shown is always candidate minus baseline. A column of the per-query table that is not a score (``query``, ``top_sources``,
``outcome``, the ``first_relevant_*`` ranks) or a metric of unknown direction is refused (bad input),
naming the metrics the gate accepts.
Left out: tests other than the t-test (the paired bootstrap's p of ``significance``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from rag_core.errors import BadInput
from rag_core.evaluate.metric_catalog import METRICS
from rag_core.workbench.statistics.intervals import Interval, bootstrap_interval
from rag_core.workbench.statistics.selection import ALPHA, holm

DEFAULT_METRICS = ("page/ndcg@10",)


def metric_direction(metric: str) -> bool | None:
    """True: higher is better; False: lower is better; None: not a registered metric (a column of text, a
    rank, an index figure)."""
    return METRICS.direction(metric)


@dataclass(frozen=True)
class MetricGate:
    metric: str
    baseline: Interval  # mean over queries [bootstrap 95% interval]
    candidate: Interval
    difference: Interval  # candidate - baseline, query by query: the mean [bootstrap 95% interval]
    p: float  # one-sided: worse by more than the margin
    p_holm: float
    worse: bool  # p_holm < alpha
    higher_is_better: bool = True

    def as_json(self) -> dict[str, Any]:
        return {"metric": self.metric, "baseline": vars(self.baseline), "candidate": vars(self.candidate),
                "difference": vars(self.difference), "p": self.p, "p_holm": self.p_holm, "worse": self.worse,
                "higher_is_better": self.higher_is_better}


@dataclass(frozen=True)
class GateResult:
    metrics: tuple[MetricGate, ...]
    margin: float
    alpha: float
    queries: int

    @property
    def failed(self) -> bool:
        return any(gate.worse for gate in self.metrics)

    def as_json(self) -> dict[str, Any]:
        return {"failed": self.failed, "margin": self.margin, "alpha": self.alpha, "queries": self.queries,
                "metrics": [gate.as_json() for gate in self.metrics]}


def worse_p_value(differences: Sequence[float], margin: float = 0.0) -> float:
    """One-sided p-value that the mean of `differences` (candidate - baseline) is below ``-margin``."""
    from scipy.stats import ttest_1samp

    shifted = np.asarray(differences, dtype=float) + margin
    if len(shifted) < 2:
        return 1.0  # no evidence
    if np.ptp(shifted) == 0:  # no variance: the t statistic is undefined; the difference is certain
        return 0.0 if shifted[0] < 0 else 1.0
    return float(ttest_1samp(shifted, 0.0, alternative="less").pvalue)


def gate_values(baseline: Mapping[str, Mapping[str, float]], candidate: Mapping[str, Mapping[str, float]], *,
                margin: float = 0.0, alpha: float = ALPHA) -> GateResult:
    """The gate from per-query values (metric -> query id -> value) of both sides, on the same queries;
    higher is better unless ``metric_direction`` says lower (names it does not know count as scores)."""
    if not baseline:
        raise ValueError("no metric to gate on")
    tested = []
    for metric in baseline:
        base, cand = baseline[metric], candidate[metric]
        if set(base) != set(cand):
            raise ValueError(f"{metric}: the two sides scored different queries")
        ids = sorted(base)
        differences = [cand[query] - base[query] for query in ids]
        sign = -1.0 if metric_direction(metric) is False else 1.0  # lower is better: a rise is the loss
        tested.append((metric, bootstrap_interval([base[q] for q in ids]), bootstrap_interval([cand[q] for q in ids]),
                       bootstrap_interval(differences), worse_p_value([sign * d for d in differences], margin), sign))
    adjusted = holm([p for *_, p, _ in tested])
    gates = tuple(MetricGate(metric, base, cand, difference, p, p_holm, p_holm < alpha, sign > 0)
                  for (metric, base, cand, difference, p, sign), p_holm in zip(tested, adjusted))
    return GateResult(gates, margin, alpha, len(next(iter(baseline.values()))))


def per_query_values(per_query: Sequence[Mapping[str, Any]], metrics: Sequence[str]) -> dict[str, dict[str, float]]:
    """metric -> query id -> value, from an evaluation's per-query rows; a metric they lack, a column that
    is not a score (text, ranks) and a metric of unknown direction are bad input naming the valid ones."""
    gateable = gate_metrics(per_query)
    for metric in metrics:
        if metric not in gateable:
            higher = [name for name, up in gateable.items() if up]
            lower = [name for name, up in gateable.items() if not up]
            column = bool(per_query) and metric in per_query[0]
            what = (f"unknown metric {metric!r}" if not column else f"{metric} has no value for some queries"
                    if metric_direction(metric) is not None else
                    f"{metric!r} is not a metric (a column of text or ranks)")
            raise BadInput(f"{what} for the gate; metrics (higher is better): {', '.join(higher)}; "
                           f"(lower is better): {', '.join(lower)}")
    values = {metric: {str(row["query_id"]): float(row[metric]) for row in per_query} for metric in metrics}
    for metric, by_query in values.items():
        if any(math.isnan(value) for value in by_query.values()):
            raise BadInput(f"{metric} has no value for some queries: choose another metric for the gate")
    return values


def gate_metrics(per_query: Sequence[Mapping[str, Any]]) -> dict[str, bool]:
    """The per-query columns the gate can test (numbers on every row, of known direction) -> higher is better."""
    def number(value: Any) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool)

    columns = list(per_query[0]) if per_query else []
    return {name: direction for name in columns if (direction := metric_direction(name)) is not None
            and all(number(row.get(name)) for row in per_query)}
