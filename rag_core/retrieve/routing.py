"""Document-level routing (the ``route_docs`` setting): rank whole documents first, then retrieve
chunks only within the best ``route_docs`` of them.

Each document gets two texts: its *name* (title and file name,
``rag_core.retrieve.context.document_title``, metadata values, the initials of the words its names
begin with, and the form and period a filing states on its first page: ``filing_facts``) and its *card* (the name, metadata as ``key: value`` lines, the headings of its
first pages and its first ``CARD_WORDS`` words). Both are ranked for the query by BM25 (the
configured tokenizer) and, in dense and hybrid mode, cards also by the embedding model (cosine over
card vectors, cached by text like chunks); the lists are fused with Reciprocal Rank Fusion (so a
match on the name counts as much as one on the whole card, like a boosted title field). Two general
normalisations help names match: letters and digits are split apart on both sides (``FY2019`` meets
``2019``), and the query also carries each pair of adjacent words joined (``best buy`` meets a file
named ``BESTBUY``), and a query word written in mixed case also stands for its capitals
(``JnJ`` meets the initials ``jj`` of ``JOHNSON_JOHNSON``, ``AmEx`` those of ``American Express``). Measured on the FinanceBench dev split (26 filings, 29 questions, BM25 only; names before initials and
filing facts were added, ``ROUTING_VERSION`` 1):
the right filing first for 79% of questions, in the top 2 for 90% (card alone: 48% / 69%). The chosen documents then restrict both retrievers the
way a metadata filter does (``doc_id`` any of), before ranking; a filter, when given, is applied to
the cards first. Routing time is its own latency stage (``route``).
With ``route_when: named`` (the default) only a question that shares a word with some document's
name is routed; any other searches every document, since a card match alone is weak evidence. On the
dev split every question names its company, while 24 of the sample corpus's 36 questions name no
document (routing them all cost that corpus a third of its page recall).
The same ranking is the document evidence of ``doc_evidence`` (``rag_core.retrieve.doc_evidence``): a prior
fused with the chunk ranking instead of a filter.
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

ROUTING_VERSION = 2  # what names hold (2: initials, filing form and period): part of the candidates' key
CARD_WORDS = 600  # words of the document's beginning on its card
CARD_HEADINGS = 40  # headings of the document's beginning on its card
_WORDS = re.compile(r"[^\W_]+")
_LETTER_DIGIT = re.compile(r"(?<=[^\W\d_])(?=\d)|(?<=\d)(?=[^\W\d_])")


def split_letters_digits(text: str) -> str:
    """``FY2019 Q3`` -> ``FY 2019 Q 3``: so a year or number written against letters still matches."""
    return _LETTER_DIGIT.sub(" ", text)


_FORM = re.compile(r"\bFORM\s+(10-K|10-Q|8-K|20-F|6-K|40-F|10-KT|S-1)\b", re.IGNORECASE)
_PERIOD = re.compile(r"\bfor\s+the\s+(fiscal\s+year|year|quarterly\s+period|quarter|(?:three|six|nine|twelve)\s+months)"
                     r"\s+ended:?\s+([A-Za-z]+)\.?\s+\d{1,2},?\s+((?:19|20)\d{2})", re.IGNORECASE)
_MONTHS = {month: number for number, month in enumerate(
    ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november",
     "december"), start=1)}
FORM_WORDS = {"10-K": "annual report", "10-KT": "annual report", "20-F": "annual report", "40-F": "annual report",
              "10-Q": "quarterly report", "8-K": "current report", "6-K": "current report"}
_CONNECTIVES = {"and", "the", "of", "for", "a", "an", "inc", "corp", "co", "company", "corporation", "ltd", "plc"}
FACT_PAGES = 2  # pages of a document's beginning read for its form and period


def filing_facts(document: Document) -> list[str]:
    """The form (``FORM 10-Q``) and the period (``For the quarterly period ended June 30, 2023``) a filing
    states on its first pages, as words a question may use: ``10-Q quarterly report``, ``2023 FY2023 Q2
    quarter``. Nothing for a document that states neither."""
    end = document.page_starts[FACT_PAGES] if document.n_pages > FACT_PAGES else len(document.text)
    head = " ".join(document.text[:end].split())
    facts: list[str] = []
    form = _FORM.search(head)
    if form:
        name = form.group(1).upper()
        facts += [name, FORM_WORDS.get(name, "")]
    period = _PERIOD.search(head)
    if period:
        kind, month, year = period.group(1).lower(), _MONTHS.get(period.group(2).lower()), period.group(3)
        facts += [year, f"FY{year}"]
        if month and "year" not in kind and "twelve" not in kind:
            facts += [f"Q{(month - 1) // 3 + 1}", "quarter", "quarterly"]
        else:
            facts += ["fiscal year", "annual"]
    return [fact for fact in facts if fact]


def initials(name: str, longest: int = 4) -> list[str]:
    """The initials of the first 2 to `longest` words a name begins with, before its first number
    (``JOHNSON_JOHNSON_2022Q4`` -> ``jj``; ``American Express Co`` -> ``ae``)."""
    words = []
    for word in _WORDS.findall(name.replace("_", " ")):
        if any(character.isdigit() for character in word):
            break
        if word.lower() not in _CONNECTIVES:
            words.append(word.lower())
    return [("".join(word[0] for word in words[:size])) for size in range(2, min(longest, len(words)) + 1)]


def document_name(document: Document) -> str:
    """The document's name field: its title and file name, metadata values, the initials of its names
    and the form and period a filing states (``filing_facts``)."""
    title = document_title(document)
    names = [title, *(value for _, value in document.metadata)]
    short = [short for name in (*title.split(" | "), *names[1:]) for short in initials(name)]
    return " ".join([*names, *dict.fromkeys(short), *filing_facts(document)])


def capitals(query: str) -> list[str]:
    """Each mixed-case word's capitals (``JnJ`` -> ``JJ``, ``AmEx`` -> ``AE``): how abbreviations are written."""
    found = []
    for word in _WORDS.findall(query):
        upper = [character for character in word if character.isupper()]
        if len(upper) >= 2 and not word.isupper():
            found.append("".join(upper))
    return found


def joined_pairs(query: str) -> str:
    """The query plus each two and three adjacent words written as one (``best buy`` -> ``bestbuy``)."""
    words = _WORDS.findall(query.lower())
    pairs = [first + second for first, second in zip(words, words[1:])]
    triples = [first + second + third for first, second, third in zip(words, words[1:], words[2:])]
    return " ".join([query, *pairs, *triples])


def routing_query(query: str) -> str:
    """What names and cards are ranked by: joined words added, letters and digits split, and each
    word once (a word the question repeats, like ``FY`` in ``FY2019 ... FY2020``, counts once)."""
    words = _WORDS.findall(split_letters_digits(joined_pairs(" ".join([query, *capitals(query)]))))
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
