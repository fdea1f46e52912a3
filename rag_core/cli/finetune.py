"""``rag-pipeline finetune reranker|embedder``: train a re-ranker or the embedding model on a golden
set's (or a BEIR split's) queries, and report it on held-out queries.

Argument parsing and printing only; the work is ``rag_core.finetune.run``. Heavy imports (torch,
sentence-transformers, MLflow) happen when the command runs, never for ``--help``.
Left out: hyper-parameter search (run the command per setting, or a sweep over its results).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any, Callable

from rag_core.config import ConfigError, RagConfig
from rag_core.finetune.losses import LOSSES
from rag_core.finetune.settings import DEVICES, KIND_DEFAULTS, NEGATIVE_SOURCES, TrainSettings

DESCRIPTION = {
    "reranker": "Train a cross-encoder (re-ranker) on the queries of a golden set or a BEIR split, with hard negatives "
                "mined by the workbench's own first stage, a validation split held out from the training queries and "
                "early stopping on its nDCG@10. The base model is the configured re-ranker, else the embedding "
                "model's encoder body with a new head (offline: the packaged all-MiniLM-L6-v2). --out DIR is then a "
                "model for --rerank-model DIR on every --rerank-backend. With --test-golden, --test-split or "
                "--holdout, the held-out queries are scored without and with it (and fused with the first stage by "
                "RRF), with paired significance. Logged as one MLflow run (params, learning curves, the model).",
    "embedder": "Train the embedding model (a bi-encoder) on the queries of a golden set or a BEIR split, with "
                "in-batch and hard negatives mined by the workbench's own first stage, a validation split and early "
                "stopping on its nDCG@10. --out DIR is then a model for --embed-model DIR (a new dense collection). "
                "With --test-golden, --test-split or --holdout, the held-out queries are searched with the base and "
                "the fine-tuned model (exact dense search), with paired significance. Logged as one MLflow run.",
}
# TrainSettings field -> (flag, help)
SETTING_FLAGS = {
    "loss": ("--loss", "training loss"),
    "epochs": ("--epochs", "passes over the training queries"),
    "learning_rate": ("--learning-rate", "peak learning rate of the model's body"),
    "head_learning_rate": ("--head-learning-rate", "learning rate of a new classification head (0 = --learning-rate)"),
    "batch_size": ("--batch-size", "query groups (query, positive, negatives) per step"),
    "negatives": ("--negatives", "hard negatives per (query, positive), drawn from the first stage's top --negatives-depth"),
    "negatives_skip": ("--negatives-skip", "first-stage ranks never drawn as negatives (unjudged relevant passages sit there)"),
    "max_length": ("--max-length", "tokens per (query, passage) pair, or per passage for an embedder"),
    "warmup": ("--warmup", "share of the steps with a rising learning rate"),
    "eval_steps": ("--eval-steps", "steps between validations and checkpoints"),
    "patience": ("--patience", "validations without a better nDCG@10 before stopping (0 = never stop early)"),
    "validation_depth": ("--validation-depth", "first-stage candidates ranked per validation query"),
    "seed": ("--seed", "seed of the validation split, the negatives, the head and the data order"),
    "device": ("--device", "auto: a CUDA GPU (bf16 where supported) when present, else the CPU"),
    "max_steps": ("--max-steps", "stop after this many steps (0 = as many as --epochs take)"),
}


def add_parser(commands: Any, add_common: Callable[[argparse.ArgumentParser], None]) -> None:
    parser = commands.add_parser("finetune", help="train a re-ranker or the embedding model on your golden set",
                                 description="Fine-tune a model on a golden set: 'finetune reranker' or 'finetune "
                                             "embedder' (see their --help).")
    kinds = parser.add_subparsers(dest="finetune_kind", required=True, metavar="KIND")
    for kind in ("reranker", "embedder"):
        sub = kinds.add_parser(kind, help=DESCRIPTION[kind].split(",")[0].split(" on ")[0], description=DESCRIPTION[kind])
        _add_kind_arguments(sub, kind)
        add_common(sub)


def _add_kind_arguments(parser: argparse.ArgumentParser, kind: str) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--golden", metavar="FILE", help="training queries: a golden set (JSONL) over --input or the store")
    source.add_argument("--beir", metavar="DIR", help="training queries: a BEIR folder's --split qrels")
    parser.add_argument("--input", metavar="DIR", help="documents of the golden set (default: the store's documents)")
    parser.add_argument("--split", default="train", help="BEIR qrels split to train on [train]")
    parser.add_argument("--max-queries", type=int, default=None, metavar="N", help="use only the first N queries")
    parser.add_argument("--out", required=True, metavar="DIR", help="where the model is written (a model folder)")
    parser.add_argument("--base-model", metavar="NAME", help="model to start from (default: see above)")
    test = parser.add_mutually_exclusive_group()
    test.add_argument("--test-golden", metavar="FILE", help="score these queries without and with the model afterwards "
                                                            "(refused if any is a training query)")
    test.add_argument("--test-split", metavar="NAME", help="with --beir: score this split's queries afterwards")
    test.add_argument("--holdout", type=float, metavar="X", help="hold out this share of the queries as test queries")
    parser.add_argument("--holdout-seed", type=int, default=0, metavar="N", help="which queries --holdout holds out [0]")
    parser.add_argument("--validation-share", type=float, default=0.15, metavar="X",
                        help="share of the training queries held out for validation and early stopping [0.15]")
    parser.add_argument("--negatives-from", choices=NEGATIVE_SOURCES, default="bm25",
                        help="first stage that hard negatives are mined from [bm25]")
    parser.add_argument("--negatives-depth", type=int, default=30, metavar="N",
                        help="first-stage candidates per query that negatives are drawn from [30]")
    defaults = {field.name: field.default for field in fields(TrainSettings)} | KIND_DEFAULTS[kind]
    for name, (flag, text) in SETTING_FLAGS.items():
        kind_of = type(defaults[name]) if name != "loss" else str
        options: dict[str, Any] = {"choices": list(LOSSES[kind])} if name == "loss" else \
            {"choices": DEVICES} if name == "device" else {"type": kind_of, "metavar": "X" if kind_of is float else "N"}
        parser.add_argument(flag, dest=f"train_{name}", default=None, help=f"{text} [{defaults[name]}]", **options)
    parser.add_argument("--resume", action="store_true", help="continue a stopped training from its last checkpoint")
    parser.add_argument("--experiment", metavar="NAME", help="MLflow experiment (default: 'finetune KIND | DATA')")
    parser.add_argument("--no-mlflow", action="store_true", help="do not log to MLflow")


def run_finetune_command(args: argparse.Namespace, config: RagConfig, store_dir: Path) -> int:
    from rag_core.evaluate.golden import load_golden
    from rag_core.finetune.data import split_by_text
    from rag_core.finetune.run import FinetuneJob, run_finetune
    from rag_core.workbench.evaluation import load_eval_inputs

    kind = args.finetune_kind
    settings = TrainSettings.for_kind(kind, **{name: getattr(args, f"train_{name}") for name in SETTING_FLAGS})
    if args.test_split and not args.beir:
        raise ConfigError("--test-split needs --beir (a golden set is tested with --test-golden or --holdout)")
    if not 0 < args.validation_share < 1:
        raise ConfigError(f"--validation-share must be between 0 and 1, got {args.validation_share}")
    with contextlib.redirect_stdout(sys.stderr):  # progress never mixes with the table or the JSON
        inputs = load_eval_inputs(input_dir=args.input, golden=args.golden, beir=args.beir, split=args.split,
                                  store_dir=store_dir, max_queries=args.max_queries, progress=True)
        queries, tests, test_name = inputs.queries, (), ""
        if args.test_golden:
            tests, test_name = tuple(load_golden(args.test_golden, doc_ids=inputs.corpus.by_id)), f"--test-golden {args.test_golden}"
        elif args.test_split:
            from rag_core.ingest.beir import load_beir

            tests, test_name = tuple(load_beir(args.beir, args.test_split)[1]), f"--test-split {args.test_split}"
        elif args.holdout is not None:
            if not 0 < args.holdout < 1:
                raise ConfigError(f"--holdout must be a share of the queries between 0 and 1, got {args.holdout}")
            queries, tests = split_by_text(queries, args.holdout, args.holdout_seed, lambda query: query.query)
            test_name = "--holdout"
        job = FinetuneJob(kind, tuple(queries), inputs.corpus, f"{inputs.corpus_name} {inputs.golden_name}",
                          Path(args.out), settings, args.negatives_from, args.negatives_depth, args.validation_share,
                          args.base_model, tuple(tests), test_name)
        outcome = run_finetune(job, config, store_dir, resume=args.resume, log_to_mlflow=not args.no_mlflow,
                               experiment=args.experiment, show_progress=True)
    summary = {"model": str(job.out_dir), "base_model": outcome.base.name, "base_model_note": outcome.base.note,
               "train_queries": len(outcome.data.train), "validation_queries": len(outcome.data.validation),
               **outcome.result.summary(), "heldout": outcome.heldout.as_dict() if outcome.heldout else None,
               "mlflow": {"run_id": outcome.run_id, "experiment": outcome.experiment,
                          "tracking_uri": outcome.tracking_uri} if outcome.run_id else None}
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
    else:
        print(format_outcome(outcome, kind))
    return 0


def format_outcome(outcome: Any, kind: str) -> str:
    result, best = outcome.result, outcome.result.best
    flag = "--rerank-model" if kind == "reranker" else "--embed-model"
    lines = [f"Fine-tuned {kind}: {result.model_dir} (use it with {flag} {result.model_dir})",
             f"Base model: {outcome.base.name} ({outcome.base.note})",
             f"Trained on {len(outcome.data.train)} queries for {result.steps} steps in {result.train_seconds:.0f} s "
             f"on {result.device} ({result.precision}), peak memory {result.peak_memory_mb:.0f} MB"
             + (", stopped early" if result.stopped_early else "")
             + (f", resumed from {result.resumed_from}" if result.resumed_from else ""),
             f"Validation nDCG@10 ({len(outcome.data.validation)} queries): {result.curve[0].ndcg_at_10:.4f} before "
             f"training, {best.ndcg_at_10:.4f} at step {best.step} (the model kept)"
             + ("" if result.beat_base else ": no better than the base model; try other settings"),
             "Learning curve (step: validation nDCG@10): "
             + ", ".join(f"{point.step}: {point.ndcg_at_10:.4f}" for point in result.curve)]
    if outcome.heldout:
        report = outcome.heldout
        lines += ["", f"Held-out queries ({report.queries}), {report.metric}:"]
        lines.append(f"  {report.baseline}: {report.systems[report.baseline][report.metric]:.4f}")
        lines += [f"  {name}: {comparison}" for name, comparison in report.comparisons.items()]
    if outcome.run_id:
        lines.append(f"\nMLflow: run {outcome.run_id} in experiment {outcome.experiment!r} ({outcome.tracking_uri})")
    return "\n".join(lines)
