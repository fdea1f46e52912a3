"""Reciprocal Rank Fusion, the ``rrf`` fusion (the default).

Reciprocal Rank Fusion (Cormack, Clarke & Büttcher, "Reciprocal Rank Fusion outperforms Condorcet
and individual Rank Learning Methods", SIGIR 2009): ``score(d) = sum_i 1 / (k + rank_i(d))``, ranks
from 1, ``k = 60`` by default. It uses ranks only, so retrievers whose scores live on different
scales (cosine similarity, BM25) need no normalisation.

With ``weights``, list i contributes ``w_i / (k + rank_i(d))`` (weighted RRF). Score-based methods
(CombSUM, CombMNZ, weighted sum after min-max or z-score normalisation, ...) are ranx's:
``rag_core.retrieve.fusion.ranx``, imported only when one is configured (ranx starts numba: seconds).
Left out: anything ranx already implements.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Sequence

from rag_core.records import ScoredId

if TYPE_CHECKING:
    from rag_core.components.config_fields import ConfigFields


def reciprocal_rank_fusion(ranked_lists: Sequence[Sequence[str]], k: int = 60,
                           weights: Sequence[float] | None = None) -> list[ScoredId]:
    """RRF over any number of ranked id lists (best first), fused best first.

    An id missing from a list gets nothing from it; an id repeated within a list counts at its
    first (best) rank only. Ties keep the order of first appearance, scanning the lists in order.
    Sums use ``math.fsum``, so equal rank sets give exactly equal scores whatever the list order.
    """
    if k < 0:
        raise ValueError(f"RRF k must be >= 0, got {k}")
    if weights is not None and len(weights) != len(ranked_lists):
        raise ValueError(f"RRF got {len(weights)} weights for {len(ranked_lists)} lists")
    contributions: dict[str, list[float]] = {}  # id -> w/(k + rank) per list; insertion order = first appearance
    for position, ranked in enumerate(ranked_lists):
        weight = 1.0 if weights is None else float(weights[position])
        seen: set[str] = set()
        for rank, item_id in enumerate(ranked, start=1):
            if item_id in seen:
                continue
            seen.add(item_id)
            contributions.setdefault(item_id, []).append(weight / (k + rank))
    fused = [ScoredId(item_id, math.fsum(parts)) for item_id, parts in contributions.items()]
    fused.sort(key=lambda hit: -hit.score)  # stable: ties stay in first-appearance order
    return fused


class RRF:
    """The ``rrf`` fusion: ``rrf_k``, and the retrievers' weights when given (weighted RRF)."""

    def __init__(self, name: str, config: ConfigFields) -> None:
        self.k = config.rrf_k

    def fuse(self, ranked: Sequence[Sequence[ScoredId]], weights: Sequence[float] | None = None) -> list[ScoredId]:
        return reciprocal_rank_fusion([[hit.id for hit in hits] for hits in ranked], k=self.k, weights=weights or None)
