"""A small on-disk cache (SQLite) for work that is expensive to redo: embeddings and cross-encoder scores.

Embeddings are keyed by (model, sha1 of the text), so a chunk that two chunkings or two corpora
share is embedded once; cross-encoder scores by (model, query, sha1 of the passage). SQLite's WAL mode
lets sweep points running in parallel processes share one cache. Each ``put_*`` call is one
transaction, committed before it returns, so a process killed later keeps everything it put (the
embedder puts one batch at a time). Delete the file to start over.
Left out: evicting old entries (the cache only grows), sharing one cache between stores.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import threading
import weakref
from collections import Counter
from pathlib import Path
from typing import Sequence

import numpy as np

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS embeddings (model TEXT, text_sha1 TEXT, vector BLOB, PRIMARY KEY (model, text_sha1));
CREATE TABLE IF NOT EXISTS cross_encoder_scores (model TEXT, query TEXT, text_sha1 TEXT, score REAL, seconds REAL,
                                                 PRIMARY KEY (model, query, text_sha1));
"""


def text_sha1(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


# Resolved paths of the caches this process holds open, with how many connections: the store check
# reads no such file with open()/close(), which would drop the POSIX locks of these connections
# (another process could then delete the write-ahead log under them: "disk I/O error").
OPEN_HERE: Counter[str] = Counter()


def open_in_this_process(path: str | Path) -> bool:
    return OPEN_HERE[str(Path(path).resolve())] > 0


def _released(key: str) -> None:
    OPEN_HERE[key] -= 1


class ScoreCache:
    def __init__(self, path: str | Path):
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._open(path)
        except sqlite3.DatabaseError as exc:  # truncated, empty header, foreign: a cache, so started again
            if isinstance(exc, sqlite3.OperationalError) and "not a database" not in str(exc) \
                    and "malformed" not in str(exc):
                raise  # locked, read-only, unable to open: the store's failure, reported as such
            log.warning("the store's file %s was damaged (%s); moved aside to %s.damaged and started again",
                        path, exc, path.name)
            if getattr(self, "_conn", None) is not None:
                self._conn.close()
            os.replace(path, path.with_name(path.name + ".damaged"))
            for suffix in ("-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
            self._open(path)
        self._lock = threading.Lock()

    def _open(self, path: Path) -> None:
        self._conn = sqlite3.connect(path, timeout=60, check_same_thread=False)
        if getattr(self, "_finalizer", None) is None:
            key = str(path.resolve())
            OPEN_HERE[key] += 1
            self._finalizer = weakref.finalize(self, _released, key)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.executescript(_SCHEMA)

    # --- embeddings: model -> text -> float32 vector ------------------------------------------
    def get_embeddings(self, model: str, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """text_sha1 -> vector, for the texts that are cached."""
        keys = list({text_sha1(text) for text in texts})
        found: dict[str, np.ndarray] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                batch = keys[start : start + 500]
                rows = self._conn.execute(
                    f"SELECT text_sha1, vector FROM embeddings WHERE model = ? AND text_sha1 IN ({','.join('?' * len(batch))})",
                    [model, *batch],
                ).fetchall()
                found.update((key, np.frombuffer(blob, dtype=np.float32)) for key, blob in rows)
        return found

    def put_embeddings(self, model: str, texts: Sequence[str], vectors: np.ndarray) -> None:
        rows = [(model, text_sha1(text), np.asarray(vector, dtype=np.float32).tobytes()) for text, vector in zip(texts, vectors)]
        with self._lock, self._conn:
            self._conn.executemany("INSERT OR REPLACE INTO embeddings VALUES (?, ?, ?)", rows)

    # --- cross-encoder scores: (model, query, passage) -> score ------------------------------
    # Each score keeps the model time it cost, so latency can be reported as the model's, cached or not.
    def get_scores(self, model: str, query: str, texts: Sequence[str]) -> dict[str, tuple[float, float]]:
        """text_sha1 -> (score, seconds the model took for it), for the pairs that are cached."""
        keys = list({text_sha1(text) for text in texts})
        if not keys:
            return {}
        with self._lock:
            rows = self._conn.execute(
                f"SELECT text_sha1, score, seconds FROM cross_encoder_scores WHERE model = ? AND query = ? "
                f"AND text_sha1 IN ({','.join('?' * len(keys))})",
                [model, query, *keys],
            ).fetchall()
        return {key: (score, seconds) for key, score, seconds in rows}

    def put_scores(self, model: str, query: str, texts: Sequence[str], scores: Sequence[float],
                   seconds_each: float) -> None:
        rows = [(model, query, text_sha1(text), float(score), seconds_each) for text, score in zip(texts, scores)]
        with self._lock, self._conn:
            self._conn.executemany("INSERT OR REPLACE INTO cross_encoder_scores VALUES (?, ?, ?, ?, ?)", rows)

    def close(self) -> None:
        self._conn.close()
        self._finalizer()
