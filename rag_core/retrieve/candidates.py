"""The first stage, from a query to its candidates: document routing, query expansion, each
configured retriever, and the fusion of their lists; with ``child_size``, children collapsed to their
parents. It knows retrievers, expansions and fusions only by their contracts
(``rag_core.retrieve.retrievers``, ``.expansion``, ``.fusion``), so a new one needs no edit here.

Order for one query: a metadata filter (``where``) gives the allowed documents; routing
(``route_docs``) narrows them to the best documents, ranked with the query's embedding when a
retriever embeds queries (computed once, ``Query.vector``, and reused by that retriever); the
expansion gives the texts to retrieve; every retriever searches each text within the allowed
documents (through the expansion's ``search``: RM3 re-queries BM25); with several texts each stage's
lists are fused across them with RRF (``multi_query``); with several retrievers their lists are fused
by ``fusion`` into the ``fused`` stage (with one, ``fused`` is its list).

Candidates depend on the settings of the stages up to ``candidates`` (the index, the retrievers and
their settings, the depths, the fusion, the expansion, the routing), the filter and the query, not on
``k`` or re-ranking, so they are kept per process (``CandidatesCache``) and reused: sweep points that
differ only in ``k`` or ``rerank_depth`` retrieve nothing again. The cache's key lists no setting: it is
the stage table's (``rag_core.components.stages.key_through``), with what no setting says: the corpus
(the chunking key), each retriever's own key (the model as loaded, code versions) and routing's version.
The cache lives in one process, so its key may change between versions freely. Reused candidates report
the latency measured when they were computed, so latency does not depend on the order points ran in.
Left out: retrievers run in parallel threads.
"""

from __future__ import annotations

import functools
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from rag_core.components.faults import BUILT_IN, calling
from rag_core.components.stages import key_through
from rag_core.ingest.corpus import Corpus
from rag_core.records import ScoredId
from rag_core.retrieve.doc_evidence import DOC_EVIDENCE, make_doc_evidence
from rag_core.retrieve.expansion import QUERY_EXPANSIONS, make_expansion
from rag_core.retrieve.filters import matching_documents, normalise
from rag_core.retrieve.fusion import FUSIONS, make_fusion, reciprocal_rank_fusion
from rag_core.retrieve.index import Index
from rag_core.retrieve.parent_child import collapse_to_parents
from rag_core.retrieve.retrievers import (RETRIEVERS, Query, checked_hits, checked_ranked, retriever_choices,
                                         uses_embedder)
from rag_core.retrieve.routing import ROUTING_VERSION, Router

if TYPE_CHECKING:
    from rag_core.components.config_fields import ConfigFields

SHOWN_DOCUMENTS = 5  # of the document evidence's ranking, kept for --explain
MAX_CACHED_CANDIDATES = 50_000  # queries x settings kept per process (a few KB each)


@dataclass(frozen=True)
class Candidates:
    ranked: dict[str, list[ScoredId]]  # each retriever's name | "fused" (| "child") -> best first
    latency_ms: dict[str, float]  # route | expansion | embed_query | vector_search | <retriever> | fusion, as measured
    expansion: dict[str, Any] = field(default_factory=dict)  # what query expansion added (terms, queries, tokens)
    routed: list[ScoredId] = field(default_factory=list)  # documents routing chose, best first (route_docs)
    retrievers: tuple[str, ...] = ()  # the retrievers' stages, in mode order
    stage_latency: dict[str, tuple[str, ...]] = field(default_factory=dict)  # retriever -> the latency keys it took


@dataclass(frozen=True)
class Routed:
    """Document routing's record: the documents it ranked, the documents left to search, its time."""
    documents: list[ScoredId]  # best first ([] without route_docs and doc_evidence)
    doc_ids: list[str] | None  # the documents the retrievers search (None: every one)
    latency_ms: dict[str, float] = field(default_factory=dict)  # embed_query | route
    info: dict[str, Any] = field(default_factory=dict)  # (nothing yet: routing shows its documents)


@dataclass(frozen=True)
class Searched:
    """One query text through every retriever and the fusion (or the document evidence): the record."""
    ranked: dict[str, list[ScoredId]]  # each retriever's name | "fused" -> best first
    latency_ms: dict[str, float]  # <retriever> | embed_query | vector_search | fusion | doc_evidence -> ms
    info: dict[str, Any] = field(default_factory=dict)  # what the retrievers did, for --explain
    stage_latency: dict[str, tuple[str, ...]] = field(default_factory=dict)  # retriever -> the latency keys it took


class FirstStage:
    """Routing, expansion, retrievers and fusion for one config over one index."""

    def __init__(self, config: ConfigFields, index: Index) -> None:
        self.config = config
        self.index = index
        self.choices = retriever_choices(config)  # the retrievers and their weights, in mode order
        self.weights = [c.weight for c in self.choices] if any(c.weight is not None for c in self.choices) else None
        self.embeds = uses_embedder(config)

    @property
    def corpus(self) -> Corpus:
        return self.index.corpus

    @functools.cached_property
    def retrievers(self) -> list[Any]:
        return [self.index.retriever(choice.name) for choice in self.choices]

    @functools.cached_property
    def fusion(self) -> Any:
        return make_fusion(self.config) if len(self.choices) > 1 else None

    @functools.cached_property
    def expansion(self) -> Any:
        return make_expansion(self.config, self.index.embedder if self.embeds else None)

    @functools.cached_property
    def evidence(self) -> Any:
        """The soft document evidence (``doc_evidence``), or None."""
        return make_doc_evidence(self.config)

    @functools.cached_property
    def router(self) -> Router:
        """Document routing over one card per document (``route_docs`` > 0), built once."""
        cfg = self.config
        return Router(self.corpus, cfg.tokenizer, self.index.embedder if self.embeds else None, cfg.rrf_k)

    @functools.cached_property
    def settings_key(self) -> tuple:
        """What the candidates of every query depend on besides the query and the filter (once per
        pipeline): the settings up to ``candidates`` (the stage table), the corpus and chunking, each
        retriever's key (the model as loaded, code versions) and routing's version."""
        index = self.index
        retrievers = tuple((r.name, r.cache_key(index.retriever_chunks(r.name))) for r in self.retrievers)
        return (index.chunking_key, retrievers, key_through(self.config, "candidates"), ROUTING_VERSION)

    def key(self, query: str, where: Mapping[str, Any] | None) -> tuple:
        """Everything the candidates of `query` depend on (the candidates cache's key)."""
        return (*self.settings_key, query, normalise(where))

    def retrieve(self, text: str, where: Mapping[str, Any] | None = None) -> Candidates:
        """Each step returns its record (``Routed``, ``Expanded``, ``Searched``); the candidates
        assemble their lists, and their latency and info in the order the steps ran."""
        cfg = self.config
        query = Query(text, self.index.embedder.embed_query if self.embeds else None)
        routed = self._route(query, matching_documents(self.corpus, where))  # None: every document
        with calling(QUERY_EXPANSIONS.get(cfg.query_expansion), "expand"):
            expanded = self.expansion.expand(query)
        depth = cfg.retrieve_depth
        if cfg.child_size:  # enough children to fill retrieve_depth parents
            depth *= max(1, -(-cfg.chunk_size // cfg.child_size))
        searches = [self._search(searched, depth, routed.doc_ids) for searched in expanded.queries]
        ranked = searches[0].ranked if len(searches) == 1 else {
            stage: reciprocal_rank_fusion([[hit.id for hit in found.ranked[stage]] for found in searches], k=cfg.rrf_k)
            for stage in searches[0].ranked
        }
        steps: list[Any] = [routed, expanded, *searches]
        if self.evidence and routed.documents:  # soft document evidence: the document ranking as a prior
            steps.append(self._with_evidence(expanded.queries, ranked["fused"], routed.documents, depth))
            ranked = {**ranked, **steps[-1].ranked}
        if cfg.child_size:
            parent_of = self.index.parent_of
            ranked = {"child": ranked["fused"], **{
                stage: collapse_to_parents(found, parent_of, None if stage == "fused" and self.fusion else cfg.retrieve_depth)
                for stage, found in ranked.items()}}
        shown = routed.documents if cfg.route_docs else routed.documents[:SHOWN_DOCUMENTS]  # evidence ranks them all
        return Candidates(ranked, summed(step.latency_ms for step in steps),
                          {key: value for step in steps for key, value in step.info.items()}, shown,
                          tuple(choice.name for choice in self.choices),
                          {name: keys for found in searches for name, keys in found.stage_latency.items()})

    def _route(self, query: Query, doc_ids: list[str] | None) -> Routed:
        """Document routing (``route_docs``), or the document ranking of ``doc_evidence``, within `doc_ids`."""
        cfg = self.config
        if not (cfg.route_docs or self.evidence):
            return Routed([], doc_ids)
        router = self.router  # built once per pipeline, not part of a query's latency
        latency: dict[str, float] = {}
        vector = None
        if router.embedder is not None:
            vector, latency["embed_query"] = query.vector()  # reused by the retrievers that embed
        started = time.perf_counter()
        routed = router.route(query.text, cfg.route_docs or len(router.doc_ids), doc_ids, vector,
                              cfg.route_when == "named")
        if routed and cfg.route_docs:  # none: the question names no document (route_when named): search every one
            doc_ids = [item.id for item in routed]
        latency["route"] = (time.perf_counter() - started) * 1000
        return Routed(routed, doc_ids, latency)

    def _with_evidence(self, queries: Sequence[Query], fused: list[ScoredId], documents: list[ScoredId],
                       depth: int) -> Searched:
        """`fused` re-ranked with the document ranking (``doc_evidence``), as the ``fused`` stage; with
        ``search``, the retrievers also search within the best ``doc_evidence_docs`` documents, and that
        list is fused in too (those searches' latency and info are part of the record)."""
        within, searches = None, []
        if DOC_EVIDENCE.get(self.config.doc_evidence).options.get("searches_documents"):
            best = [document.id for document in documents[:self.config.doc_evidence_docs]]
            searches = [self._search(query, depth, best) for query in queries]
            lists = [found.ranked["fused"] for found in searches]
            within = lists[0] if len(lists) == 1 else reciprocal_rank_fusion(
                [[hit.id for hit in found] for found in lists], k=self.config.rrf_k)
        started = time.perf_counter()
        chunk_by_id = self.index.chunk_by_id
        combined = self.evidence.combine(fused, {chunk_id: chunk_by_id[chunk_id].doc_id for chunk_id in
                                                 {hit.id for hit in [*fused, *(within or ())]}}, documents, within)
        latency = summed([*(found.latency_ms for found in searches),
                          {"doc_evidence": (time.perf_counter() - started) * 1000}])
        return Searched({"fused": combined}, latency,
                        {key: value for found in searches for key, value in found.info.items()})

    def _search(self, query: Query, depth: int, doc_ids: Sequence[str] | None) -> Searched:
        """One query text through every retriever (only `doc_ids`' chunks when given) and the fusion."""
        ranked: dict[str, list[ScoredId]] = {}
        measured: list[Mapping[str, float]] = []  # each step's latency, in the order they ran
        info: dict[str, Any] = {}
        stage_latency: dict[str, tuple[str, ...]] = {}
        for retriever in self.retrievers:
            started = time.perf_counter()
            with calling(RETRIEVERS.get(retriever.name), "search"):
                found = self.expansion.search(retriever, query, depth, doc_ids)
            found = checked_ranked(retriever.name, found, self.index.chunk_set.doc_of, doc_ids)
            measured.append(found.latency_ms or {retriever.name: (time.perf_counter() - started) * 1000})
            stage_latency[retriever.name] = tuple(measured[-1])
            info.update(found.info)
            ranked[retriever.name] = list(found.hits)
        if self.fusion is not None:
            started = time.perf_counter()
            fusion = FUSIONS.get(self.config.fusion)
            with calling(fusion, "fuse"):
                ranked["fused"] = self.fusion.fuse([ranked[choice.name] for choice in self.choices], self.weights)
            if fusion.origin != BUILT_IN:  # (ranx's normalisations may give NaN: kept as they were)
                checked_hits(fusion, "fuse", ranked["fused"], self.index.chunk_set.doc_of, doc_ids)
            measured.append({"fusion": (time.perf_counter() - started) * 1000})
        else:
            ranked["fused"] = ranked[self.choices[0].name]
        return Searched(ranked, summed(measured), info, stage_latency)


def summed(latencies: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """Stage -> milliseconds, added up over `latencies` (a stage measured twice, as ``embed_query`` by
    routing and a retriever, adds up), in the order the stages first ran."""
    total: dict[str, float] = {}
    for latency in latencies:
        for stage, ms in latency.items():
            total[stage] = total.get(stage, 0.0) + ms
    return total


class CandidatesCache:
    """key -> Candidates, least recently used first, at most ``MAX_CACHED_CANDIDATES``."""

    def __init__(self, size: int = MAX_CACHED_CANDIDATES) -> None:
        self.size = size
        self._entries: OrderedDict[tuple, Candidates] = OrderedDict()

    def get(self, key: tuple) -> Candidates | None:
        found = self._entries.get(key)
        if found is not None:
            self._entries.move_to_end(key)
        return found

    def put(self, key: tuple, candidates: Candidates) -> None:
        self._entries[key] = candidates
        if len(self._entries) > self.size:
            self._entries.popitem(last=False)

    def clear(self) -> None:
        self._entries.clear()


CANDIDATES = CandidatesCache()  # per process: shared by every pipeline (sweep points in one kernel)
__all__ = ["CANDIDATES", "Candidates", "CandidatesCache", "FirstStage", "Routed", "Searched", "summed"]
