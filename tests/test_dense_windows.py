"""Dense search reads every word it ranks (issue 35): a unit longer than the embedding model's window
is embedded as token windows (``rag_core.retrieve.windows``), on the packaged MiniLM (256 tokens).

A hand-made document whose only matching sentence lies past token 256 of its one chunk is found with
windows and missed with ``dense_pooling: first``; windows' texts tokenize to their own tokens; windows
are reused from the embedding cache; two cold builds rank alike; ``first`` warns once."""

from __future__ import annotations

import hashlib

import pytest

from rag_core.config import RagConfig
from rag_core.ingest.corpus import Corpus
from rag_core.records import Document
from rag_core.retrieve.cache import ScoreCache
from rag_core.retrieve.embedding.embedder import Embedder
from rag_core.retrieve.index import Index
from rag_core.retrieve.pipeline import Pipeline
from rag_core.retrieve.retrievers import Query
from rag_core.retrieve.windows import WINDOW_MARK
from rag_core.service import QueryResult
from rag_core.workbench.reports.text import format_explain

pytestmark = pytest.mark.slow

FILLER = ("The community garden opens at dawn and volunteers water the tomato beds, weed the herb rows, "
          "and turn the compost heaps before the afternoon heat arrives. ")
NEEDLE = "The zorblax coolant valve on turbine seven must be recalibrated to 42 bar every ninety days."
QUESTION = "How often must the zorblax coolant valve on turbine seven be recalibrated?"
OTHERS = {  # a turbine and a valve, but not the answer: they outrank a garden chunk read in its first window only
    "turbines.txt": "Wind turbines turn the energy of moving air into electricity for the grid.",
    "valves.txt": "A valve is a device that regulates the flow of a liquid or a gas through a pipe.",
    "bakery.txt": "The bakery on the corner sells sourdough bread and cinnamon rolls every morning.",
}


def _document(doc_id: str, text: str) -> Document:
    return Document.from_pages(doc_id, [text], hashlib.sha256(text.encode()).hexdigest())


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    garden = FILLER * 14 + NEEDLE  # ~330 words: the needle lies past token 256
    return Corpus.of([_document("garden.txt", garden), *(_document(name, text) for name, text in OTHERS.items())])


@pytest.fixture(scope="module")
def embedder(tmp_path_factory) -> Embedder:
    """One model for the module (torch: no ONNX export per store), with its own embedding cache."""
    return _embedder(tmp_path_factory.mktemp("cache") / "cache.sqlite")


def _embedder(cache_path) -> Embedder:
    return Embedder(RagConfig().embed_model, cache=ScoreCache(cache_path), backend="torch")


def _index(store, corpus, pooling, embedder, **settings) -> Index:
    config = RagConfig(mode="dense", rerank_depth=0, chunk_size=1000, overlap=0, dense_pooling=pooling,
                       embed_backend="torch", **settings)
    return Index(store, corpus, config, embedder=embedder)


def _ranking(index: Index) -> list[tuple[str, float]]:
    hits = index.retriever("dense").search(Query(QUESTION, index.embedder.embed_query), 4).hits
    return [(hit.id, round(hit.score, 6)) for hit in hits]


def test_the_needle_past_the_window_is_found_with_windows_and_missed_with_first(tmp_path, corpus, embedder, caplog):
    first = _index(tmp_path / "first", corpus, "first", embedder)
    first.build()
    garden = next(chunk for chunk in first.chunks if chunk.doc_id == "garden.txt")
    offsets = first.embedder.token_offsets([garden.text])[0]
    assert garden.text.index(NEEDLE) > offsets[first.embedder.window_tokens - 1][1]  # past the first window
    assert [hit for hit, _ in _ranking(first)][0] != garden.id
    warning = [record.getMessage() for record in caplog.records if record.getMessage().startswith("dense search")]
    assert all(record.levelname == "WARNING" for record in caplog.records if record.getMessage() in warning)
    caplog.clear()
    assert len(warning) == 1 and "dense_pooling: mean_top2" in warning[0]
    assert first.stats.unread_share > 0.1 and first.stats.truncated == 1

    for pooling in ("max", "mean_top2"):
        windowed = _index(tmp_path / "windows", corpus, pooling, embedder)
        windowed.build()
        assert [hit for hit, _ in _ranking(windowed)][0] == garden.id, pooling
        garden_windows = len(windowed.retriever("dense").windows)
        assert garden_windows >= 2 and windowed.stats.windows == garden_windows + len(OTHERS)
        assert windowed.stats.unread_share == 0.0
        # --explain names the window that matched: the garden's last, which holds the needle
        result = Pipeline(windowed.config, corpus, windowed.store_dir, index=windowed).retrieve(QUESTION)
        explain = format_explain(QueryResult(result, None), windowed.config)
        assert f"dense windows (dense_pooling {pooling})" in explain
        assert f"  #1: window {garden_windows} of {garden_windows} (tokens " in explain
    assert "dense search never reads" not in caplog.text


def test_window_texts_tokenize_to_their_own_tokens_within_the_window(tmp_path, corpus, embedder):
    index = _index(tmp_path / "store", corpus, "max", embedder, dense_stride=60)
    index.build()
    dense = index.retriever("dense")
    tokenizer, size = index.embedder.loaded.model.tokenizer, index.embedder.window_tokens
    texts = dict(zip(index.chunk_set.ids, index.chunk_set.texts))
    assert dense.windows and all(window_id.startswith(window.unit_id + WINDOW_MARK)
                                 for window_id, window in dense.windows.items())
    for window in dense.windows.values():
        text = texts[window.unit_id][window.char_start:window.char_end]
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        assert len(ids) == window.token_end - window.token_start <= size
    spans = sorted((w.token_start, w.token_end) for w in dense.windows.values())
    assert spans[0][0] == 0 and all(later[0] <= earlier[1] for earlier, later in zip(spans, spans[1:]))  # no gap
    assert spans[-1][1] == len(index.embedder.token_offsets([texts[window.unit_id]])[0])  # to the last token


def test_windows_come_from_the_embedding_cache_and_pooling_shares_the_vectors(tmp_path, corpus):
    embedder = _embedder(tmp_path / "cache.sqlite")
    cold = _index(tmp_path / "a", corpus, "max", embedder)
    cold.build()
    windows = cold.stats.windows
    assert windows > len(corpus) and cold.stats.embedded == windows and cold.stats.embed_cache_hits == 0
    again = _index(tmp_path / "b", corpus, "max", embedder)  # another store, the same cache: nothing embedded
    again.build()
    assert again.stats.embedded == 0 and again.stats.embed_cache_hits == windows
    assert _ranking(again) == _ranking(cold)
    other = _index(tmp_path / "a", corpus, "mean_top2", embedder)  # same store: the same collection, reused
    other.build()
    assert other.stats.embedded == 0 and other.stats.upserted == 0
    assert other.retriever("dense").collection == cold.retriever("dense").collection


def test_two_cold_builds_rank_alike(tmp_path, corpus):
    rankings = []
    for name in ("one", "two"):  # each its own store and cache: embedded twice
        index = _index(tmp_path / name, corpus, "mean_top2", _embedder(tmp_path / name / "cache.sqlite"))
        index.build()
        rankings.append(_ranking(index))
    assert rankings[0] == rankings[1] and len(rankings[0]) == 4
    # a new process on the same store: the windows come from the manifest, the vectors from the matrix file
    reopened = _index(tmp_path / "one", corpus, "mean_top2", _embedder(tmp_path / "one" / "cache.sqlite"))
    assert _ranking(reopened) == rankings[0] and reopened.stats.embedded == 0
    assert reopened.retriever("dense").windows == index.retriever("dense").windows


def test_chunk_unit_tokens_counts_the_models_tokens(tmp_path, corpus, embedder):
    config = RagConfig(mode="dense", rerank_depth=0, chunk_unit="tokens", chunk_size=100, overlap=10, embed_backend="torch")
    index = Index(tmp_path, corpus, config, embedder=embedder)
    tokenizer = embedder.loaded.model.tokenizer
    counts = [len(tokenizer(chunk.text, add_special_tokens=False)["input_ids"]) for chunk in index.chunks
              if chunk.doc_id == "garden.txt"]
    assert len(counts) >= 4 and max(counts) <= 100 and min(counts[:-1]) > 50  # filled up to 100 tokens, not words
    in_words = Index(tmp_path, corpus, config.replace(chunk_unit="words"), embedder=embedder)
    assert in_words.chunking_key != index.chunking_key and len(in_words.chunks) < len(index.chunks)
