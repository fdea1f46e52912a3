"""The orchestrator: query -> first stage (routing, expansion, retrievers, fusion) -> re-ranker -> ranking.

Every stage is a component with its own contract and registry (``rag_core.retrieve.retrievers``,
``.fusion``, ``.expansion``, ``.rerank``); the first stage is ``rag_core.retrieve.candidates``. This
file composes them and times re-ranking; it has no branch per retrieval mode. A ``Retrieval`` keeps
the ranked list of every stage (each retriever's, ``fused``, ``rerank``), and each ``Hit`` carries its
rank and score at every stage it went through, which is what ``query --explain``, the exploration
notebook, the traces and the per-stage evaluation read.

Two lists come out: ``ranking``, the whole final order (the re-ranked head, then the rest of the fused
list in fused order), which evaluation scores to a fixed depth; and ``hits``, its first ``k``: the
passages given to the LLM.

Each stage returns a record (the first stage its ``Candidates``, re-ranking a ``Reranked``), and
``retrieve`` assembles the latency and work it reports from them.
When the configured re-ranker cannot be loaded, re-ranking is off for this pipeline: a warning logged
once per process (``logging``; the CLI shows it on stderr) and recorded in ``models_used()`` as ``none (unavailable: <cause>)``.
The re-ranker receives the candidates as ``RerankPassage`` records (``score_passages``: chunk, pages,
metadata, heading), whose default adapter gives a re-ranker that reads texts only its ``score(query, texts)``.
Left out: query rewriting beyond expansion.
"""

from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from rag_core.components.config_fields import ConfigFields
from rag_core.components.faults import calling, checked_scores
from rag_core.ingest.corpus import Corpus
from rag_core.records import Chunk, Hit, ScoredId, StageScore
from rag_core.retrieve.candidates import CANDIDATES, Candidates, FirstStage
from rag_core.retrieve.filters import describe
from rag_core.retrieve.index import Index
from rag_core.retrieve.rerank import RERANKERS
from rag_core.retrieve.context import nearest_heading
from rag_core.retrieve.rerank.base import BaseReranker, RerankPassage
from rag_core.retrieve.rerank.fusion import fuse_reranked
from rag_core.retrieve.retrievers import SHORTHANDS

FINAL_STAGES = ("fused", "rerank")  # after the retrievers' own stages


@dataclass(frozen=True)
class Retrieval:
    query: str
    hits: list[Hit]  # the final top k: the passages given to the LLM
    stages: dict[str, list[Hit]]  # stage -> its whole ranked list, for the stages that ran, in pipeline order
    latency_ms: dict[str, float]  # embed_query | vector_search | bm25 | <retriever> | fusion | rerank | ...
    ranking: list[Hit] = field(default_factory=list)  # the whole final order (hits is its head)
    work: dict[str, int] = field(default_factory=dict)  # candidates_reused, rerank_pairs_scored, rerank_cache_hits
    expansion: dict[str, Any] = field(default_factory=dict)  # query expansion's additions and LLM tokens
    child_ranking: list[Chunk] = field(default_factory=list)  # child_size > 0: the fused child chunks, best first
    routed: list[ScoredId] = field(default_factory=list)  # documents routing chose (route_docs), best first
    filter: str = ""  # the metadata filter applied, as text ("" = none)
    retrievers: tuple[str, ...] = ()  # the retrievers' stages, in mode order
    stage_latency: dict[str, tuple[str, ...]] = field(default_factory=dict)  # retriever -> its latency_ms keys


def shown_stages(retrieval: Retrieval) -> list[str]:
    """The stages a table of one retrieval shows, in pipeline order: the built-in retrievers' (dense,
    bm25: shown as off when they did not run), any other retriever that ran, then fused and rerank."""
    return [*dict.fromkeys([*SHORTHANDS["hybrid"], *retrieval.retrievers]), *FINAL_STAGES]


@dataclass(frozen=True)
class Reranked:
    """Re-ranking's record: the re-ranker's order of the head, the final order of the head (after
    ``rerank_fusion``), its time and its work."""
    scored: list[ScoredId]  # the "rerank" stage: the first rerank_depth candidates by the re-ranker's score
    head: list[ScoredId]  # what replaces the first rerank_depth candidates in the final order
    latency_ms: dict[str, float]  # rerank
    work: dict[str, int]  # rerank_pairs_scored, rerank_cache_hits


_ANNOUNCED: set[str] = set()  # re-ranking models announced as unavailable in this process
log = logging.getLogger(__name__)


class Pipeline:
    def __init__(self, config: ConfigFields, corpus: Corpus, store_dir: str | Path, progress: bool = False,
                 index: Index | None = None, reranker: BaseReranker | None = None):
        """Records the parts; nothing is read, chunked or loaded until used."""
        self.config = config
        self.index = index or Index(Path(store_dir), corpus, config, progress=progress)
        self.first_stage = FirstStage(config, self.index)
        self._reranker = reranker
        self.rerank_unavailable: str | None = None  # why the configured re-ranker could not be loaded

    @property
    def corpus(self) -> Corpus:
        """The corpus as this configuration extracts (tables) and describes (metadata) it."""
        return self.index.corpus

    @functools.cached_property
    def reranker(self) -> BaseReranker | None:
        """The configured re-ranker (``rag_core.retrieve.rerank.base``), or None: re-ranking off
        (``rerank_depth`` 0) or the re-ranker unavailable (its model cannot be loaded)."""
        cfg = self.config
        if cfg.rerank_depth == 0:
            return None
        reranker = self._reranker or RERANKERS.load(cfg.reranker).from_config(cfg, self.index.cache, self.index.store_dir)
        error = reranker.unavailable()
        if error is None:
            return reranker
        self.rerank_unavailable = error.reason
        if reranker.model_name not in _ANNOUNCED:
            _ANNOUNCED.add(reranker.model_name)
            log.warning("[rag] re-ranking is off: %s", error)
        return None

    def models_used(self) -> dict[str, str]:
        """The models this configuration actually runs (after any offline fallback)."""
        used: dict[str, str] = {}
        for retriever in self.first_stage.retrievers:
            used.update(retriever.models_used())
        if self.config.rerank_depth > 0:
            reranker = self.reranker
            used["rerank_model_used"] = reranker.name_used if reranker else f"none (unavailable: {self.rerank_unavailable})"
        return used

    def retriever_metrics(self) -> dict[str, float]:
        """What the retrievers measured about their own searches (``Retriever.metrics``)."""
        found: dict[str, float] = {}
        for retriever in self.first_stage.retrievers:
            found.update(retriever.metrics())
        return found

    def build(self, load_reranker: bool = False):
        """Chunk and build the configured retrievers' indexes; with `load_reranker`, also load the
        re-ranker now, so that the first query's re-rank latency is the model's and not its loading."""
        stats = self.index.build([choice.name for choice in self.first_stage.choices])
        if load_reranker:
            self.reranker
        return stats

    @property
    def router(self):
        """Document routing over one card per document (``route_docs`` > 0)."""
        return self.first_stage.router

    def candidates(self, query: str, where: Mapping[str, Any] | None = None) -> tuple[Candidates, bool]:
        """(the retrievers' and fusion's ranked lists, whether they were reused from this process)."""
        key = self.first_stage.key(query, where)
        found = CANDIDATES.get(key)
        if found is not None:
            return found, True
        found = self.first_stage.retrieve(query, where)
        CANDIDATES.put(key, found)
        return found, False

    def retrieve(self, query: str, where: Mapping[str, Any] | None = None) -> Retrieval:
        """Rank passages for `query`; `where` keeps only the documents whose metadata match."""
        cfg = self.config
        found, reused = self.candidates(query, where)
        ranked = dict(found.ranked)
        final = ranked["fused"]
        reranked = self._rerank(query, final) if self.reranker is not None and final else None
        if reranked is not None:
            ranked["rerank"] = reranked.scored
            final = reranked.head + final[cfg.rerank_depth:]
        latency = {**found.latency_ms, **(reranked.latency_ms if reranked else {})}
        work = {"candidates_reused": int(reused), **(reranked.work if reranked else {})}
        stages = self._hits_by_stage(ranked, [*found.retrievers, *FINAL_STAGES])
        ranking = self._hits(final, stages)
        children = [self.index.chunk_by_id[item.id] for item in ranked.get("child", ())]
        return Retrieval(query, ranking[: cfg.k], stages, latency, ranking, work, dict(found.expansion), children,
                         found.routed, describe(where) if where else "", found.retrievers, dict(found.stage_latency))

    def _rerank(self, query: str, fused: list[ScoredId]) -> Reranked:
        """The first ``rerank_depth`` of `fused` scored by the re-ranker (its record)."""
        cfg, reranker = self.config, self.reranker
        started = time.perf_counter()
        candidates = fused[: cfg.rerank_depth]
        if hasattr(reranker, "score_passages"):  # BaseReranker's: the chunks, their pages and metadata
            method, given = "score_passages", self._passages(candidates)
        else:  # a re-ranker that does not follow BaseReranker: the texts only
            method, given = "score", [self.index.chunk_by_id[hit.id].text for hit in candidates]
        with calling(RERANKERS.get(cfg.reranker), method):  # a plugin's fault: one line naming it
            result = getattr(reranker, method)(query, given)
        checked_scores(RERANKERS.get(cfg.reranker), method, result.scores, len(candidates))
        order = sorted(range(len(candidates)), key=lambda i: (-result.scores[i], i))
        scored = [ScoredId(candidates[i].id, result.scores[i]) for i in order]
        # The model's time for these pairs, as measured when they were scored (maybe by an earlier
        # run), plus this call's overhead: comparable across runs whatever the cache held.
        elapsed = time.perf_counter() - started
        latency = {"rerank": (elapsed - result.computed_seconds + result.model_seconds) * 1000}
        head = scored
        if cfg.rerank_fusion == "rrf":  # the re-ranker's order and the first stage's, fused (same passages)
            order = fuse_reranked([item.id for item in scored], [item.id for item in candidates], "rrf", cfg.rrf_k)
            by_id = {item.id: item for item in scored}
            head = [by_id[item] for item in order]
        return Reranked(scored, head, latency, {"rerank_pairs_scored": result.pairs_scored,
                                                "rerank_cache_hits": result.cache_hits})

    def _passages(self, candidates: Sequence[ScoredId]) -> list[RerankPassage]:
        """The candidates as a re-ranker receives them: each chunk, its document's metadata, its heading."""
        chunks = [self.index.chunk_by_id[hit.id] for hit in candidates]
        metadata, documents = self.index.chunk_set.doc_metadata, self.index.corpus.by_id
        return [RerankPassage(chunk, metadata.get(chunk.doc_id, {}), nearest_heading(documents[chunk.doc_id],
                                                                                        chunk.char_start))
                for chunk in chunks]

    def _hits_by_stage(self, ranked: dict[str, Sequence[ScoredId]], order: Sequence[str]) -> dict[str, list[Hit]]:
        # chunk id -> stage -> (rank, score), over every stage the chunk appeared in
        seen: dict[str, dict[str, StageScore]] = {}
        for stage in order:
            for rank, item in enumerate(ranked.get(stage, ()), start=1):
                seen.setdefault(item.id, {})[stage] = StageScore(rank, float(item.score))
        chunk_by_id = self.index.chunk_by_id
        return {
            stage: [Hit(chunk_by_id[item.id], float(item.score), seen[item.id]) for item in ranked[stage]]
            for stage in order if stage in ranked
        }

    @staticmethod
    def _hits(final: Sequence[ScoredId], stages: dict[str, list[Hit]]) -> list[Hit]:
        """The final order as hits: each keeps the score of the last stage it went through."""
        by_id = {hit.chunk.id: hit for hits in stages.values() for hit in hits}
        return [by_id[item.id] for item in final]
