"""Learning the fusion of the dense and BM25 lists on one golden set and checking it on another
(``rag-pipeline tune-fusion``).

1. Hybrid candidates (dense and BM25 lists, ``retrieve_depth`` each) for every training query.
2. ``ranx.optimize_fusion`` (through ``rag_core.retrieve.fusion.ranx.learn_weights``) searches the
   weights of a weighted method (``wsum``, ``wmnz``, ``mixed``, ``w_bordafuse``, ``w_condorcet``; grid
   step ``step``) or RRF's ``k`` (``rrf``), maximising a ranx metric (default ``ndcg@10``) against the
   chunk-level relevance of the training set.
3. The configuration with those settings and the starting configuration are evaluated on the test
   set (and on the training set, for reference) with the usual metrics at every level.

Left out: tuning re-ranking or expansion together with fusion; cross-validation (give the split).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from rag_core.config import RagConfig
from rag_core.evaluate.evaluator import evaluate_config
from rag_core.evaluate.golden import GoldenQuery
from rag_core.evaluate.relevance import build_qrels
from rag_core.ingest.corpus import Corpus
from rag_core.progress import progress as progress_bar
from rag_core.records import Run
from rag_core.retrieve.fusion.ranx import WEIGHTED_METHODS
from rag_core.retrieve.pipeline import Pipeline

TUNE_METHODS = (*WEIGHTED_METHODS, "rrf")
REPORTED = ("page/recall@5", "page/ndcg@10", "doc/recall@5", "doc/ndcg@10", "chunk/ndcg@10")


@dataclass(frozen=True)
class FusionTuning:
    method: str
    norm: str
    metric: str
    learned: dict[str, Any]  # ranx's answer: {"weights": [...]} or {"k": ...}
    tuned: RagConfig  # the starting configuration with the learned fusion
    rows: list[dict[str, Any]]  # {"golden": "train" | "test", "fusion": description, metric: value, ...}

    def yaml_lines(self) -> list[str]:
        cfg = self.tuned
        lines = ["mode: hybrid", f"fusion: {cfg.fusion}"]
        if cfg.fusion == "rrf":
            lines.append(f"rrf_k: {cfg.rrf_k}")
        else:
            lines.append(f"fusion_norm: {cfg.fusion_norm}")
        if cfg.fusion_weights:
            lines.append(f"fusion_weights: [{', '.join(f'{w:g}' for w in cfg.fusion_weights)}]")
        return lines


def tune_fusion(config: RagConfig, corpus: Corpus, train: Sequence[GoldenQuery], test: Sequence[GoldenQuery],
                store_dir: str | Path, *, method: str = "wsum", metric: str = "ndcg@10", step: float = 0.1,
                progress: bool = False) -> FusionTuning:
    if method not in TUNE_METHODS:
        raise ValueError(f"tune-fusion method must be one of {', '.join(TUNE_METHODS)}, got {method!r}")
    from rag_core.retrieve.fusion.ranx import learn_weights

    start = config.replace(mode="hybrid")
    pipeline = Pipeline(start, corpus, Path(store_dir), progress=progress)
    pipeline.build()
    qrels = build_qrels(train, corpus.by_id, pipeline.index.chunks)["chunk"]
    runs: list[Run] = [{}, {}]  # dense, bm25: query_id -> chunk id -> score
    for query in progress_bar(list(train), progress, "Retrieving (training set)", unit="query"):
        candidates, _ = pipeline.candidates(query.query)
        for run, stage in zip(runs, ("dense", "bm25")):
            run[query.id] = {hit.id: hit.score for hit in candidates.ranked[stage]}
    norm = "none" if method == "rrf" else start.fusion_norm
    learned = dict(learn_weights(qrels, runs, method, norm, metric, step))
    if method == "rrf":
        tuned = start.replace(fusion="rrf", rrf_k=int(learned["k"]), fusion_weights=())
    else:
        tuned = start.replace(fusion=method, fusion_weights=tuple(round(float(w), 6) for w in learned["weights"]))
    rows = []
    for name, queries in (("train", train), ("test", test)):
        for label, cfg in (("start", start), ("tuned", tuned)):
            report = evaluate_config(cfg, corpus, queries, store_dir)
            rows.append({"golden": name, "config": label, "fusion": describe_fusion(cfg),
                         **{key: report.metrics[key] for key in REPORTED}})
    return FusionTuning(method, norm, metric, {key: _plain(value) for key, value in learned.items()}, tuned, rows)


def describe_fusion(config: RagConfig) -> str:
    weights = ",".join(f"{w:g}" for w in config.fusion_weights) or "equal"
    if config.fusion == "rrf":
        return f"rrf k={config.rrf_k} weights={weights}"
    return f"{config.fusion} {config.fusion_norm} weights={weights}"


def _plain(value: Any) -> Any:
    """numpy numbers and tuples -> JSON-ready Python values."""
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value.item() if hasattr(value, "item") else value
