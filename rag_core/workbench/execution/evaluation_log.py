"""One evaluation = one MLflow run (``log_evaluation``): its params, metrics, tags and artifacts, written
through ``rag_core.workbench.tracking.tracker``.

What a run holds (``log_evaluation``):
- params: every setting, the models actually used, corpus and golden-set fingerprints;
- metrics: every metric of the report. MLflow allows only ``[A-Za-z0-9_ ./:-]`` in metric names,
  so ``@`` is written ``_at_``: ``page/recall@5`` is logged as ``page/recall_at_5``. The mapping is
  one-to-one and only MLflow sees it (``rag_core.workbench.tracking.mlflow_names``): the CLI's JSON, the CSV and
  every table keep ``@``, and ``metric_name_from_mlflow`` turns names read back into the ``@`` form again;
- tags: the git commit (``mlflow.source.git.commit``), the fingerprints, and whatever the caller adds
  (``rag.point_hash`` for sweep points);
- artifacts (the plots drawn by ``rag_core.workbench.reports.plots``): ``per_query.csv``, ``metrics.json``
  (``@`` names), ``ranx/qrels.json`` and ``ranx/run.json`` (level -> query -> item -> score, what
  ``ranx.compare`` needs), and the plots ``plots/retrieval_by_level.png`` and ``plots/latency_by_stage.png``.

Beside ``log_evaluation``, an evaluation's run gets the golden set as its dataset input
(``rag_core.workbench.tracking.datasets``) and one trace per query (``rag_core.workbench.tracking.traces``):
``rag_core.workbench.execution.evaluation.evaluate_and_log`` adds both.
Secrets are guarded as everywhere (``tracker.guard_secrets``): nothing is logged whose value holds an API key.
Left out: the tracking store itself, reading runs back (``rag_core.workbench.reports.compare``).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Mapping

from rag_core.workbench.reports.plots import plot_latency_by_stage, plot_retrieval_by_level
from rag_core.workbench.tracking.tracker import (TAG_PREFIX, RunStatus, Tracker, TrackingTarget, git_tags,
                                                 guard_secret_files, guard_secrets)

if TYPE_CHECKING:
    from rag_core.evaluate.evaluator import EvalReport


def log_evaluation(report: "EvalReport", target: TrackingTarget, *, extra_artifacts: Iterable[str | Path] = ()) -> str:
    """Log `report` where `target` says (its ``experiment`` is required) and return the run id.

    Without ``target.run_id`` a run is created (nested under ``target.parent_run_id`` when given) and
    ended FINISHED (FAILED if logging fails). With ``target.run_id`` (a run the caller created, e.g. a
    sweep point) the report is logged into it and its status is left to the caller.
    """
    if not target.experiment:
        raise ValueError("log_evaluation needs target.experiment")
    tracker = Tracker.at(target.uri)
    run_id, run_name = target.run_id, target.run_name
    run_tags = {**evaluation_tags(report.params), **({TAG_PREFIX + "kind": "evaluation"} if run_id is None else {}),
                **target.tags}
    guard_secrets({**report.params, **run_tags, "run name": run_name or ""})
    with tempfile.TemporaryDirectory(prefix="rag-artifacts-") as folder:
        written = write_evaluation_artifacts(report, Path(folder))
        guard_secret_files([*written, *map(Path, extra_artifacts)])
        own_run = run_id is None
        if own_run:
            run_id = tracker.start_run(target.experiment, run_name, parent_run_id=target.parent_run_id, tags=run_tags)
        try:
            tracker.log(run_id, params=report.params, metrics=report.metrics, tags={} if own_run else run_tags)
            tracker.log_artifacts(run_id, [Path(folder)])
            tracker.log_artifacts(run_id, list(extra_artifacts))
        except BaseException:
            if own_run:
                tracker.finish(run_id, RunStatus.FAILED)
            raise
        if own_run:
            tracker.finish(run_id)
    return run_id


def evaluation_tags(params: Mapping[str, str]) -> dict[str, str]:
    tags = {TAG_PREFIX + key: params[key] for key in ("corpus_fingerprint", "golden_fingerprint") if key in params}
    tags.update(git_tags())
    return tags


def write_evaluation_artifacts(report: "EvalReport", folder: Path) -> list[Path]:
    """per_query.csv, metrics.json, ranx/{qrels,run}.json and plots/*.png under `folder`."""
    import pandas as pd

    folder.mkdir(parents=True, exist_ok=True)
    written = [folder / "per_query.csv", folder / "metrics.json"]
    pd.DataFrame(report.per_query).to_csv(written[0], index=False)
    written[1].write_text(json.dumps(report.metrics, indent=1, sort_keys=True))
    if report.qrels:
        (folder / "ranx").mkdir(exist_ok=True)
        written += [folder / "ranx" / "qrels.json", folder / "ranx" / "run.json"]
        written[-2].write_text(json.dumps(report.qrels))
        written[-1].write_text(json.dumps(report.runs))  # the rankings as scored
    (folder / "plots").mkdir(exist_ok=True)
    written += [folder / "plots" / "retrieval_by_level.png", folder / "plots" / "latency_by_stage.png"]
    plot_retrieval_by_level(report.metrics, written[-2])
    plot_latency_by_stage(report.metrics, written[-1])
    return written

