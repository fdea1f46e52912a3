"""Pages as retrieval units (issue 30, item 1): page/recall@5 and page/nDCG@10 of a base configuration
against the same with page retrievers fused (``page_bm25``, ``page_dense``, both), under each page score
(``page_score`` first | max | sum | mean_top), with paired bootstrap intervals and t-tests against the
base; and the cold cost of the page units as a share of ingest.

One process, one store (a fresh temporary one unless ``--store``): the base runs first (its ingest cold:
reading, chunking, embedding, BM25), then ``+page_bm25`` (its page units cold), then ``+page_bm25,page_dense``
(the dense page windows cold), then ``+page_dense`` (warm). ``index/page_seconds`` of a run is the time its
page retrievers took to build (or load) their indexes; the cold cost of the page units is the sum of the
first two page runs' (with the default runs, a warm load of page_bm25 is counted in the second: a few ms). Page scores change
only the page ranking, so they are computed from each run's retrievals, no query is run again.
Usage: python benchmarks/pages.py [--input DIR --golden FILE] [--config YAML] [--modes ...] [--store DIR] [--out FILE]
Left out: re-ranking (no cross-encoder offline), repeats of the timing (one cold run each; the machine is shared).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus_args import add_corpus_arguments  # noqa: E402
from results_file import RESULTS, write_results  # noqa: E402

PAGE_RETRIEVERS = ("page_bm25", "page_bm25,page_dense", "page_dense")
SCORES = (("first", 2), ("max", 2), ("sum", 2), ("mean_top", 2))
METRICS = ("page/recall@5", "page/ndcg@10")


def page_metrics(report, config, rule: str, top_m: int) -> dict[str, dict[str, float]]:
    """query id -> page metrics of `report`'s retrievals under page score `rule` (no query run again)."""
    from rag_core.evaluate.metrics import evaluate_rankings, page_rankings

    scored = config.replace(page_score=rule, page_top_m=top_m)
    pages = page_rankings({qid: retrieval.ranking for qid, retrieval in report.retrievals.items()}, scored)
    result = evaluate_rankings(report.qrels, report.ranked, config.metrics_k, pages=pages)
    return {qid: {name: values[name] for name in METRICS} for qid, values in result.per_query.items()}


def compared(base: dict[str, dict[str, float]], other: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """Per metric: the mean of each side, the paired difference with its 95% bootstrap interval and t-test p."""
    from rag_core.finetune.significance import paired_comparison

    found = {}
    for name in METRICS:
        test = paired_comparison({q: v[name] for q, v in base.items()}, {q: v[name] for q, v in other.items()})
        found[name] = {"base": round(test.baseline, 4), "value": round(test.candidate, 4),
                       "difference": round(test.difference, 4), "low": round(test.low, 4),
                       "high": round(test.high, 4), "p": round(test.p_ttest, 4)}
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_corpus_arguments(parser)
    parser.add_argument("--config", type=Path, help="the base configuration (YAML); default: the defaults")
    parser.add_argument("--modes", default="|".join(PAGE_RETRIEVERS),
                        help="page retrievers added to the base's mode, runs separated by '|' "
                             "(default: page_bm25|page_bm25,page_dense|page_dense)")
    parser.add_argument("--store", type=Path, help="a store to build in (default: a fresh temporary one)")
    parser.add_argument("--out", type=Path, default=RESULTS / "pages.json")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from rag_core.config import load_config
    from rag_core.evaluate.evaluator import evaluate_config
    from rag_core.evaluate.golden import load_golden
    from rag_core.ingest.corpus import Corpus
    from rag_core.ingest.files import read_documents

    base = load_config(args.config) if args.config else load_config(None)
    started = time.perf_counter()
    corpus = Corpus.of(read_documents(args.input, extract_tables=base.extract_tables).documents)
    read_seconds = time.perf_counter() - started
    queries = load_golden(args.golden, doc_ids=corpus.by_id)
    added = [mode for mode in args.modes.split("|") if mode]
    with tempfile.TemporaryDirectory() as work:
        store = args.store or Path(work) / "store"
        runs, rows = {}, []
        for extra in ["", *added]:
            config = base if not extra else base.replace(mode=f"{base.mode if base.mode != 'hybrid' else 'dense,bm25'},{extra}")
            report = evaluate_config(config, corpus, queries, store, read_seconds=0.0 if extra else read_seconds)
            name = extra and f"+{extra}"
            runs[name or "base"] = (report, config)
            metrics = report.metrics
            rows.append({"run": name or "base", "mode": config.mode,
                         "ingest_seconds": round(metrics["index/ingest_seconds"], 2),
                         "page_seconds": round(metrics.get("index/page_seconds", 0.0), 2),
                         "pages": int(metrics.get("index/pages", 0)),
                         "page_windows": int(metrics.get("index/page_windows", 0)),
                         "page_embedded": int(metrics.get("index/page_embedded", 0)),
                         **{name: round(metrics[name], 4) for name in METRICS}})
            print(rows[-1], flush=True)
    base_report, base_config = runs["base"]
    reference = page_metrics(base_report, base_config, "first", 2)
    comparisons = []
    for run, (report, config) in runs.items():
        for rule, top_m in SCORES:
            found = compared(reference, page_metrics(report, config, rule, top_m))
            comparisons.append({"run": run, "page_score": rule if rule != "mean_top" else f"mean_top{top_m}", **found})
            print(f"{run:<28} {comparisons[-1]['page_score']:<10} " + "  ".join(
                f"{name} {v['value']:.3f} ({v['difference']:+.3f} [{v['low']:+.3f}, {v['high']:+.3f}] p={v['p']:.3f})"
                for name, v in found.items()), flush=True)
    cold_base = rows[0]["ingest_seconds"]
    cold_pages = sum(row["page_seconds"] for row in rows[1:3])
    summary = {"base_ingest_seconds": cold_base, "page_units_cold_seconds": round(cold_pages, 2),
               "page_share_of_ingest": round(cold_pages / (cold_base + cold_pages), 3) if cold_base else None,
               "cold_seconds_by_run": {row["run"]: row["page_seconds"] for row in rows[1:3]}}
    print(summary)
    write_results({"input": str(args.input), "golden": str(args.golden), "config": str(args.config or "defaults"),
                   "queries": len(queries), "runs": rows, "comparisons": comparisons, "cost": summary}, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
