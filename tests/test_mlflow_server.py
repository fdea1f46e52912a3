"""An MLflow tracking server in front of the smoke sweep's store: its REST API shows the parent run
and the child runs with their params, metrics and artifacts (the executed notebook included).
The server is started on 127.0.0.1 on a free port and always terminated."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from sweep_fixtures import smoke_sweep  # noqa: F401 - fixture

pytestmark = pytest.mark.slow
STARTUP_SECONDS = 90


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def server(smoke_sweep, tmp_path):  # noqa: F811
    port = _free_port()
    mlflow = Path(sys.executable).with_name("mlflow")
    log = open(tmp_path / "server.log", "w")  # noqa: SIM115 - closed when the server is stopped
    process = subprocess.Popen(
        [str(mlflow), "server", "--backend-store-uri", smoke_sweep.tracking_uri, "--host", "127.0.0.1",
         "--port", str(port), "--workers", "1"],
        stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path, start_new_session=True,
        env={**os.environ, "MLFLOW_TRACKING_URI": smoke_sweep.tracking_uri},
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:
            try:
                with urllib.request.urlopen(f"{base}/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                log.flush()
                pytest.fail(f"mlflow server did not come up: {(tmp_path / 'server.log').read_text()[-2000:]}")
            time.sleep(0.5)
        yield base
    finally:
        os.killpg(process.pid, signal.SIGTERM)  # the server and the workers it started
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        log.close()


def _get(base: str, endpoint: str, **query) -> dict:
    with urllib.request.urlopen(f"{base}{endpoint}?{urllib.parse.urlencode(query)}", timeout=30) as response:
        return json.loads(response.read())


def _post(base: str, path: str, body: dict) -> dict:
    request = urllib.request.Request(f"{base}{path}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def test_the_server_shows_the_sweep_runs(server, smoke_sweep):  # noqa: F811
    result = smoke_sweep.result
    experiment = _get(server, "/api/2.0/mlflow/experiments/get-by-name", experiment_name=result.experiment)["experiment"]
    runs = _post(server, "/api/2.0/mlflow/runs/search", {"experiment_ids": [experiment["experiment_id"]],
                                                         "max_results": 100})["runs"]
    by_id = {run["info"]["run_id"]: run for run in runs}
    parent = by_id[result.parent_run_id]
    parent_tags = {tag["key"]: tag["value"] for tag in parent["data"]["tags"]}
    assert parent["info"]["status"] == "FINISHED" and parent_tags["rag.kind"] == "sweep"
    parent_metrics = {metric["key"]: metric["value"] for metric in parent["data"]["metrics"]}
    assert parent_metrics["sweep/points"] == 4 and parent_metrics["sweep/dense_indexes_built"] == 2

    children = [run for run in runs if {tag["key"]: tag["value"] for tag in run["data"].get("tags", [])}
                .get("mlflow.parentRunId") == result.parent_run_id]
    assert sorted(run["info"]["run_id"] for run in children) == sorted(o.run_id for o in result.outcomes)
    for outcome in result.outcomes:
        child = by_id[outcome.run_id]
        params = {param["key"]: param["value"] for param in child["data"]["params"]}
        metrics = {metric["key"]: metric["value"] for metric in child["data"]["metrics"]}
        assert child["info"]["status"] == "FINISHED"
        assert params["chunk_size"] == str(outcome.point.changes["chunk_size"]) and params["k"] == str(outcome.point.changes["k"])
        assert metrics["page/ndcg_at_10"] == pytest.approx(outcome.metrics["page/ndcg@10"])

        listed = _get(server, "/api/2.0/mlflow/artifacts/list", run_id=outcome.run_id)
        assert {"per_query.csv", "metrics.json", "plots", "ranx", "notebook"} <= {item["path"] for item in listed["files"]}
        [notebook] = _get(server, "/api/2.0/mlflow/artifacts/list", run_id=outcome.run_id, path="notebook")["files"]
        assert notebook["path"] == f"notebook/{outcome.point.file_stem}.ipynb" and notebook["file_size"] > 0

    # an artifact's content comes through the server too
    first = result.outcomes[0]
    with urllib.request.urlopen(f"{server}/get-artifact?" + urllib.parse.urlencode(
            {"path": "metrics.json", "run_uuid": first.run_id}), timeout=30) as response:
        assert json.loads(response.read())["page/ndcg@10"] == pytest.approx(first.metrics["page/ndcg@10"])
