"""Cross-encoder re-ranking: score (query, passage) pairs with a sentence-transformers ``CrossEncoder``.

Scores are raw logits (no sigmoid), cached on disk per (model, query, passage text), because a
MiniLM cross-encoder scores only a few pairs per second on a small CPU. The pipeline re-scores the
top ``rerank_depth`` fused candidates and keeps the best ``k``. Reference: Nogueira & Cho,
"Passage Re-ranking with BERT" (2019).
"""

from __future__ import annotations

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
        cached = self.cache.get_scores(self.name_used, query, texts) if self.cache else {}
        missing = list(dict.fromkeys(text for text in texts if text_sha1(text) not in cached))
        if missing:
            scores = self.loaded.model.predict(
                [(query, text) for text in missing], batch_size=self.batch_size, show_progress_bar=False
            )
            scores = [float(score) for score in scores]
            if self.cache:
                self.cache.put_scores(self.name_used, query, missing, scores)
            cached.update((text_sha1(text), score) for text, score in zip(missing, scores))
        self.pairs_scored += len(missing)
        self.cache_hits += len(texts) - len(missing)
        return [cached[text_sha1(text)] for text in texts]
