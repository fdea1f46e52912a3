"""What retrieval loses and what generation loses, from one evaluation with an oracle run (``eval --oracle``).

The oracle answers each query from its golden evidence (``rag_core.evaluate.oracle``); the evaluation has,
per query, each answer metric twice: ``answer/token_f1`` (from the retrieved passages) and
``oracle/answer/token_f1`` (from the evidence). For each metric, over the queries where both have a value:

- **loss due to retrieval** = oracle - retrieved, query by query: its mean with a percentile-bootstrap 95%
  interval of the paired differences (``intervals.bootstrap_interval``) and Student's paired t-test, two-sided
  (``selection.paired_t_test``). 0 when retrieval already gives the answer step the evidence;
- **loss due to generation** = perfect - oracle, with the metric's perfect value from the registry
  (``Metric.best``: 1 for a share), the interval that of the oracle's mean: what the answer step loses even
  with the evidence in hand.

``loss_metrics`` gives both means as metrics of the run: ``loss/retrieval/answer/token_f1`` and
``loss/generation/answer/token_f1`` (a ``loss`` part makes a name lower-is-better in the registry).
Left out: losses of the judge's scores (an oracle run is not judged), metrics without a perfect value (no
generation loss).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from rag_core.evaluate.metric_catalog import METRICS, reported_metrics
from rag_core.evaluate.oracle import ORACLE
from rag_core.workbench.statistics.intervals import Interval, bootstrap_interval
from rag_core.workbench.statistics.selection import paired_t_test

SCORED_LEVELS = ("answer", "citation")  # the oracle's metrics: what an answer and its citations score


@dataclass(frozen=True)
class AnswerLoss:
    metric: str  # "answer/token_f1"
    queries: int  # with a value in both runs
    retrieved: Interval  # the retrieved run's mean [bootstrap 95%]
    oracle: Interval  # the oracle's
    retrieval_loss: Interval  # oracle - retrieved, paired: mean of the differences [bootstrap 95%]
    p: float  # paired t-test, two-sided
    generation_loss: Interval | None  # perfect - oracle (None: the metric has no perfect value)

    def as_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "queries": self.queries, "retrieved": vars(self.retrieved),
                "oracle": vars(self.oracle), "retrieval_loss": vars(self.retrieval_loss), "p": self.p,
                "generation_loss": vars(self.generation_loss) if self.generation_loss else None}


def _value(row: Mapping[str, Any], name: str) -> float | None:
    value = row.get(name)
    if value is None or isinstance(value, (str, bool)):
        return None
    value = float(value)
    return None if math.isnan(value) else value


def oracle_metrics(per_query: Sequence[Mapping[str, Any]]) -> list[str]:
    """The answer and citation metrics the rows hold for both runs, in registry order."""
    columns = list(dict.fromkeys(column for row in per_query for column in row))
    return [column for column in reported_metrics(columns) if f"{ORACLE}/{column}" in columns
            and (found := METRICS.lookup(column)) is not None and found.level in SCORED_LEVELS
            and found.metric.per_query]


def answer_losses(per_query: Sequence[Mapping[str, Any]]) -> list[AnswerLoss]:
    """Each answer metric's losses (see the module docstring); empty without an oracle run."""
    losses = []
    for metric in oracle_metrics(per_query):
        pairs = [(retrieved, oracle) for row in per_query
                 if (retrieved := _value(row, metric)) is not None and (oracle := _value(row, f"{ORACLE}/{metric}")) is not None]
        if not pairs:
            continue
        retrieved, oracle = [pair[0] for pair in pairs], [pair[1] for pair in pairs]
        oracle_mean = bootstrap_interval(oracle)
        best = METRICS.lookup(metric).metric.best
        generation = (Interval(best - oracle_mean.estimate, best - oracle_mean.high, best - oracle_mean.low)
                      if best is not None else None)
        losses.append(AnswerLoss(metric, len(pairs), bootstrap_interval(retrieved), oracle_mean,
                                 bootstrap_interval([o - r for r, o in pairs]), paired_t_test(oracle, retrieved).p,
                                 generation))
    return losses


def loss_metrics(per_query: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """``loss/retrieval/<metric>`` and ``loss/generation/<metric>`` means, for a run's metrics (empty without an oracle)."""
    metrics: dict[str, float] = {}
    for loss in answer_losses(per_query):
        metrics[f"loss/retrieval/{loss.metric}"] = loss.retrieval_loss.estimate
        if loss.generation_loss is not None:
            metrics[f"loss/generation/{loss.metric}"] = loss.generation_loss.estimate
    return metrics


__all__ = ["AnswerLoss", "answer_losses", "loss_metrics", "oracle_metrics"]
