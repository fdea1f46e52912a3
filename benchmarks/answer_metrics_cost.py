"""What the answer metrics that need no LLM (issue 52) add to an ``eval --answers`` of the sample corpus.

One ``rag-pipeline eval`` builds the store (cold, not counted); then one ``rag-pipeline eval --answers --json``
process runs on it, without an API key (so the answers are extractive, as offline ``eval --answers`` writes
them). The evaluation records what scoring the answers took (``timing/answer_metrics_seconds``: exact match,
token F1, contains, numbers, similarity under the run's embedding model, citation precision and recall,
quote support) and how long the evaluation took inside the process (``timing/evaluate_seconds``: retrieval,
answering and scoring; no start-up, no reading of the PDFs). The target is on the process, what a user waits
for: the scoring step's share of the ``eval --answers`` process's wall time, at most 5% (one run, as the issue
asks); the share of the in-process evaluation is reported beside it, a stricter figure. Two modes: ``hybrid``
(the default: the embedding model is loaded, so ``answer/similarity`` is computed, one model pass over every
answer and golden answer) and ``bm25`` (no embedding model: the string and citation metrics alone).

Usage: python benchmarks/answer_metrics_cost.py [--input DIR --golden FILE] [--modes hybrid,bm25] [--out FILE]
Left out: an LLM's answers (the scoring costs the same on any text of that length).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus_args import add_corpus_arguments  # noqa: E402
from results_file import RESULTS, write_results  # noqa: E402


def eval_process(args: argparse.Namespace, store: str, *extra: str) -> tuple[dict, float]:
    """(the --json output, the wall time) of one ``rag-pipeline eval`` process."""
    environment = {name: value for name, value in os.environ.items() if name not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")}
    environment.setdefault("HF_HUB_OFFLINE", "1")
    command = [sys.executable, "-m", "rag_core.cli", "eval", "--golden", str(args.golden), "--input", str(args.input),
               "--store", store, "--rerank-depth", "0", "--no-mlflow", "--json", *extra]
    started = time.perf_counter()
    completed = subprocess.run(command, capture_output=True, text=True, env=environment, check=True)
    return json.loads(completed.stdout), time.perf_counter() - started


def measure(args: argparse.Namespace, mode: str) -> dict:
    """One cold ``eval`` (not counted), then one ``eval --answers`` process, in `mode`."""
    with tempfile.TemporaryDirectory() as store:
        eval_process(args, store, "--mode", mode)  # cold: builds the indexes
        payload, wall = eval_process(args, store, "--mode", mode, "--answers")
    metrics, rows = payload["metrics"], payload["per_query"]
    scoring, evaluation = metrics["timing/answer_metrics_seconds"], metrics["timing/evaluate_seconds"]
    answering = sum(float(row.get("answer_ms") or 0.0) for row in rows) / 1000
    result = {"mode": mode, "queries": len(rows), "answers": sorted({row["answer_mode"] for row in rows}),
              "similarity_model": payload["params"].get("answer_similarity_model", "none (no embedding model loaded)"),
              "eval_answers_process_seconds": round(wall, 3), "evaluate_seconds": round(evaluation, 3),
              "answering_seconds": round(answering, 3), "metric_seconds": round(scoring, 4),
              "share_of_eval_answers_process": round(scoring / wall, 4),
              "share_of_evaluate": round(scoring / evaluation, 4),
              "metrics": {name: round(value, 4) for name, value in metrics.items()
                          if name.startswith(("answer/", "citation/"))}}
    print(f"{len(rows)} queries, mode {mode}: an eval --answers process {wall:.1f} s (its evaluation "
          f"{evaluation:.1f} s, of which answering {answering:.1f} s); the answer metrics {scoring:.2f} s: "
          f"{100 * result['share_of_eval_answers_process']:.2f}% of the process (target: at most 5%), "
          f"{100 * result['share_of_evaluate']:.2f}% of the evaluation; similarity under {result['similarity_model']}")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_corpus_arguments(parser)
    parser.add_argument("--modes", default="hybrid,bm25", help="retrieval modes, each measured once [hybrid,bm25]")
    parser.add_argument("--out", type=Path, default=RESULTS / "answer_metrics_cost.json")
    args = parser.parse_args(argv)
    runs = [measure(args, mode) for mode in args.modes.split(",")]
    write_results({"target_share": 0.05, "runs": runs}, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
