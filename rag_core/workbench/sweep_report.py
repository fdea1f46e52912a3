"""A sweep's comparison table with bootstrap intervals, and its honest winner when queries are held out.

``compare_sweep`` is shared by the sweep (``rag_core.workbench.sweep``) and ``notebooks/03-compare.ipynb``:
the table best first, every metric with its bootstrap 95% interval over queries; with a holdout it is
ranked by the primary metric on the tuning queries (``tune/page/ndcg@10``), shows the held-out score
beside it and a ``role`` column (winner, default), and comes with the ``HoldoutReport``.

``sweep_table`` is the sweep's end: it reads the points' runs and per-query tables back from MLflow,
logs each point's ``tune/...`` and ``holdout/...`` metrics, the split and the report on the parent run
(metrics ``winner/tune/<metric>``, ``winner/holdout/<metric>``, ``winner/optimism/<metric>``,
``default/holdout/<metric>``, ..., tags ``rag.winner_run_id``, ``rag.default_run_id``,
``rag.default_point``), and returns the table. ``read_sweep_holdout`` reads that back.
Left out: the split (``holdout``), the winner's choice (``honest``), terminal output (``rag_core.cli``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping, Sequence

from rag_core.evaluate.golden import GoldenQuery
from rag_core.workbench.holdout import HoldoutSplit, load_split, log_split, part_metrics, split_queries
from rag_core.workbench.honest import HoldoutReport, default_config, extra_default_point, holdout_report
from rag_core.workbench.intervals import load_per_query
from rag_core.workbench.sweep_file import SweepPoint, SweepSpec
from rag_core.workbench.tracking import Tracker

if TYPE_CHECKING:
    import pandas as pd

    from rag_core.config import RagConfig
    from rag_core.workbench.points import PointOutcome

EXTRA_POINT = "extra point"


@dataclass(frozen=True)
class HoldoutPlan:
    """Made before a holdout sweep runs: its split, and the extra default point to run (or None)."""
    split: HoldoutSplit
    default: "RagConfig | None"
    extra: SweepPoint | None


@dataclass(frozen=True)
class SweepHoldout:
    """What a sweep's parent run records about its holdout."""
    split: HoldoutSplit
    default_run_id: str | None
    default_status: str  # "grid point" | "extra point" | why the default has no score


def plan_holdout(spec: SweepSpec, queries: Sequence[GoldenQuery], points: list[SweepPoint]) -> HoldoutPlan | None:
    if spec.holdout is None:
        return None
    split = split_queries([query.id for query in queries], spec.holdout, spec.holdout_seed)
    return HoldoutPlan(split, default_config(spec), extra_default_point(spec, points))


def compare_sweep(runs: "pd.DataFrame", per_query: Mapping[str, "pd.DataFrame"], primary_metric: str,
                  settings: Sequence[str] | None, metrics: Sequence[str],
                  holdout: SweepHoldout | None = None) -> tuple["pd.DataFrame", HoldoutReport | None]:
    """(the comparison table with intervals, the holdout report or None)."""
    from rag_core.workbench.compare import comparison_table

    if holdout is None or runs.empty:
        return comparison_table(runs, primary_metric, settings, metrics, per_query=per_query), None
    extra = {holdout.default_run_id} if holdout.default_status == EXTRA_POINT else set()
    try:
        report = holdout_report(runs, per_query, holdout.split, primary_metric, holdout.default_run_id,
                                holdout.default_status, extra)
    except ValueError:  # no point finished: nothing to choose from
        return comparison_table(runs, primary_metric, settings, metrics, per_query=per_query), None
    table = comparison_table(runs, f"tune/{primary_metric}", settings, [f"holdout/{primary_metric}", primary_metric, *metrics],
                             per_query=per_query, split=holdout.split)
    default_role = "default" + (" (extra point)" if extra else "")
    roles = {report.winner.run_id: "winner", **({report.default.run_id: default_role} if report.default else {})}
    if report.default and report.default.run_id == report.winner.run_id:
        roles[report.winner.run_id] = "winner, default"
    table.insert(1, "role", [roles.get(run_id, "") for run_id in table["run_id"]])
    return table, report


def sweep_table(tracker: Tracker, experiment: str, parent_id: str, spec: SweepSpec, plan: HoldoutPlan | None,
                outcomes: Sequence["PointOutcome"], metrics: Sequence[str]) -> tuple["pd.DataFrame", HoldoutReport | None]:
    """The sweep's comparison table; with a holdout, log the per-part metrics and the report first."""
    from rag_core.workbench.compare import load_runs

    runs = load_runs(experiment, parent_run_id=parent_id, tracking_uri=tracker.uri, statuses=None)
    finished = runs[runs["status"] == "FINISHED"]["run_id"] if not runs.empty else []
    per_query = load_per_query(finished, tracker.uri)
    holdout = None
    if plan is not None:
        log_split(tracker, parent_id, plan.split)
        for run_id, table in per_query.items():
            values = part_metrics(table, plan.split)
            tracker.log(run_id, metrics=values)
            for name, value in values.items():
                runs.loc[runs["run_id"] == run_id, name] = value
        holdout = SweepHoldout(plan.split, *_default_run(plan, outcomes))
    table, report = compare_sweep(runs, per_query, spec.primary_metric, spec.axes, metrics, holdout)
    if report is not None:
        tracker.log(parent_id, metrics=report.metrics(), tags=report.tags())
    return table, report


def read_sweep_holdout(experiment: str, parent_run_id: str | None = None,
                       tracking_uri: str | None = None) -> SweepHoldout | None:
    """The holdout of a sweep (default: the experiment's latest), or None when it held out no queries."""
    from rag_core.workbench.compare import latest_sweep

    tracker = Tracker.at(tracking_uri)
    parent_run_id = parent_run_id or latest_sweep(experiment, tracker.uri)
    split = load_split(tracker, parent_run_id) if parent_run_id else None
    if split is None:
        return None
    tags = tracker.client.get_run(parent_run_id).data.tags
    return SweepHoldout(split, tags.get("rag.default_run_id") or None, tags.get("rag.default_point", "unknown"))


def best_and_baseline(runs: "pd.DataFrame", primary_metric: str,
                      report: HoldoutReport | None = None) -> tuple["pd.Series", "pd.Series"]:
    """The runs to test against each other: the winner and the default run of a holdout report; without
    one (or without a default score), the best run on all queries and the run closest to the defaults."""
    from rag_core.workbench.compare import baseline_run

    def row(run_id: str) -> "pd.Series":
        return runs[runs["run_id"] == run_id].iloc[0]

    best = row(report.winner.run_id) if report else runs.sort_values(primary_metric, ascending=False).iloc[0]
    return best, row(report.default.run_id) if report and report.default else baseline_run(runs)


def _default_run(plan: HoldoutPlan, outcomes: Sequence["PointOutcome"]) -> tuple[str | None, str]:
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
