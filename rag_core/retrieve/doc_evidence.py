"""Soft document evidence (the ``doc_evidence`` setting): the documents are ranked for the question as
routing ranks them (``rag_core.retrieve.routing``: names from every source, cards, the query's
embedding), and that ranking is fused with the chunk ranking as a prior, so a chunk of a likely
document rises while a chunk of another document only loses rank, never its place in the list (hard
routing, ``route_docs``, drops every other document: a wrong document there costs the recall).

- ``prior``: the fused candidates, and the same candidates ordered by their document's rank (stable:
  within a document, in their own order), merged by weighted RRF (weights 1 and ``doc_evidence_weight``).
- ``search``: the same, plus the retrievers' lists searched again within the best ``doc_evidence_docs``
  documents (so the likely documents' chunks are candidates even when the global search missed them),
  as a third list of weight ``doc_evidence_weight``.

A combiner is registered as a class ``(name, config)`` with ``combine(fused, doc_of, documents, within)``
and the option ``searches_documents`` (the first stage then searches within the best documents too).
With ``route_when: named`` (the default) a question that names no document gets no prior.
Left out: document scores from a trained model; document evidence together with hard routing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

from rag_core.components import SETTINGS, Registry, Rule, Setting
from rag_core.records import ScoredId
from rag_core.retrieve.fusion.rrf import reciprocal_rank_fusion

if TYPE_CHECKING:
    from rag_core.components.config_fields import ConfigFields

__all__ = ["DOC_EVIDENCE", "DocumentPrior", "make_doc_evidence"]

DOC_EVIDENCE = Registry("doc_evidence", setting="doc_evidence", group="routing")


class DocumentPrior:
    """``prior`` (and ``search``, with the lists searched within the best documents)."""

    def __init__(self, name: str, config: ConfigFields) -> None:
        self.name = name
        self.weight = config.doc_evidence_weight
        self.k = config.rrf_k

    def combine(self, fused: Sequence[ScoredId], doc_of: Mapping[str, str], documents: Sequence[ScoredId],
                within: Sequence[ScoredId] | None = None) -> list[ScoredId]:
        """`fused` (chunk ids best first) re-ranked with the documents' ranking `documents` as a prior."""
        rank = {document.id: position for position, document in enumerate(documents)}
        ids = [hit.id for hit in fused] + [hit.id for hit in within or ()]
        by_document = sorted(dict.fromkeys(ids), key=lambda chunk_id: rank.get(doc_of[chunk_id], len(rank)))
        lists, weights = [[hit.id for hit in fused]], [1.0]
        if within is not None:
            lists.append([hit.id for hit in within])
            weights.append(self.weight)
        lists.append(by_document)
        weights.append(self.weight)
        return reciprocal_rank_fusion(lists, k=self.k, weights=weights)


DOC_EVIDENCE.register("none", DocumentPrior, help="no document evidence (chunks ranked on their own)")
USES = ("doc_evidence_weight", "rrf_k")
DOC_EVIDENCE.register("prior", DocumentPrior, uses=USES, help="the chunk ranking fused with its chunks ordered by document rank")
DOC_EVIDENCE.register("search", DocumentPrior, searches_documents=True, uses=(*USES, "doc_evidence_docs"),
                      help="prior, plus the retrievers searched again within the best doc_evidence_docs documents")


def make_doc_evidence(config: ConfigFields) -> DocumentPrior | None:
    """The configured combiner, or None for ``doc_evidence: none``."""
    return None if config.doc_evidence == "none" else DOC_EVIDENCE.load(config.doc_evidence)(config.doc_evidence, config)


def _not_with_hard_routing(values: Mapping[str, Any]) -> tuple[str, str] | None:
    if values["doc_evidence"] != "none" and values["route_docs"]:
        return "doc_evidence", "doc_evidence is the soft alternative to route_docs: set route_docs 0 to use it"
    return None


SETTINGS.declare(
    Setting("doc_evidence", str, "none", "soft document evidence: none | prior (the chunk ranking fused with the "
            "document ranking as a prior: a wrong document costs rank, not recall) | search (prior, plus a search "
            "within the best doc_evidence_docs documents)", choices=DOC_EVIDENCE.names, group="routing",
            stage="candidates",
            brings=lambda evidence: ("tokenizer",) if evidence != "none" else ()),  # the cards' words
    Setting("doc_evidence_weight", float, 1.0, "weight of the document evidence's lists in the RRF with the chunk "
            "ranking (which has weight 1)", minimum=0, group="routing", stage="candidates"),
    Setting("doc_evidence_docs", int, 2, "doc_evidence search: how many of the best documents are searched again",
            minimum=1, group="routing", stage="candidates"),
    owner="doc_evidence")
SETTINGS.add_rule(Rule(_not_with_hard_routing, "doc_evidence"))
