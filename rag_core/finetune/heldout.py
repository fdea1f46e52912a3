"""Held-out figures of a fine-tuned model: the same test queries scored without and with it.

- Re-ranker: the configured first stage (``rerank_depth`` 0) against its top ``rerank_depth`` re-ranked
  by the model, and that re-ranked order fused with the first stage's (``rerank_fusion: rrf``,
  ``rag_core.retrieve.rerank.fusion``).
- Embedder: exact dense search (cosine over every searched chunk) with the base model against the same
  search with the fine-tuned one.

The model is the one in memory, scored directly rather than through the store's caches (which key a
model by its name: a model trained again into the same folder must not be scored from its
predecessor's cache). Relevance and metrics are the evaluator's (``build_qrels``,
``evaluate_rankings``); each gain over the baseline comes with its paired significance
(``rag_core.finetune.significance``) on ``metric`` (``page/ndcg@10``; for BEIR pages are documents).
Left out: latency (``eval`` measures it), the LLM judge.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from rag_core.config import RagConfig
from rag_core.evaluate.golden import GoldenQuery
from rag_core.evaluate.metrics import evaluate_rankings
from rag_core.evaluate.relevance import build_qrels
from rag_core.retrieve.rerank.fusion import fuse_reranked
from rag_core.finetune.significance import PairedComparison, paired_comparison
from rag_core.ingest.corpus import Corpus
from rag_core.progress import progress
from rag_core.records import Chunk
from rag_core.retrieve.embedding.embedder import Embedder
from rag_core.retrieve.pipeline import Pipeline

METRIC = "page/ndcg@10"


@dataclass(frozen=True)
class HeldOutReport:
    queries: int
    metric: str
    baseline: str  # the system the others are compared with
    systems: dict[str, dict[str, float]]  # system -> metric -> mean over the queries
    per_query: dict[str, dict[str, dict[str, float]]] = field(repr=False)  # system -> query id -> metric -> value
    comparisons: dict[str, PairedComparison] = field(default_factory=dict)  # system -> against the baseline

    def as_dict(self) -> dict[str, Any]:
        return {"queries": self.queries, "metric": self.metric, "baseline": self.baseline, "systems": self.systems,
                "comparisons": {name: value.as_dict() for name, value in self.comparisons.items()}}

    def metrics(self) -> dict[str, float]:
        """Flat names for MLflow: ``test/<system>/<metric>`` and ``test/<system>/gain``."""
        flat = {f"test/{_slug(system)}/{name}": value for system, values in self.systems.items()
                for name, value in values.items() if name.endswith(("ndcg@10", "recall@10", "mrr"))}
        flat.update({f"test/{_slug(system)}/gain": value.difference for system, value in self.comparisons.items()})
        flat.update({f"test/{_slug(system)}/p_ttest": value.p_ttest for system, value in self.comparisons.items()})
        return flat


def rerank_heldout(model: Any, queries: Sequence[GoldenQuery], corpus: Corpus, store_dir: str | Path,
                   config: RagConfig, *, show_progress: bool = False, metric: str = METRIC) -> HeldOutReport:
    """The first stage of `config` alone, re-ranked by `model` (a ``CrossEncoder``) to ``rerank_depth``,
    and re-ranked then fused with the first stage by RRF (``rrf_k``)."""
    depth = config.rerank_depth or 20
    pipeline = Pipeline(config.replace(rerank_depth=0), corpus, Path(store_dir), progress=show_progress)
    first, reranked, fused = {}, {}, {}
    for query in progress(list(queries), show_progress, "Re-ranking held-out queries", unit="query"):
        ranking = [hit.chunk for hit in pipeline.retrieve(query.query, where=dict(query.filter) or None).ranking]
        head = ranking[:depth]
        scores = model.predict([(query.query, chunk.text) for chunk in head], show_progress_bar=False) if head else []
        order = [head[i] for i in sorted(range(len(head)), key=lambda i: (-float(scores[i]), i))]
        first[query.id] = ranking
        reranked[query.id] = order + ranking[depth:]
        by_id = {chunk.id: chunk for chunk in ranking}
        fused[query.id] = [by_id[item] for item in fuse_reranked([c.id for c in order], [c.id for c in ranking],
                                                                 "rrf", config.rrf_k)]
    runs = {"first stage": first, "re-ranked": reranked, "re-ranked + rrf": fused}
    return _report(runs, "first stage", queries, pipeline, config, metric)


def embed_heldout(base_model: Any, model: Any, queries: Sequence[GoldenQuery], corpus: Corpus, store_dir: str | Path,
                  config: RagConfig, *, show_progress: bool = False, metric: str = METRIC,
                  base_embedder: Embedder | None = None, model_embedder: Embedder | None = None) -> HeldOutReport:
    """Exact dense search with `base_model` and with `model` (``SentenceTransformer``s). `base_embedder`
    and `model_embedder` (``Embedder``s of those models with a cache; a cache keys a model by its name, so
    give a folder trained again a cache of its own) spare embedding the corpus again."""
    pipeline = Pipeline(config.replace(mode="dense", rerank_depth=0), corpus, Path(store_dir), progress=show_progress)
    chunks = pipeline.index.search_chunks
    texts = pipeline.index.indexed_texts()
    depth = max(config.metrics_k)
    runs = {}
    for name, encoder, cached in (("base embedder", base_model, base_embedder),
                                  ("fine-tuned embedder", model, model_embedder)):
        if cached is not None:
            matrix = cached.embed_documents(texts)[0]
        else:
            matrix = _encode(encoder, texts, "document", show_progress, f"Embedding with the {name}")
        vectors = _encode(encoder, [query.query for query in queries], "query", False, "")
        scores = vectors @ matrix.T  # query x chunk cosine (unit vectors)
        runs[name] = {query.id: [chunks[i] for i in np.argsort(-scores[row], kind="stable")[:depth]]
                      for row, query in enumerate(queries)}
    return _report(runs, "base embedder", queries, pipeline, config, metric)


def _encode(model: Any, texts: list[str], kind: str, show_progress: bool, label: str) -> np.ndarray:
    encode: Callable = model.encode_query if kind == "query" else model.encode_document
    batches = [texts[start:start + 256] for start in range(0, len(texts), 256)]
    parts = [encode(batch, batch_size=32, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
             for batch in progress(batches, show_progress and len(batches) > 1, label, unit="batch")]
    return np.concatenate(parts).astype(np.float32) if parts else np.zeros((0, 0), np.float32)


def _report(runs: dict[str, dict[str, list[Chunk]]], baseline: str, queries: Sequence[GoldenQuery],
            pipeline: Pipeline, config: RagConfig, metric: str) -> HeldOutReport:
    qrels = build_qrels(queries, pipeline.corpus.by_id, pipeline.index.chunks)
    depth = max(config.metrics_k)
    results = {name: evaluate_rankings(qrels, {qid: ranking[:depth] for qid, ranking in run.items()}, config.metrics_k)
               for name, run in runs.items()}
    base = {qid: values[metric] for qid, values in results[baseline].per_query.items()}
    comparisons = {name: paired_comparison(base, {qid: values[metric] for qid, values in result.per_query.items()})
                   for name, result in results.items() if name != baseline}
    return HeldOutReport(len(queries), metric, baseline, {name: result.averages for name, result in results.items()},
                         {name: result.per_query for name, result in results.items()}, comparisons)


def _slug(name: str) -> str:
    return name.replace(" + ", "_").replace(" ", "_").replace("-", "_")
