"""A sweep's comparison table with bootstrap intervals, the points indistinguishable from the best, and
its honest winner when queries are held out.

``compare_sweep`` is shared by the sweep (``rag_core.workbench.execution.sweep``) and ``notebooks/03-compare.ipynb``:
the table best first, every metric with its bootstrap 95% interval over queries, and three columns
from ``rag_core.workbench.statistics.selection``: ``role`` (``winner``: the point the sweep's ``select`` rule
chose; ``default``), ``vs best`` (``best``, ``within 1 SE``, ``same``: indistinguishable from the
best by a paired t-test over queries, Holm-corrected; ``worse``) and ``p vs best`` (the Holm-adjusted
p-value). With a holdout the table is ranked by the primary metric on the tuning queries
(``tune/page/ndcg@10``), the tests and the choice use those queries only, the held-out score is
shown beside it, and a ``WinnerReport`` comes with it.

``sweep_table`` is the sweep's end: it reads the points' runs and per-query tables back from MLflow,
logs each point's ``tune/...`` and ``holdout/...`` metrics, the split (params ``holdout`` and
``holdout_seed``, the tag ``rag.holdout_query_ids`` when it fits in a tag, the artifact
``holdout/split.json`` always) and the report on the parent run (metrics ``winner/tune/<metric>``,
``winner/holdout/<metric>``, ``winner/optimism/<metric>``, ``default/holdout/<metric>``, ..., tags
``rag.winner_run_id``, ``rag.default_run_id``, ``rag.default_point``; without a holdout the winner
chosen on all queries), the rule (tag ``rag.select``) and the count of indistinguishable points
(metric ``select/indistinguishable_points``), and returns the table. ``read_sweep_holdout`` and
``read_sweep_rule`` read them back.
Left out: the split (``holdout``), the tests and rules (``selection``), the winner's choice on tuning
queries (``honest``), terminal output (``rag_core.cli``).
"""

from __future__ import annotations

import json
import math
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

from rag_core.components.stages import applying
from rag_core.evaluate.metric_catalog import reported_metrics
from rag_core.evaluate.metrics import FALLBACK_PRIMARY_METRIC
from rag_core.workbench.plans.holdout_plan import SplitWithDefaultConfig
from rag_core.workbench.plans.sweep_file import SweepSpec
from rag_core.workbench.reports.compare import baseline_run, comparison_table, latest_sweep, load_runs
from rag_core.workbench.statistics.holdout import QuerySplit, part_metrics, split_of
from rag_core.workbench.statistics.honest import WinnerReport, choose, holdout_report
from rag_core.workbench.statistics.intervals import load_per_query
from rag_core.workbench.statistics.selection import BEST, SAME, WITHIN_ONE_SE, Selection
from rag_core.workbench.tracking.tracker import Tracker

if TYPE_CHECKING:
    from mlflow.entities import Run

    import pandas as pd

    from rag_core.workbench.plans.results import PointOutcome

EXTRA_POINT = "extra point"
SPLIT_ARTIFACT = "holdout/split.json"
IDS_TAG = "rag.holdout_query_ids"
SELECT_TAG = "rag.select"
MAX_TAG_CHARS = 5000
VS_BEST_LEGEND = ("vs best: paired t-test over queries against the best, Holm-corrected (p vs best); same = "
                  "indistinguishable (p > 0.05); within 1 SE = what select: one_se chooses from")


@dataclass(frozen=True)
class SplitWithDefaultRun:
    """What a sweep's parent run records about its holdout: the split and the default configuration's run."""
    split: QuerySplit
    default_run_id: str | None
    default_status: str  # "grid point" | "extra point" | why the default has no score


def compare_sweep(runs: "pd.DataFrame", per_query: Mapping[str, "pd.DataFrame"], primary_metric: str,
                  settings: Sequence[str] | None, metrics: Sequence[str], holdout: SplitWithDefaultRun | None = None,
                  select_rule: str = "max") -> tuple["pd.DataFrame", WinnerReport | None]:
    """(the comparison table with intervals and the selection columns, the holdout report or None)."""
    if runs.empty:
        return comparison_table(runs, primary_metric, settings, metrics, per_query=per_query), None
    report, extra = None, set()
    if holdout is not None:
        extra = {holdout.default_run_id} if holdout.default_status == EXTRA_POINT else set()
        try:
            report = holdout_report(runs, per_query, holdout.split, primary_metric, holdout.default_run_id,
                                    holdout.default_status, extra, select_rule)
        except ValueError:  # no point finished: nothing to choose from
            pass
    if report is None:
        table = comparison_table(runs, primary_metric, settings, metrics, per_query=per_query)
        try:
            selection = choose(runs, per_query, primary_metric, select_rule)
        except ValueError:  # no finished run with per-query values
            return table, None
        roles = {selection.chosen: "winner"}
    else:
        table = comparison_table(runs, f"tune/{primary_metric}", settings,
                                 [f"holdout/{primary_metric}", primary_metric, *metrics], per_query=per_query,
                                 split=holdout.split)
        selection = report.selection
        roles = {report.winner.run_id: "winner"}
        if report.default:
            default_role = "default" + (" (extra point)" if extra else "")
            roles[report.default.run_id] = "winner, default" if report.default.run_id == report.winner.run_id else default_role
    return with_selection(table, selection, roles), report


def with_selection(table: "pd.DataFrame", selection: Selection, roles: Mapping[str, str]) -> "pd.DataFrame":
    """`table` with ``role``, ``vs best`` and ``p vs best`` columns after ``rank``."""
    table = table.copy()
    table.insert(1, "role", [roles.get(run_id, "") for run_id in table["run_id"]])
    known = set(selection.means)
    table.insert(2, "vs best", [selection.verdict(run_id) if run_id in known else "" for run_id in table["run_id"]])
    table.insert(3, "p vs best", [selection.p_holm.get(run_id, math.nan) for run_id in table["run_id"]])
    return table


def sweep_table(tracker: Tracker, experiment: str, parent_id: str, spec: SweepSpec, plan: SplitWithDefaultConfig | None,
                outcomes: Sequence["PointOutcome"], metrics: Sequence[str]) -> tuple["pd.DataFrame", WinnerReport | None]:
    """The sweep's comparison table; with a holdout, log the per-part metrics and the report first."""
    import pandas as pd

    runs = without_unread(load_runs(experiment, parent_run_id=parent_id, tracking_uri=tracker.uri, statuses=None),
                          spec.axes, outcomes)
    finished = runs[runs["status"] == "FINISHED"]["run_id"] if not runs.empty else []
    per_query = load_per_query(finished, tracker.uri)
    holdout = None
    if plan is not None:
        log_split(tracker, parent_id, plan.split)
        parts = {run_id: part_metrics(table, plan.split) for run_id, table in per_query.items()}
        for run_id, values in parts.items():
            tracker.log(run_id, metrics=values)
        by_run = pd.DataFrame.from_dict(parts, orient="index")
        scored = runs["run_id"].isin(by_run.index)
        for name in by_run.columns:  # a column at a time: cell by cell cost 0.6 s for 12 runs
            runs.loc[scored, name] = runs.loc[scored, "run_id"].map(by_run[name])
        holdout = SplitWithDefaultRun(plan.split, *_default_run(plan, outcomes))
    metrics = table_columns(runs.columns, spec.primary_metric, metrics)
    table, report = compare_sweep(runs, per_query, spec.primary_metric, spec.axes, metrics, holdout, spec.select)
    tags = {SELECT_TAG: spec.select}
    if "vs best" in table:
        tracker.log(parent_id, metrics={"select/indistinguishable_points": int(table["vs best"].isin(
            [BEST, WITHIN_ONE_SE, SAME]).sum())})
    if report is not None:
        tracker.log(parent_id, metrics=report.metrics(), tags={**report.tags(), **tags})
    elif "role" in table and (table["role"] == "winner").any():
        winner = table[table["role"] == "winner"].iloc[0]
        name = runs.loc[runs["run_id"] == winner["run_id"], "run_name"]
        tracker.log(parent_id, tags={**tags, "rag.winner_run_id": winner["run_id"],
                                     "rag.winner": str(name.iloc[0]) if len(name) else winner["run_id"]})
    return table, report


def without_unread(runs: "pd.DataFrame", axes: Sequence[str], outcomes: Sequence["PointOutcome"]) -> "pd.DataFrame":
    """`runs` with each swept setting that its point's components do not read left empty (``overlap`` under
    ``chunker: semantic``, ``bm25_k1`` with ``mode: dense``): such a run stands for every value of it (the sweep
    merged those points), and its logged value was never used."""
    if runs.empty:
        return runs
    for outcome in outcomes:
        read = applying(outcome.point.config)
        unread = [axis for axis in axes if axis in runs.columns and axis not in read]
        if outcome.run_id is not None and unread:
            runs.loc[runs["run_id"] == outcome.run_id, unread] = None
    return runs


def table_columns(columns: Sequence[str], primary_metric: str, first: Sequence[str] = ()) -> list[str]:
    """The comparison table's metrics after the primary one: `first` (the sweep file's ``table_metrics``), then
    every other registered metric some run logged (``reported_metrics``: registry order, a fused retriever's own
    lists after the final ranking's), so that ``comparison.csv`` and ``sweep --wide`` hold every metric with its
    interval. A part's means (``tune/...``, ``holdout/...``, logged for every metric with a holdout) are left to
    the holdout report, which adds the primary metric's."""
    logged = [name for name in reported_metrics(columns) if split_of(name)[0] is None]  # tune/, holdout/: the report's
    return list(dict.fromkeys(name for name in [*first, *logged] if name != primary_metric))


def log_split(tracker: Tracker, run_id: str, split: QuerySplit) -> None:
    """The split on the sweep's parent run: counts as metrics, ids as a tag (when short enough) and an artifact."""
    ids = ",".join(split.held_out)
    tags = {IDS_TAG: ids} if len(ids) <= MAX_TAG_CHARS else {IDS_TAG: f"{len(split.held_out)} ids: see {SPLIT_ARTIFACT}"}
    tracker.log(run_id, metrics={"holdout/tuning_queries": len(split.tuning), "holdout/held_out_queries": len(split.held_out)},
                tags=tags)
    with tempfile.TemporaryDirectory(prefix="rag-holdout-") as folder:
        path = Path(folder) / "split.json"
        path.write_text(json.dumps(split.as_dict(), indent=1))
        tracker.log_artifacts(run_id, [path], "holdout")


def load_split(tracker: Tracker, run_id: str) -> QuerySplit | None:
    """The split logged on a sweep's parent run, or None (a sweep without holdout)."""
    if IDS_TAG not in tracker.client.get_run(run_id).data.tags:
        return None
    with tempfile.TemporaryDirectory(prefix="rag-holdout-") as folder:
        data = json.loads(tracker.download(run_id, SPLIT_ARTIFACT, folder).read_text())
    return QuerySplit(float(data["fraction"]), int(data["seed"]), tuple(data["tuning"]), tuple(data["held_out"]))


def read_sweep_holdout(experiment: str, parent_run_id: str | None = None,
                       tracking_uri: str | None = None) -> SplitWithDefaultRun | None:
    """The holdout of a sweep (default: the experiment's latest), or None when it held out no queries."""
    tracker = Tracker.at(tracking_uri)
    parent_run_id = parent_run_id or latest_sweep(experiment, tracker.uri)
    split = load_split(tracker, parent_run_id) if parent_run_id else None
    if split is None:
        return None
    tags = tracker.client.get_run(parent_run_id).data.tags
    return SplitWithDefaultRun(split, tags.get("rag.default_run_id") or None, tags.get("rag.default_point", "unknown"))


def _sweep_parent(experiment: str, parent_run_id: str | None, tracking_uri: str | None) -> "Run | None":
    tracker = Tracker.at(tracking_uri)
    parent_run_id = parent_run_id or latest_sweep(experiment, tracker.uri)
    return tracker.client.get_run(parent_run_id) if parent_run_id else None


def read_sweep_rule(experiment: str, parent_run_id: str | None = None, tracking_uri: str | None = None) -> str:
    """The selection rule a sweep (default: the experiment's latest) chose its winner by; ``max`` when it
    recorded none (sweeps from before ``select``)."""
    parent = _sweep_parent(experiment, parent_run_id, tracking_uri)
    return parent.data.tags.get(SELECT_TAG, "max") if parent else "max"


def read_sweep_primary_metric(experiment: str, parent_run_id: str | None = None, tracking_uri: str | None = None) -> str:
    """The metric a sweep (default: the experiment's latest) ranked its points by; ``page/ndcg@10`` when it
    recorded none."""
    parent = _sweep_parent(experiment, parent_run_id, tracking_uri)
    return (parent.data.params.get("primary_metric") if parent else None) or FALLBACK_PRIMARY_METRIC


def best_and_baseline(runs: "pd.DataFrame", primary_metric: str, report: WinnerReport | None = None,
                      table: "pd.DataFrame | None" = None) -> tuple["pd.Series", "pd.Series"]:
    """The runs to test against each other: the winner (of the holdout report, else the ``role`` column of
    `table`, else the best run on all queries) and the default run of the holdout report (without one, or
    without a default score, the run closest to the defaults)."""
    def row(run_id: str) -> "pd.Series":
        return runs[runs["run_id"] == run_id].iloc[0]

    chosen = table[table["role"].str.startswith("winner")]["run_id"] if table is not None and "role" in table else []
    if report:
        best = row(report.winner.run_id)
    elif len(chosen):
        best = row(chosen.iloc[0])
    else:
        best = runs.sort_values(primary_metric, ascending=False).iloc[0]
    return best, row(report.default.run_id) if report and report.default else baseline_run(runs)


def indistinguishable_rows(table: "pd.DataFrame") -> "pd.DataFrame":
    """The rows of a sweep's table that are the best or indistinguishable from it (``vs best``)."""
    if "vs best" not in table:
        return table.iloc[0:0]
    return table[table["vs best"].isin([BEST, WITHIN_ONE_SE, SAME])]


def _default_run(plan: SplitWithDefaultConfig, outcomes: Sequence["PointOutcome"]) -> tuple[str | None, str]:
    """(run id, status) of the default configuration's point."""
    if plan.default is None:
        return None, "invalid: RagConfig defaults with the base settings are not a valid configuration"
    params = plan.default.as_params()
    outcome = next((o for o in outcomes if o.point.config.as_params() == params), None)
    if outcome is None:
        return None, "not run"
    if outcome.status not in ("FINISHED", "SKIPPED") or outcome.run_id is None:
        return None, f"{outcome.status.lower()}: {(outcome.error or '').splitlines()[0][:300] if outcome.error else ''}"
    return outcome.run_id, EXTRA_POINT if outcome.point.number == 0 else "grid point"
