"""Learning the fusion of the retrievers' lists on one golden set and checking it on another
(``rag-pipeline tune-fusion``).

1. Each retriever's list (``retrieve_depth``) for every training query: the retrievers of ``mode``
   when it names several (``dense,bm25,mine``), else dense and BM25 (hybrid).
2. ``ranx.optimize_fusion`` (through ``rag_core.retrieve.fusion.ranx.learn_weights``) searches one
   weight per retriever for a weighted method (``wsum``, ``wmnz``, ``mixed``, ``w_bordafuse``,
   ``w_condorcet``; grid step ``step``) or RRF's ``k`` (``rrf``), maximising a ranx metric (default
   ``ndcg@10``) against the chunk-level relevance of the training set. Weighted methods learn their
   weights after each score normalisation of ``norms`` (default: the ``fusion_norm`` setting alone) and
   keep the normalisation that scores best there (a tie keeps the earlier one): which scale makes two
   retrievers' scores comparable differs between collections (min-max, z-score, ...).
3. The learned fusion competes with each retriever alone on the same training metric: the best of
   them is the tuned configuration (a tie goes to the fusion). So the choice cannot fall below its best
   single input on the set it was tuned on; when one input only drags, the answer is to drop it.
4. The starting configuration, the tuned one and the other candidates are evaluated on the test set
   (and on the training set, for reference) with the usual metrics at every level.

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
from rag_core.retrieve.fusion import FUSION_NORMS, make_fusion
from rag_core.retrieve.fusion.ranx import WEIGHTED_METHODS
from rag_core.retrieve.pipeline import Pipeline
from rag_core.retrieve.retrievers import BUILT_IN_MODES, parse_mode, retriever_choices

TUNE_METHODS = (*WEIGHTED_METHODS, "rrf")
TUNE_NORMS = tuple(norm for norm in FUSION_NORMS if norm != "none")  # ``--norm all``
REPORTED = ("page/recall@5", "page/ndcg@10", "doc/recall@5", "doc/ndcg@10", "chunk/ndcg@10")


@dataclass(frozen=True)
class FusionTuning:
    method: str
    norm: str  # of the learned fusion: the best of the normalisations tried
    metric: str
    learned: dict[str, Any]  # ranx's answer: {"weights": [...]} or {"k": ...}
    tuned: RagConfig  # the best on the training set: the learned fusion, or one retriever alone
    rows: list[dict[str, Any]]  # {"golden": "train" | "test", "config": label, "fusion": description, metric: value}
    candidates: dict[str, float]  # label -> the optimised metric on the training set ("learned fusion", "dense alone")
    chosen: str  # the label of the tuned configuration
    norm_scores: dict[str, float]  # normalisation -> the learned fusion's optimised metric on the training set

    def yaml_lines(self) -> list[str]:
        cfg = self.tuned
        if len(parse_mode(cfg.mode)) == 1:
            return [f"mode: {cfg.mode}"]
        lines = [f"mode: {cfg.mode}", f"fusion: {cfg.fusion}"]
        if cfg.fusion == "rrf":
            lines.append(f"rrf_k: {cfg.rrf_k}")
        else:
            lines.append(f"fusion_norm: {cfg.fusion_norm}")
        if cfg.fusion_weights:
            lines.append(f"fusion_weights: [{', '.join(f'{w:g}' for w in cfg.fusion_weights)}]")
        return lines


def tune_fusion(config: RagConfig, corpus: Corpus, train: Sequence[GoldenQuery], test: Sequence[GoldenQuery],
                store_dir: str | Path, *, method: str = "wsum", metric: str = "ndcg@10", step: float = 0.1,
                norms: Sequence[str] = (), progress: bool = False) -> FusionTuning:
    if method not in TUNE_METHODS:
        raise ValueError(f"tune-fusion method must be one of {', '.join(TUNE_METHODS)}, got {method!r}")
    unknown = [norm for norm in norms if norm not in FUSION_NORMS]
    if unknown:
        raise ValueError(f"tune-fusion normalisations must be among {', '.join(FUSION_NORMS)}, got {unknown[0]!r}")
    from rag_core.retrieve.fusion.ranx import learn_weights, score_run

    names = tuple(choice.name for choice in retriever_choices(config))
    if len(names) < 2:
        names = ("dense", "bm25")
    start = _fused_start(config, names)
    pipeline = Pipeline(start, corpus, Path(store_dir), progress=progress)
    pipeline.build()
    qrels = build_qrels(train, corpus.by_id, pipeline.index.chunks)["chunk"]
    ranked: dict[str, dict[str, list]] = {name: {} for name in names}  # retriever -> query id -> its list
    for query in progress_bar(list(train), progress, "Retrieving (training set)", unit="query"):
        candidates, _ = pipeline.candidates(query.query)
        for name in names:
            ranked[name][query.id] = list(candidates.ranked[name])
    runs: list[Run] = [{qid: {hit.id: hit.score for hit in hits} for qid, hits in ranked[name].items()} for name in names]
    tried = ("none",) if method == "rrf" else tuple(dict.fromkeys(norms or (start.fusion_norm,)))
    learned_by_norm = {norm: _learn(start, method, norm, learn_weights(qrels, runs, method, norm, metric, step))
                       for norm in tried}
    norm_scores = {norm: score_run(qrels, _fuse(fused, ranked, names), metric)
                   for norm, (_, fused) in learned_by_norm.items()}
    norm = max(norm_scores, key=lambda name: norm_scores[name])  # first of equals
    learned, fused = learned_by_norm[norm]
    options = {"learned fusion": fused, **{f"{name} alone": config.replace(mode=name, fusion_weights=()) for name in names}}
    scores = {"learned fusion": norm_scores[norm],
              **{f"{name} alone": score_run(qrels, run, metric) for name, run in zip(names, runs)}}
    chosen = max(scores, key=lambda label: scores[label])  # first of equals: the fusion
    tuned = options[chosen]
    rows = []
    for name, queries in (("train", train), ("test", test)):
        for label, cfg in (("start", start), ("tuned", tuned),
                           *((label, cfg) for label, cfg in options.items() if label != chosen)):
            report = evaluate_config(cfg, corpus, queries, store_dir)
            rows.append({"golden": name, "config": label,
                         "fusion": describe_fusion(cfg), **{key: report.metrics[key] for key in REPORTED}})
    return FusionTuning(method, norm, metric, {key: _plain(value) for key, value in learned.items()}, tuned, rows,
                        scores, chosen, norm_scores)


def parse_norms(text: str, setting: str) -> tuple[str, ...]:
    """``--norm``: ``all`` (every normalisation but ``none``, the `setting` first so that it wins ties) or
    comma-separated names."""
    if text.strip() == "all":
        return tuple(dict.fromkeys((setting, *TUNE_NORMS)))
    norms = tuple(filter(None, map(str.strip, text.split(","))))
    if not norms or any(norm not in FUSION_NORMS for norm in norms):
        raise ValueError(f"--norm must be 'all' or names among {', '.join(FUSION_NORMS)}, got {text!r}")
    return norms


def _learn(start: RagConfig, method: str, norm: str, learned: dict[str, Any]) -> tuple[dict[str, Any], RagConfig]:
    """ranx's answer for one normalisation, and the configuration that fuses that way."""
    learned = dict(learned)
    if method == "rrf":
        return learned, start.replace(fusion="rrf", rrf_k=int(learned["k"]), fusion_weights=())
    weights = tuple(round(float(w), 6) for w in learned["weights"])
    return learned, start.replace(fusion=method, fusion_norm=norm, fusion_weights=weights)


def _fuse(config: RagConfig, ranked: dict[str, dict[str, list]], names: tuple[str, ...]) -> Run:
    """The fused list of every query, as the pipeline fuses it under `config`."""
    fusion, weights = make_fusion(config), (list(config.fusion_weights) or None)
    return {qid: {hit.id: hit.score for hit in fusion.fuse([ranked[name][qid] for name in names], weights)}
            for qid in ranked[names[0]]}


def _fused_start(config: RagConfig, names: tuple[str, ...]) -> RagConfig:
    """`config` fusing `names`, its weights (from ``mode`` or ``fusion_weights``) as ``fusion_weights``."""
    mode = "hybrid" if names == ("dense", "bm25") else ",".join(names)
    choices = retriever_choices(config) if len(parse_mode(config.mode)) > 1 else ()
    weights = tuple(choice.weight for choice in choices) if choices and choices[0].weight is not None else ()
    if mode not in BUILT_IN_MODES and len(weights) != len(names):
        weights = ()
    return config.replace(mode=mode, fusion_weights=weights)


def describe_fusion(config: RagConfig) -> str:
    if len(parse_mode(config.mode)) == 1:
        return f"{config.mode} alone"
    weights = ",".join(f"{w:g}" for w in config.fusion_weights) or "equal"
    if config.fusion == "rrf":
        return f"rrf k={config.rrf_k} weights={weights}"
    return f"{config.fusion} {config.fusion_norm} weights={weights}"


def _plain(value: Any) -> Any:
    """numpy numbers and tuples -> JSON-ready Python values."""
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value.item() if hasattr(value, "item") else value
