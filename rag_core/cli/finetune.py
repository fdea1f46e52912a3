"""``rag-pipeline finetune reranker|embedder``: train a re-ranker or the embedding model on a golden
set's (or a BEIR split's) queries, and report it on held-out queries.

Argument parsing and printing only; the work is ``rag_core.finetune.run``. Heavy imports (torch,
sentence-transformers, MLflow) happen when the command runs, never for ``--help``.
Left out: hyper-parameter search (run the command per setting, or a sweep over its results).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_core.cli.common import EXIT_OK, config_from_args, emit, store_from_args
from rag_core.errors import ConfigError
from rag_core.finetune.losses import LOSSES
from rag_core.finetune.settings import DEVICES, KIND_DEFAULTS, MICRO_BATCH_PAIRS_CPU, NEGATIVE_SOURCES, PRECISIONS, \
    RECIPES, SELF_SUPERVISED_DEFAULTS, TrainSettings, recipe_named

if TYPE_CHECKING:
    from rag_core.config import RagConfig

SELF_SUPERVISED_MAX_QUERIES = 4000  # about 20 minutes of training on 2 cores (docs/self-supervised.md)

NAME = "finetune"
HELP = "train a re-ranker or the embedding model on your golden set's queries"
DESCRIPTION = (
    "KIND reranker: train a cross-encoder (re-ranker) on the queries of a golden set or a BEIR split, with hard "
    "negatives mined by the workbench's own first stage, a validation split held out from the training queries and "
    "early stopping on its nDCG@10. The base model is the configured re-ranker, else the embedding model's encoder "
    "body with a new head (offline: the packaged all-MiniLM-L6-v2). --out DIR is then a model for --rerank-model DIR "
    "on every --rerank-backend. KIND embedder: train the embedding model (a bi-encoder) likewise, with in-batch and "
    "hard negatives; --out DIR is then a model for --embed-model DIR (a new dense collection). With --test-golden, "
    "--test-split or --holdout, the held-out queries are scored without and with the model (a re-ranker also fused "
    "with the first stage by RRF), with paired significance. Logged as one MLflow run (params, learning curves, the "
    "model). --self-supervised: no queries at all; pseudo-queries made from the documents of --input or of --beir's "
    "corpus.jsonl (headings, sentences taken out of their passage, table rows), validated on the pseudo-queries of "
    "held-out documents; the model folder records that no golden query was used.")
KINDS = ("reranker", "embedder")
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
    "device": ("--device", "auto: a CUDA GPU when present, else the CPU"),
    "precision": ("--precision", "auto: bf16 where the device runs it natively (GPUs; CPUs with AVX512-BF16 or AMX), "
                                 "fp16 on GPUs without it, else fp32"),
    "max_steps": ("--max-steps", "stop after this many steps (0 = as many as --epochs take)"),
    "time_budget": ("--time-budget", "minutes of training at most: then the step that ends it is validated and the "
                                     "best checkpoint by validation is kept (0 = no budget)"),
    "loader_workers": ("--loader-workers", "data-loading processes (-1 = 4 on a GPU, 0 on a CPU)"),
    "micro_batch": ("--micro-batch", "re-ranker query groups per forward/backward pass, the step's gradients "
                                     "accumulated (the same step in less memory; listwise losses); -1 = auto: the "
                                     f"whole step on a GPU, at most {MICRO_BATCH_PAIRS_CPU} pairs a pass on a CPU"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kind", choices=KINDS, metavar="KIND", help="what to train: reranker | embedder")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--golden", metavar="FILE", help="training queries: a golden set (JSONL) over --input or the store")
    source.add_argument("--beir", metavar="DIR", help="training queries: a BEIR folder's --split qrels (with "
                                                      "--self-supervised: its corpus.jsonl alone)")
    parser.add_argument("--input", metavar="DIR", help="documents of the golden set (default: the store's documents); "
                                                       "with --self-supervised, the documents to adapt to")
    parser.add_argument("--self-supervised", action="store_true",
                        help="train on pseudo-queries made from the documents of --input or --beir (headings, "
                             "sentences taken out of their passage, table rows): no query or judgement is read; "
                             "its defaults: " + ", ".join(f"{SETTING_FLAGS[name][0]} {value}" for name, value
                                                          in SELF_SUPERVISED_DEFAULTS.items()))
    parser.add_argument("--max-pseudo-queries", type=int, default=None, metavar="N",
                        help=f"with --self-supervised: a seeded sample of N pseudo-queries "
                             f"[{SELF_SUPERVISED_MAX_QUERIES}; 0 = all]")
    parser.add_argument("--max-validation", type=int, default=None, metavar="N",
                        help="with --self-supervised: validation pseudo-queries at most (each validation embeds or "
                             "scores every candidate of each) [100]")
    parser.add_argument("--split", default="train", help="BEIR qrels split to train on [train]")
    parser.add_argument("--max-queries", type=int, default=None, metavar="N", help="use only the first N queries")
    parser.add_argument("--out", required=True, metavar="DIR",
                        help="where the model is written: a new or empty folder, or a model this command wrote "
                             "(a folder of other files is refused without --force)")
    parser.add_argument("--force", action="store_true",
                        help="--out holds other files: train beside it, then rename that folder to "
                             "DIR.replaced-<date>-<time> (kept whole) and put the model at DIR")
    parser.add_argument("--recipe", choices=tuple(RECIPES), default="default",
                        help="named settings: " + "; ".join(f"{name}: {recipe.note}" for name, recipe in RECIPES.items())
                             + " (docs/fine-tuning.md); flags given override them [default]")
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
    parser.add_argument("--negatives-depth", type=int, default=None, metavar="N",
                        help="first-stage candidates per query that negatives are drawn from [the recipe's: "
                             + "; ".join(f"{name} {recipe.negatives_depth['reranker']} (re-ranker), "
                                         f"{recipe.negatives_depth['embedder']} (embedder)"
                                         for name, recipe in RECIPES.items()) + "]")
    defaults = {field.name: field.default for field in fields(TrainSettings)}
    choices = {"loss": sorted({loss for kind in KINDS for loss in LOSSES[kind]}), "device": DEVICES,
               "precision": PRECISIONS}
    for name, (flag, text) in SETTING_FLAGS.items():
        kind_of = type(defaults[name])
        options: dict[str, Any] = {"choices": choices[name]} if name in choices else \
            {"type": kind_of, "metavar": "X" if kind_of is float else "N"}
        shown = {kind: KIND_DEFAULTS[kind].get(name, defaults[name]) for kind in KINDS}
        default = shown["reranker"] if shown["reranker"] == shown["embedder"] else \
            "; ".join(f"{kind} {value}" for kind, value in shown.items())
        parser.add_argument(flag, dest=f"train_{name}", default=None, help=f"{text} [{default}]", **options)
    parser.add_argument("--resume", action="store_true", help="continue a stopped training from its last checkpoint")
    parser.add_argument("--experiment", metavar="NAME", help="MLflow experiment (default: 'finetune KIND | DATA')")
    parser.add_argument("--no-mlflow", action="store_true", help="do not log to MLflow")


def _checked(kind: str, settings: TrainSettings) -> TrainSettings:
    """`settings`, with a micro-batch the loss cannot take refused before anything is loaded."""
    settings.groups_per_pass("cpu", LOSSES[kind][settings.loss].splittable)
    return settings


def run(args: argparse.Namespace) -> int:
    config, store_dir = config_from_args(args), store_from_args(args)  # settings errors, before anything runs
    from rag_core.finetune.output import check_output

    check_output(args.out, args.force)  # a folder of someone else's files: refused before anything is loaded
    recipe = recipe_named(args.recipe)
    if args.negatives_depth is None:
        args.negatives_depth = recipe.negatives_depth[args.kind]
    from rag_core.evaluate.golden import load_golden
    from rag_core.finetune.data import split_by_text
    from rag_core.finetune.run import FinetuneJob, run_finetune
    from rag_core.workbench.execution.evaluation import load_eval_inputs

    kind = args.kind
    if args.train_loss is not None and args.train_loss not in LOSSES[kind]:
        raise ConfigError(f"--loss {args.train_loss} is not one of the {kind} losses: {', '.join(LOSSES[kind])}")
    given = {name: getattr(args, f"train_{name}") for name in SETTING_FLAGS}
    if args.self_supervised:
        settings = TrainSettings.for_kind(kind, args.recipe, **{
            **SELF_SUPERVISED_DEFAULTS, **{name: value for name, value in given.items() if value is not None}})
        return _run_self_supervised(args, config, store_dir, _checked(kind, settings))
    if not args.golden and not args.beir:
        raise ConfigError("give the training queries: --golden FILE or --beir DIR (or --self-supervised with "
                          "--input DIR or --beir DIR to train on the documents alone)")
    if args.max_pseudo_queries is not None or args.max_validation is not None:
        raise ConfigError("--max-pseudo-queries and --max-validation need --self-supervised")
    settings = _checked(kind, TrainSettings.for_kind(kind, args.recipe, **given))
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
            from rag_core.evaluate.beir import load_beir

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
                               experiment=args.experiment, show_progress=True, force=args.force)
    _emit_summary(args, outcome, kind)
    return EXIT_OK


def _run_self_supervised(args: argparse.Namespace, config: RagConfig, store_dir: Path, settings: TrainSettings) -> int:
    """``--self-supervised``: pseudo-queries from the documents of --input or --beir (corpus.jsonl only)."""
    from rag_core.finetune.pseudo_queries import PseudoQueryRecipe
    from rag_core.finetune.self_supervised import SelfSupervisedJob, read_corpus, run_self_supervised

    refused = [flag for flag, value in (("--golden", args.golden), ("--test-golden", args.test_golden),
                                        ("--test-split", args.test_split), ("--holdout", args.holdout),
                                        ("--max-queries", args.max_queries), ("--split", args.split != "train"))
               if value not in (None, False)]
    if refused:
        raise ConfigError(f"--self-supervised reads documents only, never queries or judgements: leave out "
                          f"{', '.join(refused)} (score the model afterwards with rag-pipeline eval "
                          f"--embed-model/--rerank-model DIR)")
    if not 0 < args.validation_share < 1:
        raise ConfigError(f"--validation-share must be between 0 and 1, got {args.validation_share}")
    if args.max_pseudo_queries is not None and args.max_pseudo_queries < 0:
        raise ConfigError(f"--max-pseudo-queries must be >= 0, got {args.max_pseudo_queries}")
    if args.max_validation is not None and args.max_validation < 1:
        raise ConfigError(f"--max-validation must be >= 1, got {args.max_validation}")
    maximum = SELF_SUPERVISED_MAX_QUERIES if args.max_pseudo_queries is None else args.max_pseudo_queries
    with contextlib.redirect_stdout(sys.stderr):  # progress never mixes with the table or the JSON
        corpus, source = read_corpus(args.input, args.beir, Path(store_dir), show_progress=True)
        job = SelfSupervisedJob(args.kind, corpus, source, Path(args.out), settings,
                                PseudoQueryRecipe(max_queries=maximum, seed=settings.seed), args.negatives_from,
                                args.negatives_depth, validation_share=args.validation_share,
                                max_validation=100 if args.max_validation is None else args.max_validation,
                                base_model=args.base_model)
        outcome = run_self_supervised(job, config, store_dir, resume=args.resume, log_to_mlflow=not args.no_mlflow,
                                      experiment=args.experiment, show_progress=True, force=args.force)
    _emit_summary(args, outcome, args.kind, golden_queries_used=False)
    return EXIT_OK


def _emit_summary(args: argparse.Namespace, outcome: Any, kind: str, **extra: Any) -> None:
    from rag_core.workbench.reports.text import format_finetune

    if outcome.set_aside_to is not None:
        print(f"--force: the earlier contents of {outcome.result.model_dir} are kept in {outcome.set_aside_to}",
              file=sys.stderr)
    summary = {"model": str(outcome.result.model_dir), "base_model": outcome.base.name,
               "recipe": args.recipe,
               "replaced_folder_kept_in": str(outcome.set_aside_to) if outcome.set_aside_to else None,
               "base_model_note": outcome.base.note, "train_queries": len(outcome.data.train),
               "validation_queries": len(outcome.data.validation), **extra, **outcome.result.summary(),
               "heldout": outcome.heldout.as_dict() if outcome.heldout else None,
               "mlflow": {"run_id": outcome.run_id, "experiment": outcome.experiment,
                          "tracking_uri": outcome.tracking_uri} if outcome.run_id else None}
    emit(args, summary, format_finetune(outcome, kind))
