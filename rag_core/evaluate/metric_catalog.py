"""The metric catalog: every module that declares built-in metrics, imported by name, so the registry is whole.

Each metric is declared where it is computed (``rag_core.evaluate.metric_registry``); whoever needs the whole
table (the gate's directions, a sweep file's ``primary_metric`` and ``table_metrics``, the comparison table,
``--help``, the docs' table and its test) imports this module rather than relying on the side effects of
unrelated imports, as ``rag_core.catalog`` does for the components. A plugin's metrics join when the plugin is
loaded (``plugins:``).

- ``METRICS``: the registry, whole;
- ``metrics_table()``: the Markdown table of ``docs/evaluation.md`` ("Every metric"), which
  ``tests/unit/test_metric_registry.py`` checks against this registry;
- ``reported_metrics(columns)``: the registered metrics among a table's columns, in registry order (a sweep's
  ``comparison.csv`` and ``sweep --wide`` show each with its interval).
Left out: computing anything (each metric's module does).
"""

from __future__ import annotations

from typing import Iterable

from rag_core.evaluate import (answer_metrics, answer_scoring, answer_similarity, citation_metrics,  # noqa: F401
                               evaluator, evidence_budget, judge, metrics, page_credit, pairwise_judge)
from rag_core.evaluate.metric_registry import BUDGET, CUTOFF, METRICS, Metric

__all__ = ["METRICS", "metrics_table", "reported_metrics"]


def _row(metric: Metric) -> str:
    levels = ", ".join(f"`{level}`" for level in metric.levels)
    at = {CUTOFF: "@K (`metrics_k`)", BUDGET: "@B (`context_budgets`)"}.get(metric.parameter or "", "")
    better = "higher" if metric.higher_is_better else "lower"
    per_query = "yes" if metric.per_query else "no"
    return f"| `{metric.written}` | {levels} | {at} | {better} | {per_query} | {metric.help} |"


def metrics_table() -> str:
    """Every built-in metric as a Markdown table (name, levels, @K/@B, better, per query, what it measures)."""
    header = ["| metric | levels | takes | better | per query | what it measures |",
              "|---|---|---|---|---|---|"]
    return "\n".join([*header, *(_row(metric) for metric in METRICS if metric.origin == "built-in")])


def reported_metrics(columns: Iterable[str]) -> list[str]:
    """The columns that name a registered metric, in registry order (its levels' order, then its cutoffs and
    budgets as they appear in `columns`): unprefixed names first, then each prefix's (``bm25/``, ``dense/``,
    ``oracle/``) in alphabetical order."""
    found = [(column, METRICS.lookup(column)) for column in columns]
    order = {id(metric): position for position, metric in enumerate(METRICS)}
    named = [(column, hit) for column, hit in found if hit is not None]
    named.sort(key=lambda item: (column_prefix(item[0]).count("/"), column_prefix(item[0]), order[id(item[1].metric)],
                                 item[1].metric.levels.index(item[1].level)))
    return [column for column, _ in named]


def column_prefix(column: str) -> str:
    """What comes before a name's level: ``dense/`` in ``dense/page/recall@5``; empty for ``page/recall@5``."""
    parts = column.split("/")
    return "/".join(parts[:-2]) + "/" if len(parts) > 2 else ""
