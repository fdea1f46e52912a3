"""The query expansion contract: an expansion may rewrite a query before retrieval (``expand``: the
texts to retrieve, with what they cost and what ``--explain`` shows) and may change how a retriever
searches one of them (``search``: RM3 re-queries BM25 with feedback terms). ``none`` does neither.

``Expanded.queries`` holds the query first, then any added texts (``multi_query``'s rephrasings);
each is retrieved by every retriever and, with several, each stage's lists are fused across them
with Reciprocal Rank Fusion. A ``Query`` may carry a vector to search with (HyDE).
Left out: expansions that need the first stage's results of every retriever (they can re-query one
retriever through ``search``, as RM3 does).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from rag_core.components import Registry
from rag_core.retrieve.retrievers import Query, Ranked, Retriever

if TYPE_CHECKING:
    from rag_core.components.config_fields import ConfigFields

QUERY_EXPANSIONS = Registry("query_expansion", plural="query expansions", setting="query_expansion", group="expansion")


@dataclass(frozen=True)
class Expanded:
    queries: list[Query]  # the query first, then what the expansion added
    latency_ms: dict[str, float] = field(default_factory=dict)  # expansion (an LLM call), embed_query (HyDE)
    info: dict[str, Any] = field(default_factory=dict)  # method, queries, passage, model, input/output tokens


class QueryExpansion:
    """Settings in the config (those it declared at registration); ``embed`` is the embedding
    model's query encoder (text -> unit vector) shared with the retrievers, or None without one."""

    def __init__(self, name: str, config: ConfigFields, embedder: Any = None) -> None:
        self.name = name
        self.config = config
        self.embedder = embedder  # rag_core.retrieve.embedding.Embedder, or None (no retriever embeds)

    def cache_key(self) -> tuple:
        """What changes its results: its name, its settings and the settings it uses."""
        return QUERY_EXPANSIONS.get(self.name).key(self.config)

    def expand(self, query: Query) -> Expanded:
        return Expanded([query])

    def search(self, retriever: Retriever, query: Query, depth: int,
               allowed_doc_ids: Sequence[str] | None = None) -> Ranked:
        return retriever.search(query, depth, allowed_doc_ids)
