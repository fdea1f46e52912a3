"""Parent-child chunks ("small-to-big" retrieval): small child chunks are searched, and the passage
returned (and given to the LLM) is the ``chunk_size`` parent that holds them.

``child_chunks`` splits each parent chunk's span into children of at most ``child_size`` words
(without overlap; parents overlap as configured), each an exact span of the document text with its
own id, pages and offsets, so that relevance can be judged at the child level too.
``collapse_to_parents`` turns a ranked list of children into a ranked list of parents: a parent
appears once, at the rank and with the score of its best child.

Left out: more than two levels, children that cross their parent's boundary.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from rag_core.ingest.chunking import split_span
from rag_core.records import Chunk, Document, ScoredId


def child_chunks(parents: Iterable[Chunk], documents: Mapping[str, Document],
                 child_size: int) -> tuple[list[Chunk], dict[str, str]]:
    """(children in parent order, child id -> parent id)."""
    children: list[Chunk] = []
    parent_of: dict[str, str] = {}
    for parent in parents:
        document = documents[parent.doc_id]
        for start, end in split_span(document.text, (parent.char_start, parent.char_end), child_size):
            text = document.text[start:end]
            # the parent's id in the child's id: two overlapping parents holding the same span keep two children
            child = Chunk(Chunk.make_id(f"{parent.doc_id}\x00{parent.id}", start, end, text), parent.doc_id, text,
                          start, end, document.page_at(start), document.page_at(end - 1))
            children.append(child)
            parent_of[child.id] = parent.id
    return children, parent_of


def collapse_to_parents(ranked_children: Sequence[ScoredId], parent_of: Mapping[str, str],
                        depth: int | None = None) -> list[ScoredId]:
    """Ranked children -> ranked parents, each at its best child's rank and score; the first `depth`."""
    parents: dict[str, ScoredId] = {}
    for hit in ranked_children:
        parent = parent_of[hit.id]
        if parent not in parents:
            parents[parent] = ScoredId(parent, hit.score)
            if depth is not None and len(parents) == depth:
                break
    return list(parents.values())
