"""RM3 pseudo-relevance feedback for BM25 (Lavrenko & Croft, "Relevance-Based Language Models",
SIGIR 2001; RM3 as in Abdul-Jaleel et al., "UMass at TREC 2004", and Anserini's implementation).

1. Retrieve the top ``fb_docs`` chunks for the query with BM25 (scores ``s_d``).
2. Relevance model (RM1): ``P(w|R) = sum_d  s_d / sum(s) * tf(w, d) / |d|`` over those chunks, in the
   BM25 tokenizer's tokens (stop words and stemming as configured).
3. Keep the ``fb_terms`` most probable terms and renormalise them to sum to 1.
4. RM3: ``P'(w) = λ P(w|Q) + (1 - λ) P(w|R)``, with ``P(w|Q) = c(w, Q) / |Q|`` the original query's
   tokens and ``λ = original_weight`` (``rm3_weight``).
5. Search BM25 again with the weighted query: ``score(d) = sum_w P'(w) * bm25(w, d)``.

``expansion_weights`` (steps 2-4) is a pure function of token lists, so it is tested by hand. ``RM3``
is the ``rm3`` query expansion: it searches BM25 retrievers this way (others as usual).
Left out: feedback from a different index than the one searched, term filtering beyond the tokenizer.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from rag_core.records import ScoredId
from rag_core.retrieve.bm25 import BM25Index
from rag_core.retrieve.expansion.base import QueryExpansion
from rag_core.retrieve.retrievers import Query, Ranked, Retriever
from rag_core.retrieve.retrievers.bm25 import BM25Retriever


@dataclass(frozen=True)
class RM3Result:
    hits: list[ScoredId]  # the expanded query's BM25 ranking
    weights: dict[str, float]  # token -> weight of the expanded query, largest first


def expansion_weights(query_tokens: Sequence[str], feedback: Sequence[tuple[Sequence[str], float]],
                      fb_terms: int, original_weight: float) -> dict[str, float]:
    """The RM3 query (token -> weight, largest first) from the query's tokens and the feedback
    documents as (tokens, retrieval score)."""
    relevance: Counter[str] = Counter()
    total_score = sum(score for tokens, score in feedback if tokens)
    for tokens, score in feedback:
        if not tokens or total_score <= 0:
            continue
        doc_weight = score / total_score
        for token, count in Counter(tokens).items():
            relevance[token] += doc_weight * count / len(tokens)
    top = sorted(relevance.items(), key=lambda item: (-item[1], item[0]))[:fb_terms]
    top_total = sum(weight for _, weight in top)
    expanded: Counter[str] = Counter()
    if query_tokens:
        for token, count in Counter(query_tokens).items():
            expanded[token] += original_weight * count / len(query_tokens)
    for token, weight in top:
        expanded[token] += (1 - original_weight) * weight / top_total
    return dict(sorted(expanded.items(), key=lambda item: (-item[1], item[0])))


def rm3_search(index: BM25Index, text_of: Callable[[str], str], query: str, depth: int, fb_docs: int,
               fb_terms: int, original_weight: float, allowed: np.ndarray | None = None) -> RM3Result:
    """BM25 search of `query` expanded by RM3; `text_of` gives the text of one of the index's ids;
    `allowed` (a mask over the index's ids) restricts feedback and results alike."""
    query_tokens = index.tokenize(query)
    feedback_hits = index.retrieve(query, fb_docs, allowed=allowed)
    if not feedback_hits:
        return RM3Result([], {})
    feedback = [(index.tokenize(text_of(hit.id)), hit.score) for hit in feedback_hits]
    weights = expansion_weights(query_tokens, feedback, fb_terms, original_weight)
    return RM3Result(index.retrieve_weighted(weights, depth, allowed), weights)


class RM3(QueryExpansion):
    """The ``rm3`` expansion: a BM25 retriever searches the RM3 query (``rm3_docs``, ``rm3_terms``,
    ``rm3_weight``); its terms are what ``--explain`` shows."""

    def search(self, retriever: Retriever, query: Query, depth: int,
               allowed_doc_ids: Sequence[str] | None = None) -> Ranked:
        if not isinstance(retriever, BM25Retriever):
            return retriever.search(query, depth, allowed_doc_ids)
        cfg = self.config
        result = rm3_search(retriever.index, retriever.text_of, query.text, depth, cfg.rm3_docs, cfg.rm3_terms,
                            cfg.rm3_weight, retriever.mask(allowed_doc_ids))
        return Ranked(result.hits, info={"method": "rm3", "terms": result.weights})
