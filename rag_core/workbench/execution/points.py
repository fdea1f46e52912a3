"""One sweep point: its MLflow child run, the evaluation notebook executed into it, and its outcome.

The sweep creates the child run (so a point that fails before the notebook logs anything is still a
FAILED run with its error), papermill executes ``notebooks/02-evaluate.ipynb`` with the point's
settings in a warm kernel (``rag_core.workbench.execution.kernels``), the notebook logs params, metrics and
artifacts into that run and records its result as JSON in its last cell, and this module attaches the
executed notebook and ends the run.
Left out: scheduling (``rag_core.workbench.execution.sweep``) and reading runs back (``rag_core.workbench.reports.compare``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_core.components import SETTINGS
from rag_core.config import RagConfig
from rag_core.paths import NOTEBOOKS_DIR
from rag_core.workbench.execution.kernels import WarmKernel
from rag_core.workbench.plans.results import RESULT_MIME, PointOutcome
from rag_core.workbench.plans.sweep_file import SweepPoint, SweepSpec, path_str
from rag_core.workbench.tracking.tracker import TAG_PREFIX, Tracker, git_tags

NOTEBOOK = NOTEBOOKS_DIR / "02-evaluate.ipynb"
POINT_HASH_TAG, SWEEP_HASH_TAG, KIND_TAG = TAG_PREFIX + "point_hash", TAG_PREFIX + "sweep_hash", TAG_PREFIX + "kind"


@dataclass(frozen=True)
class PointJob:
    """What executing a point needs besides the point itself."""
    spec: SweepSpec
    experiment: str
    parent_run_id: str
    store_dir: Path
    output_dir: Path
    tracker: Tracker
    notebook: Path = NOTEBOOK


def run_point(point: SweepPoint, point_hash: str, job: PointJob, kernel: WarmKernel,
              running: set[str]) -> PointOutcome:
    """Create the child run, execute the notebook into it in `kernel`, attach the notebook, end the run.
    The run id is in `running` while the notebook executes (so an interrupted sweep can end it)."""
    started = time.perf_counter()
    tracker = job.tracker
    tags = {POINT_HASH_TAG: point_hash, SWEEP_HASH_TAG: job.spec.hash, KIND_TAG: "sweep-point", **git_tags()}
    run_id = tracker.start_run(job.experiment, point.label, parent_run_id=job.parent_run_id, tags=tags)
    running.add(run_id)
    tracking_seconds = time.perf_counter() - started
    notebook = job.output_dir / f"{point.file_stem}.ipynb"
    parameters = {
        "settings": notebook_settings(point.config),
        "input_dir": path_str(job.spec.input_dir), "golden": path_str(job.spec.golden),
        "beir": path_str(job.spec.beir), "split": job.spec.split, "max_queries": job.spec.max_queries,
        "store": str(job.store_dir), "tracking_uri": tracker.uri, "experiment": job.experiment,
        "run_name": point.label, "run_id": run_id, "parent_run_id": job.parent_run_id, "point_hash": point_hash,
        "log_to_mlflow": True, "query_ids": list(point.query_ids) if point.query_ids is not None else None,
    }
    if point.query_ids is not None:  # a search's fidelity: how many queries this run scores
        tracker.log(run_id, params={"fidelity_queries": len(point.query_ids)})
    error = None
    metrics: dict[str, float] = {}
    executed_at = time.perf_counter()
    try:
        kernel.execute(job.notebook, notebook, parameters, cwd=NOTEBOOKS_DIR)
        metrics = read_recorded_result(notebook).get("metrics", {})
    except Exception as exc:  # noqa: BLE001 - whatever failed the point is recorded, the others go on
        error = error_text(exc)
    notebook_seconds = time.perf_counter() - executed_at
    finishing = time.perf_counter()
    if notebook.exists():
        tracker.log_artifacts(run_id, [notebook], "notebook")
    tracker.log(run_id, metrics={"timing/notebook_seconds": notebook_seconds})
    if error:
        tracker.fail(run_id, error)
    else:
        tracking_seconds += time.perf_counter() - finishing
        tracker.log(run_id, metrics={"timing/sweep_tracking_seconds": tracking_seconds})
        tracker.finish(run_id)
    running.discard(run_id)
    return PointOutcome(point, "FAILED" if error else "FINISHED", run_id, metrics, time.perf_counter() - started,
                        error, notebook)


def notebook_settings(config: RagConfig) -> dict[str, Any]:
    """The notebook's ``settings`` parameter for `config`: every setting that differs from its declared
    default, and every one an environment variable could change in the kernel (plain values; tuples as
    lists). The kernel starts from the same declarations, so this is the point's config exactly, and a
    setting nobody changed never reaches a kernel that may not know it (a component registered in the
    sweep's own process only)."""
    return {setting.name: list(value) if isinstance(value, tuple) else value
            for setting, value in ((setting, getattr(config, setting.name)) for setting in SETTINGS)
            if value != setting.default or setting.env}


def read_recorded_result(notebook: str | Path) -> dict[str, Any]:
    """The JSON the evaluation notebook's last cell records (run id, metrics, params, timing)."""
    import nbformat

    executed = nbformat.read(str(notebook), as_version=4)
    for cell in reversed(executed.cells):
        for output in cell.get("outputs", []):
            if RESULT_MIME in output.get("data", {}):
                return dict(output["data"][RESULT_MIME])
    raise RuntimeError(f"{notebook} recorded no result (its last cell did not run)")


def error_text(exc: BaseException) -> str:
    """``ename: evalue`` for a failed notebook cell, else the exception itself."""
    ename, evalue = getattr(exc, "ename", None), getattr(exc, "evalue", None)
    return f"{ename}: {evalue}" if ename else f"{type(exc).__name__}: {exc}"

