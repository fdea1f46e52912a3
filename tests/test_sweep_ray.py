"""Sweeps on a Ray cluster: a local cluster (``ray start --head`` on 127.0.0.1, 2 CPUs) started by the
module and always stopped.

1. ``rag-pipeline sweep experiments/smoke.yaml --executor ray --workers 2`` gives every point the
   metrics the local executor gives it (the session's smoke sweep), with the index builds done by Ray
   tasks placed on the cluster's (declared) GPU and one child run per point.
2. A worker process killed in the middle of a point (the notebook's kernel kills its own parent, the
   Ray actor, with SIGKILL): Ray restarts the worker and runs the point again; the sweep finishes with
   every point FINISHED once, the dead attempt's child run KILLED, tagged and deleted (hidden from
   searches), and the dead attempt's kernel gone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from servers import ray_cluster
from sweep_fixtures import evaluation_notebook_with, quality_metrics, smoke_sweep, sqlite_uri  # noqa: F401

from rag_core.paths import EXPERIMENTS_DIR

pytestmark = pytest.mark.slow
ROOT = EXPERIMENTS_DIR.parent


@pytest.fixture(scope="module")
def ray_address(tmp_path_factory):
    # one GPU declared: index builds ask for it (num_gpus=1); a CPU torch build just ignores it
    with ray_cluster(tmp_path_factory.mktemp("ray-cluster"), num_cpus=2, num_gpus=1) as address:
        try:
            yield address
        finally:
            import ray

            ray.shutdown()  # this process's driver connection, before the cluster goes


def _local_metrics(smoke_sweep) -> dict[str, dict[str, float]]:  # noqa: F811
    return {outcome.point.label: quality_metrics(outcome.metrics) for outcome in smoke_sweep.result.outcomes}


def _child_runs(uri: str, experiment: str, parent_run_id: str, deleted: bool = False):
    from mlflow.entities import ViewType
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    found = client.get_experiment_by_name(experiment)
    return client.search_runs([found.experiment_id], f"tags.`mlflow.parentRunId` = '{parent_run_id}'",
                              run_view_type=ViewType.ALL if deleted else ViewType.ACTIVE_ONLY, max_results=1000)


def test_the_ray_executor_gives_the_local_metrics(ray_address, smoke_sweep, tmp_path):  # noqa: F811
    from rag_core.workbench.tracking.tracker import run_metrics

    uri = sqlite_uri(tmp_path / "mlruns")
    (tmp_path / "mlruns").mkdir()
    completed = subprocess.run(
        [sys.executable, "-m", "rag_core.cli", "sweep", str(EXPERIMENTS_DIR / "smoke.yaml"), "--executor", "ray",
         "--ray-address", ray_address, "--workers", "2", "--store", str(tmp_path / "store"),
         "--output", str(tmp_path / "notebooks"), "--json"],
        check=False, capture_output=True, text=True, timeout=1500, cwd=ROOT,
        env={**os.environ, "MLFLOW_TRACKING_URI": uri})
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "as Ray tasks on GPU nodes" in completed.stderr and "2 of 2 index builds ran on a GPU" in completed.stderr
    report = json.loads(completed.stdout)
    assert [point["status"] for point in report["points"]] == ["FINISHED"] * 4
    work = report["work"]
    assert work["sweep/prebuild_dense_indexes_built"] == 2 and work["sweep/chunks_embedded"] > 0
    assert work["sweep/points_retried"] == 0 and work["sweep/kernels_started"] == 2

    children = _child_runs(uri, report["experiment"], report["parent_run_id"])
    assert sorted(run.info.run_id for run in children) == sorted(point["run_id"] for point in report["points"])
    assert all(run.info.status == "FINISHED" for run in children)
    on_ray = {run.info.run_name: quality_metrics(run_metrics(run)) for run in children}
    local = _local_metrics(smoke_sweep)
    assert set(on_ray) == set(local) and len(local) == 4
    for label, metrics in local.items():
        assert metrics and on_ray[label] == pytest.approx(metrics, abs=1e-9), label


KILL_CELL = """
import os, pathlib, signal, time
from rag_core.workbench.execution.evaluation import config_from_parameters
_marker, _config = pathlib.Path({marker!r}), config_from_parameters(globals())
if _config.chunk_size == 512 and _config.k == 5 and not _marker.exists():  # the first attempt of one point
    _marker.write_text(f"{{os.getppid()}} {{os.getpid()}}")
    os.kill(os.getppid(), signal.SIGKILL)  # the Ray worker running this point
    time.sleep(120)  # ended earlier by ipykernel when it sees its parent gone
"""


def _gone(pid: int, seconds: float = 60) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.5)
    return False


def test_a_worker_killed_mid_point_is_retried_once(ray_address, smoke_sweep, tmp_path):  # noqa: F811
    from rag_core.workbench import load_sweep, run_sweep
    from rag_core.workbench.execution.points import POINT_HASH_TAG
    from rag_core.workbench.execution.ray_executor import SUPERSEDED_TAG

    marker = tmp_path / "killed"
    notebook = evaluation_notebook_with(KILL_CELL.format(marker=str(marker)), tmp_path / "killing.ipynb")
    uri = sqlite_uri(tmp_path / "mlruns")
    (tmp_path / "mlruns").mkdir()
    result = run_sweep(load_sweep(EXPERIMENTS_DIR / "smoke.yaml"), tmp_path / "store", workers=2,
                       output_dir=tmp_path / "notebooks", tracking_uri=uri, notebook=notebook, executor="ray",
                       ray_address=ray_address, echo=lambda line: None)

    worker_pid, kernel_pid = map(int, marker.read_text().split())  # the kill happened
    assert _gone(worker_pid) and _gone(kernel_pid)
    assert [outcome.status for outcome in result.outcomes] == ["FINISHED"] * 4
    assert result.work["sweep/points_retried"] == 1 and result.work["sweep/points_finished"] == 4

    active = _child_runs(uri, result.experiment, result.parent_run_id)
    assert sorted(run.info.run_id for run in active) == sorted(outcome.run_id for outcome in result.outcomes)
    assert all(run.info.status == "FINISHED" for run in active)
    assert len({run.data.tags[POINT_HASH_TAG] for run in active}) == 4

    every = _child_runs(uri, result.experiment, result.parent_run_id, deleted=True)
    [dead] = [run for run in every if run.info.run_id not in {r.info.run_id for r in active}]
    killed_point = next(o for o in result.outcomes if o.point.changes == {"chunk_size": 512, "k": 5})
    retry = next(run for run in active if run.info.run_id == killed_point.run_id)
    assert dead.info.status == "KILLED" and dead.info.lifecycle_stage == "deleted"
    assert dead.data.tags[SUPERSEDED_TAG] == "true"
    assert dead.data.tags[POINT_HASH_TAG] == retry.data.tags[POINT_HASH_TAG]

    local = _local_metrics(smoke_sweep)
    for outcome in result.outcomes:
        assert quality_metrics(outcome.metrics) == pytest.approx(local[outcome.point.label], abs=1e-9)
