"""Hard negatives: passages the first stage ranks high for a query that are not relevant to it.

For each training query, ``count`` negatives are drawn (seeded, without replacement) from its
first-stage candidates after the top ``skip`` (``rag_core.finetune.data``), positives left out. Drawing
at random from the top ``depth`` rather than taking the very best non-relevant ones is the usual guard
against unjudged relevant passages (false negatives), which the top ranks hold most of (Qu et al.,
"RocketQA", NAACL 2021). A query whose first stage returns fewer non-relevant candidates (a keyword
query that matches few passages) is topped up with passages drawn at random from the rest of the
corpus, so that every group has ``count`` negatives.

Shape: ``NegativeGroup(query, positive, negatives)`` with texts, one group per (query, positive).
Left out: denoising negatives with a cross-encoder (RocketQA's second step), negatives re-mined
during training (ANCE).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Mapping, Sequence

from rag_core.finetune.data import TrainingQuery


@dataclass(frozen=True)
class NegativeGroup:
    query: str
    positive: str
    negatives: tuple[str, ...]


def pick_negatives(query: TrainingQuery, count: int, rng: random.Random, skip: int = 0) -> list[str]:
    """Up to `count` chunk ids from the query's candidates after the first `skip`, positives left out,
    drawn at random and kept in their first-stage order."""
    positives = set(query.positives)
    pool = [chunk_id for chunk_id in query.candidates[skip:] if chunk_id not in positives]
    chosen = set(rng.sample(pool, min(count, len(pool))))
    return [chunk_id for chunk_id in pool if chunk_id in chosen]


def groups(queries: Sequence[TrainingQuery], passages: Mapping[str, str], count: int, seed: int = 0,
           skip: int = 0) -> list[NegativeGroup]:
    """One group per (query, positive): the query text, the positive's text and `count` negatives'
    texts (each positive of a query gets its own draw; random passages top up missing hard ones)."""
    rng = random.Random(seed)
    everything = sorted(passages)
    found = []
    for query in queries:
        for positive in query.positives:
            negatives = pick_negatives(query, count, rng, skip)
            if len(negatives) < count:
                taken = {*negatives, *query.positives}
                pool = [chunk_id for chunk_id in everything if chunk_id not in taken]
                negatives += rng.sample(pool, min(count - len(negatives), len(pool)))
            found.append(NegativeGroup(query.text, passages[positive], tuple(passages[n] for n in negatives)))
    return found
