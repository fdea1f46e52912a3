"""What the MLflow UI shows when it opens an experiment of the workbench.

- The experiment kind. MLflow 3 keeps it in the experiment tag ``mlflow.experimentKind``
  (``custom_model_development``: runs table first, Traces tab beside it; ``genai_development``: GenAI
  overview first); without it the UI guesses from what the experiment holds. MLflow 3.17's UI also has
  a global "GenAI | Model training" switch that, when set, decides for every experiment; it defaults
  to GenAI, is kept in the browser, and follows the URL parameter ``workflowType=machine_learning``.
  So the workbench sets the tag (older 3.x UIs obey it) and its URLs carry the parameter.
- A runs view with the columns that matter first (``RUNS_VIEW_COLUMNS``: the primary metric, then
  mode, chunk size, overlap, k and re-rank depth, and the golden set), best run first. MLflow keeps a
  user's columns in the browser and has no server-side default, but it opens a saved, shared view
  from the experiment tag ``mlflow.sharedViewState.<key>`` when the URL carries
  ``?viewStateShareKey=<key>``: ``runs_view_url`` is that URL, printed after an evaluation or sweep.

Both tags are written when the workbench creates an experiment, and added to an existing experiment
that lacks them (a kind chosen in the UI is kept). Left out: the charts of the view (MLflow's
defaults), the GenAI evaluation tabs.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from rag_core.evaluate.metrics import DEFAULT_PRIMARY_METRIC
from rag_core.workbench.tracking.mlflow_names import mlflow_metric_name

EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"  # the UI's "machine learning" kind: runs first ("genai_development": overview)
WORKFLOW_PARAMETER = "workflowType=machine_learning"  # the UI's "Model training" side (runs, models, traces)
VIEW_KEY = "rag-workbench-runs"
VIEW_TAG = "mlflow.sharedViewState." + VIEW_KEY
RUNS_VIEW_SETTINGS = ("mode", "chunk_size", "overlap", "k", "rerank_depth")


def runs_view_columns(primary_metric: str = DEFAULT_PRIMARY_METRIC,
                      settings: Sequence[str] = RUNS_VIEW_SETTINGS) -> list[str]:
    """The runs table's column keys, as MLflow's UI names them (``metrics.`page/ndcg_at_10```)."""
    return [f"metrics.`{mlflow_metric_name(primary_metric)}`", *(f"params.`{name}`" for name in settings),
            "attributes.`Dataset`"]


def runs_view_state(primary_metric: str = DEFAULT_PRIMARY_METRIC) -> dict[str, Any]:
    """The shared view: the columns above, runs ordered by the primary metric, best first."""
    return {"selectedColumns": runs_view_columns(primary_metric),
            "orderByKey": f"metrics.`{mlflow_metric_name(primary_metric)}`", "orderByAsc": False,
            "runListHidden": False, "viewMaximized": False}


def experiment_tags(primary_metric: str = DEFAULT_PRIMARY_METRIC) -> dict[str, str]:
    """The tags a new experiment is created with."""
    return {EXPERIMENT_KIND_TAG: EXPERIMENT_KIND, VIEW_TAG: json.dumps(runs_view_state(primary_metric))}


def missing_tags(existing: dict[str, str], primary_metric: str = DEFAULT_PRIMARY_METRIC) -> dict[str, str]:
    """The tags an existing experiment lacks (its kind, when set, is the user's choice: kept)."""
    return {key: value for key, value in experiment_tags(primary_metric).items() if key not in existing}


def runs_view_url(ui_url: str, experiment_id: str) -> str:
    """The experiment's runs table with the workbench's columns, in the UI at `ui_url`."""
    return (f"{ui_url.rstrip('/')}/#/experiments/{experiment_id}/runs?{WORKFLOW_PARAMETER}"
            f"&viewStateShareKey={VIEW_KEY}")
