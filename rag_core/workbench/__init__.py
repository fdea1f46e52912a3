"""The workbench: evaluations logged to MLflow, sweeps over a grid of settings (each point a papermill
execution of the evaluation notebook in a warm kernel), comparison of runs, and the exploration helpers.

Modules: ``sweep_file`` (reading and checking a sweep file), ``kernels`` (warm Jupyter kernels for
papermill), ``points`` (one point: child run, notebook, outcome), ``sweep`` (running them all),
``sweep_runs`` (the sweep's parent run in MLflow), ``ray_executor`` (the sweep on a Ray cluster),
``evaluation`` (one evaluation, as the notebook and ``eval`` run it), ``tracking`` (MLflow: the tracker,
``TrackingTarget``, ``RunStatus``), ``mlflow_names`` (metric names as MLflow stores them),
``traces`` (one MLflow trace per evaluated query), ``datasets`` (the golden set as a run's dataset
input), ``experiment_view`` (what the MLflow UI opens on), ``compare`` (runs read back), ``explore``
(the exploration notebook's helpers), ``holdout`` (held-out queries), ``intervals`` (bootstrap
intervals), ``selection`` (paired tests against the best, Holm, the one-SE rule), ``honest`` (the
winner chosen on tuning queries), ``sweep_report`` (a sweep's table and holdout report),
``judge_calibration`` (the judge against human scores), ``fusion_tuning`` (learned fusion weights),
``plots`` (every plot), ``reports`` (every result as text, for the CLI and the notebooks), ``compact_table``
(a sweep's table in 120 columns);
searches: ``search_space`` (strategy, budget, range axes), ``search`` (the Optuna driver: TPE, halving),
``search_run`` (trials as child runs, the winner on held-out queries), ``search_report`` (its table and
history), ``cost`` (measured throughputs, ``--dry-run`` estimates), ``sweep_result`` (what both return);
the feedback loop: ``query_traces`` (a question as a trace to label), ``labels`` (labelled traces read
back), ``gate`` (is a candidate configuration worse than the baseline?).
"""

from rag_core._lazy import lazy_exports

__getattr__, __all__ = lazy_exports(__name__, {
    "load_sweep": "sweep_file", "SweepSpec": "sweep_file", "SweepPoint": "sweep_file", "run_sweep": "sweep",
    "SweepResult": "sweep", "PointOutcome": "points", "read_recorded_result": "points",
    "evaluate_and_log": "evaluation", "load_eval_inputs": "evaluation", "EvalRun": "evaluation", "Tracker": "tracking",
    "TrackingTarget": "tracking", "RunStatus": "tracking", "format_eval_report": "reports", "format_sweep": "reports",
    "comparison_table": "compare", "load_runs": "compare", "calibrate_judge": "judge_calibration",
    "log_calibration": "judge_calibration",
    "split_queries": "holdout", "QuerySplit": "holdout", "bootstrap_interval": "intervals",
    "load_per_query": "intervals", "shown_with_intervals": "intervals", "WinnerReport": "honest",
    "compare_sweep": "sweep_report", "read_sweep_holdout": "sweep_report",
    "run_search": "search_run", "SearchHistory": "search", "read_search": "search_report", "estimate": "cost",
    "log_answered_query": "query_traces", "labelled_traces": "labels", "run_gate": "gate", "gate_values": "gate",
})
