"""A query process on a store whose ONNX export exists imports no torch, transformers,
sentence-transformers or chromadb (issue 21 item 1): the export is opened with ``tokenizers`` and
``onnxruntime`` only (``QueryEmbedder``), with the same vectors as the transformers path, and exact
dense search reads the matrix file beside the manifest instead of opening Chroma."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rag_core.config import RagConfig
from rag_core.paths import DATA_DIR, SAMPLE_DOCUMENTS_DIR
from rag_core.retrieve.embedding.onnx import QUERY_FILE, OnnxEmbedder, QueryEmbedder, write_query_files
from rag_core.retrieve.models import load_embedder

pytestmark = pytest.mark.slow
HEAVY = ("torch", "transformers", "sentence_transformers", "chromadb", "mlflow", "papermill", "ranx")
QUESTION = "What does QS-4021 mean?"


@pytest.fixture(scope="module")
def texts() -> list[str]:
    """Short and long passages (the longest past the model's 256 tokens: truncation) and a query."""
    words = " ".join(path.read_text() for path in sorted((DATA_DIR / "source").rglob("*.md"))).split()
    return [" ".join(words[start : start + length]) for start, length in ((0, 7), (300, 40), (900, 120), (2000, 400))] \
        + [QUESTION, "rate limit", "ünïcödé, tabs\tand  spaces"]


@pytest.mark.parametrize("quantize", [False, True])
def test_the_tokenizers_path_gives_the_transformers_path_vectors(texts, tmp_path, quantize):
    model = load_embedder("packaged:minilm").model
    reference = OnnxEmbedder.load(model, tmp_path, quantize=quantize, threads=1)
    assert write_query_files(model, reference.directory) and (reference.directory / QUERY_FILE).is_file()
    light = QueryEmbedder(reference.directory, threads=1)
    for kind in ("query", "document"):
        for batch_size in (1, 3, 32):  # batches mixing lengths: the padding must be the same
            expected = reference.encode(texts, kind, batch_size)
            np.testing.assert_allclose(light.encode(texts, kind, batch_size), expected, rtol=0, atol=1e-6)
    features = reference.tokenizer(texts, padding=True, truncation=True, max_length=256, return_tensors="np")
    ours = light._features(texts)
    for name in reference.manifest.input_names:  # the same token ids, masks and types, not merely close vectors
        np.testing.assert_array_equal(ours[name], features[name])


def _query(store: Path, *extra: str) -> tuple[dict, set[str], str]:
    """(the query's JSON, the heavy modules its process imported, its stderr)."""
    code = (f"import sys\nfrom rag_core.cli import main\n"
            f"main(['query', {QUESTION!r}, '--no-llm', '--rerank-depth', '0', '--json', '--store', {str(store)!r}, "
            f"*{list(extra)!r}])\n"
            f"print('modules:', *sorted(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)")
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr
    modules = set(completed.stderr.strip().splitlines()[-1].split()[1:])
    return json.loads(completed.stdout), modules, completed.stderr


@pytest.fixture(scope="module")
def onnx_store(tmp_path_factory) -> Path:
    from rag_core.service import ingest_directory

    store = tmp_path_factory.mktemp("cold") / "store"
    ingest_directory(SAMPLE_DOCUMENTS_DIR, store, RagConfig(embed_backend="onnx-int8", rerank_depth=0))
    return store


def _passages(result: dict) -> list[tuple[str, dict]]:
    return [(passage["id"], passage["scores"]) for passage in result["passages"]]


def test_an_onnx_hybrid_query_imports_no_torch_and_no_chroma(onnx_store):
    result, modules, stderr = _query(onnx_store, "--embed-backend", "onnx-int8")
    assert modules == set(), stderr
    assert "falling back" in stderr  # the default model is not offline: the fallback is still announced
    # The same passages and scores as a process that loads the model with torch and reads the vectors from Chroma.
    rows = next(onnx_store.glob("chunks/*/matrix-*.json"))
    rows.unlink()
    records = list((onnx_store / "onnx").glob("source-*.json"))
    assert len(records) == 1
    records[0].rename(records[0].with_suffix(".off"))
    try:
        reference, reference_modules, _ = _query(onnx_store, "--embed-backend", "onnx-int8")
    finally:
        records[0].with_suffix(".off").rename(records[0])
    assert {"torch", "chromadb"} <= reference_modules
    assert rows.is_file()  # the matrix file was written again from the store
    assert _passages(result) == _passages(reference) and result["passages"]
    again, modules, _ = _query(onnx_store, "--embed-backend", "onnx-int8")
    assert modules == set() and _passages(again) == _passages(result)


def test_a_changed_model_folder_is_loaded_with_torch(onnx_store, tmp_path):
    """The export is named by the weights' files: a model folder that changed is not matched to it."""
    import shutil

    from rag_core.retrieve.models import packaged_minilm_dir

    folder = tmp_path / "minilm"
    shutil.copytree(packaged_minilm_dir(), folder)
    env_store = onnx_store
    result, modules, _ = _query(env_store, "--embed-backend", "onnx-int8", "--embed-model", str(folder))
    assert "torch" in modules  # a folder never exported: loaded, exported, recorded
    _, modules, _ = _query(env_store, "--embed-backend", "onnx-int8", "--embed-model", str(folder))
    assert modules == set()
    (folder / "README.md").write_text("changed\n")
    _, modules, _ = _query(env_store, "--embed-backend", "onnx-int8", "--embed-model", str(folder))
    assert "torch" in modules


@pytest.fixture(scope="module")
def default_store(tmp_path_factory) -> Path:
    """A store ingested at the default settings (``embed_backend`` bf16, which exports its fp32 query model)."""
    from rag_core.service import ingest_directory

    store = tmp_path_factory.mktemp("cold-default") / "store"
    ingest_directory(SAMPLE_DOCUMENTS_DIR, store, RagConfig(rerank_depth=0))
    return store


def test_a_default_hybrid_query_imports_no_torch_and_embeds_the_query_in_fp32(default_store):
    """bf16 documents, fp32 queries: the query process opens the fp32 export without torch, finds the
    collection the ingest built by the store's record, and ranks as a process that loads the model."""
    from rag_core.retrieve.bf16 import cpu_has_bf16

    result, modules, stderr = _query(default_store)
    assert modules == set(), stderr
    records = list((default_store / "onnx").glob("bf16-*.json"))
    assert len(records) == 1
    assert json.loads(records[0].read_text())["backend_used"] == ("bf16" if cpu_has_bf16() else "torch")
    records[0].rename(records[0].with_suffix(".off"))  # without the record: the model is loaded
    try:
        reference, reference_modules, _ = _query(default_store)
    finally:
        records[0].with_suffix(".off").rename(records[0])
    assert "torch" in reference_modules
    assert _passages(result) == _passages(reference) and result["passages"]


def test_bf16_queries_are_the_fp32_vectors(default_store):
    from rag_core.retrieve.embedding.embedder import Embedder
    from rag_core.retrieve.embedding.onnx import open_exported

    open_exported.cache_clear()  # this process looked before the ingest exported: a new process does not
    model = RagConfig().embed_model
    bf16 = Embedder(model, backend="bf16", export_dir=default_store / "onnx")
    torch_fp32 = Embedder(model, backend="torch")
    np.testing.assert_allclose(bf16.embed_query(QUESTION), torch_fp32.embed_query(QUESTION), rtol=0, atol=1e-5)
    assert bf16._loaded is None  # the export and the record were enough


def test_a_bf16_process_that_found_the_export_embeds_new_documents_in_bf16(default_store):
    """A later process (a sweep's kernel) opens the query export without torch, then meets a new
    chunking: its documents are embedded by the bf16 encoder, not by the fp32 query export."""
    from rag_core.retrieve.bf16 import cpu_has_bf16
    from rag_core.retrieve.embedding.embedder import Embedder
    from rag_core.retrieve.embedding.onnx import open_exported

    open_exported.cache_clear()
    model = RagConfig().embed_model
    embedder = Embedder(model, backend="bf16", export_dir=default_store / "onnx")
    recorded = embedder.cache_name
    assert embedder._loaded is None
    vectors, stats = embedder.embed_documents(["a passage no chunking of the store has", "and another one"])
    assert stats.embedded == 2 and vectors.shape == (2, 384)
    assert embedder.cache_name == recorded and embedder.backend_used == ("bf16" if cpu_has_bf16() else "torch")
    fp32 = Embedder(model, backend="torch").embed_documents(["a passage no chunking of the store has"])[0]
    moved = float(np.abs(vectors[0] - fp32[0]).max())
    assert moved > 1e-6 if cpu_has_bf16() else moved < 1e-6  # bf16 did run where the CPU has it
