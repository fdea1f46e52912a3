"""Honest winners: choose a sweep's configuration on the tuning queries, report it on the held-out ones.

With ``holdout`` in a sweep file (``rag_core.workbench.statistics.holdout`` splits the queries), the winner is
the grid point chosen on the tuning queries by the sweep's selection rule (``select: max``, the best
primary metric, or ``one_se``, the cheapest point within one standard error of the best:
``rag_core.workbench.statistics.selection``); ``choose`` applies the same rule to any set of queries, which is
how a sweep without holdout chooses on all of them. The report gives the winner's tuning and
held-out scores, the optimism (tuning minus held-out: how much choosing on those queries flattered
it), the default configuration's scores, and the winner's held-out gain over the default (with a
paired bootstrap interval over the held-out queries). Every score comes with its bootstrap 95%
interval (``rag_core.workbench.statistics.intervals``).

The default configuration is RagConfig's defaults with the sweep's base settings (``--config``,
``base``, setting flags) on top, what a user gets without tuning. When it is a grid point, that
point's run is used. When it is not, it is evaluated as one extra point (point 0) under the same
parent run: without its score on the same held-out queries there is nothing to compare the winner
with, and one more point costs little next to a grid. It is never a candidate for the winner (the
grid is the search space; ``rag_core.workbench.plans.holdout_plan`` plans it). When its model cannot be
loaded (a default re-ranker, offline) it is reported as unavailable.
Left out: nested splits and repeated holdouts; the table and the MLflow logging are ``sweep_report``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from rag_core.config import RagConfig, setting_names
from rag_core.workbench.statistics.holdout import PARTS, QuerySplit
from rag_core.workbench.statistics.intervals import Interval, bootstrap_interval, metric_interval
from rag_core.workbench.statistics.selection import LATENCY_COLUMN, Cost, Selection, select

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class ScoredRun:
    run_id: str
    label: str  # the run's name: its grid settings
    tune: Interval  # the primary metric on the tuning queries
    holdout: Interval  # ... and on the held-out queries


@dataclass(frozen=True)
class WinnerReport:
    """The winner chosen on the tuning queries, its held-out score, and the default configuration's."""
    metric: str  # the primary metric
    split: QuerySplit
    winner: ScoredRun  # chosen on the tuning queries by the selection rule
    default: ScoredRun | None  # None: not evaluated (see default_status)
    default_status: str  # "grid point" | "extra point" | why it has no score
    gain: Interval | None  # winner minus default, query by query on the held-out queries
    selection: Selection  # the rule, the best, the points indistinguishable from it (tuning queries)

    @property
    def optimism(self) -> float:
        return self.winner.tune.estimate - self.winner.holdout.estimate

    def metrics(self) -> dict[str, float]:
        """For the sweep's parent run: ``winner/holdout/page/ndcg@10``, ``winner/holdout_ci_low/...``, ..."""
        values = {f"winner/optimism/{self.metric}": self.optimism}
        for role, scored in (("winner", self.winner), ("default", self.default)):
            for part in PARTS if scored else ():
                interval = getattr(scored, part)
                values.update({f"{role}/{part}/{self.metric}": interval.estimate,
                               f"{role}/{part}_ci_low/{self.metric}": interval.low,
                               f"{role}/{part}_ci_high/{self.metric}": interval.high})
        if self.gain:
            values.update({f"winner/gain_over_default/{self.metric}": self.gain.estimate,
                           f"winner/gain_over_default_ci_low/{self.metric}": self.gain.low,
                           f"winner/gain_over_default_ci_high/{self.metric}": self.gain.high})
        return values

    def tags(self) -> dict[str, str]:
        return {"rag.winner_run_id": self.winner.run_id, "rag.winner": self.winner.label, "rag.select": self.selection.rule,
                "rag.default_point": self.default_status, "rag.default_run_id": self.default.run_id if self.default else ""}

    def as_dict(self) -> dict[str, Any]:
        def scored(run: ScoredRun | None) -> dict[str, Any] | None:
            return run and {"run_id": run.run_id, "label": run.label,
                            **{part: vars(getattr(run, part)) for part in PARTS}}

        return {"metric": self.metric, "holdout": self.split.fraction, "seed": self.split.seed,
                "tuning_queries": len(self.split.tuning), "held_out_query_ids": list(self.split.held_out),
                "winner": scored(self.winner), "optimism": self.optimism, "default": scored(self.default),
                "default_status": self.default_status, "gain_over_default": self.gain and vars(self.gain),
                "selection": self.selection.as_dict()}


def swept_settings(runs: "pd.DataFrame") -> list[str]:
    """Settings whose value differs between the runs, in RagConfig order."""
    return [name for name in setting_names() if name in runs and runs[name].astype(str).nunique() > 1]


def selection_inputs(runs: "pd.DataFrame", per_query: Mapping[str, "pd.DataFrame"], metric: str,
                     query_ids: Sequence[str] | None = None) -> tuple["pd.DataFrame", dict[str, Cost]]:
    """(query id x run id table of `metric` over `query_ids` (default: every query), each run's cost), for
    the finished runs that logged per-query values, best mean first (ties: in `runs` order)."""
    import pandas as pd

    finished = runs[(runs["status"] == "FINISHED") & runs["run_id"].isin(list(per_query))] if not runs.empty else runs
    columns = {}
    for run_id in finished["run_id"] if not finished.empty else ():
        table = per_query[run_id]
        if metric in table:
            values = table.set_index(table["query_id"].astype(str))[metric].astype(float)
            columns[run_id] = values if query_ids is None else values.reindex(list(query_ids))
    scores = pd.DataFrame(columns)
    scores = scores[sorted(scores.columns, key=lambda run_id: -_mean(scores[run_id]))]  # stable: ties keep runs order
    defaults = RagConfig().as_params()
    settings = [name for name in swept_settings(runs) if name in defaults]
    costs = {}
    for _, row in finished.iterrows():
        latency = row.get(LATENCY_COLUMN)
        costs[row["run_id"]] = Cost(float(latency) if latency is not None and not pd.isna(latency) else math.nan,
                                    sum(str(row[name]) != defaults[name] for name in settings))
    return scores, costs


def choose(runs: "pd.DataFrame", per_query: Mapping[str, "pd.DataFrame"], metric: str, rule: str = "max",
           query_ids: Sequence[str] | None = None, exclude: set[str] = frozenset()) -> Selection:
    """The rule's choice among the finished runs (not `exclude`, which are still tested) on `query_ids`."""
    scores, costs = selection_inputs(runs, per_query, metric, query_ids)
    return select(scores, rule, costs, candidates=[run_id for run_id in scores.columns if run_id not in exclude])


def holdout_report(runs: "pd.DataFrame", per_query: Mapping[str, "pd.DataFrame"], split: QuerySplit, metric: str,
                   default_run_id: str | None, default_status: str, extra_run_ids: set[str] = frozenset(),
                   select_rule: str = "max") -> WinnerReport:
    """Choose the winner among the finished runs (not `extra_run_ids`) on the tuning queries only, by `select_rule`."""
    def scored(row: "pd.Series") -> ScoredRun | None:
        table = per_query.get(row["run_id"])
        parts = [metric_interval(table, f"{part}/{metric}", split) if table is not None else None for part in PARTS]
        return ScoredRun(row["run_id"], str(row.get("run_name") or row["run_id"]), *parts) if all(parts) else None

    finished = runs[runs["status"] == "FINISHED"]
    candidates = {row["run_id"]: run for _, row in finished.iterrows() if row["run_id"] not in extra_run_ids
                  and (run := scored(row))}
    if not candidates:
        raise ValueError(f"no finished run has per-query {metric} values to choose a winner from")
    tested = finished[finished["run_id"].isin(set(candidates) | set(extra_run_ids))]
    selection = choose(tested, per_query, metric, select_rule, split.tuning, set(extra_run_ids))
    winner = candidates[selection.chosen]
    rows = finished[finished["run_id"] == default_run_id]
    default = scored(rows.iloc[0]) if default_run_id and len(rows) else None
    gain = None
    if default is not None:
        winner_values, default_values = (per_query[run.run_id].set_index("query_id")[metric] for run in (winner, default))
        held_out = [query_id for query_id in split.held_out if query_id in winner_values.index]
        gain = bootstrap_interval((winner_values[held_out] - default_values.reindex(held_out)).to_numpy())
    status = default_status if default or default_status.startswith("no score") else f"no score ({default_status})"
    return WinnerReport(metric, split, winner, default, status, gain, selection)


def _mean(values: "pd.Series") -> float:
    mean = float(values.mean())
    return mean if math.isfinite(mean) else -math.inf
