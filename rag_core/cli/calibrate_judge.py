"""``rag-pipeline calibrate-judge``: how far to trust the LLM judge, measured against a person's scores.

Reads the labels (``rag_core.evaluate.judge_labels``), has the judge score the same answers and
compares (``rag_core.workbench.statistics.judge_calibration``), then prints (``rag_core.workbench.reports.text``) a table per axis (Spearman,
Kendall, exact and within-one agreement, judge - human) and each axis's 5x5 confusion table.
Left out: plots (the confusion table is logged as CSV).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from dataclasses import asdict

from rag_core.cli.common import EXIT_FAILURE, EXIT_OK, config_from_args

NAME = "calibrate-judge"
HELP = "compare the LLM judge's scores with human scores"
DESCRIPTION = (
    "Run the LLM judge (the one 'eval --judge' uses, with the configured provider and model) on answers a person "
    "has scored, and report per judge axis (faithfulness, answer_relevance, coverage, answer_correctness) the "
    "Spearman and Kendall (tau-b) correlation with the person's scores, the share of exact and within-one "
    "agreement, the mean difference judge - human, and a 5x5 confusion table. Logged as one MLflow run in the "
    "experiment 'judge calibration' (--no-mlflow to skip). LABELS is JSONL, one answer per line: {id, query, "
    "answer, reference?, passages: [{source, page, text}], human: {axis: 1-5}}; data/golden/judge_labels.jsonl "
    "is an example for the sample corpus. Needs an API key, like 'eval --judge'.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--labels", required=True, metavar="FILE", help="human scores (JSONL)")
    parser.add_argument("--experiment", default="judge calibration", metavar="NAME",
                        help="MLflow experiment [judge calibration]")
    parser.add_argument("--no-mlflow", action="store_true", help="do not log to MLflow")


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    from rag_core.evaluate.judge_labels import load_labels
    from rag_core.llm import LLMClient
    from rag_core.workbench.reports.text import format_calibration
    from rag_core.workbench.statistics.judge_calibration import calibrate_judge, log_calibration

    labels = load_labels(args.labels)
    client = LLMClient.from_config(config)  # no key: MissingAPIKey (exit 1) before any call
    with contextlib.redirect_stdout(sys.stderr):
        calibration = calibrate_judge(labels, client, retries=config.llm_max_retries, progress=True)
    if not calibration.axes:
        print(f"error: the judge scored none of the {len(labels)} answers "
              f"(missing: {calibration.missing}); see the warnings above", file=sys.stderr)
        return EXIT_FAILURE
    run_id = uri = None
    if not args.no_mlflow:
        run_id, uri = log_calibration(calibration, args.labels, experiment=args.experiment)
    if args.json:
        print(json.dumps({"axes": [asdict(axis) for axis in calibration.axes], "missing": calibration.missing,
                          "model": calibration.model, "per_answer": calibration.per_answer,
                          "mlflow": {"run_id": run_id, "experiment": args.experiment, "tracking_uri": uri}
                          if run_id else None}, indent=2))
        return EXIT_OK
    print(format_calibration(calibration, f"{len(labels)} human-labelled answers ({args.labels})"))
    if run_id:
        print(f"\nMLflow: run {run_id} in experiment {args.experiment!r} ({uri})")
    return EXIT_OK
