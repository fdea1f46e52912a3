"""Cross-encoder re-ranking (the ``cross_encoder`` re-ranker): score (query, passage) pairs with a
sentence-transformers ``CrossEncoder``, on the ``rerank_backend`` runtime.

Scores are raw logits (no sigmoid), cached on disk per (model, query, passage text), because a
MiniLM cross-encoder scores only a few dozen pairs per second on a small CPU. The cache keeps what
each score cost the model, and ``RerankScores.model_seconds`` reports that cost whether the scores
were computed now or read back, so re-ranking latency does not depend on what an earlier run happened
to cache. The pipeline re-scores the top ``rerank_depth`` fused candidates. Reference: Nogueira & Cho,
"Passage Re-ranking with BERT" (2019).

A model that cannot be loaded is not replaced: ``unavailable()`` gives the reason, and the pipeline
then runs without re-ranking (``rag_core.retrieve.models`` explains the only stand-in, asked for by name).
Left out: listwise re-rankers and LLM re-ranking.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from rag_core.retrieve import bf16
from rag_core.retrieve.cache import ScoreCache, text_sha1
from rag_core.retrieve.models import LoadedModel, ModelLoadError, load_cross_encoder
from rag_core.retrieve.rerank import RERANK_BACKENDS
from rag_core.retrieve.rerank.base import BaseReranker, RerankScores

if TYPE_CHECKING:
    from rag_core.components.config_fields import ConfigFields


_UNAVAILABLE: dict[str, ModelLoadError] = {}  # model name -> why it cannot be loaded, in this process


class CrossEncoderReranker(BaseReranker):
    """The ``cross_encoder`` re-ranker: a sentence-transformers ``CrossEncoder`` on the ``rerank_backend``
    runtime; its scores are logits, and ``min_rerank_score`` (its setting) is its no-answer threshold."""

    def __init__(self, model_name: str, cache: ScoreCache | None = None, batch_size: int = 16,
                 backend: str = "torch", export_dir: Path | None = None):
        self.model_name = model_name
        self.cache = cache
        self.batch_size = batch_size
        self.backend = backend
        self.export_dir = export_dir  # where ONNX exports are cached (the store's onnx/ folder)
        self._loaded: LoadedModel | None = None
        self._scorer: Any = None

    @classmethod
    def from_config(cls, config: ConfigFields, cache: ScoreCache | None, store_dir: Path) -> "CrossEncoderReranker":
        return cls(config.rerank_model, cache, backend=config.rerank_backend, export_dir=Path(store_dir) / "onnx")

    @classmethod
    def score_threshold(cls, config: ConfigFields) -> float | None:
        return config.min_rerank_score

    def describe(self) -> str:
        return f"cross-encoder {self.model_name!r}"

    @property
    def loaded(self) -> LoadedModel:
        if self._loaded is None:
            self._loaded = load_cross_encoder(self.model_name)
        return self._loaded

    def unavailable(self) -> ModelLoadError | None:
        """None when the model loads; else the error saying why it cannot (remembered per process,
        so that a missing model is not looked for again at every query)."""
        if self.model_name not in _UNAVAILABLE:
            try:
                self.loaded
            except ModelLoadError as exc:
                _UNAVAILABLE[self.model_name] = exc
                return exc
        return _UNAVAILABLE.get(self.model_name)

    @property
    def name_used(self) -> str:
        return self.loaded.used

    @property
    def _cache_name(self) -> str:
        """The score cache's model key: each backend's scores are its own (a ``bf16`` backend that
        refused bf16 scores in fp32, under torch's key)."""
        backend = "torch" if self.backend == "bf16" and not self.scorer.active else self.backend
        return self.name_used if backend == "torch" else f"{self.name_used} [{backend}]"

    @property
    def scorer(self) -> Any:
        """The configured backend's scorer, opened at first use."""
        if self._scorer is None:
            backend = RERANK_BACKENDS.get(self.backend)
            self._scorer = backend.load()(self.model_name, self.export_dir, **backend.options)
        return self._scorer

    def _predict(self, pairs: list[tuple[str, str]]) -> Any:
        return self.scorer.predict(pairs, batch_size=self.batch_size)

    def score(self, query: str, texts: Sequence[str]) -> RerankScores:
        # text_sha1 -> (score, model seconds)
        cached = self.cache.get_scores(self._cache_name, query, texts) if self.cache else {}
        missing = list(dict.fromkeys(text for text in texts if text_sha1(text) not in cached))
        computed_seconds = 0.0
        if missing:
            started = time.perf_counter()
            scores = self._predict([(query, text) for text in missing])
            computed_seconds = time.perf_counter() - started
            seconds_each = computed_seconds / len(missing)
            scores = [float(score) for score in scores]
            if self.cache:
                self.cache.put_scores(self._cache_name, query, missing, scores, seconds_each)
            cached.update((text_sha1(text), (score, seconds_each)) for text, score in zip(missing, scores))
        unique = {text_sha1(text) for text in texts}
        return RerankScores(
            scores=[cached[text_sha1(text)][0] for text in texts],
            model_seconds=sum(cached[key][1] for key in unique),
            computed_seconds=computed_seconds,
            pairs_scored=len(missing),
            cache_hits=len(texts) - len(missing),
        )


Reranker = CrossEncoderReranker  # its name before the re-ranker contract (rag_core.retrieve.rerank.base)


class TorchScorer:
    """The ``torch`` backend: the loaded ``CrossEncoder``'s own ``predict``."""

    def __init__(self, model_name: str, export_dir: Path | None = None) -> None:
        self.model = load_cross_encoder(model_name).model

    def predict(self, pairs: Sequence[tuple[str, str]], batch_size: int = 16) -> Any:
        return self.model.predict(list(pairs), batch_size=batch_size, show_progress_bar=False)


class Bf16Scorer(TorchScorer):
    """The ``bf16`` backend: ``TorchScorer`` under bf16 autocast, used only where the device has bf16
    and, on the fixed sample of ``rag_core.retrieve.bf16``, every query ranks its top passages as fp32
    does; else fp32, announced on stderr (``active`` False)."""

    def __init__(self, model_name: str, export_dir: Path | None = None) -> None:
        super().__init__(model_name, export_dir)
        self.device = bf16.model_device(self.model.model)
        self.agreement = bf16.first_use(f"re-rank backend bf16 ({model_name})", self.device, self.check, self.model)
        self.active = self.agreement is not None

    def check(self) -> bf16.Agreement:
        pairs = [(query, passage) for query in bf16.SAMPLE_QUERIES for passage in bf16.SAMPLE_PASSAGES]
        shape = (len(bf16.SAMPLE_QUERIES), len(bf16.SAMPLE_PASSAGES))
        reference = np.asarray(super().predict(pairs), dtype=np.float32).reshape(shape)
        fast = np.asarray(self._predict_bf16(pairs), dtype=np.float32).reshape(shape)
        return bf16.agreement(reference, fast, shape[0], vectors=False)

    def predict(self, pairs: Sequence[tuple[str, str]], batch_size: int = 16) -> Any:
        return self._predict_bf16(pairs, batch_size) if self.active else super().predict(pairs, batch_size)

    def _predict_bf16(self, pairs: Sequence[tuple[str, str]], batch_size: int = 16) -> Any:
        with bf16.autocast(self.device):
            return np.asarray(super().predict(pairs, batch_size), dtype=np.float32)
