"""A paired test of runs over the same queries, metric by metric: what ``ranx.compare`` reports with
``stat_test="student"``, computed without ranx.

ranx builds its ``Qrels`` and ``Run`` on numba's typed dictionaries and lists, whose methods numba
compiles in every new process and cannot cache (ranx's own functions are ``cache=True``; the typed
containers' are not): 10-18 s on 2 busy cores before the first comparison of a notebook kernel, for
a test that takes milliseconds. Here the per-query values come from ``rag_core.evaluate.metrics``
(ranx's definitions, checked against ranx in its tests), and the test is Student's paired t-test,
two-sided (``selection.paired_t_test``; ``scipy.stats.ttest_rel`` is its reference), as ranx's
``student``. One difference: two runs with the same value on every query get p = 1 (no evidence of a
difference), where ranx (scipy) gives NaN. Win/tie/loss counts the queries where the first run
scores higher / the same / lower, as ranx does.

Items of equal score share a rank, and each metric is its expected value over their orders
(``rag_core.evaluate.page_credit.tied_metric``): the page credit of the run that logged them.
``rankings``: run name -> query id -> item id -> score (higher first: the ``ranx/run.json`` artifact);
``qrels``: query id -> item id -> relevance (> 0 is relevant).
Left out: Fisher's randomization test and Tukey's HSD (``compare.significance`` leaves those to ranx).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from rag_core.evaluate.page_credit import from_scores, tied_metric
from rag_core.workbench.statistics.selection import paired_t_test

STAT_TEST = "student"


@dataclass(frozen=True)
class PairedReport:
    names: tuple[str, ...]  # the runs, in the order given
    metrics: tuple[str, ...]  # ranx names: "ndcg@10", "recall@5"
    queries: int
    scores: dict[str, dict[str, float]]  # run -> metric -> mean over the queries
    p_values: dict[tuple[str, str], dict[str, float]]  # (run, other run) -> metric -> two-sided p
    win_tie_loss: dict[tuple[str, str], dict[str, dict[str, int]]]  # (run, other) -> metric -> {"W", "T", "L"}
    max_p: float = 0.05
    stat_test: str = STAT_TEST

    def to_dict(self) -> dict[str, Any]:
        """The shape of ranx's ``Report.to_dict``: ``{"stat_test", "metrics", "model_names", run: {"scores",
        "comparisons": {other: {metric: p}}, "win_tie_loss": {other: {metric: {"W", "T", "L"}}}}}``."""
        data: dict[str, Any] = {"stat_test": self.stat_test, "metrics": list(self.metrics), "model_names": list(self.names)}
        for name in self.names:
            others = [other for other in self.names if other != name]
            data[name] = {"scores": dict(self.scores[name]),
                          "comparisons": {other: dict(self.p_values[name, other]) for other in others},
                          "win_tie_loss": {other: dict(self.win_tie_loss[name, other]) for other in others}}
        return data

    def __str__(self) -> str:
        letters = "abcdefghijklmnopqrstuvwxyz"
        header = ["#", "run", *self.metrics]
        rows = []
        for position, name in enumerate(self.names):
            cells = []
            for metric in self.metrics:
                beaten = "".join(letters[other] for other, rival in enumerate(self.names) if rival != name
                                 and self.scores[name][metric] > self.scores[rival][metric]
                                 and self.p_values[name, rival][metric] < self.max_p)
                cells.append(f"{self.scores[name][metric]:.3f}" + (f" >{beaten}" if beaten else ""))
            rows.append([letters[position], name, *cells])
        widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
        lines = ["  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip() for row in [header, *rows]]
        lines.append(f"Paired t-test (two-sided) over {self.queries} queries; '>b': better than run b at p < {self.max_p:g}")
        for position, name in enumerate(self.names):
            for other in self.names[position + 1:]:
                lines.append(f"p {letters[position]} vs {letters[self.names.index(other)]}: " + ", ".join(
                    f"{metric} {self.p_values[name, other][metric]:.3g}" for metric in self.metrics))
        return "\n".join(lines)

    __repr__ = __str__  # a notebook cell ending with the report shows this table


def per_query_values(qrels: Mapping[str, Mapping[str, float]], ranking: Mapping[str, Mapping[str, float]],
                     metrics: Sequence[str]) -> dict[str, np.ndarray]:
    """metric -> its value on each query of `qrels` (in `qrels` order); a query missing from `ranking`
    scores 0, as does one without a relevant item."""
    values = {metric: np.zeros(len(qrels)) for metric in metrics}
    for position, (query_id, judged) in enumerate(qrels.items()):
        groups = from_scores(ranking.get(query_id) or {})
        relevant = {item for item, relevance in judged.items() if relevance > 0}
        for metric in metrics:
            values[metric][position] = tied_metric(metric, groups, relevant)
    return values


def paired_report(qrels: Mapping[str, Mapping[str, float]], rankings: Mapping[str, Mapping[str, Mapping[str, float]]],
                  metrics: Sequence[str], max_p: float = 0.05) -> PairedReport:
    """Every run of `rankings` against every other on `metrics`, query by query over the queries of `qrels`."""
    values = {name: per_query_values(qrels, ranking, metrics) for name, ranking in rankings.items()}
    names = tuple(rankings)
    scores = {name: {metric: float(values[name][metric].mean()) if len(qrels) else math.nan for metric in metrics}
              for name in names}
    p_values, win_tie_loss = {}, {}
    for name in names:
        for other in names:
            if other == name:
                continue
            p_values[name, other] = {metric: paired_t_test(values[name][metric], values[other][metric]).p
                                     for metric in metrics}
            win_tie_loss[name, other] = {metric: {"W": int((values[name][metric] > values[other][metric]).sum()),
                                                  "T": int((values[name][metric] == values[other][metric]).sum()),
                                                  "L": int((values[name][metric] < values[other][metric]).sum())}
                                         for metric in metrics}
    return PairedReport(names, tuple(metrics), len(qrels), scores, p_values, win_tie_loss, max_p)


__all__ = ["PairedReport", "paired_report", "per_query_values"]
