"""Page- and document-level retrieval on a folder of filings for each ingest technique on and off
(tables, contextual chunk text, document routing); prints a table, writes JSON.

The corpus is read once (the extraction cache under ``<store>/extracted`` keeps what PyMuPDF gave),
then each configuration is evaluated with ``evaluate_config``, as ``rag-pipeline eval`` does, without
MLflow. BM25 mode needs no embeddings, so the default grid is cheap; ``--mode hybrid`` embeds.
Routing is also scored alone: the share of queries whose evidence document is among the routed ones.
Each set after the first is compared with the first by a paired t-test on per-query page/recall@5
(the test ``ranx.compare`` runs as "student"), and page/ndcg@10.

Usage: python benchmarks/filings_techniques.py --input DIR --golden FILE --store DIR
       [--mode bm25] [--set name:key=value,key=value ...]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from rag_core.config import RagConfig  # noqa: E402
from rag_core.evaluate.evaluator import evaluate_config  # noqa: E402
from rag_core.workbench.execution.evaluation import load_eval_inputs  # noqa: E402
from results_file import RESULTS, write_results  # noqa: E402

DEFAULT_SETS = [
    "baseline:", "title:chunk_context=title", "title_heading:chunk_context=title_heading",
    "route1:route_docs=1", "route3:route_docs=3", "route3+title:route_docs=3,chunk_context=title",
    "route1+title_heading:route_docs=1,chunk_context=title_heading",
]
METRICS = ("page/recall@5", "page/recall@10", "page/ndcg@10", "page/hit_rate@5", "doc/recall@5", "doc/mrr")


PAIRED = ("page/recall@5", "page/ndcg@10")


def paired_p(first: list[float], other: list[float]) -> float:
    """Two-sided paired t-test p-value (1.0 when the two are identical query by query)."""
    from scipy.stats import ttest_rel

    if first == other:
        return 1.0
    return float(ttest_rel(other, first).pvalue)


def parse_set(text: str) -> tuple[str, dict[str, str]]:
    name, _, body = text.partition(":")
    return name, dict(item.split("=", 1) for item in body.split(",") if item)


def routing_hit(report, k: int) -> float:
    """Share of queries with an evidence document among the first `k` routed documents."""
    hits = []
    for qid, retrieval in report.retrievals.items():
        relevant = set(report.qrels["doc"][qid])
        hits.append(float(any(item.id in relevant for item in retrieval.routed[:k])))
    return sum(hits) / len(hits) if hits else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", required=True)
    parser.add_argument("--golden", required=True)
    parser.add_argument("--store", required=True)
    parser.add_argument("--mode", default="bm25")
    parser.add_argument("--set", action="append", dest="sets", help="name:key=value,key=value (repeatable)")
    parser.add_argument("--out", default=str(RESULTS / "filings_techniques.json"))
    args = parser.parse_args()
    started = time.perf_counter()
    inputs = load_eval_inputs(input_dir=args.input, golden=args.golden, store_dir=args.store, progress=True)
    read_seconds = time.perf_counter() - started
    rows = []
    for name, settings in map(parse_set, args.sets or DEFAULT_SETS):
        config = RagConfig.from_dict({"mode": args.mode, "rerank_depth": 0, **settings})
        began = time.perf_counter()
        report = evaluate_config(config, inputs.corpus, inputs.queries, args.store)
        row = {"name": name, "mode": args.mode, **settings, **{m: report.metrics.get(m, 0.0) for m in METRICS},
               "seconds": time.perf_counter() - began,
               "latency_total_p50_ms": report.metrics.get("latency/total_p50_ms", 0.0)}
        if config.route_docs:
            row["route_hit"] = routing_hit(report, config.route_docs)
            row["latency_route_p50_ms"] = report.metrics.get("latency/route_p50_ms", 0.0)
        row["per_query"] = {name: [query_row[name] for query_row in report.per_query] for name in PAIRED}
        if rows:
            row["paired_p_vs_first"] = {name: paired_p(rows[0]["per_query"][name], row["per_query"][name]) for name in PAIRED}
        rows.append(row)
        print(f"{name:<28} " + " ".join(f"{m}={row[m]:.3f}" for m in METRICS)
              + (f" route_hit={row['route_hit']:.3f}" if "route_hit" in row else "")
              + (f" p={row['paired_p_vs_first']['page/recall@5']:.3g}" if "paired_p_vs_first" in row else "")
              + f" ({row['seconds']:.0f} s)",
              flush=True)
    write_results({"input": args.input, "golden": args.golden, "queries": len(inputs.queries),
                   "documents": len(inputs.corpus), "read_seconds": read_seconds, "rows": rows}, args.out)


if __name__ == "__main__":
    main()
