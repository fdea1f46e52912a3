"""A quality gate for CI: is a candidate configuration worse than the baseline on the same queries?

Both configurations are evaluated on the same golden-set queries (``rag_core.evaluate.evaluator``).
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
Left out: tests other than the t-test (the paired bootstrap's p of ``significance``), gating on latency.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from rag_core.config import RagConfig
from rag_core.errors import BadInput
from rag_core.workbench.statistics.intervals import Interval, bootstrap_interval
from rag_core.workbench.statistics.selection import ALPHA, holm

DEFAULT_METRICS = ("page/ndcg@10",)


@dataclass(frozen=True)
class MetricGate:
    metric: str
    baseline: Interval  # mean over queries [bootstrap 95% interval]
    candidate: Interval
    difference: Interval  # candidate - baseline, query by query: the mean [bootstrap 95% interval]
    p: float  # one-sided: worse by more than the margin
    p_holm: float
    worse: bool  # p_holm < alpha

    def as_json(self) -> dict[str, Any]:
        return {"metric": self.metric, "baseline": vars(self.baseline), "candidate": vars(self.candidate),
                "difference": vars(self.difference), "p": self.p, "p_holm": self.p_holm, "worse": self.worse}


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
    """The gate from per-query values (metric -> query id -> value) of both sides, on the same queries."""
    if not baseline:
        raise ValueError("no metric to gate on")
    tested = []
    for metric in baseline:
        base, cand = baseline[metric], candidate[metric]
        if set(base) != set(cand):
            raise ValueError(f"{metric}: the two sides scored different queries")
        ids = sorted(base)
        differences = [cand[query] - base[query] for query in ids]
        tested.append((metric, bootstrap_interval([base[q] for q in ids]), bootstrap_interval([cand[q] for q in ids]),
                       bootstrap_interval(differences), worse_p_value(differences, margin)))
    adjusted = holm([p for *_, p in tested])
    gates = tuple(MetricGate(metric, base, cand, difference, p, p_holm, p_holm < alpha)
                  for (metric, base, cand, difference, p), p_holm in zip(tested, adjusted))
    return GateResult(gates, margin, alpha, len(next(iter(baseline.values()))))


def per_query_values(per_query: Sequence[Mapping[str, Any]], metrics: Sequence[str]) -> dict[str, dict[str, float]]:
    """metric -> query id -> value, from an evaluation's per-query rows; a metric it lacks is bad input."""
    known = set(per_query[0]) if per_query else set()
    for metric in metrics:
        if metric not in known:
            names = sorted(name for name in known if name.split("/")[0] in ("chunk", "page", "doc"))
            raise BadInput(f"unknown metric {metric!r} for the gate; per-query metrics: {', '.join(names[:24])}")
    values = {metric: {str(row["query_id"]): float(row[metric]) for row in per_query} for metric in metrics}
    for metric, by_query in values.items():
        if any(math.isnan(value) for value in by_query.values()):
            raise BadInput(f"{metric} has no value for some queries: choose another metric for the gate")
    return values


def run_gate(baseline: RagConfig, candidate: RagConfig, *, golden: str | Path, store_dir: str | Path,
             input_dir: str | Path | None = None, metrics: Sequence[str] = DEFAULT_METRICS, margin: float = 0.0,
             alpha: float = ALPHA, progress: bool = False) -> GateResult:
    """Evaluate both configurations on the golden set's queries over the store's (or `input_dir`'s) documents."""
    from rag_core.evaluate.evaluator import evaluate_config
    from rag_core.service import store_access
    from rag_core.workbench.execution.evaluation import load_eval_inputs

    if not 0 < alpha < 1 or not math.isfinite(margin) or margin < 0:
        raise BadInput(f"`alpha` must be in (0, 1) and `margin` >= 0, got alpha {alpha}, margin {margin}")
    inputs = load_eval_inputs(input_dir=input_dir, golden=golden, store_dir=store_dir, progress=progress)
    sides = []
    with store_access(Path(store_dir)):
        for config in (baseline, candidate):
            report = evaluate_config(config, inputs.corpus, inputs.queries, store_dir, progress=progress,
                                     read_seconds=inputs.read_seconds)
            sides.append(per_query_values(report.per_query, list(dict.fromkeys(metrics))))
    return gate_values(*sides, margin=margin, alpha=alpha)
