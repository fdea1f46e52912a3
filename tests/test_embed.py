"""Embeddings are committed to the cache batch by batch: an ingest killed while embedding resumes; truncated texts are counted exactly."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from conftest import ROOT
from rag_core.config import RagConfig
from rag_core.service import ingest_directory

SETTINGS = {"mode": "dense", "rerank_depth": 0, "chunk_size": 32, "overlap": 0, "embed_batch_size": 8}


def write_corpus(folder, documents: int = 16, words: int = 256) -> None:
    """Text files of made-up words, so that no two chunks are alike (the cache would merge them)."""
    rng = random.Random(9)
    folder.mkdir()
    for number in range(documents):
        text = " ".join("".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(3, 9))) for _ in range(words))
        (folder / f"doc-{number:03d}.txt").write_text(text)


def cached_embeddings(store) -> int:
    path = store / "cache.sqlite"
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(path, timeout=5) as conn:
            return conn.execute("SELECT count(*) FROM embeddings").fetchone()[0]
    except sqlite3.OperationalError:  # the table is not created yet
        return 0


@pytest.mark.slow
def test_an_ingest_killed_while_embedding_resumes_where_it_stopped(tmp_path):
    folder, store = tmp_path / "input", tmp_path / "store"
    write_corpus(folder)
    flags = [f"--{name.replace('_', '-')}={value}" for name, value in SETTINGS.items()]
    ingest = subprocess.Popen([sys.executable, "-m", "rag_core.cli", "ingest", "--input", str(folder),
                               "--store", str(store), *flags], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while cached_embeddings(store) < 8 and ingest.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    os.kill(ingest.pid, signal.SIGKILL)
    ingest.wait()
    assert ingest.returncode == -signal.SIGKILL, "the ingest ended before it could be killed while embedding"
    done_before_kill = cached_embeddings(store)

    report = ingest_directory(folder, store, RagConfig(**SETTINGS))
    assert 0 < done_before_kill < report["chunks"], "embeddings reach the cache only when all are done"
    assert 0 < report["embedded"] <= report["chunks"] - done_before_kill
    assert report["embedded"] + done_before_kill == report["chunks"] == cached_embeddings(store)


@pytest.mark.slow
def test_truncated_texts_are_counted_as_tokenizing_them_whole_counts_them():
    """``count_truncated`` decides long texts on their heads; the count is the one full tokenization gives,
    texts just around the limit, without spaces and empty included."""
    from rag_core.paths import SAMPLE_DOCUMENTS_DIR
    from rag_core.ingest.files import read_documents
    from rag_core.retrieve.embedding.embedder import Embedder

    embedder = Embedder("packaged:minilm")
    limit, tokenizer = embedder.max_seq_length, embedder.loaded.model.tokenizer
    words = " ".join(document.text for document in read_documents(SAMPLE_DOCUMENTS_DIR).documents).split(" ")
    rng = random.Random(0)
    texts = []
    for length in (50, 150, 190, 200, 210, 220, 240, 260, 400, 900):
        for _ in range(20):
            start = rng.randrange(len(words) - length)
            texts.append(" ".join(words[start:start + length]))
    long_words = "international " * 300  # 302 tokens; its head (111 tokens) does not decide it
    texts += ["x" * 3000, "word " * (limit - 2), "word " * (limit - 1), "1,234 " * 400, " " * 2000 + "tail", "",
              long_words]
    lengths = [len(ids) for ids in tokenizer(texts, add_special_tokens=True, truncation=False)["input_ids"]]
    expected = sum(length > limit for length in lengths)
    assert 0 < expected < len(texts) and any(abs(length - limit) <= 5 for length in lengths)
    assert embedder.count_truncated(texts) == expected
    assert embedder.count_truncated([long_words]) == 1 and embedder.count_truncated([long_words[:1000]]) == 0
