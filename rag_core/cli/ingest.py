"""``rag-pipeline ingest --input DIR``: read documents into the store and build the indexes.

The work is ``rag_core.service.ingest_directory``; this module prints what was read, what was skipped
and why, and fails (exit 2) only when nothing could be read.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rag_core.cli.common import EXIT_BAD_INPUT, EXIT_OK, config_from_args, emit, store_from_args

NAME = "ingest"
HELP = "read PDFs/.txt/.md from a folder and build the indexes"
DESCRIPTION = ("Read every PDF, .txt and .md file below --input, report the files that cannot be read, and build "
               "the chunk, vector and BM25 indexes for the current settings. Re-running on the same input adds nothing; "
               "documents whose file in DIR is gone (deleted, renamed) are removed from the store unless --keep-missing.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--input", required=True, metavar="DIR", help="folder (or one file) to ingest")
    parser.add_argument("--keep-missing", action="store_true",
                        help="keep stored documents whose file in DIR is gone (default: remove them from every index)")


def run(args: argparse.Namespace) -> int:
    from rag_core.service import ingest_directory

    config = config_from_args(args)
    report = ingest_directory(Path(args.input), store_from_args(args), config, progress=True,
                              keep_missing=args.keep_missing)
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
    if report.get("truncated"):  # the build printed a warning when too much is never read
        lines.append(f"Dense search: {report['truncated']} of {report['chunks']} units "
                     f"({100 * report['truncated_share']:.0f}%) longer than the embedding model's window; "
                     + (f"{100 * report['unread_share']:.1f}% of the indexed text never read (dense_pooling first)"
                        if report.get("unread_share") else f"every word read ({report['dense_vectors']} windows)"
                        if report.get("dense_vectors", 0) > report["chunks"] else "the text never read was not "
                        "measured (a dense index built before windows)"))
    if report.get("registry_rebuilt"):
        lines.append("Repaired: the store's registry was damaged (kept as documents/registry.json.damaged) and was "
                     "rebuilt from the intact document files")
    if report.get("dropped_damaged"):
        lines.append(f"Repaired: {len(report['dropped_damaged'])} document(s) whose stored file was damaged were "
                     f"read again or, if not in {args.input}, dropped: " + ", ".join(report["dropped_damaged"][:10]))
    lines += [f"Repaired: {line}" for line in report.get("repaired", ())]
    if report.get("removed"):
        lines.append(f"Removed {report['removed']} document(s) whose file is gone: "
                     + ", ".join(report["removed_documents"][:10]) + (", ..." if report["removed"] > 10 else ""))
    if report.get("seconds"):
        lines.append("Seconds: " + ", ".join(f"{stage} {value:.1f}" for stage, value in report["seconds"].items()))
    for skipped in report["skipped"]:
        lines.append(f"  skipped {skipped['path']}: {skipped['reason']}")
    emit(args, report, "\n".join(lines))
    return EXIT_OK
