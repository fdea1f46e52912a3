"""Comparing evaluation runs read back from MLflow: a table best first, and a paired significance
test between two runs (``paired_tests``: ``ranx.compare``'s Student's t without ranx's start-up;
``ranx.compare`` for its other tests); the metric-vs-setting and quality-vs-latency plots are in
``rag_core.workbench.reports.plots``. The table's metrics can carry bootstrap 95% intervals over queries (``rag_core.workbench.statistics.intervals``).

Runs come from one sweep (its parent run's children; by default the latest sweep of the experiment)
or from every evaluation run of an experiment. A table row is one run: its run id and name, every
param (settings as numbers where they are numbers) and every metric, with ``@`` names. A point
retried after a failure has several child runs; only its latest finished one is kept.

The significance test rebuilds the qrels and rankings from the ``ranx/qrels.json`` and
``ranx/run.json`` artifacts that ``rag_core.workbench.tracking.tracker`` logs with every run. It is done at page or
document level, whose relevance does not depend on the chunking; chunk-level relevance differs
between chunk sizes, so such runs are not comparable query by query. Used by ``rag_core.sweep`` and
``notebooks/03-compare.ipynb``; logging runs is ``rag_core.workbench.tracking.tracker``. Settings whose values are
whole numbers stay integers in the table (``256``, not ``256.000``), even beside a failed run.
Left out: tests other than ranx's.
"""

from __future__ import annotations

import json
import math
import tempfile
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from rag_core.config import RagConfig, setting_names
from rag_core.workbench.statistics.honest import swept_settings
from rag_core.workbench.statistics.paired_tests import STAT_TEST, PairedReport, paired_report
from rag_core.workbench.tracking.tracker import PARENT_RUN_TAG, TAG_PREFIX, RunStatus, Tracker, run_metrics

if TYPE_CHECKING:
    import pandas as pd
    from ranx.data_structures.report import Report

    from rag_core.workbench.statistics.holdout import QuerySplit

NOTHING_RETRIEVED = "__nothing_retrieved__"  # stands in for an empty ranking (scores 0, as rag_core.evaluate.metrics)
NOTHING_RELEVANT = "__nothing_relevant__"  # stands in for a query without relevant items at a level


# --- reading runs -------------------------------------------------------------------------------
def latest_sweep(experiment: str, tracking_uri: str | None = None) -> str | None:
    """Run id of the most recent sweep parent run in `experiment`, or None."""
    runs = Tracker.at(tracking_uri).runs(experiment, f"tags.`{TAG_PREFIX}kind` = 'sweep'", ["attributes.start_time DESC"])
    return runs[0].info.run_id if runs else None


def load_runs(experiment: str, *, parent_run_id: str | None = None, tracking_uri: str | None = None,
              statuses: Sequence[str] | None = (RunStatus.FINISHED,), latest_sweep_only: bool = True) -> "pd.DataFrame":
    """One row per run: the children of `parent_run_id` (default: the latest sweep, when
    `latest_sweep_only`), else every evaluation run of `experiment`. `statuses` None keeps all."""
    import pandas as pd

    tracker = Tracker.at(tracking_uri)
    settings = set(setting_names())
    if parent_run_id is None and latest_sweep_only:
        parent_run_id = latest_sweep(experiment, tracker.uri)
    if parent_run_id:
        runs = tracker.child_runs(experiment, parent_run_id)
    else:
        runs = [run for run in tracker.runs(experiment) if run.data.tags.get(f"{TAG_PREFIX}kind") != "sweep"]
    rows = []
    for run in runs:
        row: dict[str, Any] = {
            "run_id": run.info.run_id, "run_name": run.info.run_name, "status": run.info.status,
            "start_time": run.info.start_time, "parent_run_id": run.data.tags.get(PARENT_RUN_TAG),
            "point_hash": run.data.tags.get(f"{TAG_PREFIX}point_hash") or run.info.run_id,
            "error": run.data.tags.get(f"{TAG_PREFIX}error"),
        }
        row.update({key: _number(value) if key in settings else value for key, value in run.data.params.items()})
        row.update(run_metrics(run))
        rows.append(row)
    table = pd.DataFrame(rows, columns=None if rows else ["run_id", "run_name", "status", "point_hash"])
    if table.empty:
        return table
    # a retried point: keep its finished run, else its latest
    table["_finished"] = table["status"] == RunStatus.FINISHED
    table = table.sort_values(["_finished", "start_time"]).drop_duplicates("point_hash", keep="last")
    table = table.drop(columns="_finished")
    if statuses is not None:
        table = table[table["status"].isin(statuses)]
    return table.reset_index(drop=True)


def comparison_table(runs: "pd.DataFrame", primary_metric: str, settings: Sequence[str] | None = None,
                     metrics: Iterable[str] = (), *, per_query: Mapping[str, "pd.DataFrame"] | None = None,
                     split: "QuerySplit | None" = None) -> "pd.DataFrame":
    """Finished runs best first by `primary_metric` (rank 1 = best), then the others (failed). With
    `per_query` (run id -> per-query table, ``intervals.load_per_query``), every metric gets its bootstrap
    95% interval over queries in ``<metric> ci_low`` / ``<metric> ci_high`` columns (``tune/`` and
    ``holdout/`` metrics over that part of `split`)."""
    import pandas as pd

    settings = list(settings) if settings is not None else swept_settings(runs)
    columns = list(dict.fromkeys([*settings, primary_metric, *metrics]))  # a column once, whoever names it twice
    if runs.empty:
        return pd.DataFrame(columns=["rank", *columns, "status", "run_id"])
    table = runs.reindex(columns=[*columns, "status", "run_id", "error"])
    finished = table[table["status"] == RunStatus.FINISHED].sort_values(primary_metric, ascending=False, kind="stable")
    finished.insert(0, "rank", range(1, len(finished) + 1))
    others = table[table["status"] != RunStatus.FINISHED].assign(rank=None)
    table = pd.concat([finished, others[finished.columns]] if len(others) else [finished], ignore_index=True)
    if table["error"].isna().all():
        table = table.drop(columns="error")
    table = _integer_settings(table, settings)
    if per_query is not None:
        from rag_core.workbench.statistics.intervals import with_intervals

        table = with_intervals(table, per_query, columns[len(settings):], split)
    return table


def _integer_settings(table: "pd.DataFrame", settings: Sequence[str]) -> "pd.DataFrame":
    """Settings whose values are all whole numbers as a nullable integer column: a missing value
    (a failed run) would otherwise make the column float, printed as '256.000'."""
    import pandas as pd

    for name in settings:
        values = table[name].dropna()
        numeric = pd.to_numeric(values, errors="coerce")
        if len(values) and numeric.notna().all() and (numeric % 1 == 0).all() and not values.map(
                lambda value: isinstance(value, bool)).any():
            table[name] = pd.to_numeric(table[name], errors="coerce").astype("Int64")
    return table


def baseline_run(runs: "pd.DataFrame", defaults: RagConfig | None = None) -> "pd.Series":
    """The run whose swept settings are the defaults (RagConfig()); without one, the run that
    matches most of them."""
    defaults = (defaults or RagConfig()).as_params()
    swept = swept_settings(runs) or [name for name in setting_names() if name in runs]
    matches = runs.apply(lambda row: sum(str(row[name]) == defaults[name] for name in swept), axis=1)
    return runs.loc[matches.idxmax()]


# --- significance -------------------------------------------------------------------------------
def significance(runs: Sequence["pd.Series"], metrics: Sequence[str], *, tracking_uri: str | None = None,
                 stat_test: str = "student", max_p: float = 0.05) -> "PairedReport | Report":
    """Paired test of `runs` on `metrics` (all at one level, page or doc), query by query: Student's t
    (``paired_tests``, no ranx: ranx's typed containers compile for 10-18 s in every new process), or
    ``ranx.compare`` for its other tests (``fisher``, ``tukey``)."""
    levels = {metric.split("/", 1)[0] for metric in metrics}
    if len(levels) != 1 or not levels <= {"page", "doc"}:
        raise ValueError(f"compare at one level, page or doc (chunk relevance depends on the chunking): {list(metrics)}")
    level = levels.pop()
    tracker = Tracker.at(tracking_uri)
    qrels, rankings = None, {}
    with tempfile.TemporaryDirectory(prefix="rag-compare-") as folder:
        for position, row in enumerate(runs):
            run_qrels, run_ranking = (_artifact_json(tracker, row["run_id"], name, Path(folder) / str(position))[level]
                                      for name in ("ranx/qrels.json", "ranx/run.json"))
            if qrels is None:
                qrels = run_qrels
            elif run_qrels != qrels:
                raise ValueError(f"runs {runs[0]['run_id']} and {row['run_id']} were judged on different {level} "
                                 "relevance (another golden set?): they cannot be compared query by query")
            rankings[_run_label(row, position)] = {qid: run_ranking.get(qid) or {NOTHING_RETRIEVED: 0.0} for qid in qrels}
    qrels = {qid: items or {NOTHING_RELEVANT: 1} for qid, items in qrels.items()}
    if stat_test == STAT_TEST:
        return paired_report(qrels, rankings, [metric.split("/", 1)[1] for metric in metrics], max_p)
    from ranx import Qrels, Run, compare

    ranx_runs = [Run(ranking, name=name) for name, ranking in rankings.items()]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*unsafe cast.*")
        return compare(Qrels(qrels), ranx_runs, [metric.split("/", 1)[1] for metric in metrics],
                       stat_test=stat_test, max_p=max_p)


def significance_summary(report: "PairedReport | Report", best: "pd.Series", baseline: "pd.Series") -> dict[str, Any]:
    """Scores and p-values of the best run against the baseline, as plain values."""
    data = report.to_dict()
    best_name, baseline_name = _run_label(best, 0), _run_label(baseline, 1)
    return {
        "best_run_id": best["run_id"], "baseline_run_id": baseline["run_id"], "same_run": best["run_id"] == baseline["run_id"],
        "stat_test": data["stat_test"],
        "best": {metric: float(value) for metric, value in data[best_name]["scores"].items()},
        "baseline": {metric: float(value) for metric, value in data[baseline_name]["scores"].items()},
        "p_values": {metric: None if math.isnan(value) else float(value)  # NaN: ranx's p for identical values
                     for metric, value in data[best_name]["comparisons"][baseline_name].items()},
        "win_tie_loss": data[best_name]["win_tie_loss"][baseline_name],
    }


def _run_label(row: "pd.Series", position: int) -> str:
    """ranx needs distinct run names: '1: <run name>', '2: <run name>', ..."""
    return f"{position + 1}: {row.get('run_name') or row['run_id']}"


def _artifact_json(tracker: Tracker, run_id: str, path: str, folder: Path) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    return json.loads(tracker.download(run_id, path, folder).read_text())


def _number(value: str) -> Any:
    """'256' -> 256, '0.75' -> 0.75, anything else unchanged."""
    for kind in (int, float):
        try:
            return kind(value)
        except (TypeError, ValueError):
            pass
    return value
