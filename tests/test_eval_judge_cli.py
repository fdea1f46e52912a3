"""`rag-pipeline eval --judge` end to end: answers and judge scores from the real anthropic SDK
talking to the project's Messages API server, logged to MLflow, and the planted key nowhere in the
MLflow store."""

from __future__ import annotations

import json

import pytest
from mlflow.tracking import MlflowClient

from conftest import run_cli
from llm_fixtures import PLANTED_KEY, anthropic_env, clean_llm_env, llm_server  # noqa: F401 - fixtures
from llm_server import reply
from rag_core.paths import SAMPLE_DOCUMENTS_DIR, SAMPLE_GOLDEN_FILE

pytestmark = pytest.mark.slow


def test_eval_judge_logs_scores_and_never_the_key(tmp_path, anthropic_env):
    judge = lambda score: reply(json.dumps({"score": score, "reason": "ok"}))  # noqa: E731
    anthropic_env.script(reply("The answer. [Source: api-reference.pdf, page 1]"),
                         judge(4), judge(5), judge(3), judge(2))
    tracking = f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}"
    (tmp_path / "mlruns").mkdir()
    result = run_cli("eval", "--golden", str(SAMPLE_GOLDEN_FILE), "--input", str(SAMPLE_DOCUMENTS_DIR),
                     "--max-queries", "1", "--mode", "bm25", "--rerank-depth", "0", "--judge", "--json",
                     store=tmp_path / "store",
                     env={"ANTHROPIC_API_KEY": PLANTED_KEY, "ANTHROPIC_BASE_URL": anthropic_env.anthropic_base_url,
                          "MLFLOW_TRACKING_URI": tracking})
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    metrics = payload["metrics"]
    assert (metrics["judge/faithfulness"], metrics["judge/answer_relevance"], metrics["judge/coverage"],
            metrics["judge/answer_correctness"]) == (4, 5, 3, 2)
    assert len(anthropic_env.requests) == 5

    run = MlflowClient(tracking).get_run(payload["mlflow"]["run_id"])
    logged = {name.replace("_at_", "@"): value for name, value in run.data.metrics.items()}
    assert logged["judge/faithfulness"] == 4 and logged["judge/answer_correctness"] == 2

    assert PLANTED_KEY not in result.stdout + result.stderr
    for path in (tmp_path / "mlruns").rglob("*"):
        if path.is_file():
            assert PLANTED_KEY.encode() not in path.read_bytes(), path


def test_eval_judge_without_a_key_says_which_variable_to_set(tmp_path, clean_llm_env):
    result = run_cli("eval", "--golden", str(SAMPLE_GOLDEN_FILE), "--input", str(SAMPLE_DOCUMENTS_DIR),
                     "--max-queries", "1", "--mode", "bm25", "--rerank-depth", "0", "--judge", "--no-mlflow",
                     store=tmp_path / "store")
    assert result.returncode == 1
    assert "ANTHROPIC_API_KEY" in result.stderr
