"""Shared fixtures. Tests run offline: the embedding model falls back to the packaged all-MiniLM-L6-v2
weights; re-ranking uses the random-head stand-in, asked for by name (``STAND_IN_RERANKER``, also set
as RAG_RERANK_MODEL for commands and notebooks): it exercises the code path, its scores mean nothing."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
for variable in ("RAG_EMBED_MODEL", "RAG_RERANK_MODEL", "RAG_LLM_MODEL", "LLM_PROVIDER", "RAG_STORE",
                 "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL"):
    os.environ.pop(variable, None)
STAND_IN_RERANKER = "random-head:packaged:minilm"
os.environ["RAG_RERANK_MODEL"] = STAND_IN_RERANKER

from rag_core.config import RagConfig  # noqa: E402
from rag_core.paths import SAMPLE_DOCUMENTS_DIR, SAMPLE_GOLDEN_FILE  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def sample_documents_dir() -> Path:
    return SAMPLE_DOCUMENTS_DIR


@pytest.fixture(scope="session")
def sample_golden_file() -> Path:
    return SAMPLE_GOLDEN_FILE


@pytest.fixture(scope="session")
def sample_store(tmp_path_factory) -> Path:
    """The sample corpus ingested once with the default settings (hybrid, chunk_size 512)."""
    from rag_core.service import ingest_directory

    store = tmp_path_factory.mktemp("sample-store")
    report = ingest_directory(SAMPLE_DOCUMENTS_DIR, store, RagConfig())
    assert report["documents"] >= 6
    return store


def _indexes_of(store: Path) -> set[str]:
    return {str(path.relative_to(store)) for path in store.glob("chunks/*/*") if not path.name.endswith(".npy")}


@pytest.fixture(autouse=True)
def _the_shared_sample_store_gains_no_index(request):
    """The session's sample store is shared: a test that builds another index in it (another backend,
    model or chunking) changes what later tests find there. Such a test fails; it belongs on
    ``copy_of_sample_store``."""
    if "sample_store" not in request.fixturenames:
        yield
        return
    store = request.getfixturevalue("sample_store")
    before = _indexes_of(store)
    yield
    added = _indexes_of(store) - before
    assert not added, f"this test built {sorted(added)} in the shared sample store: use copy_of_sample_store"


@pytest.fixture
def copy_of_sample_store(sample_store, tmp_path) -> Path:
    return copy_store(sample_store, tmp_path / "store")


def copy_store(source: Path, target: Path) -> Path:
    """Copy a store that this process may hold open. Its SQLite databases go through SQLite's backup: a
    plain read of a database file (copytree's) closes a descriptor of it, which drops every POSIX lock this
    process holds there, and another process may then delete the WAL under the open connection."""
    shutil.copytree(source, target, ignore=lambda folder, names: [name for name in names if ".sqlite" in name])
    for database in [*source.rglob("*.sqlite"), *source.rglob("*.sqlite3")]:
        origin, copy = sqlite3.connect(database), sqlite3.connect(target / database.relative_to(source))
        try:
            origin.backup(copy)
        finally:
            origin.close()
            copy.close()
    return target


def run_cli(*args: str, store: Path | None = None, env: dict[str, str] | None = None, cwd: Path | None = None):
    """Run `rag-pipeline` as a subprocess, the way a user does."""
    command = [sys.executable, "-m", "rag_core.cli", *args]
    if store is not None:
        command += ["--store", str(store)]
    return subprocess.run(command, capture_output=True, text=True, env={**os.environ, **(env or {})},
                          cwd=cwd or ROOT, timeout=600)


@pytest.fixture
def isolated_components(monkeypatch):
    """Components registered and settings declared during the test (in-process plugins included) are
    forgotten after it, so that other tests see only the built-ins."""
    from rag_core.components import REGISTRIES, SETTINGS

    for registry in REGISTRIES.values():
        monkeypatch.setattr(registry, "_components", dict(registry._components))
    monkeypatch.setattr(SETTINGS, "_settings", dict(SETTINGS._settings))
    monkeypatch.setattr(SETTINGS, "_rules", list(SETTINGS._rules))
    registries, modules = dict(REGISTRIES), set(sys.modules)
    yield
    REGISTRIES.clear()
    REGISTRIES.update(registries)
    for name in set(sys.modules) - modules:
        if name.startswith("rag_plugin_"):  # plugin files imported by path: imported again next time
            del sys.modules[name]


UNIT = Path(__file__).resolve().parent / "unit"


@pytest.fixture(autouse=True)
def _unit_tests_start_no_process_and_load_no_model(request, monkeypatch):
    """The unit tier (tests/unit, `make test-fast`) promises no models, no servers, no notebooks and no
    subprocesses: a test there that starts a process or loads a model fails, and belongs beside it."""
    if UNIT not in Path(str(request.node.path)).resolve().parents:
        return
    # matplotlib lists the system fonts through `fc-list` the first time it is imported on a machine; ranx
    # imports it. That set-up is the machine's, not the test's: pay it before the guard goes up.
    import matplotlib.font_manager  # noqa: F401

    def refuse(*args, **kwargs):
        raise AssertionError("a unit test started a process or loaded a model: move it out of tests/unit")

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)
    transformers = sys.modules.get("sentence_transformers")  # imported by an earlier test or by rag_core
    if transformers is not None:
        monkeypatch.setattr(transformers.SentenceTransformer, "__init__", refuse)
        monkeypatch.setattr(transformers.CrossEncoder, "__init__", refuse)
    for name, module in list(sys.modules.items()):  # the workbench's own loaders, also where imported by name
        if name == "rag_core" or name.startswith("rag_core."):
            for loader in ("load_embedder", "load_cross_encoder"):
                if hasattr(module, loader):
                    monkeypatch.setattr(module, loader, refuse)
