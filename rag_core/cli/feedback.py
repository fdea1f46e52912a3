"""``rag-pipeline feedback export``: labelled traces become golden-set lines (and judge labels).

Reading the traces is ``rag_core.workbench.tracking.labels``; the rules (what is added, what is skipped and
why) are ``rag_core.evaluate.feedback``. This module appends the lines: to an existing golden set
without repeating a question already there (the file is read and checked first), to a judge-label
file without repeating an id. Evidence is looked up in the documents of ``--store``.
What the user wrote stays whole (``rag_core.writes``): ``--out`` and ``--judge-labels`` are checked before
any work (a folder, a path under a file, or one file for both is bad input); each file is rewritten
beside itself, its old bytes then the new lines, and renamed over the old one; the read-check-write
holds a lock beside each file (``.<name>.lock``), so two exports into one golden set run one after the
other and the second skips what the first added.
``--to-dataset NAME`` also writes the new lines as a new version of an MLflow golden dataset
(``rag_core.workbench.tracking.golden_datasets``). ``queue`` makes the label schemas and a review queue of the
experiment's traces (``rag_core.workbench.tracking.review_queue``) and prints where the UI shows it.
Left out: adding labels here (they are added in the MLflow UI or with ``mlflow.log_feedback``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rag_core.cli.common import EXIT_OK, emit, store_from_args
from rag_core.errors import BadInput
from rag_core.evaluate.golden_records import check_dataset_name
from rag_core.writes import check_output_file, jsonl_text, lock_beside, write_atomic

NAME = "feedback"
MLFLOW_UI_URL = "http://127.0.0.1:5000"  # where `make mlflow-ui` serves the UI
HELP = "turn labelled MLflow traces (query --trace) into golden-set lines"
DESCRIPTION = (
    "export: read the traces of an MLflow experiment (query --trace logs them) and their labels, MLflow "
    "assessments named expected_response (expectation), answer_accepted (bool feedback) and passage_relevant "
    "(bool feedback, metadata source and page), added in the MLflow UI's trace view or with mlflow.log_feedback / "
    "mlflow.log_expectation; append one golden-set line per labelled question to --out (evidence: the relevant "
    "passages' text, found in the store's documents; provenance: trace, labeller, time) and rejected answers to "
    "--judge-labels (what calibrate-judge reads). Says what was added and what was skipped, and why.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["export", "queue"],
                        help="export: labelled traces -> golden-set lines; queue: a review queue of the traces")
    parser.add_argument("--experiment", required=True, metavar="NAME", help="MLflow experiment holding the traces")
    parser.add_argument("--out", metavar="FILE",
                        help="export (required): golden set (JSONL) to append to (created if missing)")
    parser.add_argument("--to-dataset", metavar="NAME",
                        help="export: also write a new version of MLflow golden dataset NAME (the newest version's "
                             "lines, then the new ones; see rag-pipeline golden)")
    parser.add_argument("--queue", default="rag-review", metavar="NAME", help="queue: the review queue [rag-review]")
    parser.add_argument("--since", metavar="DATE",
                        help="queue: only questions asked on or after DATE (2026-12-01, or an ISO time; UTC)")
    parser.add_argument("--unlabelled-only", action="store_true", help="queue: only questions without labels")
    parser.add_argument("--sample", type=int, metavar="N", help="queue: N of the chosen questions at random (seed 0)")
    parser.add_argument("--judge-labels", metavar="FILE", help="also append judge labels for rejected answers here")


def run(args: argparse.Namespace) -> int:
    from rag_core.evaluate.feedback import export_feedback
    from rag_core.ingest.corpus import store_corpus
    from rag_core.workbench.tracking.labels import labelled_traces

    if args.action == "queue":
        return _queue(args)
    if not args.out:
        raise BadInput("feedback export needs --out FILE (the golden set to append to)")
    if args.to_dataset:
        check_dataset_name(args.to_dataset)  # before any work: a name no reader could read back is refused
    out = check_output_file(args.out, "--out")  # a folder, a path under a file, one file twice: before any work
    judge_file = check_output_file(args.judge_labels, "--judge-labels", ("--out", out)) if args.judge_labels else None
    corpus = store_corpus(store_from_args(args))
    traces = labelled_traces(args.experiment)
    with lock_beside(out, *([judge_file] if judge_file else [])):  # another export of these files waits here
        existing, judge_ids = _existing(out, judge_file)
        earlier = _dataset_lines(args.to_dataset) if args.to_dataset else []  # its questions are not added again
        existing += [str(line.get("query", "")) for line in earlier]
        export = export_feedback(traces, corpus.by_id, experiment=args.experiment, existing_queries=existing,
                                 existing_judge_ids=judge_ids)
        contents = [(out, _appended(out, export.golden))]
        if judge_file is not None:
            contents.append((judge_file, _appended(judge_file, export.judge_labels)))
        for path, content in contents:  # each whole (encoded first), then renamed over the file
            if content is not None:
                write_atomic(path, content)
    dataset = _write_dataset(args, export.golden) if args.to_dataset else None
    payload = {"traces": len(traces), "unlabelled": export.unlabelled, "added": len(export.golden), "dataset": dataset,
               "added_ids": [line["id"] for line in export.golden], "out": str(out),
               "skipped": [item.as_json() for item in export.skipped],
               "judge_labels": {"file": str(judge_file), "added": len(export.judge_labels),
                                "skipped": [item.as_json() for item in export.judge_skipped]} if judge_file else None}
    emit(args, payload, _text(payload))
    return EXIT_OK


def _existing(out: Path, judge_file: Path | None) -> tuple[list[str], list[str]]:
    """The questions of the golden set and the ids of the judge-label file, as they are now (read under the lock)."""
    from rag_core.evaluate.golden import load_golden
    from rag_core.evaluate.judge_labels import load_labels

    existing = [query.query for query in load_golden(out)] if _has_lines(out) else []
    judge_ids = [label.id for label in load_labels(judge_file)] if judge_file and _has_lines(judge_file) else []
    return existing, judge_ids


def _has_lines(path: Path) -> bool:
    return path.is_file() and bool(path.read_text(encoding="utf-8-sig").strip())


def _appended(path: Path, lines: list[dict[str, Any]]) -> bytes | None:
    """The file's bytes as they are, then `lines` (None: nothing to add). Encoded here, so that a line that
    is not valid UTF-8 fails before any file is written."""
    if not lines:
        return None
    before = path.read_bytes() if path.is_file() else b""
    return before + (b"\n" if before and not before.endswith(b"\n") else b"") + jsonl_text(lines).encode("utf-8")


def _text(payload: dict[str, Any]) -> str:
    lines = [f"{payload['traces']} trace(s), {payload['unlabelled']} without labels; "
             f"added {payload['added']} golden-set line(s) to {payload['out']}, skipped {len(payload['skipped'])}"]
    lines += [f"  skipped {item['trace_id']} ({item['query'][:60]!r}): {item['reason']}" for item in payload["skipped"]]
    judge = payload["judge_labels"]
    if judge:
        lines.append(f"added {judge['added']} judge label(s) to {judge['file']}")
        lines += [f"  no judge label for {item['trace_id']}: {item['reason']}" for item in judge["skipped"]]
    return "\n".join(lines)


def _dataset_lines(name: str) -> list[dict[str, Any]]:
    """The newest version's lines of MLflow golden dataset `name` (none when it has no version yet)."""
    from rag_core.evaluate.golden_records import DatasetRef
    from rag_core.workbench.tracking.golden_datasets import read_lines, resolve, versions

    return read_lines(resolve(DatasetRef(name, None))) if versions(name) else []


def _write_dataset(args: argparse.Namespace, added: list[dict[str, Any]]) -> dict[str, Any] | None:
    """A new version of ``--to-dataset``: the newest version's lines as the write finds them, then the new ones
    (None: nothing new)."""
    from rag_core.workbench.tracking.golden_datasets import write_version
    from rag_core.workbench.tracking.tracker import Tracker

    if not added:
        return None
    experiment = Tracker.at().experiment_id(args.experiment)
    written = write_version(args.to_dataset, added, append=True, experiment_ids=[experiment],
                            origin=f"feedback export of experiment {args.experiment!r}")
    return written.version.as_json()


def _queue(args: argparse.Namespace) -> int:
    """``feedback queue``: the label schemas and a review queue of the experiment's traced questions."""
    from rag_core.evaluate.queue_labels import QUESTIONS
    from rag_core.workbench.tracking.review_queue import build_review_queue

    if args.sample is not None and args.sample < 1:
        raise BadInput(f"--sample must be at least 1, got {args.sample}")
    report = build_review_queue(args.experiment, queue=args.queue, since_ms=_since_ms(args.since),
                                unlabelled_only=args.unlabelled_only, sample=args.sample)
    payload = {**report.as_json(), "ui": f"{MLFLOW_UI_URL}/{report.ui_path()}"}
    lines = [f"review queue {report.queue!r} of experiment {report.experiment!r}: {len(report.added)} question(s) "
             f"added, {report.already} already there ({report.traces} traced in all)",
             f"questions: {', '.join(q.name for q in QUESTIONS)}",
             f"passage_relevant offers: {report.choices[0]} .. {report.choices[-1]} (the trace's ranks)"]
    if report.created:
        lines.append(f"created: {', '.join(report.created)}")
    lines.append(f"open it in the MLflow UI (make mlflow-ui): {payload['ui']}")
    emit(args, payload, "\n".join(lines))
    return EXIT_OK


def _since_ms(text: str | None) -> int | None:
    """--since as milliseconds since the epoch (a date is its midnight; a time without a zone is UTC)."""
    import datetime as dt

    if text is None:
        return None
    try:
        moment = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise BadInput(f"--since {text!r} is not a date: write 2026-12-01 or 2026-12-01T09:30") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.timezone.utc)
    return int(moment.timestamp() * 1000)
