"""Passages to write golden questions from, sampled across documents and positions in them.

A document is cut into passages of about ``passage_words`` words inside each page (the project's
chunker, ``per_page=True``, no overlap), so each passage has one page. Each passage gets a position:
``beginning``, ``middle`` or ``end`` of its document (by page, or by character offset for a
one-page document). ``stratified_order`` then orders all passages so that any prefix of the order
is spread evenly: round robin over the documents (in a seeded random order), each document cycling
through its positions, a random passage within each (document, position) stratum. Taking the first
N passages therefore covers every document once N reaches the number of documents.

Left out: weighting documents by length (every document gets the same share), semantic clustering.
"""

from __future__ import annotations

import random
from itertools import chain, zip_longest
from typing import Iterable, Sequence, TypeVar

from rag_core.ingest.chunkers import count_words
from rag_core.ingest.chunkers.recursive import chunk_document
from rag_core.records import Document, Passage

POSITIONS = ("beginning", "middle", "end")  # Passage.position: which third of its document

Item = TypeVar("Item")


def position_in(document: Document, offset: int) -> str:
    """Which third of `document` the character at `offset` is in (by page when there are several)."""
    if document.n_pages > 1:
        share = (document.page_at(offset) - 1) / document.n_pages
    else:
        share = offset / max(1, len(document.text))
    return POSITIONS[min(len(POSITIONS) - 1, int(share * len(POSITIONS)))]


def candidate_passages(documents: Iterable[Document], passage_words: int = 120, min_words: int = 25) -> list[Passage]:
    """Every passage of at least `min_words` words, document by document."""
    passages = []
    for document in documents:
        for chunk in chunk_document(document, passage_words, 0, per_page=True):
            if count_words(chunk.text) >= min_words:
                passages.append(Passage(document.doc_id, chunk.page_start, position_in(document, chunk.char_start),
                                        chunk.text, chunk.char_start, chunk.char_end))
    return passages


def stratified_order(passages: Sequence[Passage], seed: int = 0) -> list[Passage]:
    """All `passages`, ordered so that every prefix is spread over documents and positions."""
    rng = random.Random(seed)
    strata: dict[str, dict[str, list[Passage]]] = {}  # doc_id -> position -> passages
    for passage in passages:
        strata.setdefault(passage.doc_id, {}).setdefault(passage.position, []).append(passage)
    doc_ids = sorted(strata)
    rng.shuffle(doc_ids)
    per_document = []
    for index, doc_id in enumerate(doc_ids):
        for members in strata[doc_id].values():
            rng.shuffle(members)
        rotated = POSITIONS[index % len(POSITIONS):] + POSITIONS[:index % len(POSITIONS)]  # vary the first position
        per_document.append(interleave([strata[doc_id].get(position, []) for position in rotated]))
    return interleave(per_document)


def interleave(lists: Sequence[Sequence[Item]]) -> list[Item]:
    """Round robin: the first of each list, then the second of each, ..."""
    marker = object()
    return [item for item in chain.from_iterable(zip_longest(*lists, fillvalue=marker)) if item is not marker]
