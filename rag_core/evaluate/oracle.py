"""The oracle's passages: a query's golden evidence given to the answer step in place of what was retrieved.

Answering from the evidence itself separates what retrieval loses from what generation loses (the
FinanceBench paper's "oracle" setting; Islam et al. 2023): the oracle's score against the retrieved run's is
the loss due to retrieval, the oracle's score against a perfect one the loss due to generation
(``rag_core.workbench.statistics.oracle_loss``).

Each evidence item becomes one passage (a ``Hit`` whose chunk is that text where it lies in its document, so
its citation names the right pages and the extractive answer can widen it to whole sentences):

- with ``text``: the span where relevance locates it (``rag_core.evaluate.relevance.locate_evidence``);
- with ``page`` only: that whole page;
- with neither (a whole document named as evidence): no passage: a document is not a passage.

Passages come in the golden line's order, each evidence span once. A query with no passage is answered
"not in the documents", as the answer step answers a query with nothing retrieved.
Left out: evidence that cannot be located (the golden set's check rejects it before the evaluation).
"""

from __future__ import annotations

from typing import Mapping

from rag_core.evaluate.golden import GoldenQuery
from rag_core.evaluate.relevance import locate_evidence
from rag_core.records import Chunk, Document, Hit, StageScore

ORACLE = "oracle"  # the prefix of the oracle's metrics and columns: oracle/answer/token_f1


def oracle_passages(query: GoldenQuery, documents: Mapping[str, Document]) -> list[Hit]:
    """The golden evidence of `query` as passages, best first in the golden line's order (see the docstring)."""
    hits: list[Hit] = []
    seen: set[tuple[str, int, int]] = set()
    for number, evidence in enumerate(query.evidence, start=1):
        document = documents.get(evidence.source)
        if document is None:
            continue
        if evidence.text:
            start, end = locate_evidence(document, evidence.text, page=evidence.page)
        elif evidence.page is not None and 1 <= evidence.page <= document.n_pages:
            start = document.page_starts[evidence.page - 1]
            end = document.page_starts[evidence.page] if evidence.page < document.n_pages else len(document.text)
        else:
            continue
        if (document.doc_id, start, end) in seen or start >= end:
            continue
        seen.add((document.doc_id, start, end))
        chunk = Chunk(id=f"{ORACLE}:{query.id}:{number}", doc_id=document.doc_id, text=document.text[start:end],
                      page_start=document.page_at(start), page_end=document.page_at(end - 1),
                      char_start=start, char_end=end)
        hits.append(Hit(chunk=chunk, score=1.0, stages={ORACLE: StageScore(rank=len(hits) + 1, score=1.0)}))
    return hits


__all__ = ["ORACLE", "oracle_passages"]
