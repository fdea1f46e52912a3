"""The workbench: evaluations logged to MLflow, sweeps over a grid of settings (each point a papermill
execution of the evaluation notebook in a warm kernel) or searched with Optuna, statistics to choose among
them, and reports. One subpackage per concern, each with its own ``__all__``, from the bottom up (a
subpackage imports only those below it: ``tests/unit/test_layers.py``):

- ``tracking``: MLflow (runs, traces, datasets, the UI's view, labelled traces read back);
- ``statistics``: held-out queries, intervals, paired tests, selection rules, the quality gate;
- ``plans``: the sweep file, a search's space, the holdout's default point, cost estimates, and the
  records running them returns (``EvalRun``, ``PointOutcome``, ``SweepResult``);
- ``search``: the Optuna driver (TPE, halving) and learned fusion weights;
- ``reports``: text, plots, sweep and search tables, run comparison, the explore notebook's helpers;
- ``execution``: one evaluation and its run, one point, the local and Ray executors, grids and searches
  run start to finish (each ends with its report).

The names below are the workbench's public entry points, imported on first use."""

from rag_core._lazy import lazy_exports

__getattr__, __all__ = lazy_exports(__name__, {
    "load_sweep": "plans.sweep_file", "SweepSpec": "plans.sweep_file", "SweepPoint": "plans.sweep_file",
    "run_sweep": "execution.sweep", "SweepResult": "plans.results", "PointOutcome": "plans.results",
    "read_recorded_result": "execution.points", "evaluate_and_log": "execution.evaluation",
    "load_eval_inputs": "execution.evaluation", "EvalRun": "plans.results", "Tracker": "tracking.tracker",
    "TrackingTarget": "tracking.tracker", "RunStatus": "tracking.tracker", "format_eval_report": "reports.text",
    "format_sweep": "reports.text", "comparison_table": "reports.compare", "load_runs": "reports.compare",
    "calibrate_judge": "statistics.judge_calibration", "log_calibration": "statistics.judge_calibration",
    "split_queries": "statistics.holdout", "QuerySplit": "statistics.holdout",
    "bootstrap_interval": "statistics.intervals", "load_per_query": "statistics.intervals",
    "shown_with_intervals": "statistics.intervals", "WinnerReport": "statistics.honest",
    "compare_sweep": "reports.sweep_report", "read_sweep_holdout": "reports.sweep_report",
    "run_search": "execution.search_run", "SearchHistory": "search.driver", "read_search": "reports.search_report",
    "estimate": "plans.cost", "log_answered_query": "tracking.query_traces",
    "labelled_traces": "tracking.labels", "run_gate": "execution.gate_run", "gate_values": "statistics.gate",
})
