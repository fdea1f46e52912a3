"""The workbench: evaluations logged to MLflow, sweeps over a grid of settings (each point a papermill
execution of the evaluation notebook in a warm kernel) or searched with Optuna, statistics to choose among
them, and reports. One subpackage per concern, each with its own ``__all__``:

- ``tracking``: MLflow (runs, traces, datasets, the UI's view, labelled traces read back);
- ``execution``: the sweep plan, one evaluation, one point, the local and Ray executors, cost estimates;
- ``search``: Optuna searches (space, driver, trials, report) and learned fusion weights;
- ``statistics``: held-out queries, intervals, paired tests, selection rules, the quality gate;
- ``reports``: text, plots, sweep tables, run comparison, the explore notebook's helpers.

The names below are the workbench's public entry points, imported on first use.
"""

from rag_core._lazy import lazy_exports

__getattr__, __all__ = lazy_exports(__name__, {
    "load_sweep": "execution.sweep_file", "SweepSpec": "execution.sweep_file", "SweepPoint": "execution.sweep_file",
    "run_sweep": "execution.sweep", "SweepResult": "execution.sweep_result", "PointOutcome": "execution.points",
    "read_recorded_result": "execution.points", "evaluate_and_log": "execution.evaluation",
    "load_eval_inputs": "execution.evaluation", "EvalRun": "execution.evaluation", "Tracker": "tracking.tracker",
    "TrackingTarget": "tracking.tracker", "RunStatus": "tracking.tracker", "format_eval_report": "reports.text",
    "format_sweep": "reports.text", "comparison_table": "reports.compare", "load_runs": "reports.compare",
    "calibrate_judge": "statistics.judge_calibration", "log_calibration": "statistics.judge_calibration",
    "split_queries": "statistics.holdout", "QuerySplit": "statistics.holdout",
    "bootstrap_interval": "statistics.intervals", "load_per_query": "statistics.intervals",
    "shown_with_intervals": "statistics.intervals", "WinnerReport": "statistics.honest",
    "compare_sweep": "reports.sweep_report", "read_sweep_holdout": "reports.sweep_report",
    "run_search": "search.run", "SearchHistory": "search.driver", "read_search": "search.report",
    "estimate": "execution.cost", "log_answered_query": "tracking.query_traces",
    "labelled_traces": "tracking.labels", "run_gate": "statistics.gate", "gate_values": "statistics.gate",
})
