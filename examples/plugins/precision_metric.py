"""A ranking metric that is not built in: precision@K, as a plugin (docs/adding.md, "Add a metric").

Nothing in rag_core names this file. Loaded (``plugins: [precision_metric.py]`` in a config or sweep file,
``--plugins examples/plugins/precision_metric.py`` on any command, a notebook's ``plugins``), it registers
``precision@K`` at every ranking level: ``eval`` reports ``chunk/precision@5``, ``page/precision@10``, ...
beside recall, a sweep can rank by it (``primary_metric: page/precision@5``) and show it
(``table_metrics:``), ``gate --metric page/precision@5`` tests it, and it is in every run's MLflow metrics,
per-query CSV and traces.

A ranking metric is a function of the ranking's tie groups as ``spans``, one ``(positions before the group,
its size, relevant items in it)`` per group, best first, the cutoff K and the number of relevant items; tied
items are in random order, so the metric is its expected value over those orders (a group of n items holding
r relevant ones shows, at each of its positions, a relevant item with probability r / n).
Left out: graded relevance (evidence is binary).
"""

from __future__ import annotations

from typing import Sequence

from rag_core.evaluate.metric_registry import CUTOFF, METRICS, RANKING_LEVELS


@METRICS.define("precision", RANKING_LEVELS, "share of the first K items that are relevant (example plugin)",
                parameter=CUTOFF, best=1.0)
def precision(spans: Sequence[tuple[int, int, int]], cutoff: int, relevant: int) -> float:
    shown = sum(found * min(size, cutoff - start) / size for start, size, found in spans if start < cutoff)
    return shown / cutoff
