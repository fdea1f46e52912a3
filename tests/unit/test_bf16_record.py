"""The bf16 backend's record of the collection its last build made (``onnx/bf16-<key>.json``): read
back as written; damaged or foreign records are ignored (the model is loaded and decides)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rag_core.retrieve.embedding import onnx
from rag_core.retrieve.models import embedder_source

MODEL = "packaged:minilm"


@pytest.fixture
def record(tmp_path):
    source = embedder_source(MODEL)
    assert source is not None
    loaded = SimpleNamespace(requested=MODEL, used=source.used, fallback=source.fallback)
    onnx.write_bf16_record(loaded, tmp_path, "torch")
    return onnx.bf16_record(source, tmp_path)


def test_the_record_is_read_back(record, tmp_path):
    assert onnx.read_bf16_record(MODEL, True, tmp_path) == "torch"


@pytest.mark.parametrize("text", ["[1, 2]", "{", '{"used": "another model", "backend_used": "torch"}', "null",
                                  '{"backend_used": 3}'])
def test_a_damaged_or_foreign_record_is_ignored(record, tmp_path, text):
    record.write_text(text)
    assert onnx.read_bf16_record(MODEL, True, tmp_path) is None
