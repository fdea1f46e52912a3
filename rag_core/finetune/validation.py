"""Validation during training: nDCG@10 of the held-out queries' first-stage candidates as the model
being trained orders them, the number early stopping and the learning curve follow.

A cross-encoder scores each (query, candidate) pair; an embedder ranks the candidates by the cosine of
its query and passage vectors (each distinct passage embedded once per validation). Candidates are the
first stage's top ``depth`` (``rag_core.finetune.data``); a relevant chunk the first stage missed stays
missed, as in ``eval``, so the figure is what re-ranking (or a new embedding) can reach from there.
nDCG is ``rag_core.evaluate.metrics.query_metric``'s, the evaluator's own.

The evaluators are sentence-transformers evaluators (``BaseEvaluator``), so the trainer calls them
every ``eval_steps`` and keeps the best checkpoint by ``validation_ndcg@10``; each call is appended
to ``curve`` as ``CurvePoint(step, epoch, ndcg@10)``.
Left out: other metrics (MRR, recall) as the early-stopping criterion.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
from sentence_transformers.base.evaluation.evaluator import BaseEvaluator

from rag_core.evaluate.metrics import query_metric
from rag_core.finetune.data import TrainingQuery

METRIC = "ndcg@10"
NAME = "validation"
BEST_METRIC = f"eval_{NAME}_{METRIC}"  # the trainer's name for it (metric_for_best_model)


@dataclass(frozen=True)
class CurvePoint:
    step: int
    epoch: float
    ndcg_at_10: float


class _RankingValidation(BaseEvaluator):
    def __init__(self, queries: Sequence[TrainingQuery], passages: Mapping[str, str], depth: int = 20,
                 batch_size: int = 32) -> None:
        super().__init__()
        self.queries = [query for query in queries if query.candidates]
        self.passages = passages
        self.depth = depth
        self.batch_size = batch_size
        self.primary_metric = METRIC
        self.curve: list[CurvePoint] = []

    def scores(self, model: Any) -> list[np.ndarray]:
        """One score per candidate (top `depth`) of each query, higher = more relevant."""
        raise NotImplementedError

    def ndcg(self, model: Any) -> float:
        values = []
        for query, scores in zip(self.queries, self.scores(model)):
            candidates = query.candidates[: self.depth]
            order = sorted(range(len(candidates)), key=lambda i: (-scores[i], i))
            ranking = [candidates[i] for i in order] + list(query.candidates[self.depth:])
            values.append(query_metric(METRIC, ranking, set(query.positives)))
        return float(np.mean(values)) if values else 0.0

    def __call__(self, model: Any, output_path: str | None = None, epoch: float = -1, steps: int = -1) -> dict[str, float]:
        value = self.ndcg(model)
        self.curve.append(CurvePoint(max(steps, 0), max(float(epoch), 0.0), value))
        return self.prefix_name_to_metrics({METRIC: value}, NAME)


class RerankValidation(_RankingValidation):
    """A cross-encoder's nDCG@10 over the validation queries' candidates."""

    def scores(self, model: Any) -> list[np.ndarray]:
        pairs = [(query.text, self.passages[chunk_id]) for query in self.queries for chunk_id in query.candidates[: self.depth]]
        flat = np.asarray(model.predict(pairs, batch_size=self.batch_size, show_progress_bar=False), dtype=float)
        found, start = [], 0
        for query in self.queries:
            count = len(query.candidates[: self.depth])
            found.append(flat[start : start + count])
            start += count
        return found


class EmbedValidation(_RankingValidation):
    """An embedder's nDCG@10 over the validation queries' candidates, ranked by cosine."""

    def scores(self, model: Any) -> list[np.ndarray]:
        chunk_ids = list(dict.fromkeys(c for query in self.queries for c in query.candidates[: self.depth]))
        vectors = model.encode_document([self.passages[c] for c in chunk_ids], batch_size=self.batch_size,
                                        normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
        row = {chunk_id: position for position, chunk_id in enumerate(chunk_ids)}
        queries = model.encode_query([query.text for query in self.queries], batch_size=self.batch_size,
                                     normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
        return [vectors[[row[c] for c in query.candidates[: self.depth]]] @ vector
                for query, vector in zip(self.queries, queries)]
