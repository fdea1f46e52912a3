"""The first-stage retriever contract (after BEIR's ``retrieval/search/base.py``): a retriever indexes
the chunks of one corpus and chunking under a cache key, then answers
``search(query, depth, allowed_doc_ids) -> Ranked``. BM25 and dense retrieval are two implementations;
hybrid retrieval is a fusion over a list of them (``rag_core.retrieve.candidates``), so the pipeline
knows only this contract and a new retriever is a new file plus its registration.

Shapes:
- ``ChunkSet``: what retrievers index: the searched chunks (children with ``child_size``), their
  indexed texts (``chunk_context`` prefixes), each document's metadata, and the chunking's folder in
  the store, below which a retriever keeps its index in a folder named by its ``cache_key``.
- ``Query``: one query text, and its embedding computed once and shared (document routing and the
  dense retriever use the same vector; HyDE replaces it).
- ``Ranked``: a retriever's answer: ``ScoredId`` hits best first, the time it took split into
  latency stages when the retriever splits it, and what ``--explain`` may show.
- ``Resources``: what retrievers share, built once per index: the store folder, the score cache, the
  embedding model and the vector store.
- ``BuildStats`` (``rag_core.retrieve.build_stats``): what a ``build`` did (seconds, vectors embedded),
  returned to the index, which adds it into its statistics.
``checked_ranked`` (``checked_hits``) holds every retriever's answer to the contract (a ``Ranked`` of ids it was given,
each once, within the allowed documents, with finite scores); a breach is one ``ComponentFault``
naming the retriever (``rag_core.components.faults``).
Left out: retrievers that need training data at index time.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from rag_core.components import Registry
from rag_core.components.faults import component_fault
from rag_core.records import Chunk, ScoredId
from rag_core.retrieve.build_stats import BuildStats

if TYPE_CHECKING:
    from rag_core.components.config_fields import ConfigFields

# Names a retriever may not take: the pipeline's own stages and latency keys, and the mode shorthand.
RESERVED_NAMES = ("fused", "rerank", "child", "final", "fusion", "expansion", "route", "embed_query",
                  "vector_search", "total", "hybrid", "query", "generate", "doc_evidence")
RETRIEVERS = Registry("retriever", setting="mode", group="retrieval", reserved=RESERVED_NAMES)


def digest_key(*parts: object) -> str:
    """A short, stable key of `parts` (JSON, sorted keys): what store folders and collections are named by."""
    return hashlib.sha1(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def context_key(context: tuple) -> str:
    """A chunk context's key ("" without context, so the keys of stores built before stay as they were)."""
    return digest_key(*context) if context else ""


@dataclass(frozen=True)
class Ranked:
    hits: list[ScoredId]  # best first
    latency_ms: dict[str, float] = field(default_factory=dict)  # stage -> ms; empty: the caller times the call
    info: dict[str, Any] = field(default_factory=dict)  # what the search did, for --explain (RM3's terms)


def checked_ranked(name: str, found: Any, doc_of: Mapping[str, str], allowed_doc_ids: Sequence[str] | None) -> Ranked:
    """`found`, the answer of the retriever registered as `name`, when it keeps the contract: a
    ``Ranked`` whose hits are ids of the chunks it indexed (`doc_of`: chunk id -> document id), each
    once, of the allowed documents, with finite scores; else a ``ComponentFault`` naming it."""
    if not isinstance(found, Ranked):
        raise component_fault(RETRIEVERS.get(name), f"search() returned a {type(found).__name__}, not a Ranked")
    checked_hits(RETRIEVERS.get(name), "search", found.hits, doc_of, allowed_doc_ids)
    return found


def checked_hits(component: Any, call: str, hits: Sequence[Any], doc_of: Mapping[str, str],
                 allowed_doc_ids: Sequence[str] | None = None) -> Sequence[Any]:
    """`hits` (what `component`'s `call` returned: a retriever's search, a fusion's fuse) when they
    are ``ScoredId`` of indexed chunks, each once, of the allowed documents, with finite scores."""
    allowed = None if allowed_doc_ids is None else set(allowed_doc_ids)
    seen: set[str] = set()
    for hit in hits:
        problem = _hit_problem(hit, doc_of, allowed, seen)
        if problem:
            raise component_fault(component, f"{call}() returned {problem} (the contract: ids of the index's "
                                             "chunks, each once, with finite scores)")
        seen.add(hit.id)
    return hits


def _hit_problem(hit: Any, doc_of: Mapping[str, str], allowed: set[str] | None, seen: set[str]) -> str | None:
    if not isinstance(hit, tuple) or len(hit) != 2 or not isinstance(hit[0], str):
        return f"a hit {str(hit)[:80]!r} that is not a ScoredId(id, score)"
    if hit.id not in doc_of:
        return f"chunk id {hit.id[:80]!r}, which is not in the index"
    if hit.id in seen:
        return f"chunk id {hit.id!r} more than once"
    if allowed is not None and doc_of[hit.id] not in allowed:
        return f"chunk {hit.id!r} of document {doc_of[hit.id]!r}, outside the allowed documents"
    try:
        score = float(hit.score)
    except (TypeError, ValueError):
        return f"the score {str(hit.score)[:40]!r} (not a number) for chunk {hit.id!r}"
    if not math.isfinite(score):
        return f"the score {score} for chunk {hit.id!r}"
    return None


class Query:
    """A query text and its embedding, computed at most once (``vector``) unless given."""

    def __init__(self, text: str, embed: Callable[[str], Any] | None = None, vector: Any = None) -> None:
        self.text = text
        self._embed = embed  # text -> unit vector (the embedding model's query encoder)
        self._vector = vector

    @property
    def has_vector(self) -> bool:
        return self._vector is not None

    def vector(self) -> tuple[Any, float]:
        """(the query's embedding, milliseconds spent computing it in this call: 0 when it was known)."""
        if self._vector is not None:
            return self._vector, 0.0
        if self._embed is None:
            raise ValueError("this query has no embedding model to embed it with")
        started = time.perf_counter()
        self._vector = self._embed(self.text)
        return self._vector, (time.perf_counter() - started) * 1000


@dataclass
class ChunkSet:
    chunks: Sequence[Chunk]  # what is searched, in index order
    folder: Path  # <store>/chunks/<chunking key>/
    chunking_key: str
    # what every retriever's key holds besides its own settings (Index.key_context): () or (chunk_context,
    # its version), then (name, value) of the settings format 1 of the store does not hold that apply to it
    context: tuple = ()
    indexed_texts: Callable[[], list[str]] = lambda: []  # the text each chunk is indexed with (computed on call)
    doc_metadata: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # doc id -> its metadata fields
    corpus: Any = None  # the Corpus the chunks come from (page units read its pages); None: not known

    @property
    def context_key(self) -> str:
        return context_key(self.context)

    @cached_property
    def texts(self) -> list[str]:
        return self.indexed_texts()

    @cached_property
    def ids(self) -> list[str]:
        return [chunk.id for chunk in self.chunks]

    @cached_property
    def doc_of(self) -> dict[str, str]:
        """Chunk id -> its document's id."""
        return {chunk.id: chunk.doc_id for chunk in self.chunks}


@dataclass
class Resources:
    """What the retrievers of one index share (each built on first use by the index)."""

    store_dir: Path
    cache: Any  # rag_core.retrieve.cache.ScoreCache
    embedder: Any  # rag_core.retrieve.embedding.Embedder: loads nothing until it embeds
    open_vector_store: Callable[[], Any]  # the configured VectorStore, opened on first call
    progress: bool = False


class Retriever(ABC):
    """Settings come from the config (``self.config``, the settings it declared at registration);
    ``build`` indexes (or loads) a ``ChunkSet`` under ``cache_key``; ``search`` ranks its chunks."""

    def __init__(self, name: str, config: ConfigFields, resources: Resources) -> None:
        self.name = name  # its registered name: its stage in the ranked lists, traces and --explain
        self.config = config
        self.resources = resources

    def cache_key(self, chunks: ChunkSet) -> str:
        """What its index is stored under (a folder or file name inside ``chunks.folder``) and its
        candidates are cached by: by default its name, its settings (``settings_key``) and
        ``chunks.context``; override it when something else changes its results, and keep
        ``chunks.context`` in it (the index gives it the retriever's settings too when overridden)."""
        return f"{self.name}-{digest_key(*self.settings_key(), *chunks.context)}"

    def index_key(self, chunks: ChunkSet) -> str:
        """The store's name of its index over `chunks` (what a build writes): ``cache_key`` unless the
        index is stored under another name (the dense collection, a page retriever's index of pages)."""
        return self.cache_key(chunks)

    @abstractmethod
    def build(self, chunks: ChunkSet) -> BuildStats | None:
        """Index `chunks` under ``cache_key(chunks)``, or load that index when it exists; returns what it
        did (the ``BuildStats`` fields it measured; None: nothing to report)."""

    @abstractmethod
    def search(self, query: Query, depth: int, allowed_doc_ids: Sequence[str] | None = None) -> Ranked:
        """The best `depth` chunk ids for `query`, best first; with `allowed_doc_ids`, only chunks of
        those documents are scored and ranked (a filter applied before ranking, not after)."""

    def models_used(self) -> dict[str, str]:
        """Run params naming the models it actually runs (after any offline fallback)."""
        return {}

    def metrics(self) -> dict[str, float]:
        """Run metrics about its searches so far (the dense retriever's approximate-search recall)."""
        return {}

    def settings_key(self) -> tuple:
        """Its name and the values of the settings it declared (and uses): what a ``cache_key`` covers."""
        return RETRIEVERS.get(self.name).key(self.config)
