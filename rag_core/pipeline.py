"""The orchestrator: query -> dense and/or BM25 -> Reciprocal Rank Fusion -> cross-encoder -> top k.

Every stage can also be used on its own (``rag_core.bm25``, ``rag_core.fusion``, ``rag_core.rerank``,
...); this file only composes them and times each stage. A ``Retrieval`` keeps the ranked list of
every stage, and each final ``Hit`` carries its rank and score at every stage it went through, which
is what ``query --explain``, the exploration notebook and the per-stage evaluation read.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from rag_core.config import RagConfig
from rag_core.corpus import Corpus
from rag_core.fusion import reciprocal_rank_fusion
from rag_core.index import Index
from rag_core.records import Hit, ScoredId, StageScore
from rag_core.rerank import Reranker

STAGES = ("dense", "bm25", "fused", "rerank")


@dataclass(frozen=True)
class Retrieval:
    query: str
    hits: list[Hit]  # the final top k
    stages: dict[str, list[Hit]]  # stage -> its whole ranked list, for the stages that ran
    latency_ms: dict[str, float]  # embed_query | vector_search | bm25 | fusion | rerank


class Pipeline:
    def __init__(self, config: RagConfig, corpus: Corpus, store_dir: str | Path, progress: bool = False,
                 index: Index | None = None):
        self.config = config
        self.corpus = corpus
        self.index = index or Index(Path(store_dir), corpus, config, progress=progress)
        self._reranker: Reranker | None = None

    @property
    def reranker(self) -> Reranker:
        if self._reranker is None:
            self._reranker = Reranker(self.config.rerank_model, self.index.cache, self.config.model_fallback)
        return self._reranker

    def models_used(self) -> dict[str, str]:
        """The models this configuration actually runs (after any offline fallback)."""
        used = {}
        if self.config.mode in ("dense", "hybrid"):
            used["embed_model_used"] = self.index.embedder.name_used
        if self.config.rerank_depth > 0:
            used["rerank_model_used"] = self.reranker.name_used
        return used

    def build(self, load_reranker: bool = False):
        """Build the indexes the mode needs; with `load_reranker`, also load the cross-encoder now, so
        that the first query's re-rank latency is the model's and not its loading."""
        stats = self.index.build()
        if load_reranker and self.config.rerank_depth > 0:
            self.reranker.loaded
        return stats

    def retrieve(self, query: str) -> Retrieval:
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
        final = ranked["fused"]
        if cfg.rerank_depth > 0 and final:
            started = time.perf_counter()
            candidates = final[: cfg.rerank_depth]
            scores = self.reranker.score(query, [self.index.chunk_by_id[hit.id].text for hit in candidates])
            order = sorted(range(len(candidates)), key=lambda i: (-scores[i], i))
            ranked["rerank"] = [ScoredId(candidates[i].id, scores[i]) for i in order]
            # The model's time for these pairs, as measured when they were scored (maybe by an earlier
            # run), plus this call's overhead: comparable across runs whatever the cache held.
            elapsed = time.perf_counter() - started
            latency["rerank"] = (elapsed + self.reranker.model_seconds - self.reranker.last_compute_seconds) * 1000
            final = ranked["rerank"]
        stages = self._hits_by_stage(ranked)
        last_stage = next(stage for stage in reversed(STAGES) if stage in stages)
        return Retrieval(query, stages[last_stage][: cfg.k], stages, latency)

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
