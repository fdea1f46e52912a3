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
Query expansion (``query_expansion``): ``rm3`` re-queries BM25 with feedback terms
(``rag_core.retrieve.rm3``); ``multi_query`` retrieves the query and each LLM rephrasing and fuses
each stage's lists across them with RRF; ``hyde`` searches the mean of the query's embedding and the
LLM's hypothetical passage's (``rag_core.retrieve.expansion``). Fusion of the dense and BM25 lists is
``fusion`` (RRF here, other methods through ranx). With ``child_size``, the retrievers search child
chunks; each list is collapsed to parent chunks (best child's rank) and the fused child list is kept
for child-level metrics. A metadata filter (``where``, ``rag_core.retrieve.filters``) and document
routing (``route_docs``, ``rag_core.retrieve.routing``) both narrow the documents both retrievers
rank, before ranking; the routed documents are kept for ``query --explain``. The expansion, fusion,
child, context, routing and filter settings are all part of the candidates key.
Left out: query rewriting beyond expansion.
"""

from __future__ import annotations

import functools
import sys
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from rag_core.config import RagConfig
from rag_core.ingest.corpus import Corpus
from rag_core.retrieve.filters import describe, matching_documents, normalise
from rag_core.retrieve.fusion import reciprocal_rank_fusion
from rag_core.retrieve.index import Index
from rag_core.records import Chunk, Hit, ScoredId, StageScore
from rag_core.retrieve.rerank import Reranker

STAGES = ("dense", "bm25", "fused", "rerank")
MAX_CACHED_CANDIDATES = 50_000  # queries x settings kept per process (a few KB each)


@dataclass(frozen=True)
class Candidates:
    ranked: dict[str, list[ScoredId]]  # "dense" | "bm25" | "fused" -> best first
    latency_ms: dict[str, float]  # expansion | embed_query | vector_search | bm25 | fusion, as measured when computed
    expansion: dict[str, Any] = field(default_factory=dict)  # what query expansion added (terms, queries, tokens)
    routed: list[ScoredId] = field(default_factory=list)  # documents routing chose, best first (route_docs)


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
    expansion: dict[str, Any] = field(default_factory=dict)  # query expansion's additions and LLM tokens
    child_ranking: list[Chunk] = field(default_factory=list)  # child_size > 0: the fused child chunks, best first
    routed: list[ScoredId] = field(default_factory=list)  # documents routing chose (route_docs), best first
    filter: str = ""  # the metadata filter applied, as text ("" = none)


class Pipeline:
    def __init__(self, config: RagConfig, corpus: Corpus, store_dir: str | Path, progress: bool = False,
                 index: Index | None = None, reranker: Reranker | None = None):
        self.config = config
        self.corpus = corpus
        self.index = index or Index(Path(store_dir), corpus, config, progress=progress)
        self.corpus = self.index.corpus  # with this configuration's extraction and metadata
        self._reranker = reranker
        self._expander = None  # the LLM expander, made on first use (needs an API key)
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

    @functools.cached_property
    def router(self):
        """Document routing over one card per document (``route_docs`` > 0)."""
        from rag_core.retrieve.routing import Router

        dense = self.config.mode in ("dense", "hybrid")
        return Router(self.corpus, self.config.tokenizer, self.index.embedder if dense else None, self.config.rrf_k)

    def candidates(self, query: str, where: Mapping[str, Any] | None = None) -> tuple[Candidates, bool]:
        """(the retrievers' and fusion's ranked lists, whether they were reused from this process)."""
        key = self._candidates_key(query) + (normalise(where),)
        if key in _CANDIDATES:
            _CANDIDATES.move_to_end(key)
            return _CANDIDATES[key], True
        found = self._retrieve_candidates(query, where)
        _CANDIDATES[key] = found
        if len(_CANDIDATES) > MAX_CACHED_CANDIDATES:
            _CANDIDATES.popitem(last=False)
        return found, False

    def _candidates_key(self, query: str) -> tuple:
        cfg = self.config
        dense = self.index.embedder.cache_name if cfg.mode in ("dense", "hybrid") else None
        bm25 = self.index.bm25_key if cfg.mode in ("bm25", "hybrid") else None
        fusion = (cfg.fusion, cfg.fusion_norm, cfg.fusion_weights) if cfg.mode == "hybrid" else None
        return (self.index.chunking_key, dense, bm25, cfg.mode, cfg.retrieve_depth, cfg.rrf_k, fusion,
                self._expansion_key(), query, self.index.context_key, cfg.route_docs,
                cfg.route_when if cfg.route_docs else None)

    def _expansion_key(self) -> tuple:
        cfg = self.config
        if cfg.query_expansion == "rm3":
            return ("rm3", cfg.rm3_docs, cfg.rm3_terms, cfg.rm3_weight)
        if cfg.query_expansion == "multi_query":
            return ("multi_query", cfg.multi_query_n, cfg.llm_provider, cfg.llm_model)
        if cfg.query_expansion == "hyde":
            return ("hyde", cfg.llm_provider, cfg.llm_model)
        return ("none",)

    @property
    def expander(self):
        """The LLM query expander (``MissingAPIKey`` without a key), for multi_query and hyde."""
        if self._expander is None:
            from rag_core.llm import MissingAPIKey
            from rag_core.retrieve.expansion import LLMExpander

            try:
                self._expander = LLMExpander(self.config)
            except MissingAPIKey as exc:
                raise MissingAPIKey(f"query_expansion {self.config.query_expansion} needs an LLM: {exc} "
                                    "(or use query_expansion none or rm3, which work offline)") from None
        return self._expander

    def _retrieve_candidates(self, query: str, where: Mapping[str, Any] | None = None) -> Candidates:
        cfg = self.config
        latency: dict[str, float] = {}
        expansion: dict[str, Any] = {}
        doc_ids = matching_documents(self.corpus, where)  # None: every document
        routed: list[ScoredId] = []
        query_vector = None  # the query's embedding, computed once for routing and the dense search
        if cfg.route_docs:
            router = self.router  # built once per pipeline, not part of a query's latency
            if router.embedder is not None:
                started = time.perf_counter()
                query_vector = router.embedder.embed_query(query)
                latency["embed_query"] = (time.perf_counter() - started) * 1000
            started = time.perf_counter()
            routed = router.route(query, cfg.route_docs, doc_ids, query_vector, cfg.route_when == "named")
            if routed:  # none: the question names no document (route_when named), so every one is searched
                doc_ids = [item.id for item in routed]
            latency["route"] = (time.perf_counter() - started) * 1000
        texts, hyde = [query], None
        if cfg.query_expansion in ("multi_query", "hyde"):
            expanded = self.expander.expand(query)
            latency["expansion"] = expanded.latency_ms
            expansion = expanded.as_info()
            texts += list(expanded.queries)
            hyde = expanded.passage
        searches = [self._search(text, hyde, latency, expansion, doc_ids, query_vector if text == query else None)
                    for text in texts]
        ranked = searches[0] if len(searches) == 1 else {
            stage: reciprocal_rank_fusion([[hit.id for hit in found[stage]] for found in searches], k=cfg.rrf_k)
            for stage in searches[0]
        }
        if cfg.child_size:
            from rag_core.retrieve.parent_child import collapse_to_parents

            parent_of = self.index.parent_of
            ranked = {"child": ranked["fused"], **{
                stage: collapse_to_parents(found, parent_of, None if stage == "fused" and cfg.mode == "hybrid"
                                           else cfg.retrieve_depth)
                for stage, found in ranked.items()}}
        return Candidates(ranked, latency, expansion, routed)

    def _search(self, query: str, hyde: str | None, latency: dict[str, float], expansion: dict[str, Any],
                doc_ids: Sequence[str] | None, query_vector: Any = None) -> dict[str, list[ScoredId]]:
        """One query text through the retrievers (only `doc_ids`' chunks when given) and fusion;
        latencies add up into `latency`. `query_vector`: the text's embedding, when already computed."""
        cfg = self.config
        depth = cfg.retrieve_depth
        if cfg.child_size:  # enough children to fill retrieve_depth parents
            depth *= max(1, -(-cfg.chunk_size // cfg.child_size))
        ranked: dict[str, list[ScoredId]] = {}

        def add(stage: str, started: float) -> None:
            latency[stage] = latency.get(stage, 0.0) + (time.perf_counter() - started) * 1000

        if cfg.mode in ("dense", "hybrid"):
            self.index.ensure_dense()
            started = time.perf_counter()
            vector, embed_ms = query_vector, 0.0
            if hyde:  # HyDE: the query's and the hypothetical passage's embeddings, averaged
                vector = self._hyde_vector(query, hyde)
                embed_ms = (time.perf_counter() - started) * 1000
            ranked["dense"], query_ms = self.index.dense_search(query, depth, doc_ids, vector=vector)
            embed_ms += query_ms
            latency["embed_query"] = latency.get("embed_query", 0.0) + embed_ms
            latency["vector_search"] = latency.get("vector_search", 0.0) + (time.perf_counter() - started) * 1000 - embed_ms
        if cfg.mode in ("bm25", "hybrid"):
            bm25 = self.index.ensure_bm25()
            started = time.perf_counter()
            if cfg.query_expansion == "rm3":
                from rag_core.retrieve.rm3 import rm3_search

                chunk_by_id = self.index.chunk_by_id
                result = rm3_search(bm25, lambda chunk_id: chunk_by_id[chunk_id].text, query, depth, cfg.rm3_docs,
                                    cfg.rm3_terms, cfg.rm3_weight, self.index.bm25_mask(doc_ids))
                ranked["bm25"] = result.hits
                expansion.update(method="rm3", terms=result.weights)
            else:
                ranked["bm25"] = self.index.bm25_search(query, depth, doc_ids)
            add("bm25", started)
        if cfg.mode == "hybrid":
            started = time.perf_counter()
            ranked["fused"] = self._fuse(ranked["dense"], ranked["bm25"])
            add("fusion", started)
        else:
            ranked["fused"] = ranked["dense" if cfg.mode == "dense" else "bm25"]
        return ranked

    def _hyde_vector(self, query: str, passage: str):
        import numpy as np

        passage_vectors, _ = self.index.embedder.embed_documents([passage])
        mean = self.index.embedder.embed_query(query) + passage_vectors[0]
        return (mean / np.linalg.norm(mean)).astype(np.float32)

    def _fuse(self, dense: list[ScoredId], bm25: list[ScoredId]) -> list[ScoredId]:
        cfg = self.config
        if cfg.fusion == "rrf":
            return reciprocal_rank_fusion([[hit.id for hit in dense], [hit.id for hit in bm25]], k=cfg.rrf_k,
                                          weights=cfg.fusion_weights or None)
        from rag_core.retrieve.fusion_ranx import ranx_fusion  # ranx starts numba: only when asked for

        return ranx_fusion([dense, bm25], cfg.fusion, cfg.fusion_norm, cfg.fusion_weights)

    def retrieve(self, query: str, where: Mapping[str, Any] | None = None) -> Retrieval:
        """Rank passages for `query`; `where` keeps only the documents whose metadata match."""
        cfg = self.config
        found, reused = self.candidates(query, where)
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
        children = [self.index.chunk_by_id[item.id] for item in ranked.get("child", ())]
        return Retrieval(query, ranking[: cfg.k], stages, latency, ranking, work, dict(found.expansion), children,
                         found.routed, describe(where) if where else "")

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
