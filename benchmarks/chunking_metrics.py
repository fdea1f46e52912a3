"""Chunkings compared on equal terms (issue 46): for each chunking, the metrics at every level, page
metrics under each page credit (``page_credit`` tied | majority | page_order), the evidence metrics at
each context budget, and the share of retrieved passages that cross a page; then paired differences
between chunkings with 95% bootstrap intervals and t-tests.

One ``evaluate_config`` per chunking (one store, a temporary one unless ``--store``); the credit rules
change only the page ranking, so they are computed from each run's retrievals, no query is run again.
A passage "crosses a page" when it spans more than one page; the share is over the passages of the
final rankings to depth max(metrics_k).

Usage: python benchmarks/chunking_metrics.py [--input DIR --golden FILE] [--config YAML]
         [--chunkings 256/0,512/64,...] [--pairs 512/64:512/0,...] [--set key=value ...] [--store DIR] [--out FILE]
Left out: re-ranking (no cross-encoder offline), BEIR folders (one-page documents: every credit rule is
the same ranking, and BEIR qrels quote no evidence text).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus_args import add_corpus_arguments, read_corpus  # noqa: E402
from results_file import RESULTS, write_results  # noqa: E402

CREDITS = ("tied", "majority", "page_order")
PAGE_METRICS = ("page/ndcg@10", "page/mrr", "page/recall@5")
OTHER_METRICS = ("chunk/ndcg@10", "chunk/mrr", "doc/ndcg@10")
DEFAULT_CHUNKINGS = "256/0,256/64,512/0,512/64,1024/0,1024/64"  # experiments/grid.yaml's chunkings
DEFAULT_PAIRS = "512/64:512/0,512/64:256/64,512/64:1024/64"


def per_query_metrics(report, config, corpus) -> dict[str, dict[str, float]]:
    """query id -> every reported metric of one run, the page ones under each credit rule."""
    from rag_core.evaluate.metrics import evaluate_rankings, page_rankings

    rankings = {qid: retrieval.ranking for qid, retrieval in report.retrievals.items()}
    values = {qid: {name: row.get(name) for name in (*OTHER_METRICS, *evidence_names(config))}
              for qid, row in ((row["query_id"], row) for row in report.per_query)}
    for credit in CREDITS:
        pages = page_rankings(rankings, config.replace(page_credit=credit), corpus.by_id)
        scored = evaluate_rankings(report.qrels, report.ranked, config.metrics_k, pages=pages)
        for qid, found in scored.per_query.items():
            values[qid].update({f"{name} {credit}": found[name] for name in PAGE_METRICS})
    return values


def evidence_names(config) -> list[str]:
    from rag_core.evaluate.evidence_budget import evidence_metric_names

    return evidence_metric_names(config.context_budgets)


def crossing_share(report) -> float:
    passages = [chunk for chunks in report.ranked.values() for chunk in chunks]
    return sum(chunk.page_end > chunk.page_start for chunk in passages) / len(passages) if passages else 0.0


def summary(values: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """metric -> mean and 95% bootstrap interval over the queries that have it."""
    from rag_core.workbench.statistics.intervals import bootstrap_interval

    names = list(next(iter(values.values())))
    found = {}
    for name in names:
        column = [row[name] for row in values.values() if row.get(name) is not None]
        if column:
            interval = bootstrap_interval(column)
            found[name] = {"mean": round(interval.estimate, 4), "low": round(interval.low, 4),
                           "high": round(interval.high, 4), "queries": len(column)}
    return found


def compared(base: dict[str, dict[str, float]], other: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    from rag_core.finetune.significance import paired_comparison

    found = {}
    for name in base[next(iter(base))]:
        pairs = {qid: (row[name], other[qid][name]) for qid, row in base.items()
                 if row.get(name) is not None and other.get(qid, {}).get(name) is not None}
        if len(pairs) > 1:
            test = paired_comparison({q: a for q, (a, _) in pairs.items()}, {q: b for q, (_, b) in pairs.items()})
            found[name] = {key: round(value, 4) for key, value in test.as_dict().items() if isinstance(value, float)}
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_corpus_arguments(parser)
    parser.add_argument("--config", type=Path, help="the base configuration (YAML); default: the defaults")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a setting of the base")
    parser.add_argument("--chunkings", default=DEFAULT_CHUNKINGS,
                        help="chunk_size/overlap, comma-separated; a size ending in t counts tokens (128t/64)")
    parser.add_argument("--pairs", default=DEFAULT_PAIRS, help="baseline:candidate chunkings to test, comma-separated")
    parser.add_argument("--store", type=Path, help="a store to build in (default: a fresh temporary one)")
    parser.add_argument("--out", type=Path, default=RESULTS / "chunking_metrics.json")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from rag_core.config import load_config
    from rag_core.evaluate.evaluator import evaluate_config

    base = load_config(args.config, dict(item.split("=", 1) for item in args.set))
    corpus, queries = read_corpus(args, base.extract_tables)
    chunkings = [item.strip() for item in args.chunkings.split(",") if item.strip()]
    runs, rows = {}, []
    with tempfile.TemporaryDirectory() as work:
        for chunking in chunkings:
            size, overlap = chunking.split("/")
            unit = "tokens" if size.endswith("t") else "words"
            config = base.replace(chunk_size=int(size.rstrip("t")), overlap=int(overlap), chunk_unit=unit)
            report = evaluate_config(config, corpus, queries, args.store or Path(work) / "store")
            runs[chunking] = per_query_metrics(report, config, corpus)
            rows.append({"chunking": chunking, "mode": config.mode, "chunks": int(report.metrics["index/chunks"]),
                         "crossing_share": round(crossing_share(report), 4), "metrics": summary(runs[chunking])})
            print(row_text(rows[-1]), flush=True)
    comparisons = []
    for pair in (item for item in args.pairs.split(",") if item.strip()):
        baseline, candidate = pair.split(":")
        if baseline in runs and candidate in runs:
            comparisons.append({"baseline": baseline, "candidate": candidate,
                                "paired": compared(runs[baseline], runs[candidate])})
            print(pair_text(comparisons[-1]), flush=True)
    write_results({"input": str(args.input), "golden": str(args.golden), "config": str(args.config or "defaults"),
                   "set": args.set, "queries": len(queries), "runs": rows, "comparisons": comparisons}, args.out)
    return 0


def row_text(row: dict) -> str:
    shown = ("evidence/recall@1024", "page/ndcg@10 tied", "page/ndcg@10 page_order", "chunk/ndcg@10", "doc/ndcg@10")
    metrics = row["metrics"]
    return (f"{row['chunking']:>8} {row['mode']:<7} {row['chunks']:>6} chunks, {100 * row['crossing_share']:.0f}% cross a page; "
            + "; ".join(f"{name} {metrics[name]['mean']:.3f} [{metrics[name]['low']:.3f}, {metrics[name]['high']:.3f}]"
                        for name in shown if name in metrics))


def pair_text(comparison: dict) -> str:
    shown = ("evidence/recall@1024", "evidence/recall@512", "page/ndcg@10 tied", "page/ndcg@10 majority",
             "page/ndcg@10 page_order", "page/mrr tied", "page/mrr page_order")
    paired = comparison["paired"]
    return (f"{comparison['candidate']} - {comparison['baseline']}: "
            + "; ".join(f"{name} {paired[name]['difference']:+.3f} [{paired[name]['low']:+.3f}, "
                        f"{paired[name]['high']:+.3f}] p={paired[name]['p_ttest']:.3g}" for name in shown if name in paired))


if __name__ == "__main__":
    raise SystemExit(main())
