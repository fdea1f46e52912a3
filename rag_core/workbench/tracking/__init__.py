"""MLflow: where runs, traces and datasets go and how they are read back.

Modules: ``tracker`` (the tracker, ``TrackingTarget``, ``RunStatus``, secrets kept out of runs),
``mlflow_names`` (metric names as MLflow stores them), ``experiment_view`` (what the MLflow UI opens on),
``traces`` (one MLflow trace per evaluated query), ``datasets`` (the golden set as a run's dataset input),
``query_traces`` (an asked question as a trace to label), ``labels`` (labelled traces read back).
"""

from rag_core._lazy import lazy_exports

__getattr__, __all__ = lazy_exports(__name__, {
    "Tracker": "tracker", "TrackingTarget": "tracker", "RunStatus": "tracker", "SecretInRun": "tracker",
    "run_metrics": "tracker",
    "mlflow_metric_name": "mlflow_names", "metric_name_from_mlflow": "mlflow_names",
    "runs_view_url": "experiment_view", "experiment_tags": "experiment_view",
    "log_query_traces": "traces", "log_golden_input": "datasets",
    "log_answered_query": "query_traces", "labelled_traces": "labels",
})
