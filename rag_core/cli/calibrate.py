"""``rag-pipeline calibrate-judge``: how far to trust the LLM judge, measured against a person's scores.

Reads the labels (``rag_core.evaluate.judge_labels``), has the judge score the same answers and
compares (``rag_core.workbench.judge_calibration``), then prints a table per axis (Spearman,
Kendall, exact and within-one agreement, judge - human) and each axis's 5x5 confusion table.
Left out: plots (the confusion table is logged as CSV).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from dataclasses import asdict
from typing import Any, Callable

from rag_core.config import RagConfig

DESCRIPTION = (
    "Run the LLM judge (the one 'eval --judge' uses, with the configured provider and model) on answers a person "
    "has scored, and report per judge axis (faithfulness, answer_relevance, coverage, answer_correctness) the "
    "Spearman and Kendall (tau-b) correlation with the person's scores, the share of exact and within-one "
    "agreement, the mean difference judge - human, and a 5x5 confusion table. Logged as one MLflow run in the "
    "experiment 'judge calibration' (--no-mlflow to skip). LABELS is JSONL, one answer per line: {id, query, "
    "answer, reference?, passages: [{source, page, text}], human: {axis: 1-5}}; data/golden/judge_labels.jsonl "
    "is an example for the sample corpus. Needs an API key, like 'eval --judge'.")


def add_parser(commands: Any, add_common: Callable[[argparse.ArgumentParser], None]) -> None:
    parser = commands.add_parser("calibrate-judge", help="compare the LLM judge's scores with human scores",
                                 description=DESCRIPTION)
    parser.add_argument("--labels", required=True, metavar="FILE", help="human scores (JSONL)")
    parser.add_argument("--experiment", default="judge calibration", metavar="NAME",
                        help="MLflow experiment [judge calibration]")
    parser.add_argument("--no-mlflow", action="store_true", help="do not log to MLflow")
    add_common(parser)


def run_calibrate_command(args: argparse.Namespace, config: RagConfig) -> int:
    from rag_core.evaluate.judge_labels import load_labels
    from rag_core.generate.llm import LLMClient
    from rag_core.workbench.judge_calibration import calibrate_judge, log_calibration

    labels = load_labels(args.labels)
    client = LLMClient.from_config(config)  # no key: MissingAPIKey (exit 1) before any call
    with contextlib.redirect_stdout(sys.stderr):
        calibration = calibrate_judge(labels, client, retries=config.llm_max_retries, progress=True)
    if not calibration.axes:
        print(f"error: the judge scored none of the {len(labels)} answers "
              f"(missing: {calibration.missing}); see the warnings above", file=sys.stderr)
        return 1
    run_id = uri = None
    if not args.no_mlflow:
        run_id, uri = log_calibration(calibration, args.labels, experiment=args.experiment)
    if args.json:
        print(json.dumps({"axes": [asdict(axis) for axis in calibration.axes], "missing": calibration.missing,
                          "model": calibration.model, "per_answer": calibration.per_answer,
                          "mlflow": {"run_id": run_id, "experiment": args.experiment, "tracking_uri": uri}
                          if run_id else None}, indent=2))
        return 0
    print(format_calibration(calibration, f"{len(labels)} human-labelled answers ({args.labels})"))
    if run_id:
        print(f"\nMLflow: run {run_id} in experiment {args.experiment!r} ({uri})")
    return 0


def format_calibration(calibration: Any, what: str) -> str:
    lines = [f"Judge {calibration.provider} {calibration.model} against {what}", ""]
    header = ["axis", "n", "spearman", "kendall", "exact", "within-one", "judge-human"]
    rows = [[a.axis, str(a.n), _num(a.spearman), _num(a.kendall), f"{a.exact:.2f}", f"{a.within_one:.2f}",
             f"{a.mean_difference:+.2f}"] for a in calibration.axes]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines += ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
              for row in [header, *rows]]
    if calibration.missing:
        lines.append("Not scored by the judge (left out): "
                     + ", ".join(f"{axis} {count}" for axis, count in calibration.missing.items()))
    lines += ["", "Confusion (rows: human score, columns: judge score)"]
    for axis in calibration.axes:
        lines += [f"{axis.axis}", "         judge 1  2  3  4  5"]
        lines += [f"  human {human}  " + " ".join(f"{count:>2}" for count in counts)
                  for human, counts in enumerate(axis.confusion, start=1)]
    lines.append("Correlations are n/a when either side gives every answer the same score.")
    return "\n".join(lines)


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"
