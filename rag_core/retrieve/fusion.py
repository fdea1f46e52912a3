"""Rank fusion: merge the ranked lists of several retrievers into one, chosen by name (``method="rrf"``).

Reciprocal Rank Fusion (Cormack, Clarke & Büttcher, "Reciprocal Rank Fusion outperforms Condorcet
and individual Rank Learning Methods", SIGIR 2009): ``score(d) = sum_i 1 / (k + rank_i(d))``, ranks
from 1, ``k = 60`` by default. It uses ranks only, so retrievers whose scores live on different
scales (cosine similarity, BM25) need no normalisation.

With ``weights``, list i contributes ``w_i / (k + rank_i(d))`` (weighted RRF). Score-based methods
(CombSUM, CombMNZ, weighted sum after min-max or z-score normalisation, ...) are ranx's:
``rag_core.retrieve.fusion_ranx``, imported only when one is configured (ranx starts numba: seconds).
Left out: anything ranx already implements.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

from rag_core.records import ScoredId


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


# name -> fusion function taking (ranked_lists, **settings)
FUSION_METHODS: dict[str, Callable[..., list[ScoredId]]] = {"rrf": reciprocal_rank_fusion}


def fuse(ranked_lists: Sequence[Sequence[str]], method: str = "rrf", **settings: Any) -> list[ScoredId]:
    """Fuse with the method registered under ``method`` (``ValueError`` listing valid names otherwise)."""
    if method not in FUSION_METHODS:
        raise ValueError(f"unknown fusion method {method!r}; valid methods: {', '.join(FUSION_METHODS)}")
    return FUSION_METHODS[method](ranked_lists, **settings)
