"""A re-ranker that is not built in: BM25 over the candidate passages, as a plugin (no model, pure Python).

Nothing in rag_core names this file. It registers itself when imported, which happens when a config
or sweep file lists it (``plugins: [passage_bm25.py]``, relative to that file), or with
``rag-pipeline ... --plugins examples/plugins/passage_bm25.py``. Then ``reranker: passage_bm25`` with
``rerank_depth`` > 0 re-scores the top fused candidates in ``query``, ``eval``, sweeps and notebooks,
and its two settings are flags (``--passage-bm25-k1 0.9``), sweep axes and MLflow params like any
built-in setting. ``examples/plugins/rerank-sweep.yaml`` compares it with no re-ranking.

The re-ranker follows the contract of ``rag_core.retrieve.rerank.base``: ``score(query, texts)``
gives one score per passage. Each passage is scored with Okapi BM25 against the query, with the
collection statistics (document frequencies, mean length) of the passages given, so a term that
occurs in every candidate weighs little:

    idf(t)      = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))
    score(q, d) = sum over the query's terms t (repeats count) of
                  idf(t) * tf(t, d) * (k1 + 1) / (tf(t, d) + k1 * (1 - b + b * len(d) / avg_len))

Terms are lower-cased runs of letters and digits. It loads no model, so it is always available and
runs offline. Its scores have no calibrated scale (they grow with the query's length), so it keeps
the contract's default ``score_threshold`` (None): the no-answer rule counts the retrievers' agreement.
Left out: stemming and stop words (the built-in BM25 retriever has them, ``tokenizer``), caching (a few
dozen passages score in well under a millisecond).
"""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from typing import Sequence

from rag_core.components import Setting
from rag_core.retrieve.rerank import RERANKERS
from rag_core.retrieve.rerank.base import BaseReranker, RerankScores

TERM = re.compile(r"[^\W_]+")


def terms(text: str) -> list[str]:
    return TERM.findall(text.lower())


def bm25_scores(query: str, texts: Sequence[str], k1: float = 1.2, b: float = 0.75) -> list[float]:
    """Okapi BM25 of each text of `texts` for `query`, with `texts` as the collection (module docstring)."""
    documents = [Counter(terms(text)) for text in texts]
    lengths = [sum(counts.values()) for counts in documents]
    average = sum(lengths) / len(lengths) if lengths else 0.0
    frequency = Counter(term for counts in documents for term in counts)
    idf = {term: math.log(1 + (len(documents) - df + 0.5) / (df + 0.5)) for term, df in frequency.items()}
    scores = []
    for counts, length in zip(documents, lengths):
        norm = k1 * (1 - b + b * length / average) if average else k1
        scores.append(sum(idf[term] * counts[term] * (k1 + 1) / (counts[term] + norm)
                          for term in terms(query) if counts[term]))
    return scores


@RERANKERS.register(
    "passage_bm25",
    help="BM25 of each candidate passage, with the candidates as the collection (no model), an example plugin",
    settings=[
        Setting("passage_bm25_k1", float, 1.2, "passage BM25 re-ranker: term-frequency saturation k1", minimum=0.0,
                stage="rerank"),
        Setting("passage_bm25_b", float, 0.75, "passage BM25 re-ranker: length normalisation b", minimum=0.0,
                maximum=1.0, stage="rerank"),
    ],
)
class PassageBM25Reranker(BaseReranker):
    model_name = "passage_bm25"  # no model: what runs record as rerank_model_used

    def score(self, query: str, texts: Sequence[str]) -> RerankScores:
        started = time.perf_counter()
        scores = bm25_scores(query, texts, self.config.passage_bm25_k1, self.config.passage_bm25_b)
        return RerankScores.computed(scores, time.perf_counter() - started)
