"""What the evidence metrics (``rag_core.evaluate.evidence_budget``, issue 46) add to a warm ``eval``.

One process: the sample corpus is evaluated once to build the store (cold, not counted), then
``evaluate_config`` runs ``--repeats`` times warm, and the evidence metrics are computed again from the
same rankings the same number of times, each from cold caches (the per-document character counts are
cached per process, as in a new ``eval`` process). The ratio is the evidence step's median time over the
median warm ``evaluate_config`` (which includes it): the share of a warm evaluation it takes.

Usage: python benchmarks/evidence_cost.py [--input DIR --golden FILE] [--repeats 5] [--out FILE]
Left out: process start-up and model loading (they make a whole ``eval`` process slower, so the share of
the process is smaller than the share reported here).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus_args import add_corpus_arguments, read_corpus  # noqa: E402
from results_file import RESULTS, write_results  # noqa: E402



def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_corpus_arguments(parser)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=RESULTS / "evidence_cost.json")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from rag_core.config import load_config
    from rag_core.evaluate import evidence_budget
    from rag_core.evaluate.evaluator import evaluate_config

    config = load_config(None)
    corpus, queries = read_corpus(args)
    with tempfile.TemporaryDirectory() as store:
        evaluate_config(config, corpus, queries, store)  # cold: builds the indexes
        evals, evidence = [], []
        for _ in range(args.repeats):
            started = time.perf_counter()
            report = evaluate_config(config, corpus, queries, store)
            evals.append(time.perf_counter() - started)
        rankings = {qid: [hit.chunk for hit in retrieval.ranking] for qid, retrieval in report.retrievals.items()}
        for _ in range(args.repeats):
            evidence_budget._counts.cache_clear()
            started = time.perf_counter()
            evidence_budget.evidence_metrics(queries, corpus.by_id, rankings, config.context_budgets)
            evidence.append(time.perf_counter() - started)
    result = {"queries": len(queries), "budgets": list(config.context_budgets), "repeats": args.repeats,
              "warm_eval_seconds": [round(value, 4) for value in evals],
              "evidence_seconds": [round(value, 5) for value in evidence],
              "share_of_warm_eval": round(statistics.median(evidence) / statistics.median(evals), 4)}
    print(f"warm evaluate_config median {statistics.median(evals):.3f} s; evidence metrics median "
          f"{1000 * statistics.median(evidence):.1f} ms: {100 * result['share_of_warm_eval']:.1f}% of a warm eval "
          f"({len(queries)} queries, budgets {', '.join(map(str, config.context_budgets))})")
    write_results(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
