"""Query expansion: the registry (``QUERY_EXPANSIONS``, the ``query_expansion`` setting) with the
built-ins ``none``, ``rm3`` (BM25 pseudo-relevance feedback, offline: ``expansion/rm3.py``),
``multi_query`` and ``hyde`` (an LLM rephrases the query or writes a hypothetical passage:
``expansion/llm.py``; they need an API key). The contract is ``expansion/base.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from rag_core.components import SETTINGS, Setting
from rag_core.retrieve.expansion.base import QUERY_EXPANSIONS, Expanded, QueryExpansion
from rag_core.retrieve.retrievers import RETRIEVERS, parse_mode

if TYPE_CHECKING:
    from rag_core.components.config_fields import ConfigFields

__all__ = ["QUERY_EXPANSIONS", "Expanded", "QueryExpansion", "make_expansion"]


def _retrievers(values: Mapping[str, Any]) -> list[str] | None:
    try:
        return [choice.name for choice in parse_mode(values["mode"])]
    except ValueError:
        return None  # mode's own check says what is wrong with it


def _rm3_needs_bm25(values: Mapping[str, Any]) -> tuple[str, str] | None:
    names = _retrievers(values)
    if values["query_expansion"] == "rm3" and names is not None and "bm25" not in names:
        return ("query_expansion", "query_expansion rm3 expands the BM25 query: it needs mode bm25 or hybrid "
                                   "(a bm25 retriever in mode)")
    return None


def _hyde_needs_an_embedding(values: Mapping[str, Any]) -> tuple[str, str] | None:
    names = _retrievers(values)
    if (values["query_expansion"] == "hyde" and names is not None
            and not any(name in RETRIEVERS and RETRIEVERS.get(name).options.get("embeds_query") for name in names)):
        return "mode", "mode must be dense or hybrid for query_expansion hyde (it embeds a passage)"
    return None


SETTINGS.declare(Setting("query_expansion", str, "none", "none | rm3 (BM25 pseudo-relevance feedback) | multi_query | "
                         "hyde (these two need an LLM key)", choices=QUERY_EXPANSIONS.names, group="expansion",
                         stage="candidates"),
                 owner="expansion")
QUERY_EXPANSIONS.register("none", QueryExpansion, help="the query as written")
QUERY_EXPANSIONS.register(
    "rm3", "rag_core.retrieve.expansion.rm3:RM3", rules=[_rm3_needs_bm25],
    help="RM3 pseudo-relevance feedback: BM25 searched again with the top chunks' terms (offline)",
    settings=[
        Setting("rm3_docs", int, 10, "RM3: top BM25 chunks used as feedback", above=0, group="expansion",
                stage="candidates"),
        Setting("rm3_terms", int, 10, "RM3: expansion terms kept", above=0, group="expansion", stage="candidates"),
        Setting("rm3_weight", float, 0.5, "RM3: weight of the original query (0..1) against the feedback terms",
                minimum=0, maximum=1, group="expansion", stage="candidates"),
    ])
QUERY_EXPANSIONS.register(
    "multi_query", "rag_core.retrieve.expansion.llm:MultiQuery", uses=("llm_provider", "llm_model"),
    help="the LLM writes multi_query_n rephrasings; each is retrieved, the lists fused with RRF (needs an API key)",
    settings=[Setting("multi_query_n", int, 3, "multi_query: rephrasings the LLM writes (each retrieved, fused with RRF)",
                      above=0, group="expansion", stage="candidates")])
QUERY_EXPANSIONS.register(
    "hyde", "rag_core.retrieve.expansion.llm:HyDE", uses=("llm_provider", "llm_model"), rules=[_hyde_needs_an_embedding],
    help="the LLM writes a hypothetical passage; the mean of its and the query's embeddings is searched (needs an API key)")


def make_expansion(config: ConfigFields, embedder: Any = None) -> QueryExpansion:
    """The configured query expansion."""
    return QUERY_EXPANSIONS.load(config.query_expansion)(config.query_expansion, config, embedder)
