"""Cross-encoder re-ranking: score (query, passage) pairs with a sentence-transformers ``CrossEncoder``.

Scores are raw logits (no sigmoid), cached on disk per (model, query, passage text), because a
MiniLM cross-encoder scores only a few dozen pairs per second on a small CPU. The cache keeps what
each score cost the model, and ``model_seconds`` reports that cost whether the scores were computed
now or read back, so re-ranking latency does not depend on what an earlier run happened to cache. The pipeline re-scores the
top ``rerank_depth`` fused candidates and keeps the best ``k``. Reference: Nogueira & Cho,
"Passage Re-ranking with BERT" (2019).
"""

from __future__ import annotations

import time
from typing import Sequence

from rag_core.cache import ScoreCache, text_sha1
from rag_core.models import LoadedModel, load_cross_encoder


class Reranker:
    def __init__(self, model_name: str, cache: ScoreCache | None = None, fallback: bool = True, batch_size: int = 16):
        self.model_name = model_name
        self.cache = cache
        self.fallback = fallback
        self.batch_size = batch_size
        self.pairs_scored = 0  # computed by the model
        self.cache_hits = 0
        self.model_seconds = 0.0  # model time of the last `score` call's pairs, cached ones included
        self.last_compute_seconds = 0.0  # of which computed in that call
        self._loaded: LoadedModel | None = None

    @property
    def loaded(self) -> LoadedModel:
        if self._loaded is None:
            self._loaded = load_cross_encoder(self.model_name, self.fallback)
        return self._loaded

    @property
    def name_used(self) -> str:
        return self.loaded.used

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        """One score per text, in the order given (higher = more relevant)."""
        # text_sha1 -> (score, model seconds)
        cached = self.cache.get_scores(self.name_used, query, texts) if self.cache else {}
        missing = list(dict.fromkeys(text for text in texts if text_sha1(text) not in cached))
        self.last_compute_seconds = 0.0
        if missing:
            started = time.perf_counter()
            scores = self.loaded.model.predict(
                [(query, text) for text in missing], batch_size=self.batch_size, show_progress_bar=False
            )
            self.last_compute_seconds = time.perf_counter() - started
            seconds_each = self.last_compute_seconds / len(missing)
            scores = [float(score) for score in scores]
            if self.cache:
                self.cache.put_scores(self.name_used, query, missing, scores, seconds_each)
            cached.update((text_sha1(text), (score, seconds_each)) for text, score in zip(missing, scores))
        self.pairs_scored += len(missing)
        self.cache_hits += len(texts) - len(missing)
        unique = {text_sha1(text) for text in texts}
        self.model_seconds = sum(cached[key][1] for key in unique)
        return [cached[text_sha1(text)][0] for text in texts]
