"""Document-level routing (the ``route_docs`` setting): rank whole documents first, then retrieve
chunks only within the best ``route_docs`` of them.

Each document gets one *card*: its title (``rag_core.retrieve.context.document_title``), its
metadata as ``key: value`` lines, its headings of the first pages, and its first
``CARD_WORDS`` words. Cards are ranked for the query by BM25 (the configured tokenizer, with
letters and digits split apart on both sides so ``FY2019`` meets ``2019``) and, in dense and hybrid
mode, by the embedding model too (cosine over the card vectors, cached by text like chunks); the two
lists are fused with Reciprocal Rank Fusion. The chosen documents then restrict both retrievers the
way a metadata filter does (``doc_id`` any of), before ranking; a filter, when given, is applied to
the cards first. Routing time is its own latency stage (``route``).
Left out: learned routers, routing by an LLM, per-document score thresholds (always ``route_docs``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from rag_core.ingest.corpus import Corpus
from rag_core.records import Document, ScoredId
from rag_core.retrieve.bm25 import BM25Index
from rag_core.retrieve.context import document_title
from rag_core.retrieve.fusion import reciprocal_rank_fusion

CARD_WORDS = 600  # words of the document's beginning on its card
CARD_HEADINGS = 40  # headings of the document's beginning on its card
_LETTER_DIGIT = re.compile(r"(?<=[^\W\d_])(?=\d)|(?<=\d)(?=[^\W\d_])")


def split_letters_digits(text: str) -> str:
    """``FY2019 Q3`` -> ``FY 2019 Q 3``: so a year or number written against letters still matches."""
    return _LETTER_DIGIT.sub(" ", text)


def document_card(document: Document, words: int = CARD_WORDS) -> str:
    """The text a document is routed by: title, metadata, first headings, first words."""
    lines = [document_title(document)]
    lines += [f"{key}: {value}" for key, value in document.metadata]
    first_pages_end = document.page_starts[3] if document.n_pages > 3 else len(document.text)
    lines += [heading for start, heading in document.headings[:CARD_HEADINGS] if start < first_pages_end]
    lines.append(" ".join(document.text.split()[:words]))
    return "\n".join(lines)


@dataclass
class Router:
    corpus: Corpus
    tokenizer: str = "stem"
    embedder: object | None = None  # an Embedder: dense routing too (dense and hybrid mode)
    rrf_k: int = 60

    def __post_init__(self) -> None:
        self.doc_ids = [document.doc_id for document in self.corpus.documents]
        self.cards = [document_card(document) for document in self.corpus.documents]
        self._bm25 = BM25Index(tokenizer=self.tokenizer)
        self._bm25.index(self.doc_ids, [split_letters_digits(card) for card in self.cards])
        self._vectors = None
        if self.embedder is not None:
            self._vectors, _ = self.embedder.embed_documents(self.cards)

    def route(self, query: str, n: int, within: Sequence[str] | None = None) -> list[ScoredId]:
        """The best `n` documents for `query` (among `within` when given), best first."""
        allowed = None if within is None else np.isin(np.array(self.doc_ids), list(within))
        ranked = self._bm25.retrieve(split_letters_digits(query), len(self.doc_ids), allowed)
        if self._vectors is not None:
            similarity = self._vectors @ self.embedder.embed_query(query)
            order = [i for i in np.argsort(-similarity, kind="stable") if allowed is None or allowed[i]]
            ranked = reciprocal_rank_fusion([[hit.id for hit in ranked], [self.doc_ids[i] for i in order]], k=self.rrf_k)
        seen = {hit.id for hit in ranked}  # documents with no word in common come last, in corpus order
        ranked += [ScoredId(doc_id, 0.0) for position, doc_id in enumerate(self.doc_ids)
                   if doc_id not in seen and (allowed is None or allowed[position])]
        return ranked[:n]
