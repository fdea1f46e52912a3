"""``rag-pipeline eval`` as a user runs it (a subprocess): the JSON and the table, the MLflow run it
logs, bad golden sets (exit 2), BEIR datasets, and that ``--mode bm25`` does only BM25's work."""

from __future__ import annotations

import json
import time

import pandas as pd
import pytest
from conftest import run_cli
from mlflow.tracking import MlflowClient
from sweep_fixtures import sqlite_uri, tiny_corpus  # noqa: F401 - fixtures

from rag_core.config import setting_names
from rag_core.evaluate.metrics import metric_names
from rag_core.evaluate.relevance import LEVELS

pytestmark = pytest.mark.slow

BEIR_TINY = "tests/fixtures/beir-tiny"


def _golden_sources(golden_path) -> dict[str, set[str]]:
    return {query["id"]: {item["source"] for item in query["evidence"]}
            for query in map(json.loads, golden_path.read_text().splitlines())}


def _retrieved_documents(row: dict) -> set[str]:
    """Documents of the final top k, from the per-query table's "doc pN | doc pM" column."""
    return {item.rsplit(" p", 1)[0] for item in row["top_sources"].split(" | ")} if row["top_sources"] else set()


def test_eval_json_on_the_sample_corpus(sample_documents_dir, sample_golden_file, tmp_path):
    uri = sqlite_uri(tmp_path)
    completed = run_cli("eval", "--input", str(sample_documents_dir), "--golden", str(sample_golden_file),
                        "--max-queries", "4", "--rerank-depth", "0", "--json", store=tmp_path / "store",
                        env={"MLFLOW_TRACKING_URI": uri})
    assert completed.returncode == 0, completed.stderr
    output = json.loads(completed.stdout)  # nothing but the JSON on stdout
    metrics, params, per_query = output["metrics"], output["params"], output["per_query"]

    for level in LEVELS:
        for name in metric_names((5, 10)):
            assert 0.0 <= metrics[f"{level}/{name}"] <= 1.0
    for stage in ("embed_query", "vector_search", "bm25", "fusion", "total"):
        assert metrics[f"latency/{stage}_p50_ms"] <= metrics[f"latency/{stage}_p95_ms"]
    assert "latency/rerank_p50_ms" not in metrics  # rerank_depth 0: no re-ranking stage
    assert metrics["index/chunks"] > 0 and metrics["eval/queries"] == 4
    assert set(setting_names()) <= set(params) and params["rerank_depth"] == "0"
    assert "embed_model_used" in params and "rerank_model_used" not in params

    # document hit rate, checked against the golden evidence and the retrieved sources
    sources = _golden_sources(sample_golden_file)
    assert len(per_query) == 4
    for row in per_query:
        hit = bool(_retrieved_documents(row) & sources[row["query_id"]])
        assert row["doc/hit_rate@5"] == float(hit)
    assert metrics["doc/hit_rate@5"] == pytest.approx(sum(row["doc/hit_rate@5"] for row in per_query) / 4)

    # ... and one MLflow run holding the same numbers, in the tracking store given
    logged = MlflowClient(uri).get_run(output["mlflow"]["run_id"])
    assert output["mlflow"]["experiment"] == "documents | golden"
    assert logged.data.metrics["page/recall_at_5"] == metrics["page/recall@5"]
    assert logged.data.params["chunk_size"] == params["chunk_size"]


def test_eval_table_and_per_query_csv(tiny_corpus, tmp_path):  # noqa: F811
    csv = tmp_path / "out" / "per_query.csv"
    completed = run_cli("eval", "--input", str(tiny_corpus.documents), "--golden", str(tiny_corpus.golden),
                        "--mode", "bm25", "--rerank-depth", "0", "--chunk-size", "40", "--overlap", "8",
                        "--no-mlflow", "--per-query", str(csv), store=tmp_path / "store",
                        env={"MLFLOW_TRACKING_URI": sqlite_uri(tmp_path)})
    assert completed.returncode == 0, completed.stderr
    lines = completed.stdout.splitlines()
    header = next(line for line in lines if line.startswith("level"))
    assert header.split() == ["level", *metric_names((5, 10))]
    assert [line.split()[0] for line in lines[lines.index(header) + 1:lines.index(header) + 4]] == list(LEVELS)
    assert any(line.startswith("bm25") for line in lines) and "MLflow" not in completed.stdout
    table = pd.read_csv(csv)
    assert list(table["query_id"]) == ["t1", "t2", "t3"]
    assert not (tmp_path / "mlflow.db").exists()  # --no-mlflow


def test_a_golden_set_naming_a_missing_document_exits_2(tiny_corpus, tmp_path):  # noqa: F811
    golden = tmp_path / "bad.jsonl"
    golden.write_text(json.dumps({"id": "qx9", "query": "Where is it?", "evidence": [{"source": "nowhere.pdf"}]}) + "\n")
    completed = run_cli("eval", "--input", str(tiny_corpus.documents), "--golden", str(golden), "--no-mlflow",
                        store=tmp_path / "store")
    assert completed.returncode == 2
    assert "qx9" in completed.stderr and "nowhere.pdf" in completed.stderr
    assert "Traceback" not in completed.stderr


def test_eval_on_a_beir_dataset(tmp_path):
    completed = run_cli("eval", "--beir", BEIR_TINY, "--mode", "bm25", "--rerank-depth", "0", "--json", "--no-mlflow",
                        store=tmp_path / "store")
    assert completed.returncode == 0, completed.stderr
    output = json.loads(completed.stdout)
    # q4's only judgement has score 0: it has nothing relevant and is left out
    assert [row["query_id"] for row in output["per_query"]] == ["q1", "q2", "q3"]
    relevant = {"q1": {"d1", "d2"}, "q2": {"d3", "d4"}, "q3": {"d5", "d6"}}
    for row in output["per_query"]:
        assert row["doc/hit_rate@5"] == float(bool(_retrieved_documents(row) & relevant[row["query_id"]]))
    assert output["metrics"]["index/documents"] == 8


def test_bm25_mode_loads_no_embedding_model(tiny_corpus, tmp_path):  # noqa: F811
    # an embedding model that cannot load, and no fallback: only a run that loads it can fail
    common = ["eval", "--input", str(tiny_corpus.documents), "--golden", str(tiny_corpus.golden), "--rerank-depth", "0",
              "--embed-model", str(tmp_path / "no-such-model"), "--no-model-fallback", "--no-mlflow", "--json"]
    bm25 = run_cli(*common, "--mode", "bm25", store=tmp_path / "store")
    assert bm25.returncode == 0, bm25.stderr
    assert "embed_model_used" not in json.loads(bm25.stdout)["params"]
    dense = run_cli(*common, "--mode", "dense", store=tmp_path / "store")
    assert dense.returncode == 1 and "no-such-model" in dense.stderr


def test_beir_5000_abstracts_bm25_well_under_a_minute(tmp_path):
    from rag_core.evaluate.beir import write_synthetic_beir

    write_synthetic_beir(tmp_path / "beir")
    started = time.perf_counter()
    completed = run_cli("eval", "--beir", str(tmp_path / "beir"), "--mode", "bm25", "--rerank-depth", "0", "--json",
                        "--no-mlflow", store=tmp_path / "store")
    seconds = time.perf_counter() - started
    assert completed.returncode == 0, completed.stderr
    metrics = json.loads(completed.stdout)["metrics"]
    print(f"\nBEIR, 5,000 synthetic abstracts, 50 queries, --mode bm25 --rerank-depth 0: {seconds:.1f} s "
          f"(ingest {metrics['index/ingest_seconds']:.1f} s)")
    assert seconds < 60
    assert metrics["index/documents"] == 5000 and metrics["index/embedded"] == 0
    assert metrics["doc/hit_rate@5"] > 0.9  # three of a document's own rare words find it


def test_evidence_metrics_and_page_credit_as_a_user_sees_them(tiny_corpus, tmp_path):  # noqa: F811
    common = ["eval", "--input", str(tiny_corpus.documents), "--mode", "bm25", "--rerank-depth", "0",
              "--chunk-size", "40", "--overlap", "8", "--no-mlflow", "--context-budgets", "20,40,400"]
    completed = run_cli(*common, "--golden", str(tiny_corpus.golden), "--json", store=tmp_path / "store")
    assert completed.returncode == 0, completed.stderr
    output = json.loads(completed.stdout)
    metrics, rows = output["metrics"], output["per_query"]
    assert output["params"]["page_credit"] == "tied" and output["params"]["context_budgets"] == "20,40,400"
    assert metrics["evidence/queries"] == len(rows) == 3
    for name in ("recall", "precision", "iou"):
        for budget in (20, 40, 400):
            column = [row[f"evidence/{name}@{budget}"] for row in rows]
            assert all(0.0 <= value <= 1.0 for value in column)
            assert metrics[f"evidence/{name}@{budget}"] == pytest.approx(sum(column) / 3)
    for row in rows:  # more words read can only hold more of the evidence
        assert row["evidence/recall@20"] <= row["evidence/recall@40"] <= row["evidence/recall@400"]

    # the same set with pages only: nothing to locate, so the metrics are not available (never 0)
    pages_only = tmp_path / "pages.jsonl"
    lines = [json.loads(line) for line in tiny_corpus.golden.read_text().splitlines()]
    pages_only.write_text("".join(json.dumps({**line, "evidence": [{key: value for key, value in item.items() if key != "text"}
                                                                    for item in line["evidence"]]}) + "\n"
                                  for line in lines))
    completed = run_cli(*common, "--golden", str(pages_only), store=tmp_path / "store")
    assert completed.returncode == 0, completed.stderr
    assert "Evidence at a context budget: not available" in completed.stdout
    assert "page_credit tied" in completed.stdout
    completed = run_cli(*common, "--golden", str(pages_only), "--json", store=tmp_path / "store")
    assert not any(name.startswith("evidence/") and name != "evidence/queries" for name in json.loads(completed.stdout)["metrics"])
