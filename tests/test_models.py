"""Model loading: a missing model without fallback names itself and the way out; with fallback the
packaged MiniLM embeds and the name actually used says so; a cross-encoder never falls back, and the
random-head stand-in exists only by its name."""

from __future__ import annotations

import pytest

from rag_core.retrieve.models import FALLBACK_EMBED_NAME, ModelLoadError, load_cross_encoder, load_embedder

pytestmark = pytest.mark.slow


def test_missing_model_without_fallback_is_a_clear_error(tmp_path):
    missing = str(tmp_path / "no-such-model")
    with pytest.raises(ModelLoadError) as error:
        load_embedder(missing, fallback=False)
    message = str(error.value)
    assert missing in message and "RAG_EMBED_MODEL" in message and "local" in message


def test_fallback_is_recorded_as_the_model_used():
    name = "rag-workbench-tests/no-such-model"  # not on disk, and the hub is off in tests
    loaded = load_embedder(name, fallback=True)
    assert loaded.fallback and loaded.used == FALLBACK_EMBED_NAME and loaded.requested == name
    assert loaded.model.encode(["hello"]).shape == (1, 384)


def test_a_missing_cross_encoder_is_an_error_never_a_stand_in():
    name = "rag-workbench-tests/no-such-cross-encoder"  # not on disk, and the hub is off in tests
    with pytest.raises(ModelLoadError) as error:
        load_cross_encoder(name)
    assert name in str(error.value) and "RAG_RERANK_MODEL" in str(error.value) and error.value.reason


def test_the_random_head_stand_in_is_seeded_and_says_what_it_is():
    name = "random-head:packaged:minilm"
    first = load_cross_encoder(name)
    assert first.used.startswith(name) and "meaningless" in first.used
    load_cross_encoder.cache_clear()
    second = load_cross_encoder(name)
    pairs = [("what is the rate limit?", "Each key may send 600 requests per minute.")]
    assert first.model.predict(pairs)[0] == pytest.approx(second.model.predict(pairs)[0])
