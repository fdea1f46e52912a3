"""The BM25 retriever: a ``BM25Index`` (``rag_core.retrieve.bm25``) over the indexed chunk texts, saved
in the chunking's folder as ``bm25-<key>/`` (the key: backend, tokenizer, k1, b, the chunk context, and
``bm25_numbers`` with its version when on: the keys of before stay as they were)
with each document's metadata beside it (``metadata.json``: what filters match).

A filter (``allowed_doc_ids``) becomes a mask over the index's entries, applied before the top
``depth`` is taken. ``rag_core.retrieve.expansion.rm3`` searches it with a weighted query (``index``,
``mask``, ``text_of``).
Left out: indexes that grow (a new corpus or chunking is a new index).
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np

from rag_core.ingest.corpus import umask_mode
from rag_core.retrieve.bm25 import BM25Index
from rag_core.retrieve.build_stats import BuildStats
from rag_core.retrieve.retrievers.base import ChunkSet, Query, Ranked, Resources, Retriever, digest_key
from rag_core.retrieve.tokenizer import NUMBERS_VERSION

if TYPE_CHECKING:
    from rag_core.components.config_fields import ConfigFields

log = logging.getLogger(__name__)


class BM25Retriever(Retriever):
    def __init__(self, name: str, config: ConfigFields, resources: Resources) -> None:
        super().__init__(name, config, resources)
        self.index: BM25Index | None = None
        self._doc_ids: np.ndarray | None = None  # the document of each index entry, in index order
        self._texts: dict[str, str] = {}

    def cache_key(self, chunks: ChunkSet) -> str:
        cfg = self.config
        numbers = (("numbers", NUMBERS_VERSION),) if cfg.bm25_numbers else ()
        return f"bm25-{digest_key(cfg.bm25_backend, cfg.tokenizer, cfg.bm25_k1, cfg.bm25_b, *chunks.context, *numbers)}"

    def build(self, chunks: ChunkSet) -> BuildStats:
        """Loads the saved index, or builds and saves it (its seconds: ``bm25_seconds``)."""
        built = BuildStats()
        if self.index is not None:
            return built
        cfg = self.config
        directory = chunks.folder / self.cache_key(chunks)
        if directory.exists():
            try:
                self.index = BM25Index.load(directory)
                if sorted(self.index.ids) != sorted(chunks.ids):
                    raise ValueError("its chunk ids are not the chunks'")
            except Exception as exc:  # noqa: BLE001 - truncated, empty, foreign: derived from the chunks, rebuilt
                self.index = None
                log.warning("the store's BM25 index %s was damaged (%s); rebuilding it from the chunks", directory,
                            str(exc).splitlines()[0][:80] if str(exc) else type(exc).__name__)
                shutil.rmtree(directory, ignore_errors=True)
        if self.index is None:
            started = time.perf_counter()
            index = BM25Index.from_config(cfg)
            index.index(chunks.ids, chunks.texts)
            chunks.folder.mkdir(parents=True, exist_ok=True)
            temp = Path(tempfile.mkdtemp(dir=chunks.folder, prefix=".tmp-bm25-"))
            temp.chmod(umask_mode(0o777))  # mkdtemp's 0700 would keep a team out of a shared store
            index.save(temp)
            (temp / "metadata.json").write_text(json.dumps(dict(chunks.doc_metadata)))  # what filters match
            try:
                temp.rename(directory)
            except OSError:  # built by another process meanwhile
                shutil.rmtree(temp, ignore_errors=True)
            built.bm25_seconds = time.perf_counter() - started
            self.index = index
        doc_of = chunks.doc_of
        self._doc_ids = np.array([doc_of[item] for item in self.index.ids], dtype=object)
        self._chunks = chunks
        return built

    def mask(self, allowed_doc_ids: Sequence[str] | None) -> np.ndarray | None:
        """Which index entries belong to `allowed_doc_ids` (None: no restriction)."""
        if allowed_doc_ids is None:
            return None
        return np.isin(self._doc_ids, list(allowed_doc_ids))

    def text_of(self, chunk_id: str) -> str:
        """The shown text of an indexed chunk (RM3 reads its feedback documents)."""
        if not self._texts:
            self._texts = {chunk.id: chunk.text for chunk in self._chunks.chunks}
        return self._texts[chunk_id]

    def search(self, query: Query, depth: int, allowed_doc_ids: Sequence[str] | None = None) -> Ranked:
        return Ranked(self.index.retrieve(query.text, depth, allowed=self.mask(allowed_doc_ids)))
