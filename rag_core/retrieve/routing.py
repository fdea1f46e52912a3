"""Document-level routing (the ``route_docs`` setting): rank whole documents first, then retrieve
chunks only within the best ``route_docs`` of them.

Each document gets two texts: its *name* (title, ``rag_core.retrieve.context.document_title``, and
metadata values) and its *card* (the name, metadata as ``key: value`` lines, the headings of its
first pages and its first ``CARD_WORDS`` words). Both are ranked for the query by BM25 (the
configured tokenizer) and, in dense and hybrid mode, cards also by the embedding model (cosine over
card vectors, cached by text like chunks); the lists are fused with Reciprocal Rank Fusion (so a
match on the name counts as much as one on the whole card, like a boosted title field). Two general
normalisations help names match: letters and digits are split apart on both sides (``FY2019`` meets
``2019``), and the query also carries each pair of adjacent words joined (``best buy`` meets a file
named ``BESTBUY``). Measured on the FinanceBench dev split (26 filings, 29 questions, BM25 only):
the right filing first for 79% of questions, in the top 2 for 90% (card alone: 48% / 69%). The chosen documents then restrict both retrievers the
way a metadata filter does (``doc_id`` any of), before ranking; a filter, when given, is applied to
the cards first. Routing time is its own latency stage (``route``).
With ``route_when: named`` (the default) only a question that shares a word with some document's
name is routed; any other searches every document, since a card match alone is weak evidence. On the
dev split every question names its company, while 24 of the sample corpus's 36 questions name no
document (routing them all cost that corpus a third of its page recall).
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
_WORDS = re.compile(r"[^\W_]+")
_LETTER_DIGIT = re.compile(r"(?<=[^\W\d_])(?=\d)|(?<=\d)(?=[^\W\d_])")


def split_letters_digits(text: str) -> str:
    """``FY2019 Q3`` -> ``FY 2019 Q 3``: so a year or number written against letters still matches."""
    return _LETTER_DIGIT.sub(" ", text)


def document_name(document: Document) -> str:
    """Title and metadata values: the document's name field."""
    return " ".join([document_title(document), *(value for _, value in document.metadata)])


def joined_pairs(query: str) -> str:
    """The query plus each two and three adjacent words written as one (``best buy`` -> ``bestbuy``)."""
    words = _WORDS.findall(query.lower())
    pairs = [first + second for first, second in zip(words, words[1:])]
    triples = [first + second + third for first, second, third in zip(words, words[1:], words[2:])]
    return " ".join([query, *pairs, *triples])


def routing_query(query: str) -> str:
    """What names and cards are ranked by: joined words added, letters and digits split, and each
    word once (a word the question repeats, like ``FY`` in ``FY2019 ... FY2020``, counts once)."""
    words = _WORDS.findall(split_letters_digits(joined_pairs(query)))
    return " ".join(dict.fromkeys(word.lower() for word in words))


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
        self._names = BM25Index(tokenizer=self.tokenizer)
        self._names.index(self.doc_ids, [split_letters_digits(document_name(doc)) for doc in self.corpus.documents])
        self._vectors = None
        if self.embedder is not None:
            self._vectors, _ = self.embedder.embed_documents(self.cards)

    def route(self, query: str, n: int, within: Sequence[str] | None = None,
              query_vector: np.ndarray | None = None, require_name: bool = False) -> list[ScoredId]:
        """The best `n` documents for `query` (among `within` when given), best first; none when
        `require_name` and the query shares no word with any document's name. `query_vector`: the
        query's embedding when the caller has it (the pipeline embeds a query once for routing and
        the chunks); computed here otherwise."""
        allowed = None if within is None else np.isin(np.array(self.doc_ids), list(within))
        text = routing_query(query)
        lists = [[hit.id for hit in index.retrieve(text, len(self.doc_ids), allowed)] for index in (self._names, self._bm25)]
        if require_name and not lists[0]:
            return []
        if self._vectors is not None:
            vector = self.embedder.embed_query(query) if query_vector is None else query_vector
            similarity = self._vectors @ vector
            lists.append([self.doc_ids[i] for i in np.argsort(-similarity, kind="stable") if allowed is None or allowed[i]])
        ranked = reciprocal_rank_fusion(lists, k=self.rrf_k)
        seen = {hit.id for hit in ranked}  # documents with no word in common come last, in corpus order
        ranked += [ScoredId(doc_id, 0.0) for position, doc_id in enumerate(self.doc_ids)
                   if doc_id not in seen and (allowed is None or allowed[position])]
        return ranked[:n]
