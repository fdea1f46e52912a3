"""Fine-tuning end to end on tiny data with a tiny BERT (a step or two): the saved re-ranker loads with
``--rerank-model DIR`` on every backend, the saved embedder is a new dense collection, a stopped
training resumes from its checkpoint, the MLflow run holds the curves and the model, and the command
refuses to train on its own test queries while ``eval`` warns about a model's training queries."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import run_cli
from finetune_fixtures import tiny_bert, topic_beir  # noqa: F401 - fixtures
from mlflow.tracking import MlflowClient
from sweep_fixtures import sqlite_uri

from rag_core.config import RagConfig
from rag_core.finetune.fingerprints import TRAINING_FILE, check_trained_on, model_cache_name
from rag_core.finetune.run import FinetuneJob, run_finetune
from rag_core.finetune.settings import TrainSettings
from rag_core.finetune.training import CHECKPOINTS, CheckpointMismatch, LossBar
from rag_core.evaluate.beir import load_beir
from rag_core.ingest.corpus import Corpus

BM25 = RagConfig(mode="bm25", rerank_depth=5)


def _job(kind: str, beir, base, out, **settings) -> FinetuneJob:
    documents, queries = load_beir(beir, "train")
    tests = load_beir(beir, "test")[1]
    chosen = {"max_steps": 1, "eval_steps": 1, "batch_size": 2, "max_length": 48, "negatives": 2, "warmup": 0.0,
              **settings}
    return FinetuneJob(kind, tuple(queries), Corpus.of(documents), "topic train", out,
                       TrainSettings.for_kind(kind, **chosen), negatives_depth=5, validation_share=0.25,
                       base_model=str(base), test_queries=tuple(tests), test_name="--test-split test")


def test_trained_reranker_loads_with_rerank_model_on_every_backend(topic_beir, tiny_bert, tmp_path):  # noqa: F811
    from rag_core.retrieve.rerank import Reranker

    job = _job("reranker", topic_beir, tiny_bert, tmp_path / "reranker")
    outcome = run_finetune(job, BM25, tmp_path / "store", log_to_mlflow=False)
    folder = outcome.result.model_dir
    assert (folder / "config.json").is_file() and not (folder / CHECKPOINTS).exists()
    assert [point.step for point in outcome.result.curve] == [0, 1] and outcome.result.steps == 1
    assert outcome.heldout.queries == 3 and set(outcome.heldout.comparisons) == {"re-ranked", "re-ranked + rrf"}
    trained_on = check_trained_on(folder, {q.id: q.text for q in outcome.data.all_queries()})
    assert len(trained_on.overlap) == 9  # training and validation queries are both recorded
    assert json.loads((folder / "finetune.json").read_text())["kind"] == "reranker"

    pairs = ("What does the alpha report say about river?", ["alpha notes river bank", "golf notes violin string"])
    scores = {backend: Reranker(str(folder), backend=backend, export_dir=tmp_path / "onnx").score(*pairs).scores
              for backend in ("torch", "onnx", "onnx-int8")}
    assert np.allclose(scores["onnx"], scores["torch"], atol=1e-4)
    assert np.allclose(scores["onnx-int8"], scores["torch"], atol=0.1)
    assert "random" not in Reranker(str(folder)).name_used  # a real model, recorded by its folder


def test_trained_embedder_gets_its_own_dense_collection(topic_beir, tiny_bert, tmp_path):  # noqa: F811
    from rag_core.retrieve.embedding.embedder import Embedder
    from rag_core.retrieve.index import Index

    job = _job("embedder", topic_beir, tiny_bert, tmp_path / "embedder", negatives=1)
    outcome = run_finetune(job, BM25, tmp_path / "store", log_to_mlflow=False)
    folder = str(outcome.result.model_dir)
    assert set(outcome.heldout.systems) == {"base embedder", "fine-tuned embedder"}
    vectors, _ = Embedder(folder).embed_documents(["alpha notes river bank"])
    assert vectors.shape == (1, 32) and np.isclose(np.linalg.norm(vectors[0]), 1.0, atol=1e-5)

    documents, _ = load_beir(topic_beir, "train")
    collections = {}
    for model in (folder, str(tiny_bert)):
        index = Index(tmp_path / "store", Corpus.of(documents), RagConfig(mode="dense", embed_model=model))
        collections[model] = index.retriever("dense").collection
    assert len(set(collections.values())) == 2  # the fine-tuned model never reads the base model's vectors
    before = model_cache_name(folder, folder)
    run_finetune(_job("embedder", topic_beir, tiny_bert, tmp_path / "embedder", negatives=1, seed=7), BM25,
                 tmp_path / "store", log_to_mlflow=False)  # trained again into the same folder
    assert model_cache_name(folder, folder) != before


def test_a_stopped_training_resumes_from_its_checkpoint(topic_beir, tiny_bert, tmp_path, monkeypatch):  # noqa: F811
    out = tmp_path / "reranker"
    calls = []

    def stop_after_first_save(self, args, state, control, **kwargs):
        calls.append(state.global_step)
        raise KeyboardInterrupt  # Ctrl-C once the first checkpoint is on disk

    monkeypatch.setattr(LossBar, "on_save", stop_after_first_save, raising=False)
    job = _job("reranker", topic_beir, tiny_bert, out, max_steps=2)
    with pytest.raises(KeyboardInterrupt):
        run_finetune(job, BM25, tmp_path / "store", log_to_mlflow=False)
    assert calls == [1] and (out / CHECKPOINTS / "checkpoint-1").is_dir()
    monkeypatch.undo()

    with pytest.raises(CheckpointMismatch, match="--resume"):  # not silently started afresh
        run_finetune(job, BM25, tmp_path / "store", log_to_mlflow=False)
    with pytest.raises(CheckpointMismatch, match="other settings"):
        run_finetune(_job("reranker", topic_beir, tiny_bert, out, max_steps=2, learning_rate=1e-4), BM25,
                     tmp_path / "store", resume=True, log_to_mlflow=False)
    outcome = run_finetune(job, BM25, tmp_path / "store", resume=True, log_to_mlflow=False)
    assert outcome.result.resumed_from.endswith("checkpoint-1") and outcome.result.steps == 2
    assert [point.step for point in outcome.result.curve] == [0, 1, 2]  # the curve before the stop is kept


def test_mlflow_run_holds_params_curves_and_the_model(topic_beir, tiny_bert, tmp_path):  # noqa: F811
    uri = sqlite_uri(tmp_path)
    outcome = run_finetune(_job("reranker", topic_beir, tiny_bert, tmp_path / "reranker", max_steps=2), BM25,
                           tmp_path / "store", tracking_uri=uri)
    client = MlflowClient(uri)
    run = client.get_run(outcome.run_id)
    assert run.data.params["kind"] == "reranker" and run.data.params["finetune_loss"] == "lce"
    assert run.data.params["train_queries"] == "7" and run.data.params["base_model"] == str(tiny_bert)
    curve = client.get_metric_history(outcome.run_id, "validation/ndcg_at_10")
    assert sorted(point.step for point in curve) == [0, 1, 2]
    assert [m.step for m in client.get_metric_history(outcome.run_id, "train/loss")] == [1, 2]
    assert "test/re_ranked/page/ndcg@10".replace("@", "_at_") in run.data.metrics
    artifacts = {item.path for item in client.list_artifacts(outcome.run_id, "model")}
    assert {"model/config.json", f"model/{TRAINING_FILE}"} <= artifacts


@pytest.mark.slow
def test_cli_refuses_its_test_queries_and_eval_warns_about_training_queries(topic_beir, tiny_bert, tmp_path):  # noqa: F811
    common = ["--beir", str(topic_beir), "--base-model", str(tiny_bert), "--mode", "bm25", "--max-steps", "1",
              "--eval-steps", "1", "--max-length", "48", "--batch-size", "2", "--warmup", "0", "--no-mlflow"]
    refused = run_cli("finetune", "reranker", *common, "--out", str(tmp_path / "x"), "--test-split", "train",
                      store=tmp_path / "store")
    assert refused.returncode == 2 and refused.stderr.strip().startswith("error: refusing to train on 9 queries")
    assert len(refused.stderr.strip().splitlines()) == 1 and not (tmp_path / "x").exists()

    trained = run_cli("finetune", "reranker", *common, "--out", str(tmp_path / "m"), "--test-split", "test", "--json",
                      store=tmp_path / "store")
    assert trained.returncode == 0, trained.stderr
    summary = json.loads(trained.stdout)
    assert summary["train_queries"] + summary["validation_queries"] == 9 and summary["heldout"]["queries"] == 3

    for split, warned in (("train", True), ("test", False)):
        scored = run_cli("eval", "--beir", str(topic_beir), "--split", split, "--mode", "bm25", "--rerank-depth", "5",
                         "--rerank-model", str(tmp_path / "m"), "--no-mlflow", store=tmp_path / "store")
        assert scored.returncode == 0, scored.stderr
        assert ("warning: " in scored.stderr and "was trained on 9 of the 9 queries" in scored.stderr) == warned
