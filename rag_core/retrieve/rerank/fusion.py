"""``rerank_fusion`` (a setting; also the fine-tuning report's "re-ranked + rrf"): the re-ranked order
fused with the first stage's order of the same candidates.

With ``rrf``, the final order of the re-ranked head is Reciprocal Rank Fusion
(``rag_core.retrieve.fusion``, ``1 / (k + rank)`` summed over the two orders, ranks from 1) of the
re-ranker's order and the first stage's order of those same candidates; the first stage's tail
(candidates beyond ``rerank_depth``) follows unchanged, as without fusion. A re-ranker that is good
but not better than the first stage everywhere (one trained on a few hundred queries, say) often gains
from keeping the first stage's vote. ``none`` keeps the re-ranker's order.
Left out: weights between the two orders (``fusion_weights`` serve the retrievers' fusion).
"""

from __future__ import annotations

from typing import Sequence

from rag_core.retrieve.fusion import reciprocal_rank_fusion
from rag_core.retrieve.rerank import RERANK_FUSIONS


def fuse_reranked(reranked: Sequence[str], first_stage: Sequence[str], method: str = "rrf", k: int = 60) -> list[str]:
    """The final order of ids: `reranked` (the re-ranked head, best first) fused by `method` with the
    first stage's order of the same ids, then the rest of `first_stage` in its order."""
    if method not in RERANK_FUSIONS:
        raise ValueError(f"unknown rerank_fusion {method!r}; valid: {', '.join(RERANK_FUSIONS)}")
    head = set(reranked)
    tail = [item for item in first_stage if item not in head]
    if method == "none":
        return list(reranked) + tail
    first_order = [item for item in first_stage if item in head]
    return [hit.id for hit in reciprocal_rank_fusion([list(reranked), first_order], k=k)] + tail
