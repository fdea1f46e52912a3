"""Exact dense search over a collection's vectors, and the order every dense list is cut in.

Approximate search (Chroma's HNSW graph) is not reproducible: each build inserts into its graph in
its own way, and the records a store keeps only in its log are inserted again by every process that
opens it, so two builds of one store, or two processes, can return different top-k lists (measured
in ``/work/notes/determinism.md``: 9-16 of 200 top-20 lists between two builds of a filings store).
``ExactSearch`` scores every vector (one matrix product) and orders by ``(-score, chunk id)``: the
same list in every build and process, filters exact, and ties decided by id rather than by the order
of ingest. Up to some tens of thousands of chunks it is also faster than Chroma's query path
(``benchmarks/dense_search.py``), which is why the dense retriever uses it by default
(``dense_search: auto``, up to ``dense_exact_max`` chunks).

``by_score_then_id`` is the same order for a list a store returned (approximate search above the
threshold): ask for a few more than ``k``, order, cut, so a tie at the boundary is decided by id.
Left out: approximate-search recall estimated inside the store (the dense retriever measures it).
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from rag_core.records import ScoredId

TIE_MARGIN = 8  # extra hits asked of an approximate store so that ties at the cut are ordered by id


def by_score_then_id(hits: Iterable[ScoredId], k: int) -> list[ScoredId]:
    """`hits` best first, equal scores by id, the first `k`."""
    return sorted(hits, key=lambda hit: (-hit.score, hit.id))[:k]


class ExactSearch:
    """Cosine similarity of a query with every row of `matrix` (unit vectors, one per id); best first,
    ties by id. `doc_ids`: each row's document, for ``search(..., allowed_doc_ids)``."""

    def __init__(self, ids: Sequence[str], matrix: np.ndarray, doc_ids: Sequence[str] | None = None) -> None:
        if len(ids) != len(matrix):
            raise ValueError(f"{len(ids)} ids for {len(matrix)} vectors")
        self.ids = np.asarray(list(ids), dtype=object)
        self.matrix = np.ascontiguousarray(matrix, dtype=np.float32)
        self.doc_ids = np.asarray(list(doc_ids), dtype=object) if doc_ids is not None else None
        order = np.argsort(self.ids.astype(str), kind="stable")
        self.id_rank = np.empty(len(order), dtype=np.int64)  # each row's rank among the sorted ids
        self.id_rank[order] = np.arange(len(order))

    @classmethod
    def from_store(cls, store, collection: str) -> "ExactSearch":
        """The vectors a store holds in `collection` (its ``vectors`` method)."""
        ids, matrix, doc_ids = store.vectors(collection)
        return cls(ids, matrix, doc_ids)

    def __len__(self) -> int:
        return len(self.ids)

    def scores(self, vector: np.ndarray) -> np.ndarray:
        return self.matrix @ np.asarray(vector, dtype=np.float32)

    def search(self, vector: np.ndarray, k: int, allowed_doc_ids: Sequence[str] | None = None) -> list[ScoredId]:
        if not len(self.ids) or k <= 0:
            return []
        scores = self.scores(vector)
        rows = np.arange(len(scores))
        if allowed_doc_ids is not None:
            if self.doc_ids is None:
                raise ValueError("this exact index has no document ids to filter by")
            rows = np.flatnonzero(np.isin(self.doc_ids, list(allowed_doc_ids)))
            if not len(rows):
                return []
        if len(rows) > k:  # the k best and every row tied with the k-th, then ordered exactly
            kth = np.partition(scores[rows], len(rows) - k)[len(rows) - k]
            rows = rows[scores[rows] >= kth]
        top = rows[np.lexsort((self.id_rank[rows], -scores[rows]))][:k]
        return [ScoredId(str(self.ids[row]), float(scores[row])) for row in top]
