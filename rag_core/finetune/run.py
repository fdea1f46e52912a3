"""One fine-tuning, start to finish: what ``rag-pipeline finetune reranker|embedder`` runs.

1. Refuse training queries that the held-out evaluation of the same run reports on (same id or same
   normalised text): ``data.ensure_disjoint``.
2. Choose the base model (``base_models``), mine positives and first-stage candidates and hold out the
   validation queries (``data``), find a checkpoint to resume (``training``).
3. Train (``reranker`` / ``embedder``), save the best model into the output folder with the
   fingerprints of its training and validation queries (``fingerprints``) and ``finetune.json``; a folder of
   someone else's files is refused, or with ``force`` set aside once the model is complete (``output``).
4. Score the test queries, when given, without and with the model (``heldout``), with paired
   significance; log everything to MLflow (``tracking``).

Left out: argument parsing and printing (``rag_core.cli.finetune``).
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Sequence

from rag_core.config import RagConfig
from rag_core.evaluate.golden import GoldenQuery
from rag_core.finetune.base_models import BaseModel, base_embedder, base_reranker
from rag_core.finetune.data import TrainingSet, build_training_set, ensure_disjoint
from rag_core.finetune.fingerprints import write_training_queries
from rag_core.finetune.output import Placed, check_output, staged_output
from rag_core.finetune.heldout import HeldOutReport, embed_heldout, rerank_heldout
from rag_core.finetune.settings import TrainSettings
from rag_core.finetune.tracking import SUMMARY_FILE, log_training
from rag_core.finetune.training import TrainingResult, checkpoint_to_resume
from rag_core.ingest.corpus import Corpus

KINDS = ("reranker", "embedder")


@dataclass(frozen=True)
class FinetuneJob:
    kind: str  # reranker | embedder
    queries: tuple[GoldenQuery, ...]  # training and validation queries
    corpus: Corpus
    source: str  # what the queries are, for the record: "golden.jsonl", "scifact (BEIR) qrels train"
    out_dir: Path
    settings: TrainSettings
    negatives_from: str = "bm25"
    negatives_depth: int = 30
    validation_share: float = 0.15
    base_model: str | None = None  # None: base_models' choice
    test_queries: tuple[GoldenQuery, ...] = ()
    test_name: str = ""  # what the test queries are ("--test-golden test.jsonl")


@dataclass(frozen=True)
class FinetuneOutcome:
    base: BaseModel
    data: TrainingSet
    result: TrainingResult
    heldout: HeldOutReport | None
    run_id: str | None
    tracking_uri: str | None
    experiment: str
    set_aside_to: Path | None = None  # where --force moved the user's earlier folder (None: nothing moved)


def data_fingerprint(data: TrainingSet) -> str:
    """What a checkpoint was trained on (queries, positives, candidates, passages' texts)."""
    digest = hashlib.sha256()
    for part, queries in (("train", data.train), ("validation", data.validation)):
        for query in queries:
            digest.update(json.dumps([part, query.id, query.text, query.positives, query.candidates]).encode())
    for chunk_id in sorted({c for q in data.all_queries() for c in (*q.positives, *q.candidates)}):
        digest.update(data.passages[chunk_id].encode())
    return digest.hexdigest()[:16]


def run_finetune(job: FinetuneJob, config: RagConfig, store_dir: str | Path, *, resume: bool = False,
                 log_to_mlflow: bool = True, experiment: str | None = None, tracking_uri: str | None = None,
                 show_progress: bool = False, force: bool = False) -> FinetuneOutcome:
    """Train `job` into ``job.out_dir`` (``rag_core.finetune.output``'s rules: a folder of someone else's files
    is refused unless `force`, and then set aside only once the model is complete)."""
    if job.kind not in KINDS:
        raise ValueError(f"unknown kind {job.kind!r}; valid kinds: {', '.join(KINDS)}")
    if job.test_queries:
        ensure_disjoint(job.queries, job.test_queries, job.test_name or "the held-out evaluation")
    plan = check_output(job.out_dir, force)
    placed: list[Placed] = []
    with staged_output(plan, placed) as work:
        base, data, result, heldout, run_id, uri, experiment = _train_and_record(
            job, replace(job, out_dir=work), config, store_dir, resume, log_to_mlflow, experiment, tracking_uri,
            show_progress)
    result = replace(result, model_dir=placed[0].model_dir)
    return FinetuneOutcome(base, data, result, heldout, run_id, uri, experiment, placed[0].set_aside_to)


def _train_and_record(job: FinetuneJob, staged: FinetuneJob, config: RagConfig, store_dir: str | Path, resume: bool,
                      log_to_mlflow: bool, experiment: str | None, tracking_uri: str | None,
                      show_progress: bool) -> tuple:
    """Train `staged` (`job` written into its working folder), score its test queries, write the model's
    records and log the run; params name the folder the model ends up in (``job.out_dir``)."""
    reranker = job.kind == "reranker"
    base = (base_reranker if reranker else base_embedder)(config, job.base_model)
    if show_progress:
        print(f"Base model: {base.name} ({base.note})", file=sys.stderr)
    data = build_training_set(job.queries, job.corpus, store_dir, config, negatives_from=job.negatives_from,
                              depth=job.negatives_depth, validation_share=job.validation_share,
                              seed=job.settings.seed, passage_kind="text" if reranker else "indexed",
                              show_progress=show_progress)
    if show_progress:
        print(f"Training on {len(data.train)} queries, validating on {len(data.validation)} "
              f"(negatives from {job.negatives_from}, top {job.negatives_depth})", file=sys.stderr)
    result = train_model(job.kind, data, base, staged.out_dir, job.settings, resume, show_progress)
    params = {"kind": job.kind, "base_model": base.name, "base_model_note": base.note, "source": job.source,
              "train_queries": str(len(data.train)), "validation_queries": str(len(data.validation)),
              "negatives_from": job.negatives_from, "negatives_depth": str(job.negatives_depth),
              "validation_share": str(job.validation_share), "output": str(job.out_dir), **job.settings.as_params()}
    write_training_queries(staged.out_dir, [query.text for query in data.all_queries()], kind=job.kind,
                           source=job.source, base_model=base.name)
    heldout = None
    if job.test_queries:
        heldout = _heldout(staged, result, base, config, store_dir, show_progress)
    experiment = experiment or f"finetune {job.kind} | {job.source}"
    run_id, uri = record_and_log(result, job.kind, params, {"heldout": heldout.as_dict() if heldout else None},
                                 heldout.metrics() if heldout else {}, experiment, log_to_mlflow, tracking_uri,
                                 run_name=job.out_dir.name)
    return base, data, result, heldout, run_id, uri, experiment


def train_model(kind: str, data: TrainingSet, base: BaseModel, out_dir: Path, settings: TrainSettings, resume: bool,
                show_progress: bool) -> TrainingResult:
    """Train `kind` on `data` into `out_dir`, resuming a checkpoint of the same training when asked."""
    resume_from = checkpoint_to_resume(out_dir, settings, data_fingerprint(data), resume)
    if kind == "reranker":
        from rag_core.finetune.reranker import train_reranker as trainer
    else:
        from rag_core.finetune.embedder import train_embedder as trainer
    return trainer(data, base.path, out_dir, settings, resume_from=resume_from, show_progress=show_progress)


def record_and_log(result: TrainingResult, kind: str, params: dict[str, str], extra: dict[str, Any],
                   metrics: dict[str, float], experiment: str, log_to_mlflow: bool,
                   tracking_uri: str | None, run_name: str | None = None) -> tuple[str | None, str | None]:
    """Write ``finetune.json`` (params, training summary, `extra`) into the model folder and log the run
    to MLflow when asked; (run id, tracking URI), or (None, None) when not logged."""
    summary = {**params, **result.summary(), **extra}
    (result.model_dir / SUMMARY_FILE).write_text(json.dumps(summary, indent=1, default=str))
    if not log_to_mlflow:
        return None, None
    return log_training(result, kind=kind, params=params, metrics=metrics, experiment=experiment,
                        run_name=run_name or result.model_dir.name, tracking_uri=tracking_uri)


def _heldout(job: FinetuneJob, result: TrainingResult, base: BaseModel, config: RagConfig, store_dir: str | Path,
             show_progress: bool) -> HeldOutReport:
    """The test queries scored without and with the saved model (loaded from its folder, as users will)."""
    tests: Sequence[GoldenQuery] = job.test_queries
    if job.kind == "reranker":
        from rag_core.finetune.reranker import load_base_cross_encoder

        model = load_base_cross_encoder(str(result.model_dir), job.settings, result.device)
        return rerank_heldout(model, tests, job.corpus, store_dir, config, show_progress=show_progress)
    from rag_core.finetune.embedder import load_base_embedder
    from rag_core.retrieve.embedding.embedder import Embedder
    from rag_core.retrieve.cache import ScoreCache

    model = load_base_embedder(str(result.model_dir), job.settings, result.device)
    cached_base = Embedder(config.embed_model, config.embed_batch_size, ScoreCache(Path(store_dir) / "cache.sqlite"),
                           config.model_fallback) if base.note != "given with --base-model" else None
    return embed_heldout(cached_base.loaded.model if cached_base else load_base_embedder(base.path, job.settings,
                                                                                          result.device),
                         model, tests, job.corpus, store_dir, config, show_progress=show_progress,
                         base_embedder=cached_base)
