"""The orchestrator: query -> dense and/or BM25 -> Reciprocal Rank Fusion -> cross-encoder -> ranking.

Every stage can also be used on its own (``rag_core.retrieve.bm25``, ``rag_core.retrieve.fusion``, ``rag_core.retrieve.rerank``,
...); this file only composes them and times each stage. A ``Retrieval`` keeps the ranked list of
every stage, and each ``Hit`` carries its rank and score at every stage it went through, which is
what ``query --explain``, the exploration notebook and the per-stage evaluation read.

Two lists come out: ``ranking``, the whole final order (the re-ranked head, then the rest of the fused
list in fused order), which evaluation scores to a fixed depth; and ``hits``, its first ``k``: the
passages given to the LLM.

Candidates (the dense, BM25 and fused lists) depend only on the index, the mode, the depths and the
query, not on ``k`` or re-ranking, so they are kept per process and reused: sweep points that differ
only in ``k`` or ``rerank_depth`` retrieve nothing again. Reused candidates report the latency measured
when they were computed, so latency does not depend on the order points ran in.

When the configured cross-encoder cannot be loaded, re-ranking is off for this pipeline: announced
once per process on stderr and recorded in ``models_used()`` as ``none (unavailable: <cause>)``.
Left out: query rewriting and metadata filters.
"""

from __future__ import annotations

import functools
import sys
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from rag_core.config import RagConfig
from rag_core.ingest.corpus import Corpus
from rag_core.retrieve.fusion import reciprocal_rank_fusion
from rag_core.retrieve.index import Index
from rag_core.records import Hit, ScoredId, StageScore
from rag_core.retrieve.rerank import Reranker

STAGES = ("dense", "bm25", "fused", "rerank")
MAX_CACHED_CANDIDATES = 50_000  # queries x settings kept per process (a few KB each)


@dataclass(frozen=True)
class Candidates:
    ranked: dict[str, list[ScoredId]]  # "dense" | "bm25" | "fused" -> best first
    latency_ms: dict[str, float]  # embed_query | vector_search | bm25 | fusion, as measured when computed


# candidates key -> Candidates, least recently used first
_CANDIDATES: OrderedDict[tuple, Candidates] = OrderedDict()
_ANNOUNCED: set[str] = set()  # re-ranking models announced as unavailable in this process


@dataclass(frozen=True)
class Retrieval:
    query: str
    hits: list[Hit]  # the final top k: the passages given to the LLM
    stages: dict[str, list[Hit]]  # stage -> its whole ranked list, for the stages that ran
    latency_ms: dict[str, float]  # embed_query | vector_search | bm25 | fusion | rerank
    ranking: list[Hit] = field(default_factory=list)  # the whole final order (hits is its head)
    work: dict[str, int] = field(default_factory=dict)  # candidates_reused, rerank_pairs_scored, rerank_cache_hits


class Pipeline:
    def __init__(self, config: RagConfig, corpus: Corpus, store_dir: str | Path, progress: bool = False,
                 index: Index | None = None, reranker: Reranker | None = None):
        self.config = config
        self.corpus = corpus
        self.index = index or Index(Path(store_dir), corpus, config, progress=progress)
        self._reranker = reranker
        self.rerank_unavailable: str | None = None  # why the configured cross-encoder could not be loaded

    @functools.cached_property
    def reranker(self) -> Reranker | None:
        """The cross-encoder, or None: re-ranking off (``rerank_depth`` 0) or its model unavailable."""
        if self.config.rerank_depth == 0:
            return None
        reranker = self._reranker or Reranker(self.config.rerank_model, self.index.cache,
                                              backend=self.config.rerank_backend,
                                              export_dir=self.index.store_dir / "onnx")
        error = reranker.unavailable()
        if error is None:
            return reranker
        self.rerank_unavailable = error.reason
        if reranker.model_name not in _ANNOUNCED:
            _ANNOUNCED.add(reranker.model_name)
            print(f"[rag] re-ranking is off: {error}", file=sys.stderr, flush=True)
        return None

    def models_used(self) -> dict[str, str]:
        """The models this configuration actually runs (after any offline fallback)."""
        used = {}
        if self.config.mode in ("dense", "hybrid"):
            used["embed_model_used"] = self.index.embedder.name_used
            used["embed_backend_used"] = self.index.embedder.backend_used
        if self.config.rerank_depth > 0:
            reranker = self.reranker
            used["rerank_model_used"] = reranker.name_used if reranker else f"none (unavailable: {self.rerank_unavailable})"
        return used

    def build(self, load_reranker: bool = False):
        """Build the indexes the mode needs; with `load_reranker`, also load the cross-encoder now, so
        that the first query's re-rank latency is the model's and not its loading."""
        stats = self.index.build()
        if load_reranker:
            self.reranker
        return stats

    def candidates(self, query: str) -> tuple[Candidates, bool]:
        """(the retrievers' and fusion's ranked lists, whether they were reused from this process)."""
        key = self._candidates_key(query)
        if key in _CANDIDATES:
            _CANDIDATES.move_to_end(key)
            return _CANDIDATES[key], True
        found = self._retrieve_candidates(query)
        _CANDIDATES[key] = found
        if len(_CANDIDATES) > MAX_CACHED_CANDIDATES:
            _CANDIDATES.popitem(last=False)
        return found, False

    def _candidates_key(self, query: str) -> tuple:
        cfg = self.config
        dense = self.index.embedder.cache_name if cfg.mode in ("dense", "hybrid") else None
        bm25 = self.index.bm25_key if cfg.mode in ("bm25", "hybrid") else None
        return (self.index.chunking_key, dense, bm25, cfg.mode, cfg.retrieve_depth, cfg.rrf_k, query)

    def _retrieve_candidates(self, query: str) -> Candidates:
        cfg = self.config
        latency: dict[str, float] = {}
        ranked: dict[str, list[ScoredId]] = {}
        if cfg.mode in ("dense", "hybrid"):
            self.index.ensure_dense()
            started = time.perf_counter()
            ranked["dense"], latency["embed_query"] = self.index.dense_search(query, cfg.retrieve_depth)
            latency["vector_search"] = (time.perf_counter() - started) * 1000 - latency["embed_query"]
        if cfg.mode in ("bm25", "hybrid"):
            self.index.ensure_bm25()
            started = time.perf_counter()
            ranked["bm25"] = self.index.bm25_search(query, cfg.retrieve_depth)
            latency["bm25"] = (time.perf_counter() - started) * 1000
        if cfg.mode == "hybrid":
            started = time.perf_counter()
            ranked["fused"] = reciprocal_rank_fusion([[hit.id for hit in ranked["dense"]], [hit.id for hit in ranked["bm25"]]], k=cfg.rrf_k)
            latency["fusion"] = (time.perf_counter() - started) * 1000
        else:
            ranked["fused"] = ranked["dense" if cfg.mode == "dense" else "bm25"]
        return Candidates(ranked, latency)

    def retrieve(self, query: str) -> Retrieval:
        cfg = self.config
        found, reused = self.candidates(query)
        ranked = dict(found.ranked)
        latency = dict(found.latency_ms)
        work = {"candidates_reused": int(reused)}
        final = ranked["fused"]
        reranker = self.reranker
        if reranker is not None and final:
            started = time.perf_counter()
            candidates = final[: cfg.rerank_depth]
            result = reranker.score(query, [self.index.chunk_by_id[hit.id].text for hit in candidates])
            order = sorted(range(len(candidates)), key=lambda i: (-result.scores[i], i))
            ranked["rerank"] = [ScoredId(candidates[i].id, result.scores[i]) for i in order]
            # The model's time for these pairs, as measured when they were scored (maybe by an earlier
            # run), plus this call's overhead: comparable across runs whatever the cache held.
            elapsed = time.perf_counter() - started
            latency["rerank"] = (elapsed - result.computed_seconds + result.model_seconds) * 1000
            work.update(rerank_pairs_scored=result.pairs_scored, rerank_cache_hits=result.cache_hits)
            final = ranked["rerank"] + final[cfg.rerank_depth:]
        stages = self._hits_by_stage(ranked)
        ranking = self._hits(final, stages)
        return Retrieval(query, ranking[: cfg.k], stages, latency, ranking, work)

    def _hits_by_stage(self, ranked: dict[str, Sequence[ScoredId]]) -> dict[str, list[Hit]]:
        # chunk id -> stage -> (rank, score), over every stage the chunk appeared in
        seen: dict[str, dict[str, StageScore]] = {}
        for stage in STAGES:
            for rank, item in enumerate(ranked.get(stage, ()), start=1):
                seen.setdefault(item.id, {})[stage] = StageScore(rank, float(item.score))
        chunk_by_id = self.index.chunk_by_id
        return {
            stage: [Hit(chunk_by_id[item.id], float(item.score), seen[item.id]) for item in ranked[stage]]
            for stage in STAGES if stage in ranked
        }

    @staticmethod
    def _hits(final: Sequence[ScoredId], stages: dict[str, list[Hit]]) -> list[Hit]:
        """The final order as hits: each keeps the score of the last stage it went through."""
        by_id = {hit.chunk.id: hit for stage in STAGES for hit in stages.get(stage, ())}
        return [by_id[item.id] for item in final]
