"""A search on a Ray cluster (``--executor ray --workers 2``): the driver asks and tells Optuna, the trials
run on Ray actors and are child runs like local ones. A local cluster (``ray start --head``, 2 CPUs) is
started by the module and always stopped."""

from __future__ import annotations

import json

import pytest
import yaml
from conftest import run_cli
from mlflow.tracking import MlflowClient
from servers import ray_cluster
from sweep_fixtures import sqlite_uri

from rag_core.paths import SAMPLE_DOCUMENTS_DIR, SAMPLE_GOLDEN_FILE

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ray_address(tmp_path_factory):
    with ray_cluster(tmp_path_factory.mktemp("ray-cluster"), num_cpus=2) as address:
        try:
            yield address
        finally:
            import ray

            ray.shutdown()


def test_a_search_runs_its_trials_on_ray_actors(ray_address, tmp_path):
    uri = sqlite_uri(tmp_path / "mlruns")
    (tmp_path / "mlruns").mkdir()
    path = tmp_path / "ray-search.yaml"
    path.write_text(yaml.safe_dump({
        "name": "ray-search", "input": str(SAMPLE_DOCUMENTS_DIR), "golden": str(SAMPLE_GOLDEN_FILE), "max_queries": 4,
        "strategy": "tpe", "budget": 3, "base": {"mode": "bm25", "rerank_depth": 0, "tracing": False},
        "grid": {"bm25_k1": {"low": 0.4, "high": 2.0, "step": 0.4}, "bm25_b": [0.3, 0.75]}}))
    result = run_cli("sweep", str(path), "--executor", "ray", "--workers", "2", "--ray-address", ray_address, "--json",
                     store=tmp_path / "store", env={"MLFLOW_TRACKING_URI": uri})
    assert result.returncode == 0, result.stderr[-3000:]
    output = json.loads(result.stdout)
    assert output["search"]["spent_points"] == 3 and output["search"]["counts"].get("complete") == 3
    client = MlflowClient(uri)
    children = client.search_runs([client.get_experiment_by_name(output["experiment"]).experiment_id],
                                  f"tags.`mlflow.parentRunId` = '{output['parent_run_id']}'")
    assert sorted(r.info.status for r in children) == ["FINISHED"] * 3
    assert {r.data.params["fidelity_queries"] for r in children} == {"4"}
    assert len({r.data.tags["rag.point_hash"] for r in children}) == 3
