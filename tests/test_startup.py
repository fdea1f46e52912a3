"""Commands import only what they use: a BM25 query without re-ranking loads no torch, no MLflow, no
papermill and no ranx (each costs seconds of process start)."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("torch", "mlflow", "papermill", "ranx", "sentence_transformers", "chromadb", "nbformat", "ray")


def _modules_after(code: str) -> set[str]:
    script = f"import sys\n{code}\nprint('modules:', *sorted(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)"
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr
    return set(completed.stderr.strip().splitlines()[-1].split()[1:])


def test_help_imports_nothing_heavy():
    assert _modules_after("from rag_core.cli import build_parser; build_parser().format_help()") == set()


@pytest.mark.slow
def test_a_bm25_query_imports_nothing_heavy(tmp_path):
    from rag_core.config import RagConfig
    from rag_core.paths import SAMPLE_DOCUMENTS_DIR
    from rag_core.service import ingest_directory

    ingest_directory(SAMPLE_DOCUMENTS_DIR, tmp_path / "store", RagConfig(mode="bm25", rerank_depth=0))
    code = (f"from rag_core.cli import main\nmain(['query', 'What does QS-4021 mean?', '--mode', 'bm25', "
            f"'--rerank-depth', '0', '--no-llm', '--store', {str(tmp_path / 'store')!r}])")
    assert _modules_after(code) == set()
