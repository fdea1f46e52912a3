"""An evaluation's answers as text: the metrics that need no LLM with their intervals, the oracle's losses, the
judge's scores and failures (``eval --answers``, ``--oracle``, ``--judge``; the evaluation notebook).

``answer_sections`` gives the answers sections of ``rag_core.workbench.reports.text.format_eval_report``: every answer
and citation metric of the registry that the per-query table holds, its mean with a percentile-bootstrap 95%
interval over the queries that have a value, and how many have one; then, with an oracle run, each metric's
loss due to retrieval (oracle - retrieved, paired, with its interval and p) and due to generation (perfect -
oracle: ``rag_core.workbench.statistics.oracle_loss``); then the judge's means and its failures.
``answer_view`` cuts a sweep's comparison table to its answer and citation metrics (``notebooks/03-compare``).
Left out: the per-query answers themselves (the per-query CSV and the traces hold them).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from rag_core.evaluate.metric_catalog import METRICS, reported_metrics
from rag_core.workbench.statistics.intervals import bootstrap_interval
from rag_core.workbench.statistics.oracle_loss import answer_losses

if TYPE_CHECKING:
    import pandas as pd

    from rag_core.evaluate.evaluator import EvalReport

ANSWER_LEVELS = ("answer", "citation")
JUDGE_AXES = ("faithfulness", "answer_relevance", "coverage", "answer_correctness")


def _values(rows: Sequence[Mapping[str, Any]], column: str) -> list[float]:
    values = [row.get(column) for row in rows]
    return [float(value) for value in values if isinstance(value, (int, float)) and not isinstance(value, bool)
            and not math.isnan(float(value))]


def answer_columns(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The per-query answer and citation metrics of `rows` (the retrieved run's, not the oracle's), registry order."""
    columns = list(dict.fromkeys(column for row in rows for column in row))
    return [column for column in reported_metrics(columns) if column.count("/") == 1
            and METRICS.lookup(column).level in ANSWER_LEVELS and METRICS.lookup(column).metric.per_query]


Section = tuple[str, list[str], list[list[str]]]  # (title line, table header, table rows); no header: text only


def answer_sections(report: "EvalReport") -> list[Section]:
    """The answers section, the oracle's and the judge's (none when the evaluation wrote no answers)."""
    rows, params = report.per_query, report.params
    if not any("answer_mode" in row for row in rows):
        return []
    modes = [row.get("answer_mode") for row in rows]
    counts = ", ".join(f"{modes.count(mode)} {str(mode).replace('_', ' ')}" for mode in dict.fromkeys(modes))
    table = [[column, str(bootstrap_interval(values)), str(len(values))]
             for column in answer_columns(rows) if (values := _values(rows, column))]
    sections: list[Section] = [(f"Answers ({counts}): mean [95% bootstrap interval over the queries with a value]",
                                ["metric", "mean [95% CI]", "queries"], table)]
    if params.get("answer_similarity_model"):
        sections.append((f"answer/similarity: cosine under {params['answer_similarity_model']} (a proxy of closeness, "
                         "not correctness)", [], []))
    return sections + oracle_section(rows) + judge_section(report.metrics)


def oracle_section(rows: Sequence[Mapping[str, Any]]) -> list[Section]:
    """The oracle's table: per metric, retrieved, oracle, the losses (none without an oracle run)."""
    losses = answer_losses(rows)
    if not losses:
        return []
    return [("Oracle (the same answer step given the golden evidence): loss due to retrieval = oracle - retrieved, "
             "paired over queries (t-test p); due to generation = perfect - oracle",
             ["metric", "retrieved", "oracle", "retrieval loss", "p", "generation loss"],
             [[loss.metric, str(loss.retrieved), str(loss.oracle), str(loss.retrieval_loss), f"{loss.p:.3g}",
               str(loss.generation_loss) if loss.generation_loss else "n/a"] for loss in losses])]


def judge_section(metrics: Mapping[str, float]) -> list[Section]:
    """The judge's means (1-5) and its failures, when it ran."""
    if "judge/failures" not in metrics:
        return []
    scores = ", ".join(f"{axis.replace('_', ' ')} {metrics[f'judge/{axis}']:.2f}" for axis in JUDGE_AXES
                       if f"judge/{axis}" in metrics)
    return [(f"Judge (1-5, LLM answers only): {scores or 'no score'}; {int(metrics['judge/failures'])} scores "
             f"missing after retries ({int(metrics.get('judge/unparseable', 0))} replies never parsed), counted and "
             "left out of the means", [], [])]


def answer_view(table: "pd.DataFrame", settings: Sequence[str]) -> "pd.DataFrame | None":
    """A comparison table (``compare_sweep``'s, with intervals) cut to its rank, role, `settings` and answer and
    citation metrics, each as ``0.412 [0.351, 0.470]``; None when no run scored answers (``03-compare``)."""
    from rag_core.workbench.statistics.intervals import LOW, HIGH, shown_with_intervals

    metrics = [column for column in table.columns if not column.endswith((LOW, HIGH)) and column.count("/") == 1
               and (found := METRICS.lookup(column)) is not None and found.level in ANSWER_LEVELS]
    if not metrics:
        return None
    kept = [column for column in ("rank", "role", "vs best", *settings) if column in table]
    intervals = [name for metric in metrics for name in (metric + LOW, metric + HIGH) if name in table]
    return shown_with_intervals(table[[*kept, *metrics, *intervals]])[[*kept, *metrics]]


__all__ = ["Section", "answer_columns", "answer_sections", "answer_view", "judge_section", "oracle_section"]
