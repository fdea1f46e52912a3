"""Servers the tests start for themselves, each on 127.0.0.1 (a free port) and always stopped:
an MLflow tracking server, a PostgreSQL 15 cluster in a temporary directory, a local Ray cluster.

Every server runs in its own process group (``start_new_session``), so stopping it stops what it
started (MLflow's gunicorn/uvicorn workers, Ray's raylet and workers) and nothing else. Each
context manager yields what a client needs (a URL, a database URI, a Ray address) and stops the
server on exit, also when the test fails. ``pytest.skip`` (with the reason) only where the server
cannot be had on this machine at all; a server that is there but does not come up fails the test.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import pytest

from rag_core.retrieve.vector_stores.chroma_process import ChromaServer, chroma_server, free_port  # noqa: F401 - re-exported

STARTUP_SECONDS = 90


def _postgres_bin() -> Path:
    """PostgreSQL's server binaries: $RAG_TEST_POSTGRES_BIN, else 15 (what these machines have), else
    the newest Debian installs under /usr/lib/postgresql."""
    if "RAG_TEST_POSTGRES_BIN" in os.environ:
        return Path(os.environ["RAG_TEST_POSTGRES_BIN"])
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"),
                   key=lambda path: int(path.parts[-3]) if path.parts[-3].isdigit() else 0)
    preferred = Path("/usr/lib/postgresql/15/bin")
    return preferred if (preferred / "initdb").exists() or not found else found[-1].parent


POSTGRES_BIN = _postgres_bin()


@contextmanager
def silent_server() -> Iterator[int]:
    """A port that accepts connections and never answers: every request times out."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield sock.getsockname()[1]


def venv_tool(name: str) -> str:
    """A console script installed next to this Python (``mlflow``, ``ray``)."""
    return str(Path(sys.executable).with_name(name))


def stop_group(process: subprocess.Popen, grace: float = 20) -> None:
    """SIGTERM the process group `process` leads, SIGKILL it after `grace` seconds."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=grace)
    except ProcessLookupError:
        return
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


def wait_until(ready: Callable[[], bool], process: subprocess.Popen, what: str, log: Path) -> None:
    """Poll `ready` until it is true; fail the test (with the log's tail) when `process` exits first
    or STARTUP_SECONDS pass."""
    deadline = time.monotonic() + STARTUP_SECONDS
    while not ready():
        if process.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"{what} did not come up: {log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.5)


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


@contextmanager
def mlflow_server(backend_store_uri: str, folder: Path, artifacts_destination: Path | None = None) -> Iterator[str]:
    """``mlflow server`` on `backend_store_uri` (artifacts served from `artifacts_destination`
    when given); yields its base URL."""
    port = free_port()
    log_path = folder / f"mlflow-server-{port}.log"
    command = [venv_tool("mlflow"), "server", "--backend-store-uri", backend_store_uri, "--host", "127.0.0.1",
               "--port", str(port), "--workers", "1"]
    if artifacts_destination is not None:
        command += ["--artifacts-destination", str(artifacts_destination)]
    with open(log_path, "w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=folder, start_new_session=True,
                                   env={**os.environ, "MLFLOW_TRACKING_URI": backend_store_uri})
        base = f"http://127.0.0.1:{port}"
        try:
            wait_until(lambda: http_ok(f"{base}/health"), process, "mlflow server", log_path)
            yield base
        finally:
            stop_group(process)


# --- PostgreSQL ---------------------------------------------------------------------------------
def _postgres_user() -> tuple[list[str], int | None]:
    """(command prefix, uid): initdb and postgres refuse to run as root, so as root they run as
    ``nobody`` through ``runuser``; otherwise as ourselves."""
    if os.geteuid() != 0:
        return [], None
    runuser = shutil.which("runuser")
    if runuser is None:
        pytest.skip("PostgreSQL cannot run as root and runuser is missing to run it as 'nobody'")
    return [runuser, "-u", "nobody", "--"], pwd.getpwnam("nobody").pw_uid


@contextmanager
def postgres_cluster(database: str = "mlflow") -> Iterator[str]:
    """A fresh PostgreSQL cluster (initdb) in a temporary directory, on a free loopback port with
    its unix socket in that directory, holding an empty `database`; yields its SQLAlchemy URI."""
    initdb, pg_ctl = POSTGRES_BIN / "initdb", POSTGRES_BIN / "pg_ctl"
    if not initdb.exists():
        pytest.skip(f"no PostgreSQL server binaries at {POSTGRES_BIN} (Debian package 'postgresql'; "
                    f".ci/run installs it)")
    pytest.importorskip("psycopg2", reason="psycopg2-binary (the test extra) is not installed")
    import psycopg2

    prefix, uid = _postgres_user()
    folder = Path(tempfile.mkdtemp(prefix="rag-postgres-"))  # not under pytest's root-only tmp_path
    if uid is not None:
        os.chown(folder, uid, -1)
    data, log_path, port = folder / "data", folder / "postgres.log", free_port()
    started = False
    try:
        try:
            subprocess.run([*prefix, str(initdb), "-D", str(data), "-U", "mlflow", "--auth=trust", "-E", "UTF8",
                            "--no-locale"], check=True, capture_output=True, timeout=120)
            started = True  # pg_ctl stop below is harmless when start failed half-way
            subprocess.run([*prefix, str(pg_ctl), "-D", str(data), "-l", str(log_path), "-w", "-t", "60", "-o",
                            f"-p {port} -k {folder} -c listen_addresses=127.0.0.1", "start"],
                           check=True, capture_output=True, timeout=90)
        except subprocess.CalledProcessError as error:
            pytest.fail(f"PostgreSQL did not start: {error.stderr.decode(errors='replace')[-2000:]}"
                        f"{log_path.read_text(errors='replace')[-2000:] if log_path.exists() else ''}")
        connection = psycopg2.connect(host="127.0.0.1", port=port, user="mlflow", dbname="postgres")
        connection.autocommit = True
        with connection.cursor() as cursor:
            cursor.execute(f'CREATE DATABASE "{database}"')
        connection.close()
        # SQLAlchemy 2.1 reads plain postgresql:// as psycopg 3; the driver installed is psycopg2
        yield f"postgresql+psycopg2://mlflow@127.0.0.1:{port}/{database}"
    finally:
        if started:
            subprocess.run([*prefix, str(pg_ctl), "-D", str(data), "-m", "fast", "-w", "stop"],
                           capture_output=True, timeout=60, check=False)
        shutil.rmtree(folder, ignore_errors=True)


# --- Ray ----------------------------------------------------------------------------------------
RAY_START_ATTEMPTS = 3  # `ray start` gives its raylet a fixed 30 s to register: on a loaded machine it can miss


@contextmanager
def ray_cluster(folder: Path, num_cpus: int = 2, num_gpus: int = 0) -> Iterator[str]:
    """A one-node Ray cluster (``ray start --head --block``, no dashboard) with `num_cpus` CPUs and
    `num_gpus` GPUs (declared: Ray schedules on them, whether or not the machine has them); yields its
    GCS address. Stopped with its process group (not ``ray stop``, which stops every Ray on the machine).
    A start that times out (Ray's own 30 s limit for the raylet) is tried again, twice at most."""
    pytest.importorskip("ray", reason="ray is not installed")
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    for attempt in range(1, RAY_START_ATTEMPTS + 1):
        port = free_port()
        temp_dir = Path(tempfile.mkdtemp(prefix="rag-ray-"))  # Ray's socket paths must stay short
        log_path = folder / f"ray-{port}.log"
        command = [venv_tool("ray"), "start", "--head", "--block", "--node-ip-address", "127.0.0.1",
                   "--port", str(port), "--num-cpus", str(num_cpus), "--num-gpus", str(num_gpus),
                   "--include-dashboard", "false", "--disable-usage-stats",
                   "--ray-client-server-port", str(free_port()), "--temp-dir", str(temp_dir)]
        with open(log_path, "w") as log:
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=folder,
                                       start_new_session=True, env=env)
        try:
            started = lambda: "Ray runtime started" in log_path.read_text(errors="replace")  # noqa: E731
            deadline = time.monotonic() + STARTUP_SECONDS
            while not started() and process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.5)
            if started():
                yield f"127.0.0.1:{port}"
                return
            if attempt == RAY_START_ATTEMPTS or "timed out during startup" not in log_path.read_text(errors="replace"):
                pytest.fail(f"ray start did not come up: {log_path.read_text(errors='replace')[-3000:]}")
        finally:
            stop_group(process, grace=30)
            shutil.rmtree(temp_dir, ignore_errors=True)


# --- MLflow's REST API --------------------------------------------------------------------------
def rest_get(base: str, endpoint: str, **query) -> dict:
    import json
    import urllib.parse

    with urllib.request.urlopen(f"{base}{endpoint}?{urllib.parse.urlencode(query)}", timeout=30) as response:
        return json.loads(response.read())


def rest_post(base: str, endpoint: str, body: dict) -> dict:
    import json

    request = urllib.request.Request(f"{base}{endpoint}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def rest_runs(base: str, experiment: str) -> list[dict]:
    """Every active run of `experiment`, as the REST API returns them (tags/params/metrics as dicts)."""
    found = rest_get(base, "/api/2.0/mlflow/experiments/get-by-name", experiment_name=experiment)["experiment"]
    runs = rest_post(base, "/api/2.0/mlflow/runs/search", {"experiment_ids": [found["experiment_id"]],
                                                           "max_results": 1000})["runs"]
    for run in runs:
        data = run["data"]
        for part in ("tags", "params", "metrics"):
            data[part] = {item["key"]: item["value"] for item in data.get(part, [])}
    return runs


def check_sweep_through_rest(base: str, result, indexes_built: int) -> None:
    """The REST API at `base` shows `result` (a SweepResult) exactly: the FINISHED parent with its
    work metrics, one FINISHED child per point with its settings and metrics, the artifacts and the
    executed notebook, and an artifact's content."""
    import json
    import urllib.parse

    runs = rest_runs(base, result.experiment)
    by_id = {run["info"]["run_id"]: run for run in runs}
    parent = by_id[result.parent_run_id]
    assert parent["info"]["status"] == "FINISHED" and parent["data"]["tags"]["rag.kind"] == "sweep"
    assert parent["data"]["metrics"]["sweep/points"] == len(result.outcomes)
    assert parent["data"]["metrics"]["sweep/dense_indexes_built"] == indexes_built

    children = [run for run in runs if run["data"]["tags"].get("mlflow.parentRunId") == result.parent_run_id]
    assert sorted(run["info"]["run_id"] for run in children) == sorted(o.run_id for o in result.outcomes)
    for outcome in result.outcomes:
        child = by_id[outcome.run_id]
        params, metrics = child["data"]["params"], child["data"]["metrics"]
        assert child["info"]["status"] == "FINISHED"
        assert all(params[name] == str(value) for name, value in outcome.point.changes.items())
        assert metrics["page/ndcg_at_10"] == pytest.approx(outcome.metrics["page/ndcg@10"])

        listed = rest_get(base, "/api/2.0/mlflow/artifacts/list", run_id=outcome.run_id)
        assert {"per_query.csv", "metrics.json", "plots", "ranx", "notebook"} <= {item["path"] for item in listed["files"]}
        [notebook] = rest_get(base, "/api/2.0/mlflow/artifacts/list", run_id=outcome.run_id, path="notebook")["files"]
        assert notebook["path"] == f"notebook/{outcome.point.file_stem}.ipynb" and notebook["file_size"] > 0

    first = result.outcomes[0]  # an artifact's content comes through the server too
    with urllib.request.urlopen(f"{base}/get-artifact?" + urllib.parse.urlencode(
            {"path": "metrics.json", "run_uuid": first.run_id}), timeout=30) as response:
        assert json.loads(response.read())["page/ndcg@10"] == pytest.approx(first.metrics["page/ndcg@10"])
