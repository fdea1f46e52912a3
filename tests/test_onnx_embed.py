"""The embedding model on ONNX Runtime against the torch model it was exported from (the packaged
all-MiniLM-L6-v2: mean pooling + normalisation), the backend in the collection key and in the run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rag_core.config import ConfigError, RagConfig
from rag_core.paths import DATA_DIR, SAMPLE_GOLDEN_FILE
from rag_core.retrieve.bf16 import cpu_has_bf16
from rag_core.retrieve.embedding.embedder import Embedder
from rag_core.retrieve.models import load_embedder
from rag_core.retrieve.embedding.onnx import OnnxEmbedder, model_prompts
from rag_core.retrieve.onnx_export import MODEL_FILE

pytestmark = pytest.mark.slow
MODEL = "packaged:minilm"


@pytest.fixture(scope="session")
def torch_model():
    return load_embedder(MODEL).model


@pytest.fixture(scope="session")
def texts() -> list[str]:
    """Passages of 10 to 400 words of the sample corpus (the longest past the model's 256 tokens, so
    truncation is compared too) and golden queries."""
    words = " ".join(path.read_text() for path in sorted((DATA_DIR / "source").rglob("*.md"))).split()
    passages = [" ".join(words[start : start + length]) for start, length in ((0, 10), (500, 60), (900, 150), (2000, 400))]
    queries = [json.loads(line)["query"] for line in SAMPLE_GOLDEN_FILE.read_text().splitlines() if line.strip()]
    return passages + queries[:6]


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("onnx-embed-cache")


@pytest.fixture(scope="session")
def torch_vectors(torch_model, texts) -> np.ndarray:
    return torch_model.encode_document(texts, normalize_embeddings=True, convert_to_numpy=True)


def cosines(vectors: np.ndarray, reference: np.ndarray) -> np.ndarray:
    return np.sum(vectors * reference, axis=1) / np.linalg.norm(vectors, axis=1) / np.linalg.norm(reference, axis=1)


def test_fp32_vectors_equal_torch(torch_model, torch_vectors, texts, cache_dir):
    onnx = OnnxEmbedder.load(torch_model, cache_dir, quantize=False, threads=2)
    vectors = onnx.encode(texts, "document", batch_size=3)  # batches mixing lengths: padding must not matter
    assert vectors.shape == torch_vectors.shape == (len(texts), 384) and vectors.dtype == np.float32
    assert cosines(vectors, torch_vectors).min() > 0.99
    np.testing.assert_allclose(vectors, torch_vectors, atol=1e-4)  # the same pooling, not merely a close one
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert onnx.manifest.max_length == torch_model.max_seq_length == 256


def test_pooling_is_the_mean_of_token_vectors(torch_model, texts, cache_dir):
    """Independently of sentence-transformers: mean of the HF model's token vectors over the mask."""
    import torch

    onnx = OnnxEmbedder.load(torch_model, cache_dir, quantize=False, threads=2)
    features = torch_model.tokenizer(texts[:3], padding=True, truncation=True, max_length=256, return_tensors="pt")
    with torch.no_grad():
        tokens = torch_model[0].auto_model(**features).last_hidden_state
    mask = features["attention_mask"].unsqueeze(-1).float()
    mean = ((tokens * mask).sum(1) / mask.sum(1)).numpy()
    expected = mean / np.linalg.norm(mean, axis=1, keepdims=True)
    np.testing.assert_allclose(onnx.encode(texts[:3]), expected, atol=1e-4)


def test_int8_vectors_are_close_to_torch(torch_model, torch_vectors, texts, cache_dir):
    int8 = OnnxEmbedder.load(torch_model, cache_dir, quantize=True, threads=2)
    fp32 = OnnxEmbedder.load(torch_model, cache_dir, quantize=False, threads=2)
    similarity = cosines(int8.encode(texts), torch_vectors)
    assert similarity.min() > 0.95 and similarity.mean() > 0.97
    assert not np.allclose(int8.encode(texts), fp32.encode(texts), atol=1e-4)  # quantization happened
    assert (int8.directory / MODEL_FILE).stat().st_size < 0.8 * (fp32.directory / MODEL_FILE).stat().st_size
    assert int8.directory != fp32.directory


def test_prompts_follow_sentence_transformers():
    class Model:
        prompts = {"query": "query: ", "document": ""}
        default_prompt_name = None

    assert model_prompts(Model()) == {"query": "query: ", "document": ""}
    Model.prompts, Model.default_prompt_name = {"retrieval": "Represent: "}, "retrieval"
    assert model_prompts(Model()) == {"query": "Represent: ", "document": "Represent: "}


def test_each_backend_has_its_own_cache_name():
    names = {backend: Embedder(MODEL, backend=backend).cache_name for backend in ("torch", "onnx", "onnx-int8")}
    assert names["torch"] == load_embedder(MODEL).used  # torch keeps the existing caches and collections
    assert len(set(names.values())) == 3 and names["onnx-int8"].endswith("[onnx-int8]")
    with pytest.raises(ConfigError, match="embed_backend must be one of torch, onnx, onnx-int8"):
        RagConfig(embed_backend="tensorrt")


def test_the_pipeline_embeds_on_onnx_in_its_own_collection(copy_of_sample_store):
    from rag_core.service import open_pipeline

    query = "Which headers tell a client how close it is to the rate limit?"
    config = RagConfig(mode="dense", rerank_depth=0)  # the store's model and backend: reuses its collection
    on_default = open_pipeline(copy_of_sample_store, config, progress=False)
    on_onnx = open_pipeline(copy_of_sample_store, config.replace(embed_backend="onnx"), progress=False)
    default_hits, onnx_hits = on_default.retrieve(query).hits, on_onnx.retrieve(query).hits
    assert on_onnx.index.retriever("dense").collection != on_default.index.retriever("dense").collection  # the backend is part of the key
    assert on_onnx.index.stats.embedded == on_onnx.index.stats.windows  # not read from the default's cache entries
    assert on_default.index.stats.embedded == 0
    assert [hit.chunk.id for hit in onnx_hits] == [hit.chunk.id for hit in default_hits]
    assert on_onnx.models_used()["embed_backend_used"] == "onnx"
    assert on_default.models_used()["embed_backend_used"] == ("bf16" if cpu_has_bf16() else "torch")
    assert any((copy_of_sample_store / "onnx").iterdir())  # the export is cached in the store


def test_a_trace_that_disagrees_with_torch_is_exported_again_with_dynamo(tmp_path, monkeypatch):
    """fp32 exports are traced (fast) and checked on a probe batch of other shapes; a trace that fails
    the check is replaced by the dynamo exporter's graph, and the manifest says which made the file."""
    from rag_core.retrieve import onnx_export

    model = load_embedder(MODEL).model
    texts = ["a query", "a much longer passage about rate limits, quotas and the headers that report them"]
    traced = OnnxEmbedder.load(model, tmp_path / "traced")
    assert traced.manifest.exporter.endswith(", torchscript")
    monkeypatch.setattr(onnx_export, "TRACE_TOLERANCE", -1.0)  # no graph agrees: the check fails for real
    fallback = OnnxEmbedder.load(model, tmp_path / "fallback")
    assert fallback.manifest.exporter.endswith(", dynamo")
    reference = model.encode_document(texts, normalize_embeddings=True)
    for encoder in (traced, fallback):
        np.testing.assert_allclose(encoder.encode(texts, "document"), reference, rtol=0, atol=1e-5)
