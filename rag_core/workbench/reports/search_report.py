"""A search's comparison table and honest winner, and its history read back for ``03-compare``.

``search_table`` (the search's end) keeps the runs that scored every tuning query (the trials that
reached the last rung) and, with ``holdout:``, the winner's and the default configuration's runs on
every query, and passes them to ``sweep_report.compare_sweep``, the grid's report: best first by the
primary metric on the tuning queries, each metric with its bootstrap interval, the ``role`` column and
the ``WinnerReport`` (logged on the parent run as for a grid). Trial runs hold no held-out query, so
the only candidate for the winner there is the winner's run on every query. A ``trial`` column says
which trial each row is. Points that cannot be told apart from the best are marked by the grid's
report itself (``compare_sweep``, where the paired tests over queries live); a search's table goes
through it unchanged.

``read_search`` reads a finished (or running) search back: its trials from the Optuna study named on
the parent run (tags ``rag.search_storage``, ``rag.search_study``), as a table with the cost spent
so far and the best value so far, and Optuna's parameter importances (PED-ANOVA, Watanabe et al.,
IJCAI 2023, over the trials that reached every tuning query).
Left out: the search itself (``rag_core.workbench.search.driver``, ``rag_core.workbench.execution.search_run``),
plots (``plots``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from rag_core.workbench.plans.sweep_file import SweepSpec
from rag_core.workbench.reports.sweep_report import SplitWithDefaultRun, compare_sweep, log_split, table_columns
from rag_core.workbench.search.driver import COMPLETE, RECORD_ATTR, REPEAT, STORAGE_TAG, STUDY_TAG, SearchHistory, TrialRecord
from rag_core.workbench.statistics.holdout import QuerySplit, part_metrics
from rag_core.workbench.statistics.intervals import load_per_query
from rag_core.workbench.tracking.tracker import Tracker

if TYPE_CHECKING:
    import pandas as pd

    from rag_core.workbench.statistics.honest import WinnerReport


def search_table(tracker: Tracker, experiment: str, parent_id: str, spec: SweepSpec, history: SearchHistory,
                 split: QuerySplit | None, final: Mapping[str, Any],
                 metrics: Sequence[str]) -> tuple["pd.DataFrame", "WinnerReport | None"]:
    from rag_core.workbench.reports.compare import load_runs

    runs = load_runs(experiment, parent_run_id=parent_id, tracking_uri=tracker.uri, statuses=None)
    top = history.rungs[-1]
    trial_of: dict[str, int] = {}  # run id -> the first trial that ran it on every tuning query
    for trial in history.trials:
        for queries, _, run_id, _ in trial.evaluations:
            if queries == top and run_id:
                trial_of.setdefault(run_id, trial.number)
    winner_run, default_run = final.get("winner"), final.get("default")
    keep = set(trial_of)
    if winner_run and history.best is not None:  # the winner's run on every query stands for its trial
        keep -= {run_id for run_id, number in trial_of.items() if number == history.best.number}
    keep |= {run_id for run_id in (winner_run, default_run) if run_id}
    if runs.empty:
        return runs, None
    runs = runs[runs["run_id"].isin(keep)].reset_index(drop=True)
    per_query = load_per_query(runs["run_id"], tracker.uri)
    holdout = None
    if split is not None:
        log_split(tracker, parent_id, split)
        for run_id, table in per_query.items():
            values = part_metrics(table, split)
            tracker.log(run_id, metrics=values)
            for name, value in values.items():
                runs.loc[runs["run_id"] == run_id, name] = value
        holdout = SplitWithDefaultRun(split, default_run, str(final.get("default_status", "not run")))
    table, report = compare_sweep(runs, per_query, spec.primary_metric, spec.axes,
                                  table_columns(runs.columns, spec.primary_metric, metrics), holdout, spec.select)
    if "role" not in table and history.best is not None:
        winners = set(history.best.run_ids)
        table.insert(1, "role", ["winner" if run_id in winners else "" for run_id in table["run_id"]])
    table.insert(1, "trial", [trial_of.get(run_id, history.best.number if run_id == winner_run and history.best else None)
                              for run_id in table["run_id"]])
    table["trial"] = table["trial"].astype("Int64")
    if report is not None:
        tracker.log(parent_id, metrics=report.metrics(), tags=report.tags())
    return table, report


# --- reading a search back ------------------------------------------------------------------------
@dataclass(frozen=True)
class SearchView:
    strategy: str
    metric: str
    top_queries: int  # the last rung: every tuning query
    trials: "pd.DataFrame"  # one row per trial: number, status, value, queries, charged_seconds, spent_seconds, best_so_far, settings
    importances: dict[str, float] = field(default_factory=dict)  # setting -> importance (summing to 1); {} when too few trials


def read_search(experiment: str, parent_run_id: str | None = None, tracking_uri: str | None = None) -> SearchView | None:
    """The search of a sweep parent run (default: the experiment's latest sweep); None for a grid."""
    import optuna

    from rag_core.workbench.reports.compare import latest_sweep

    tracker = Tracker.at(tracking_uri)
    parent_run_id = parent_run_id or latest_sweep(experiment, tracker.uri)
    if not parent_run_id:
        return None
    run = tracker.client.get_run(parent_run_id)
    storage, name = run.data.tags.get(STORAGE_TAG), run.data.tags.get(STUDY_TAG)
    if not storage or not name:
        return None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.load_study(study_name=name, storage=storage)
    records = [TrialRecord(**json.loads(trial.user_attrs[RECORD_ATTR])) for trial in study.get_trials(deepcopy=False)
               if RECORD_ATTR in trial.user_attrs]
    strategy = run.data.params.get("strategy", "")
    return SearchView(strategy, run.data.params.get("primary_metric", ""), max((r.queries for r in records), default=0),
                      trials_frame(records), param_importances(study))


def trials_frame(records: Sequence[TrialRecord]) -> "pd.DataFrame":
    """Trials in order, with the seconds spent up to each and the best value at every tuning query so far."""
    import pandas as pd

    top = max((r.queries for r in records), default=0)
    rows, spent, best = [], 0.0, -math.inf
    for record in sorted(records, key=lambda r: r.number):
        spent += record.charged
        if record.value is not None and record.queries == top and record.status in (COMPLETE, REPEAT):
            best = max(best, record.value)
        rows.append({"number": record.number, "status": record.status, "value": record.value, "queries": record.queries,
                     "charged_seconds": record.charged, "cold_seconds": record.cold_seconds, "spent_seconds": spent,
                     "best_so_far": best if best > -math.inf else math.nan, **record.changes})
    return pd.DataFrame(rows)


def param_importances(study: Any) -> dict[str, float]:
    """Optuna's importances over the completed (not repeated, feasible) trials; {} when they are too few."""
    import optuna

    done = [trial for trial in study.get_trials(deepcopy=False) if trial.state == optuna.trial.TrialState.COMPLETE
            and RECORD_ATTR in trial.user_attrs and json.loads(trial.user_attrs[RECORD_ATTR])["status"] == COMPLETE]
    if len(done) < 3:
        return {}
    copy = optuna.create_study(direction="maximize")
    copy.add_trials(done)
    try:
        return dict(optuna.importance.get_param_importances(copy))
    except (RuntimeError, ValueError, ZeroDivisionError):  # too few distinct values to tell
        return {}
