"""A fine-tuning run in MLflow: its settings, learning curves, held-out figures and the model itself.

Through ``rag_core.workbench.tracking.tracker.Tracker`` (the same store, URI and secret guard as evaluations):
one run in the experiment ``finetune <kind> | <data>`` unless one is named, with
- params: the kind, base model, data source, query counts, the negatives' source and depth, and every
  training setting (``finetune_*``);
- metrics by step: ``train/loss`` and ``validation/ndcg_at_10`` (MLflow draws them as curves), and once:
  ``train/seconds``, ``train/peak_memory_mb``, ``validation/best_ndcg_at_10`` and any held-out figures
  (``test/...``) the command measured;
- artifacts: the model folder under ``model/`` (what ``--rerank-model`` / ``--embed-model`` load) and
  ``finetune.json`` (the summary the model folder also holds).
Left out: MLflow's model flavours (the folder is a sentence-transformers model; it is logged as files).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Mapping

from rag_core.finetune.training import TrainingResult
from rag_core.workbench.tracking.tracker import TAG_PREFIX, Tracker, git_tags, mlflow_metric_name

SUMMARY_FILE = "finetune.json"


def log_training(result: TrainingResult, *, kind: str, params: Mapping[str, Any], metrics: Mapping[str, float],
                 experiment: str, run_name: str | None = None, tracking_uri: str | None = None) -> tuple[str, str]:
    """Log one fine-tuning run; returns (run id, tracking URI)."""
    from mlflow.entities import Metric

    tracker = Tracker.at(tracking_uri)
    run_id = tracker.start_run(experiment, run_name, tags={TAG_PREFIX + "kind": f"finetune-{kind}", **git_tags()})
    try:
        now = int(time.time() * 1000)
        stepped = [Metric(mlflow_metric_name("validation/ndcg@10"), point.ndcg_at_10, now, point.step)
                   for point in result.curve]
        stepped += [Metric("train/loss", loss, now, step) for step, loss in result.losses]
        for start in range(0, len(stepped), 500):
            tracker.client.log_batch(run_id, metrics=stepped[start:start + 500])
        best = result.best
        summary = {"train/seconds": result.train_seconds, "train/peak_memory_mb": result.peak_memory_mb,
                   "train/steps": float(result.steps), "validation/best_ndcg@10": best.ndcg_at_10,
                   "validation/best_step": float(best.step), **metrics}
        tracker.log(run_id, params={**params, "device": result.device, "precision": result.precision}, metrics=summary)
        files = [path for path in sorted(Path(result.model_dir).iterdir()) if path.name != "checkpoints"]
        tracker.log_artifacts(run_id, [path for path in files if path.name != SUMMARY_FILE], "model")
        tracker.log_artifacts(run_id, [path for path in files if path.name == SUMMARY_FILE])
    except BaseException:
        tracker.finish(run_id, "FAILED")
        raise
    tracker.finish(run_id)
    return run_id, tracker.uri
