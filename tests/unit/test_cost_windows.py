"""`--dry-run` estimates count windows (issue 35): with ``dense_pooling`` other than ``first`` a unit longer
than the model's window is embedded as its windows, so it costs that many texts. Hand-computed values."""

from __future__ import annotations

import json

import pytest

from rag_core.config import load_config
from rag_core.ingest.corpus import Corpus
from rag_core.records import Document
from rag_core.workbench.plans.cost import (ASSUMED_WINDOW_TOKENS, TOKENS_PER_WORD, Throughputs, _to_embed,
                                           window_count, window_tokens)


@pytest.mark.parametrize("tokens, window, stride, expected", [
    (100, 254, 190, 1),  # fits
    (254, 254, 190, 1),  # exactly one window
    (255, 254, 190, 2),  # one token past: a second window, ending at the unit's end
    (444, 254, 190, 2),  # 254 + 190: two windows exactly
    (445, 254, 190, 3),
    (1000, 510, 382, 3),  # 510 + 382 = 892 < 1000: three
])
def test_window_count_by_hand(tokens, window, stride, expected):
    assert window_count(tokens, window, stride) == expected


def corpus(words: int) -> Corpus:
    text = " ".join(f"w{i}" for i in range(words))
    return Corpus.of([Document("a.txt", text, (0,), "hash-a")])


def config(**settings):
    return load_config(None, {"embed_model": "some/model", "model_fallback": False, "mode": "dense", **settings})


def test_windows_counted_in_the_estimate(tmp_path):
    rate = Throughputs(embed={"some/model": [["run", 10.0, 1.0]]})  # 10 texts per second
    # 1,000 words in 256-word chunks, no overlap: 3 chunks of 256 x 1.2 = 307.2 tokens each; MiniLM's window
    # (254, assumed: no index of the model in the store) with the default stride 190: 2 windows each
    first, = _to_embed([config(chunk_size=256, overlap=0, dense_pooling="first")], corpus(1000), tmp_path, rate)
    windows, = _to_embed([config(chunk_size=256, overlap=0, dense_pooling="mean_top2")], corpus(1000), tmp_path, rate)
    assert TOKENS_PER_WORD * 256 > ASSUMED_WINDOW_TOKENS
    assert (first.chunks, first.texts, first.seconds) == (3, 3, pytest.approx(0.3))
    assert (windows.chunks, windows.texts, windows.seconds) == (3, 6, pytest.approx(0.6))
    # 200-word chunks (240 tokens) fit: one window each, the same cost as truncation
    short, = _to_embed([config(chunk_size=200, overlap=0, dense_pooling="max")], corpus(1000), tmp_path, rate)
    assert (short.chunks, short.texts) == (5, 5)


def test_window_length_read_from_the_store(tmp_path):
    manifest = tmp_path / "chunks" / "k" / "dense-x.json"
    manifest.parent.mkdir(parents=True)
    manifest.write_text(json.dumps({"model": "some/model", "window_tokens": 510}))
    assert window_tokens(config(), tmp_path) == 510
    assert window_tokens(config(embed_model="other/model"), tmp_path) == ASSUMED_WINDOW_TOKENS
    # 307-token chunks fit a 510-token window: no extra texts
    need, = _to_embed([config(chunk_size=256, overlap=0)], corpus(1000), tmp_path, Throughputs())
    assert (need.chunks, need.texts, need.seconds) == (3, 3, None)


def test_the_dry_run_line_names_the_windowed_texts():
    from types import SimpleNamespace

    from rag_core.workbench.plans.cost import CostEstimate, EmbeddingNeed
    from rag_core.workbench.reports.text import format_estimate

    needs = [EmbeddingNeed("256/0 windows", 3, 0.6, 6), EmbeddingNeed("200/0", 5, 0.5, 5)]
    cost = CostEstimate("grid", "", 2, 2, 10, 2, ["some/model"], needs, None, {"dense": 1.0}, 1.1, 3.1, "", [])
    text = format_estimate(SimpleNamespace(name="s", space=None), cost, "here", 10)
    assert "    256/0 windows: ~3 chunks as ~6 windowed texts, 1 s" in text
    assert "    200/0: ~5 chunks, 0 s" in text  # fits: no windows to name
