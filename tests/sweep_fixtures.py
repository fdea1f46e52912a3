"""Fixtures for the tracking, sweep, notebook and MLflow-server tests.

Import the ones you use into a test module (``from sweep_fixtures import tiny_corpus, smoke_sweep``).
``smoke_sweep`` runs ``experiments/smoke.yaml`` (with 2 workers) once per test session, into a
temporary store and tracking store, and is shared by every module that uses it. Nothing here
touches the project's ``mlruns/`` or ``.rag_store``.
"""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import pytest

from rag_core.paths import EXPERIMENTS_DIR

# Three small documents on unrelated subjects, and a golden set whose evidence is copied from them.
TINY_DOCUMENTS = {
    "lighthouses.md": (
        "Lighthouse keepers trimmed the wicks of the lamps every evening. The Fresnel lens, invented by "
        "Augustin Fresnel in 1822, concentrates the light into a beam visible for twenty nautical miles. "
        "Keepers logged the weather, the passing ships and the fuel burned on each watch.\n\n"
        "Automation ended the profession: the last keeper left the Longstone light in 1990, and today an "
        "electric lamp switches itself on at dusk with a photocell."
    ),
    "sourdough.md": (
        "A sourdough starter is a culture of wild yeast and lactic acid bacteria kept in flour and water. "
        "Feed the starter twice a day with equal weights of flour and water at about 24 degrees Celsius.\n\n"
        "The bulk fermentation of the dough takes four to six hours; the loaf then proofs overnight in the "
        "refrigerator and bakes in a covered pot at 250 degrees Celsius for twenty minutes."
    ),
    "glaciers.md": (
        "A glacier forms where more snow falls in winter than melts in summer, and the buried snow turns "
        "into firn and then into dense ice. Glaciers flow downhill under their own weight.\n\n"
        "Moraines are ridges of rock debris that a glacier pushes ahead of it or leaves along its sides. "
        "Most alpine glaciers have retreated since 1850, the end of the Little Ice Age."
    ),
}
TINY_GOLDEN = [
    {"id": "t1", "query": "Who invented the lens that concentrates lighthouse light into a beam?",
     "evidence": [{"source": "lighthouses.md", "text": "The Fresnel lens, invented by Augustin Fresnel in 1822"}]},
    {"id": "t2", "query": "How often should a sourdough starter be fed?",
     "evidence": [{"source": "sourdough.md", "text": "Feed the starter twice a day"}]},
    {"id": "t3", "query": "What are moraines made of?",
     "evidence": [{"source": "glaciers.md", "text": "Moraines are ridges of rock debris"}]},
]


@dataclass(frozen=True)
class TinyCorpus:
    documents: Path
    golden: Path


def write_tiny_corpus(folder: Path) -> TinyCorpus:
    documents = folder / "documents"
    documents.mkdir(parents=True, exist_ok=True)
    for name, text in TINY_DOCUMENTS.items():
        (documents / name).write_text(text)
    golden = folder / "golden.jsonl"
    golden.write_text("".join(json.dumps(query) + "\n" for query in TINY_GOLDEN))
    return TinyCorpus(documents, golden)


@pytest.fixture(scope="session")
def tiny_corpus(tmp_path_factory) -> TinyCorpus:
    return write_tiny_corpus(tmp_path_factory.mktemp("tiny-corpus"))


def sqlite_uri(folder: Path) -> str:
    return f"sqlite:///{folder.resolve() / 'mlflow.db'}"


@pytest.fixture
def tracking_uri(tmp_path, monkeypatch) -> str:
    """A fresh SQLite tracking store in tmp_path, also set as MLFLOW_TRACKING_URI."""
    uri = sqlite_uri(tmp_path / "mlruns")
    (tmp_path / "mlruns").mkdir()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    return uri


def files_containing(folder: Path, needle: str) -> list[Path]:
    """Every file below `folder` whose bytes contain `needle`."""
    return [path for path in folder.rglob("*") if path.is_file() and needle.encode() in path.read_bytes()]


def evaluation_notebook_with(cell_source: str, path: Path) -> Path:
    """A copy of notebooks/02-evaluate.ipynb with `cell_source` run right after the parameters."""
    import nbformat

    from rag_core.workbench.execution.points import NOTEBOOK

    notebook = nbformat.read(str(NOTEBOOK), as_version=4)
    position = next(i for i, cell in enumerate(notebook.cells) if "parameters" in cell.metadata.get("tags", []))
    notebook.cells.insert(position + 1, nbformat.v4.new_code_cell(cell_source))
    nbformat.write(notebook, str(path))
    return path


def quality_metrics(metrics: dict[str, float]) -> dict[str, float]:
    """The metrics a point's settings determine (not timings, latencies or work counts)."""
    return {name: value for name, value in metrics.items() if name.split("/")[0] in ("chunk", "page", "doc", "context")}


def embeddings_in_cache(store: Path) -> int:
    with sqlite3.connect(store / "cache.sqlite") as connection:
        return connection.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0]


# --- the smoke sweep, once per session -----------------------------------------------------------
@dataclass(frozen=True)
class SmokeSweep:
    result: object  # rag_core.workbench.SweepResult
    spec: object  # rag_core.workbench.SweepSpec
    store: Path
    tracking_dir: Path
    tracking_uri: str
    output: Path


_SMOKE: dict[str, SmokeSweep] = {}


@pytest.fixture(scope="session")
def smoke_sweep(tmp_path_factory) -> SmokeSweep:
    if "smoke" not in _SMOKE:
        from rag_core.workbench import load_sweep, run_sweep

        folder = tmp_path_factory.mktemp("smoke-sweep")
        tracking_dir = folder / "mlruns"
        tracking_dir.mkdir()
        uri = sqlite_uri(tracking_dir)
        spec = load_sweep(EXPERIMENTS_DIR / "smoke.yaml")
        previous = os.environ.get("MLFLOW_TRACKING_URI")
        os.environ["MLFLOW_TRACKING_URI"] = uri  # belt and braces: nothing may reach the project's mlruns/
        try:
            result = run_sweep(spec, folder / "store", workers=2, output_dir=folder / "notebooks", tracking_uri=uri)
        finally:
            if previous is None:
                os.environ.pop("MLFLOW_TRACKING_URI", None)
            else:
                os.environ["MLFLOW_TRACKING_URI"] = previous
        _SMOKE["smoke"] = SmokeSweep(result, spec, folder / "store", tracking_dir, uri, folder / "notebooks")
    return _SMOKE["smoke"]


def kernel_pids() -> set[int]:
    """This process's Jupyter kernels (children at any depth, so also those of servers other tests run)."""
    import psutil

    found = set()
    for child in psutil.Process().children(recursive=True):
        try:
            if any("ipykernel" in part for part in child.cmdline()):
                found.add(child.pid)
        except psutil.Error:  # gone meanwhile
            pass
    return found
