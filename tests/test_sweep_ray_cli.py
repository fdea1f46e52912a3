"""``rag-pipeline sweep --executor ray``'s bad input and environment failures: clear messages and exit
codes, no traceback, and nothing written to the tracking store (the cluster is joined before the
parent run is made). No cluster is started: the address given is a closed loopback port. And what
the driver hands the workers' environment: settings, never credentials."""

from __future__ import annotations

from conftest import run_cli
from servers import free_port

from rag_core.paths import EXPERIMENTS_DIR

SMOKE = str(EXPERIMENTS_DIR / "smoke.yaml")


def test_a_ray_address_without_the_ray_executor_is_bad_input(tmp_path):
    completed = run_cli("sweep", SMOKE, "--ray-address", "127.0.0.1:6379", store=tmp_path / "store",
                        env={"MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"})
    assert completed.returncode == 2 and "--ray-address needs --executor ray" in completed.stderr
    assert "Traceback" not in completed.stderr and not (tmp_path / "mlflow.db").exists()


def test_an_unreachable_ray_cluster_is_an_environment_failure(tmp_path):
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    completed = run_cli("sweep", SMOKE, "--executor", "ray", "--ray-address", address, "--workers", "2",
                        store=tmp_path / "store", env={"MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"})
    assert completed.returncode == 1, completed.stderr[-2000:]
    assert f"cannot join the Ray cluster at {address}" in completed.stderr
    assert "Traceback" not in completed.stderr and not (tmp_path / "mlflow.db").exists()
    assert not (tmp_path / "store").exists()


def test_ray_workers_get_the_settings_but_never_credentials(monkeypatch):
    from rag_core.workbench.execution.ray_executor import forwarded_env

    monkeypatch.setenv("RAG_EMBED_MODEL", "/models/minilm")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret-value")
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "hunter2-secret")
    monkeypatch.setenv("HF_TOKEN", "hf_secret_token")
    monkeypatch.setenv("HOME", "/root")
    env = forwarded_env("http://127.0.0.1:5000")
    assert env["RAG_EMBED_MODEL"] == "/models/minilm" and env["HF_HUB_OFFLINE"] == "1"
    assert env["MLFLOW_TRACKING_URI"] == "http://127.0.0.1:5000"
    assert not {"ANTHROPIC_API_KEY", "MLFLOW_TRACKING_PASSWORD", "HF_TOKEN", "HOME"} & set(env)
    assert not any("secret" in value for value in env.values())
