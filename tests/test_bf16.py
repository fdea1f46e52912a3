"""The bf16 backends (embedding and re-ranking): the first-use agreement check against fp32 (passes on
a CPU with bf16; refused, announced, when the hardware lacks bf16 or the sample disagrees), and each
backend's own cache key. Vectors are compared with ones computed here directly (torch.autocast)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rag_core.retrieve import bf16
from rag_core.retrieve.embedding.embedder import Embedder
from rag_core.retrieve.models import load_embedder

pytestmark = pytest.mark.slow  # loads models
MODEL = "packaged:minilm"
RERANKER = "random-head:packaged:minilm"
HAS_BF16 = bf16.cpu_has_bf16()


def test_agreement_counts_swapped_top_ranks_and_the_lowest_cosine():
    # 2 queries, 3 passages, unit vectors in 2-D: query 0 ranks passages 0 > 1 > 2 in both; query 1's
    # top 3 order changes when passage 1 is rotated
    angle = lambda degrees: [np.cos(np.radians(degrees)), np.sin(np.radians(degrees))]  # noqa: E731
    queries = np.array([angle(0), angle(90)])
    reference = np.vstack([queries, [angle(10), angle(40), angle(80)]])
    fast = np.vstack([queries, [angle(10), angle(44), angle(80)]])
    result = bf16.agreement(reference, fast, 2)
    assert result.min_cosine == pytest.approx(np.cos(np.radians(4)), abs=1e-6)
    assert result.ranks_agree == 2 and result.passed  # 44 degrees still ranks between 10 and 80
    swapped = np.vstack([queries, [angle(10), angle(85), angle(80)]])  # 85 before 80 for query 1, after for 0
    result = bf16.agreement(reference, swapped, 2)
    assert result.ranks_agree == 0 and not result.passed
    assert result.min_cosine == pytest.approx(np.cos(np.radians(45)), abs=1e-6)
    scores = bf16.agreement(np.array([[3.0, 2.0, 1.0, 0.0], [1.0, 2.0, 3.0, 4.0]]),
                            np.array([[3.0, 1.0, 2.0, 0.0], [1.0, 2.0, 3.0, 4.0]]), 2, vectors=False)
    assert (scores.min_cosine, scores.ranks_agree, scores.passed) == (None, 1, False)
    only_fourth = bf16.agreement(np.array([[4.0, 3.0, 2.0, 1.0]]), np.array([[4.0, 3.0, 2.0, 5.0]]), 1, vectors=False)
    assert only_fourth.ranks_agree == 0  # passage 3 entered the top 3


def test_cpu_flags_are_read_from_cpuinfo(tmp_path: Path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse avx512f avx512_vnni\n")
    assert not bf16.cpu_has_bf16(info)
    info.write_text("processor\t: 0\nflags\t\t: fpu sse avx512f amx_bf16 amx_tile\n")
    assert bf16.cpu_has_bf16(info)
    assert not bf16.cpu_has_bf16(tmp_path / "missing")


@pytest.mark.skipif(not HAS_BF16, reason="this CPU has no bf16")
def test_bf16_embeddings_pass_the_check_and_match_autocast(caplog):
    import torch

    embedder = Embedder(MODEL, backend="bf16")
    texts = list(bf16.SAMPLE_PASSAGES[:4])
    vectors, _ = embedder.embed_documents(texts)
    assert embedder.encoder.active and embedder.backend_used == "bf16"
    assert "bf16 refused" not in caplog.text
    model = load_embedder(MODEL).model
    fp32 = model.encode_document(texts, normalize_embeddings=True, convert_to_numpy=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        direct = model.encode_document(texts, normalize_embeddings=True, convert_to_tensor=True).float().numpy()
    assert np.allclose(vectors, direct / np.linalg.norm(direct, axis=1, keepdims=True), atol=1e-5)
    assert not np.allclose(vectors, fp32, atol=1e-5)  # bf16 did run: the vectors moved
    cosine = np.sum(vectors * fp32, axis=1)
    assert cosine.min() >= bf16.MIN_COSINE
    assert embedder.encoder.agreement.ranks_agree == len(bf16.SAMPLE_QUERIES)


def test_bf16_is_refused_announced_without_the_cpu_flags(monkeypatch, caplog):
    monkeypatch.setattr(bf16, "cpu_has_bf16", lambda: False)
    monkeypatch.setattr(bf16, "_ANNOUNCED", set())  # nothing said yet in this process
    embedder, torch_embedder = Embedder(MODEL, backend="bf16"), Embedder(MODEL)
    assert embedder.cache_name == torch_embedder.cache_name and embedder.backend_used == "torch"
    assert Embedder(MODEL, backend="bf16").backend_used == "torch"  # refused again, not said again
    refused = [message for message in caplog.messages if "bf16 refused" in message]
    assert len(refused) == 1 and "avx512_bf16" in refused[0]
    texts = list(bf16.SAMPLE_PASSAGES[:3])
    assert np.array_equal(embedder.embed_documents(texts)[0], torch_embedder.embed_documents(texts)[0])


@pytest.mark.skipif(not HAS_BF16, reason="this CPU has no bf16")
def test_bf16_is_refused_when_the_sample_disagrees(monkeypatch, caplog):
    monkeypatch.setattr(bf16, "MIN_COSINE", 1.01)  # no cosine reaches it: a forced disagreement
    monkeypatch.setattr(bf16, "_ANNOUNCED", set())
    embedder = Embedder(MODEL, backend="bf16")
    assert not embedder.encoder.active and embedder.backend_used == "torch"
    assert "disagrees with fp32: min cosine" in caplog.text


@pytest.mark.skipif(not HAS_BF16, reason="this CPU has no bf16")
def test_a_model_is_checked_once_per_process_and_judged_at_each_use(monkeypatch, caplog):
    import weakref

    from rag_core.retrieve.embedding.embedder import Bf16Encoder

    monkeypatch.setattr(bf16, "_CHECKED", weakref.WeakKeyDictionary())  # nothing checked yet
    monkeypatch.setattr(bf16, "_ANNOUNCED", set())
    calls = []
    real_check = Bf16Encoder.check
    monkeypatch.setattr(Bf16Encoder, "check", lambda self: calls.append(self) or real_check(self))
    encoders = [Embedder(MODEL, backend="bf16").encoder for _ in range(3)]
    assert all(encoder.active for encoder in encoders) and len(calls) == 1
    assert encoders[2].agreement == encoders[0].agreement
    monkeypatch.setattr(bf16, "MIN_COSINE", 1.01)  # the same figures fail a stricter threshold
    assert not Embedder(MODEL, backend="bf16").encoder.active and len(calls) == 1
    assert "disagrees with fp32" in caplog.text


@pytest.mark.skipif(not HAS_BF16, reason="this CPU has no bf16")
def test_each_backend_has_its_own_cache_key():
    names = {backend: Embedder(MODEL, backend=backend).cache_name for backend in ("torch", "bf16", "onnx", "onnx-int8")}
    assert len(set(names.values())) == 4 and names["bf16"] == f"{names['torch']} [bf16]"


@pytest.mark.skipif(not HAS_BF16, reason="this CPU has no bf16")
def test_bf16_reranker_checks_against_fp32_and_keys_its_scores(monkeypatch, caplog):
    from rag_core.retrieve.rerank.cross_encoder import Reranker

    reranker, on_torch = Reranker(RERANKER, backend="bf16"), Reranker(RERANKER)
    texts = list(bf16.SAMPLE_PASSAGES)
    fast, reference = reranker.score("how do cells make energy", texts), on_torch.score("how do cells make energy", texts)
    assert reranker.scorer.active == (reranker.scorer.check().passed)
    assert reranker._cache_name == on_torch._cache_name + " [bf16]" if reranker.scorer.active else on_torch._cache_name
    if reranker.scorer.active:
        assert np.argmax(fast.scores) == np.argmax(reference.scores)
        assert np.allclose(fast.scores, reference.scores, atol=0.1 * np.ptp(reference.scores))
    monkeypatch.setattr(bf16, "cpu_has_bf16", lambda: False)
    refused = Reranker(RERANKER, backend="bf16")
    assert refused._cache_name == on_torch._cache_name
    assert refused.score("how do cells make energy", texts).scores == reference.scores
    assert "re-rank backend bf16" in caplog.text
