"""Parent-child chunks ("small-to-big" retrieval): small child chunks are searched, and the passage
returned (and given to the LLM) is the ``chunk_size`` parent that holds them.

``child_chunks`` splits each parent chunk's span into children of at most ``child_size`` words
(without overlap; parents overlap as configured), each an exact span of the document text with its
own id, pages and offsets, so that relevance can be judged at the child level too.
``collapse_to_parents`` turns a ranked list of children into a ranked list of parents: a parent
appears once, at the rank and with the score of its best child. ``pool_to_parents`` is the same with
a choice of pooling (``POOLINGS``: ``max``, the best child; ``mean_top2``, the mean of the two best),
re-ordered by the pooled score (ties by id); dense search scores a unit by its token windows with it
(``rag_core.retrieve.windows``), so windows and children are one mechanism. ``pool_scores`` scores a
page by the chunks ranked on it the same way (``PAGE_POOLS``: ``max``, ``sum``, ``mean_top``: the
mean of the best ``page_top_m``), for page metrics that rank pages (``rag_core.evaluate.metrics``).

Left out: more than two levels, children that cross their parent's boundary.
"""

from __future__ import annotations

from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

from rag_core.ingest.chunkers import count_words
from rag_core.ingest.chunkers.recursive import split_span
from rag_core.records import Chunk, Document, ScoredId


def child_chunks(parents: Iterable[Chunk], documents: Mapping[str, Document], child_size: int,
                 count: Callable[[str], int] | None = None) -> tuple[list[Chunk], dict[str, str]]:
    """(children in parent order, child id -> parent id); `count`: what sizes count (words when None)."""
    children: list[Chunk] = []
    parent_of: dict[str, str] = {}
    for parent in parents:
        document = documents[parent.doc_id]
        for start, end in split_span(document.text, (parent.char_start, parent.char_end), child_size,
                                     count=count or count_words):
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




def _mean_top(scores: Sequence[float], top_m: int) -> float:
    best = sorted(scores, reverse=True)[:max(1, top_m)]
    return sum(best) / len(best)


# The one pooling table: name -> function(scores of a unit's parts, top_m) -> the unit's score. page_score
# (PAGE_POOLS), dense_pooling, page_pooling and parent-child (POOLINGS) all pool through it; adding a rule
# is one function and one line (and its name in the settings' choices).
POOLS: dict[str, Callable[[Sequence[float], int], float]] = {
    "max": lambda scores, top_m: max(scores),
    "sum": lambda scores, top_m: sum(scores),
    "mean_top": _mean_top,  # the mean of the best top_m (of all of them when fewer)
    "mean_top2": lambda scores, top_m: _mean_top(scores, 2),
}
PAGE_POOLS = ("max", "sum", "mean_top")  # page_score's rules (config adds "first": no pooling)
# dense_pooling's and parent-child's rules: a unit's best window, or the mean of its two best (its one score
# when it has one)
POOLINGS: dict[str, Callable[[list[float]], float]] = {
    name: (lambda scores, pool=POOLS[name]: pool(scores, 2)) for name in ("max", "mean_top2")}


def pool_scores(scores: Sequence[float], rule: str, top_m: int = 2) -> float:
    """One score from the scores of a unit's parts (a page's chunks): their ``max``, their ``sum``,
    or ``mean_top``, the mean of the best `top_m` (of all of them when fewer)."""
    if not scores:
        raise ValueError("no scores to pool")
    if rule not in PAGE_POOLS:
        raise ValueError(f"unknown page score {rule!r}: one of {', '.join(PAGE_POOLS)}")
    return POOLS[rule](scores, top_m)


def pool_to_parents(ranked_children: Sequence[ScoredId], parent_of: Mapping[str, str], pooling: str = "max",
                    depth: int | None = None) -> list[ScoredId]:
    """Scored children -> parents scored by pooling their children's scores (``POOLINGS``), best
    first, ties by parent id; the first `depth`. A child missing from `parent_of` is its own parent.
    Exact when `ranked_children` holds every child of the parents ranked (children cut off a list
    are not pooled)."""
    if pooling not in POOLINGS:
        raise ValueError(f"unknown pooling {pooling!r}: one of {', '.join(POOLINGS)}")
    scores: dict[str, list[float]] = {}
    for hit in ranked_children:
        scores.setdefault(parent_of.get(hit.id, hit.id), []).append(hit.score)
    pool = POOLINGS[pooling]
    pooled = sorted((ScoredId(parent, float(pool(found))) for parent, found in scores.items()),
                    key=lambda hit: (-hit.score, hit.id))
    return pooled if depth is None else pooled[:depth]


def pool_rows(scores: np.ndarray, parent_row: np.ndarray,
              pooling: str = "max") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``pool_to_parents`` on arrays, for exact search over every child: `scores` and `parent_row` (each
    child's parent, as 0..P-1) per child -> (the parents present, their pooled scores, and each one's
    best child as a row of `scores`), as three arrays in parent order."""
    if pooling not in POOLINGS:
        raise ValueError(f"unknown pooling {pooling!r}: one of {', '.join(POOLINGS)}")
    order = np.lexsort((-scores, parent_row))  # by parent, then best child first
    parents, ranked = parent_row[order], np.asarray(scores, dtype=np.float64)[order]
    starts = np.flatnonzero(np.r_[True, parents[1:] != parents[:-1]]) if len(order) else np.zeros(0, np.int64)
    best = ranked[starts]
    if pooling == "mean_top2":
        two = np.r_[starts[1:], len(order)] - starts >= 2
        best = np.where(two, (best + ranked[np.minimum(starts + 1, len(order) - 1)]) / 2, best)
    return parents[starts], best, order[starts]
