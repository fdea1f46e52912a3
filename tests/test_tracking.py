"""The MLflow layer: what a logged evaluation reads back as (params, metrics, tags, artifacts), the
metric-name mapping, where things are stored, and that an API key never reaches the tracking store."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient
from sweep_fixtures import files_containing, tiny_corpus, tracking_uri  # noqa: F401 - fixtures

from rag_core.config import RagConfig
from rag_core.evaluate.evaluator import evaluate_config
from rag_core.evaluate.golden import load_golden
from rag_core.evaluate.metrics import metric_names
from rag_core.evaluate.relevance import LEVELS
from rag_core.ingest.corpus import Corpus
from rag_core.ingest.files import read_documents
from rag_core.paths import PROJECT_ROOT
from rag_core.workbench.execution.evaluation_log import log_evaluation
from rag_core.workbench.tracking.tracker import (
    SecretInRun,
    Tracker,
    TrackingTarget,
    metric_name_from_mlflow,
    mlflow_metric_name,
    run_metrics,
)

PLANTED_KEY = "sk-ant-planted-0123456789abcdefXYZ"


@pytest.fixture(scope="module")
def report(tiny_corpus, tmp_path_factory):  # noqa: F811
    """A real evaluation of the tiny corpus (BM25 only: no model to load)."""
    corpus = Corpus.of(read_documents(tiny_corpus.documents).documents)
    queries = load_golden(tiny_corpus.golden, corpus.by_id)
    config = RagConfig(mode="bm25", rerank_depth=0, chunk_size=40, overlap=8, k=3)
    return evaluate_config(config, corpus, queries, tmp_path_factory.mktemp("store"))


def _download(client: MlflowClient, run_id: str, path: str, tmp_path) -> Path:
    return Path(client.download_artifacts(run_id, path, str(tmp_path)))


def test_logged_evaluation_reads_back_as_logged(report, tracking_uri, tmp_path):  # noqa: F811
    run_id = log_evaluation(report, TrackingTarget(tracking_uri, "tiny | golden", "bm25 point",
                                                   tags={"rag.point_hash": "abc123"}))
    client = MlflowClient(tracking_uri)
    run = client.get_run(run_id)

    assert run.info.status == "FINISHED" and run.info.run_name == "bm25 point"
    assert run.data.params == report.params
    assert set(RagConfig().as_params()) <= set(run.data.params)
    assert {"corpus_fingerprint", "golden_fingerprint"} <= set(run.data.params)
    # every metric, under its MLflow name (no '@'), with the value logged
    assert all("@" not in name for name in run.data.metrics)
    assert run.data.metrics == pytest.approx({mlflow_metric_name(name): value for name, value in report.metrics.items()})
    assert run_metrics(run) == pytest.approx(report.metrics)
    assert run.data.metrics["page/recall_at_5"] == report.metrics["page/recall@5"]

    tags = run.data.tags
    assert tags["rag.point_hash"] == "abc123"
    assert tags["rag.corpus_fingerprint"] == report.params["corpus_fingerprint"]
    assert tags["rag.golden_fingerprint"] == report.params["golden_fingerprint"]
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=PROJECT_ROOT, capture_output=True, text=True,
                          check=False).stdout.strip()
    if head:
        assert tags["mlflow.source.git.commit"] == head

    listed = {item.path for item in client.list_artifacts(run_id)}
    assert {"per_query.csv", "metrics.json", "plots", "ranx"} <= listed
    assert {item.path for item in client.list_artifacts(run_id, "plots")} == {
        "plots/retrieval_by_level.png", "plots/latency_by_stage.png"}
    for plot in ("plots/retrieval_by_level.png", "plots/latency_by_stage.png"):
        assert _download(client, run_id, plot, tmp_path / "png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    per_query = pd.read_csv(_download(client, run_id, "per_query.csv", tmp_path))
    assert list(per_query["query_id"]) == [row["query_id"] for row in report.per_query]
    assert list(per_query["page/ndcg@10"]) == pytest.approx([row["page/ndcg@10"] for row in report.per_query])
    assert json.loads(_download(client, run_id, "metrics.json", tmp_path).read_text()) == pytest.approx(report.metrics)

    # the ranx artifacts hold the evaluated rankings: the final hits, best first
    ranx_run = json.loads(_download(client, run_id, "ranx/run.json", tmp_path).read_text())
    ranx_qrels = json.loads(_download(client, run_id, "ranx/qrels.json", tmp_path).read_text())
    assert set(ranx_run) == set(LEVELS) and ranx_qrels == report.qrels
    for query_id, retrieval in report.retrievals.items():
        ranked = sorted(ranx_run["chunk"][query_id], key=ranx_run["chunk"][query_id].get, reverse=True)
        assert ranked == [hit.chunk.id for hit in retrieval.hits]

    # artifacts live next to the tracking database, not in the project's mlruns/
    assert run.info.artifact_uri.startswith((tmp_path / "mlruns" / "artifacts").as_uri())


def test_a_run_can_be_nested_and_logged_into_by_id(report, tracking_uri):  # noqa: F811
    tracker = Tracker.at()
    assert tracker.uri == tracking_uri  # MLFLOW_TRACKING_URI chooses the store
    parent = tracker.start_run("tiny | golden", "parent", tags={"rag.kind": "sweep"})
    child = tracker.start_run("tiny | golden", "child", parent_run_id=parent)
    assert log_evaluation(report, TrackingTarget(experiment="tiny | golden", run_id=child)) == child
    client = MlflowClient(tracking_uri)
    assert client.get_run(child).info.status == "RUNNING"  # the caller ends a run it created
    assert client.get_run(child).data.tags["mlflow.parentRunId"] == parent
    assert client.get_run(child).data.metrics["doc/mrr"] == report.metrics["doc/mrr"]


def test_metric_name_mapping_is_one_to_one():
    names = [f"{level}/{name}" for level in LEVELS for name in metric_names((1, 5, 10, 100))]
    mapped = [mlflow_metric_name(name) for name in names]
    assert len(set(mapped)) == len(names)
    assert mlflow_metric_name("page/recall@5") == "page/recall_at_5"
    assert [metric_name_from_mlflow(name) for name in mapped] == names
    assert metric_name_from_mlflow("latency/rerank_p95_ms") == "latency/rerank_p95_ms"


def test_server_uris_leave_artifacts_to_the_server(tmp_path):
    assert Tracker("http://127.0.0.1:5000").artifact_root() is None
    assert Tracker(f"sqlite:///{tmp_path}/x/mlflow.db").artifact_root() == tmp_path / "x" / "artifacts"


def test_a_planted_api_key_never_reaches_the_tracking_store(report, tracking_uri, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("ANTHROPIC_API_KEY", PLANTED_KEY)
    monkeypatch.setenv("OPENAI_API_KEY", PLANTED_KEY[::-1])
    log_evaluation(report, TrackingTarget(tracking_uri, "tiny | golden"))  # settings only: fine

    leaky_params = type(report)({**report.metrics}, report.per_query, {**report.params, "llm_model": PLANTED_KEY},
                                report.retrievals, report.qrels)
    with pytest.raises(SecretInRun, match="llm_model"):
        log_evaluation(leaky_params, TrackingTarget(tracking_uri, "tiny | golden"))
    with pytest.raises(SecretInRun):
        log_evaluation(report, TrackingTarget(tracking_uri, "tiny | golden", f"run {PLANTED_KEY[::-1]}"))
    with pytest.raises(SecretInRun):
        log_evaluation(report, TrackingTarget(tracking_uri, "tiny | golden", tags={"note": PLANTED_KEY}))
    leaky_file = tmp_path / "notes.txt"
    leaky_file.write_text(f"key={PLANTED_KEY}")
    with pytest.raises(SecretInRun, match="notes.txt"):
        log_evaluation(report, TrackingTarget(tracking_uri, "tiny | golden"), extra_artifacts=[leaky_file])

    store = tmp_path / "mlruns"
    assert any(path.suffix == ".png" for path in store.rglob("*"))  # the grep below looks at a real store
    for secret in (PLANTED_KEY, PLANTED_KEY[::-1]):
        assert files_containing(store, secret) == []
    # refused logs created no half-written runs
    runs = MlflowClient(tracking_uri).search_runs([MlflowClient(tracking_uri).get_experiment_by_name("tiny | golden").experiment_id])
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"
