"""``rag-pipeline feedback export``: labelled traces become golden-set lines (and judge labels).

Reading the traces is ``rag_core.workbench.tracking.labels``; the rules (what is added, what is skipped and
why) are ``rag_core.evaluate.feedback``. This module appends the lines: to an existing golden set
without repeating a question already there (the file is read and checked first), to a judge-label
file without repeating an id. Evidence is looked up in the documents of ``--store``.
Left out: other actions than ``export`` (labels are added in the MLflow UI or with ``mlflow.log_feedback``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Iterable

from rag_core.cli.common import EXIT_OK, emit, store_from_args

NAME = "feedback"
HELP = "turn labelled MLflow traces (query --trace) into golden-set lines"
DESCRIPTION = (
    "export: read the traces of an MLflow experiment (query --trace logs them) and their labels, MLflow "
    "assessments named expected_response (expectation), answer_accepted (bool feedback) and passage_relevant "
    "(bool feedback, metadata source and page), added in the MLflow UI's trace view or with mlflow.log_feedback / "
    "mlflow.log_expectation; append one golden-set line per labelled question to --out (evidence: the relevant "
    "passages' text, found in the store's documents; provenance: trace, labeller, time) and rejected answers to "
    "--judge-labels (what calibrate-judge reads). Says what was added and what was skipped, and why.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["export"], help="export: labelled traces -> golden-set lines")
    parser.add_argument("--experiment", required=True, metavar="NAME", help="MLflow experiment holding the traces")
    parser.add_argument("--out", required=True, metavar="FILE",
                        help="golden set (JSONL) to append to (created if missing)")
    parser.add_argument("--judge-labels", metavar="FILE", help="also append judge labels for rejected answers here")


def run(args: argparse.Namespace) -> int:
    from rag_core.evaluate.feedback import export_feedback
    from rag_core.evaluate.golden import load_golden
    from rag_core.evaluate.judge_labels import load_labels
    from rag_core.ingest.corpus import store_corpus
    from rag_core.workbench.tracking.labels import labelled_traces

    out, judge_file = Path(args.out), Path(args.judge_labels) if args.judge_labels else None
    corpus = store_corpus(store_from_args(args))
    existing = [query.query for query in load_golden(out)] if _has_lines(out) else []
    judge_ids = [label.id for label in load_labels(judge_file)] if judge_file and _has_lines(judge_file) else []
    traces = labelled_traces(args.experiment)
    export = export_feedback(traces, corpus.by_id, experiment=args.experiment, existing_queries=existing,
                             existing_judge_ids=judge_ids)
    _append(out, export.golden)
    if judge_file is not None:
        _append(judge_file, export.judge_labels)
    payload = {"traces": len(traces), "unlabelled": export.unlabelled, "added": len(export.golden),
               "added_ids": [line["id"] for line in export.golden], "out": str(out),
               "skipped": [item.as_json() for item in export.skipped],
               "judge_labels": {"file": str(judge_file), "added": len(export.judge_labels),
                                "skipped": [item.as_json() for item in export.judge_skipped]} if judge_file else None}
    emit(args, payload, _text(payload))
    return EXIT_OK


def _has_lines(path: Path) -> bool:
    return path.is_file() and bool(path.read_text(encoding="utf-8-sig").strip())


def _append(path: Path, lines: Iterable[dict[str, Any]]) -> None:
    lines = list(lines)
    if not lines:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    needs_newline = path.is_file() and path.stat().st_size > 0 and not path.read_bytes().endswith(b"\n")
    with path.open("a", encoding="utf-8") as handle:
        handle.write("\n" if needs_newline else "")
        handle.writelines(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)


def _text(payload: dict[str, Any]) -> str:
    lines = [f"{payload['traces']} trace(s), {payload['unlabelled']} without labels; "
             f"added {payload['added']} golden-set line(s) to {payload['out']}, skipped {len(payload['skipped'])}"]
    lines += [f"  skipped {item['trace_id']} ({item['query'][:60]!r}): {item['reason']}" for item in payload["skipped"]]
    judge = payload["judge_labels"]
    if judge:
        lines.append(f"added {judge['added']} judge label(s) to {judge['file']}")
        lines += [f"  no judge label for {item['trace_id']}: {item['reason']}" for item in judge["skipped"]]
    return "\n".join(lines)
