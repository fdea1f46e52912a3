"""``rag-pipeline make-golden``: write a golden set from the user's documents with an LLM.

The work is ``rag_core.evaluate.golden_generation``; this module reads the arguments, checks the key
before reading anything, writes the file, checks that the golden-set loader accepts it, and prints
what was kept, what was dropped and why, the tokens used and their cost.
Left out: reviewing the questions (a person does that: see docs/evaluation.md).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path
from typing import Any, Callable

from rag_core.cli.common import EXIT_FAILURE, EXIT_OK, config_from_args
from rag_core.errors import BadInput
from rag_core.writes import check_output_file

NAME = "make-golden"
HELP = "write a golden set (questions + evidence) from your documents with an LLM"
DESCRIPTION = (
    "Sample passages across the documents below --input (every document, and the beginning, middle and end of "
    "each), have the LLM write a question, a short answer and the supporting sentence(s) quoted from each "
    "passage, and write them as a golden set (JSONL, the format 'eval --golden' reads). Questions whose quoted "
    "evidence cannot be found in the document (by the evaluator's own alignment) and near-duplicate questions are "
    "dropped and counted, and replaced from further passages. Needs an API key (ANTHROPIC_API_KEY, or "
    "OPENAI_API_KEY with --llm-provider openai). Review the file before trusting it: the LLM can write a wrong "
    "answer or a question the documents answer elsewhere too.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--input", required=True, metavar="DIR", help="folder (or one file) of documents")
    parser.add_argument("--out", required=True, metavar="FILE", help="golden set to write (JSONL)")
    parser.add_argument("--n", type=int, default=50, metavar="N", help="questions to keep [50]")
    parser.add_argument("--types", default="factoid", metavar="LIST",
                        help="question types to mix, comma-separated: factoid, numeric, multi_sentence [factoid]")
    parser.add_argument("--seed", type=int, default=0, metavar="S", help="sampling seed [0]")
    parser.add_argument("--duplicate-threshold", type=float, default=90.0, metavar="X",
                        help="drop a question whose rapidfuzz token_set_ratio with a kept one is >= X (0-100) [90]")
    parser.add_argument("--max-requests", type=int, default=None, metavar="N",
                        help="stop after N LLM requests, kept or not [3 x --n]")
    parser.add_argument("--force", action="store_true", help="replace --out if it exists")


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    from rag_core.evaluate.golden import GoldenSetError, load_golden
    from rag_core.evaluate.golden_generation import generate_golden, write_golden
    from rag_core.generate.cost import describe_cost, estimate_cost
    from rag_core.ingest.files import read_documents
    from rag_core.llm import LLMClient

    types = tuple(t.strip() for t in args.types.split(",") if t.strip())
    if not 0 <= args.duplicate_threshold <= 100:
        raise BadInput(f"--duplicate-threshold must be between 0 and 100, got {args.duplicate_threshold:g}")
    check_output_file(args.out, "--out")  # a folder or a path under a file: before any request
    if Path(args.out).exists() and not args.force:
        raise GoldenSetError(f"{args.out} already exists: choose another --out, or pass --force to replace it")
    client = LLMClient.from_config(config)  # no key: MissingAPIKey (exit 1) before any work
    with contextlib.redirect_stdout(sys.stderr):  # progress never mixes with the summary or the JSON
        result = read_documents(args.input, progress=True)
        if not result.documents:
            reasons = "; ".join(f"{item.path}: {item.reason}" for item in result.skipped) or "no files found"
            raise BadInput(f"no documents could be read from {args.input} ({reasons})")
        generation = generate_golden(result.documents, client, args.n, types=types, seed=args.seed,
                                     duplicate_threshold=args.duplicate_threshold, max_requests=args.max_requests,
                                     retries=config.llm_max_retries, progress=True)
    if not generation.records:
        print(f"error: no question was kept ({_dropped_text(generation.counts)}); nothing written", file=sys.stderr)
        return EXIT_FAILURE
    path = write_golden(generation.records, args.out, overwrite=args.force)
    load_golden(path, doc_ids=[document.doc_id for document in result.documents])  # what eval will do first
    summary = {
        "out": str(path), "written": len(generation.records), "requested": generation.requested,
        "dropped": generation.counts, "documents": len(result.documents),
        "per_document": _tally(generation.records, lambda r: r["evidence"][0]["source"]),
        "per_position": _tally(generation.records, lambda r: r["position"]),
        "per_type": _tally(generation.records, lambda r: r["type"]),
        "model": generation.model, "input_tokens": generation.usage.input_tokens,
        "output_tokens": generation.usage.output_tokens,
        "cost_usd": estimate_cost(generation.model, generation.usage), "dropped_questions": generation.dropped,
    }
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
        return EXIT_OK
    covered = len(summary["per_document"])
    print("\n".join([
        f"Wrote {len(generation.records)} questions to {path} ({generation.requested} LLM requests)",
        f"Dropped: {_dropped_text(generation.counts)}",
        f"Documents covered: {covered} of {len(result.documents)}; positions: "
        + ", ".join(f"{k} {v}" for k, v in summary["per_position"].items())
        + "; types: " + ", ".join(f"{k} {v}" for k, v in summary["per_type"].items()),
        f"Tokens: {describe_cost(generation.model, generation.usage)}",
        "Review every question, answer and quote before evaluating with it (docs/evaluation.md: 'Reviewing a generated "
        "golden set'); then: rag-pipeline eval --golden " + str(path) + " --input " + str(args.input),
    ]))
    return EXIT_OK


def _dropped_text(counts: dict[str, int]) -> str:
    return ", ".join(f"{count} {reason}" for reason, count in counts.items()) or "none"


def _tally(records: Any, key: Callable[[dict], str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for record in records:
        counts[key(record)] = counts.get(key(record), 0) + 1
    return dict(sorted(counts.items()))
