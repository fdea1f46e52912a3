"""A terminal that fits (issue 44 item 4): no line that `query` and `eval` print on the sample corpus
is longer than 120 characters, the library's long warnings and the extractive answer's quotes
included (BM25 mode: no embedding model, so the test is quick)."""

from __future__ import annotations

import pytest

from conftest import run_cli
from rag_core.paths import SAMPLE_DOCUMENTS_DIR, SAMPLE_GOLDEN_FILE
from rag_core.terminal_text import TERMINAL_WIDTH

# A re-ranker that cannot be loaded: the "[rag] re-ranking is off ..." warning, 250 characters unwrapped.
NO_RERANKER = {"RAG_RERANK_MODEL": "/nonexistent/cross-encoder"}
BM25 = ("--mode", "bm25", "--rerank-depth", "5")


@pytest.fixture(scope="module")
def bm25_store(tmp_path_factory):
    store = tmp_path_factory.mktemp("bm25-store")
    completed = run_cli("ingest", "--input", str(SAMPLE_DOCUMENTS_DIR), "--mode", "bm25", store=store)
    assert completed.returncode == 0, completed.stderr
    return store


def too_long(output: str) -> list[str]:
    """The lines of `output` longer than the terminal's width; a progress bar's carriage returns end a
    line as a newline does (the terminal shows each redraw on the same line)."""
    return [line for line in output.replace("\r", "\n").splitlines() if len(line) > TERMINAL_WIDTH]


def test_query_output_fits(bm25_store):
    completed = run_cli("query", "Why would a worker be handed a job that another worker has already finished?",
                        *BM25, store=bm25_store, env=NO_RERANKER)
    assert completed.returncode == 0, completed.stderr
    assert "re-ranking is off" in completed.stderr and "Extractive answer" in completed.stdout
    assert too_long(completed.stdout) == [] and too_long(completed.stderr) == []
    unwrapped = " ".join(completed.stdout.split())
    assert "[Source: " in unwrapped and "no answer was generated." in unwrapped  # wrapped, nothing lost


def test_eval_output_fits(bm25_store, tmp_path):
    tracking = {"MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}
    completed = run_cli("eval", "--golden", str(SAMPLE_GOLDEN_FILE), *BM25, store=bm25_store,
                        env={**NO_RERANKER, **tracking})
    assert completed.returncode == 0, completed.stderr
    assert "re-ranking is off" in completed.stderr and "Retrieval: 36 queries" in completed.stdout
    assert "MLflow UI (make mlflow-ui):\n  http://127.0.0.1:5000/#/experiments/" in completed.stdout  # 137 unwrapped
    assert too_long(completed.stdout) == [] and too_long(completed.stderr) == []
