"""Where things live. Every default path is built here, from the project root or the working directory.

Raw input (``data/``) is never written by the pipeline; derived data (the index store, caches,
MLflow runs) lives apart and can be deleted at any time.
"""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = PROJECT_ROOT / "data"
SAMPLE_DOCUMENTS_DIR = DATA_DIR / "documents"
SAMPLE_GOLDEN_FILE = DATA_DIR / "golden" / "golden.jsonl"
NOTEBOOKS_DIR = PROJECT_ROOT / "notebooks"
EXPERIMENTS_DIR = PROJECT_ROOT / "experiments"


def default_store_dir() -> Path:
    """Index store: ``$RAG_STORE`` or ``.rag_store`` in the current directory."""
    return Path(os.environ.get("RAG_STORE", ".rag_store"))


def default_tracking_uri() -> str:
    """MLflow store: ``$MLFLOW_TRACKING_URI`` or a SQLite file under the project's ``mlruns/``."""
    uri = os.environ.get("MLFLOW_TRACKING_URI")
    if uri:
        return uri
    mlruns = PROJECT_ROOT / "mlruns"
    mlruns.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{mlruns / 'mlflow.db'}"
