"""``rag-pipeline``: ingest documents, ask questions, evaluate against a golden set, run sweeps.

Every command takes ``--config FILE``, ``--store DIR`` and every setting of ``RagConfig`` as a flag
named after it (``--chunk-size 256``, ``--mode bm25``, ``--per-page`` / ``--no-per-page``), plus
``--json`` for machine-readable output. Exit codes: 0 ok, 1 a failure while running (a model or the
LLM API), 2 bad input (missing files, unknown settings, a bad golden set, an empty store).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any, Callable

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from rag_core.config import SETTING_HELP, ConfigError, RagConfig, load_config  # noqa: E402
from rag_core.paths import default_store_dir  # noqa: E402

EXIT_OK, EXIT_BAD_INPUT = 0, 2  # 1: a failure while running, from service.known_failure


# --- argument parsing --------------------------------------------------------------------------
def _add_common(parser: argparse.ArgumentParser) -> None:
    common = parser.add_argument_group("common options")
    common.add_argument("--config", metavar="FILE", help="YAML file of settings (see experiments/*.yaml)")
    common.add_argument("--store", metavar="DIR", default=None,
                        help="where indexes live (default: $RAG_STORE or ./.rag_store)")
    common.add_argument("--json", action="store_true", help="print machine-readable JSON on stdout")
    settings = parser.add_argument_group("settings (override the config file; defaults in brackets)")
    for field in dataclasses.fields(RagConfig):
        flag = "--" + field.name.replace("_", "-")
        default = field.default
        if field.type in ("bool", bool):
            settings.add_argument(flag, dest=field.name, action=argparse.BooleanOptionalAction, default=None,
                                  help=f"{SETTING_HELP[field.name]} [{default}]")
        else:
            shown = ",".join(map(str, default)) if isinstance(default, tuple) else default
            settings.add_argument(flag, dest=field.name, default=None, metavar=_metavar(field.type),
                                  help=f"{SETTING_HELP[field.name]} [{shown}]")


def _add_where(parser: argparse.ArgumentParser, note: str = "") -> None:
    parser.add_argument("--where", action="append", default=[], metavar="KEY=VALUE",
                        help="retrieve only from documents whose metadata match, before ranking; repeatable, "
                             "a key given twice means any of its values (keys: doc_id, title, pages and the "
                             "metadata.jsonl / --metadata-pattern keys)" + note)


def _metavar(kind: object) -> str:
    return {"int": "N", "float": "X"}.get(str(kind), "LIST" if str(kind).startswith("tuple") else "NAME")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rag-pipeline",
        description="RAG workbench: retrieval-augmented generation over PDFs, and the measurements to tune it.",
        epilog="Run 'rag-pipeline COMMAND --help' for a command's options.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    ingest = commands.add_parser("ingest", help="read PDFs/.txt/.md from a folder and build the indexes",
                                 description="Read every PDF, .txt and .md file below --input, report the files "
                                             "that cannot be read, and build the chunk, vector and BM25 indexes "
                                             "for the current settings. Re-running on the same input adds nothing.")
    ingest.add_argument("--input", required=True, metavar="DIR", help="folder (or one file) to ingest")
    _add_common(ingest)

    query = commands.add_parser("query", help="answer a question from the ingested documents, with citations",
                                description="Retrieve passages for QUESTION and answer with [Source: document, "
                                            "page N] citations (LLM with an API key, extractive without).")
    query.add_argument("question", help="the question, in quotes")
    query.add_argument("--explain", action="store_true",
                       help="show each final passage's rank and score at every stage (vector, BM25, fused, re-ranked)")
    query.add_argument("--no-llm", action="store_true", help="never call the LLM: extractive answer")
    _add_where(query)
    _add_common(query)

    evaluate = commands.add_parser(
        "eval", help="evaluate retrieval (and answers) against a golden set; logs one MLflow run",
        description="Run every golden-set query through the pipeline and report Recall@K, MRR, nDCG@K and hit "
                    "rate at chunk, page and document level, latency per stage and index statistics.")
    source = evaluate.add_mutually_exclusive_group(required=True)
    source.add_argument("--golden", metavar="FILE", help="golden set (JSONL) over the documents of --input or the store")
    source.add_argument("--beir", metavar="DIR", help="a BEIR dataset folder (corpus.jsonl, queries.jsonl, qrels/)")
    evaluate.add_argument("--input", metavar="DIR", help="documents to evaluate on (default: the store's documents)")
    evaluate.add_argument("--split", default="test", help="BEIR qrels split [test]")
    evaluate.add_argument("--max-queries", type=int, default=None, metavar="N", help="evaluate only the first N queries")
    evaluate.add_argument("--judge", action="store_true", help="also generate answers and score them with an LLM judge")
    evaluate.add_argument("--experiment", metavar="NAME", help="MLflow experiment (default: one per corpus + golden set)")
    evaluate.add_argument("--no-mlflow", action="store_true", help="do not log to MLflow")
    evaluate.add_argument("--per-query", metavar="CSV", help="also write the per-query table to this CSV file")
    _add_where(evaluate, " (queries with their own \"filter\" in the golden set keep theirs)")
    _add_common(evaluate)

    sweep = commands.add_parser(
        "sweep", help="run a grid of settings through the evaluation notebook (papermill), logged to MLflow",
        description="Execute notebooks/02-evaluate.ipynb once per grid point of FILE, in one warm Jupyter kernel per "
                    "worker; one MLflow parent run per sweep and one child run per point. Points already finished "
                    "with the same settings are skipped (--rerun runs them again). Points that need a cross-encoder "
                    "that cannot be loaded are not run, and the sweep says so.")
    sweep.add_argument("file", metavar="FILE", help="sweep file, e.g. experiments/grid.yaml")
    sweep.add_argument("--workers", type=int, default=1, metavar="N", help="grid points run in parallel [1]")
    sweep.add_argument("--output", metavar="DIR", help="where executed notebooks go [experiments/runs/<sweep>]")
    sweep.add_argument("--rerun", action="store_true",
                       help="run every point again under a new parent run, even those finished before")
    sweep.add_argument("--executor", choices=("local", "ray"), default="local",
                       help="local: worker threads on this machine; ray: index builds and points scheduled on a Ray "
                            "cluster, one actor with a warm kernel per worker, a point retried when its worker dies "
                            "(the store path and the tracking URI must be reachable from every node) [local]")
    sweep.add_argument("--ray-address", metavar="ADDR",
                       help="Ray cluster to join with --executor ray, e.g. 10.0.0.5:6379 (default: $RAY_ADDRESS, "
                            "a cluster started on this machine with `ray start`, else a new local one)")
    _add_common(sweep)

    from rag_core.cli import calibrate, finetune, make_golden  # argparse only; the work is imported when a command runs

    make_golden.add_parser(commands, _add_common)
    calibrate.add_parser(commands, _add_common)
    finetune.add_parser(commands, _add_common)
    from rag_core.cli.tune_fusion import add_parser as add_tune_fusion

    add_tune_fusion(commands)
    _add_common(commands.choices["tune-fusion"])
    return parser


def config_from_args(args: argparse.Namespace) -> RagConfig:
    overrides = {field.name: getattr(args, field.name, None) for field in dataclasses.fields(RagConfig)}
    return load_config(args.config, overrides)


def store_from_args(args: argparse.Namespace) -> Path:
    return Path(args.store) if args.store else default_store_dir()


def emit(args: argparse.Namespace, payload: dict[str, Any], text: str) -> None:
    if args.json:
        print(json.dumps(payload, indent=2, default=str))
    else:
        print(text)


# --- ingest ------------------------------------------------------------------------------------
def cmd_ingest(args: argparse.Namespace) -> int:
    from rag_core.service import ingest_directory

    config = config_from_args(args)
    report = ingest_directory(Path(args.input), store_from_args(args), config, progress=True)
    if not report["documents_read"]:
        reasons = "; ".join(f"{s['path']}: {s['reason']}" for s in report["skipped"]) or "no files found"
        print(f"error: nothing could be ingested from {args.input} ({reasons})", file=sys.stderr)
        emit(args, report, "")
        return EXIT_BAD_INPUT
    lines = [
        f"Ingested {report['documents_read']} document(s) from {args.input}",
        f"Store {report['store']}: {report['documents']} document(s), {report['chunks']} chunks "
        f"({report['added']} new in this run)",
    ]
    for skipped in report["skipped"]:
        lines.append(f"  skipped {skipped['path']}: {skipped['reason']}")
    emit(args, report, "\n".join(lines))
    return EXIT_OK


# --- query -------------------------------------------------------------------------------------
def cmd_query(args: argparse.Namespace) -> int:
    from rag_core.service import answer_query, format_answer, format_explain

    config = config_from_args(args)
    from rag_core.retrieve.filters import parse_where

    result = answer_query(args.question, store_from_args(args), config, use_llm=not args.no_llm,
                          where=parse_where(args.where))
    text = format_answer(result)
    if args.explain:
        text += "\n\n" + format_explain(result, config)
    emit(args, result.as_json(), text)
    return EXIT_OK


# --- eval and sweep ----------------------------------------------------------------------------
def cmd_eval(args: argparse.Namespace) -> int:
    from rag_core.cli.eval import run_eval_command

    return run_eval_command(args, config_from_args(args), store_from_args(args))


def cmd_sweep(args: argparse.Namespace) -> int:
    from rag_core.cli.sweep import run_sweep_command

    config_from_args(args)  # settings errors, before anything runs
    return run_sweep_command(args, store_from_args(args))


def cmd_make_golden(args: argparse.Namespace) -> int:
    from rag_core.cli.make_golden import run_make_golden_command

    return run_make_golden_command(args, config_from_args(args))


def cmd_calibrate_judge(args: argparse.Namespace) -> int:
    from rag_core.cli.calibrate import run_calibrate_command

    return run_calibrate_command(args, config_from_args(args))


def cmd_finetune(args: argparse.Namespace) -> int:
    from rag_core.cli.finetune import run_finetune_command

    return run_finetune_command(args, config_from_args(args), store_from_args(args))


def cmd_tune_fusion(args: argparse.Namespace) -> int:
    from rag_core.cli.tune_fusion import run_tune_fusion_command

    return run_tune_fusion_command(args, config_from_args(args), store_from_args(args))


_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "ingest": cmd_ingest, "query": cmd_query, "eval": cmd_eval, "sweep": cmd_sweep,
    "make-golden": cmd_make_golden, "calibrate-judge": cmd_calibrate_judge, "tune-fusion": cmd_tune_fusion,
    "finetune": cmd_finetune,
}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="warning: %(message)s")
    logging.getLogger("rag_core.ingest.files").setLevel(logging.ERROR)  # the ingest summary lists skipped files
    try:
        return _COMMANDS[args.command](args)
    except (ConfigError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # known failures (models, LLM API) carry a readable message
        from rag_core.service import known_failure

        failure = known_failure(exc)
        if failure is None:
            raise
        message, code = failure
        print(f"error: {message}", file=sys.stderr)
        return code


if __name__ == "__main__":
    sys.exit(main())
