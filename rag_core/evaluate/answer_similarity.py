"""Semantic answer similarity: how close an answer is to the golden answer under a model, without an LLM.

- ``answer/similarity``: the cosine of the answer's and the golden answer's embeddings under the embedding
  model the run already loaded (Haystack's semantic answer similarity, SAS: Risch et al., "Semantic Answer
  Similarity for Evaluating Question Answering Models", 2021, bi-encoder form). The model is a param of the
  run (``answer_similarity_model``): values under different models do not compare. A run that loads no
  embedding model (BM25 alone) has no value: loading one only to score would cost more than the rest.
- ``answer/similarity_cross_encoder``: when the run loaded a cross-encoder re-ranker, the logistic of its
  score of the pair (golden answer, answer) (SAS's cross-encoder form; a re-ranker trained for relevance, not
  for similarity, so a weaker proxy still).

Both score what an answer says (``rag_core.generate.answer.answer_body``). They are proxies of closeness,
never of correctness: a fluent wrong number is close to the right one. A query without a golden answer,
or with an empty answer, has no value.
Left out: BERTScore (token alignment: another model and 10x the time), a similarity model of its own.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

from rag_core.evaluate.metric_registry import METRICS

METRICS.declare("similarity", ("answer",), "cosine of the answer and the golden answer under the run's embedding model "
                "(a proxy of closeness, not correctness; param answer_similarity_model)", best=1.0)
METRICS.declare("similarity_cross_encoder", ("answer",), "logistic of the loaded cross-encoder's score of "
                "(golden answer, answer) (a proxy)", best=1.0)

Encode = Callable[[list[str]], np.ndarray]  # texts -> one embedding per row
PairScore = Callable[[str, list[str]], list[float]]  # (query, texts) -> one score per text


def _scored(answers: Sequence[str], golds: Sequence[str | None]) -> list[int]:
    return [i for i, (answer, gold) in enumerate(zip(answers, golds)) if gold and gold.strip() and answer.strip()]


def cosine_similarities(encode: Encode, answers: Sequence[str], golds: Sequence[str | None]) -> list[float | None]:
    """One cosine per answer (None without a golden answer or an answer), from one call of `encode` (each
    distinct text once, shortest first: batches of like lengths are padded less)."""
    positions = _scored(answers, golds)
    values: list[float | None] = [None] * len(answers)
    if not positions:
        return values
    texts = list(dict.fromkeys([answers[i] for i in positions] + [str(golds[i]) for i in positions]))
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # batches of like lengths: less padding
    encoded = np.asarray(encode([texts[i] for i in order]), dtype=float)
    encoded /= np.maximum(np.linalg.norm(encoded, axis=1, keepdims=True), 1e-12)
    vector = {texts[i]: encoded[row] for row, i in enumerate(order)}  # each distinct text encoded once
    for i in positions:
        values[i] = float(vector[answers[i]] @ vector[str(golds[i])])
    return values


def cross_encoder_similarities(score: PairScore, answers: Sequence[str], golds: Sequence[str | None]) -> list[float | None]:
    """One ``1 / (1 + exp(-s))`` per answer, with ``s`` the cross-encoder's score of (golden answer, answer)."""
    values: list[float | None] = [None] * len(answers)
    for i in _scored(answers, golds):
        logit = float(score(str(golds[i]), [answers[i]])[0])
        values[i] = 1 / (1 + math.exp(-logit)) if logit > -700 else 0.0
    return values


__all__ = ["Encode", "PairScore", "cosine_similarities", "cross_encoder_similarities"]
