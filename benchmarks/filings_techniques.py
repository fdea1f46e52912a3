"""Page- and document-level retrieval on a folder of filings for each ingest technique on and off
(tables, contextual chunk text, document routing); prints a table, writes JSON.

The corpus is read once (the extraction cache under ``<store>/extracted`` keeps what PyMuPDF gave),
then each configuration is evaluated with ``evaluate_config``, as ``rag-pipeline eval`` does, without
MLflow. BM25 mode needs no embeddings, so the default grid is cheap; ``--mode hybrid`` embeds.
Routing is also scored alone: the share of queries whose evidence document is among the routed ones.
Each set gets 95% bootstrap intervals over the questions (``rag_core.workbench.statistics.intervals``) on
page/recall@5 and page/ndcg@10, and each set after the first the paired difference against the first, with
its bootstrap interval and paired t-test p (``rag_core.finetune.significance.paired_comparison``); a
Markdown table of them ends the output.

Usage: python benchmarks/filings_techniques.py --input DIR --golden FILE --store DIR
       [--config FILE] [--mode bm25] [--set name:key=value,key=value ...]
A value may hold commas (``--set pages:mode=dense,bm25,page_bm25,page_score=max``): an item starts at
``key=``. ``--config`` gives the base settings every set starts from (``--mode`` and the sets override it).
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import re  # noqa: E402

from rag_core.config import RagConfig, read_yaml_settings  # noqa: E402
from rag_core.evaluate.evaluator import evaluate_config  # noqa: E402
from rag_core.workbench.execution.evaluation import load_eval_inputs  # noqa: E402
from results_file import RESULTS, interval_text, write_results  # noqa: E402

DEFAULT_SETS = [
    "baseline:", "title:chunk_context=title", "title_heading:chunk_context=title_heading",
    "route1:route_docs=1", "route3:route_docs=3", "route3+title:route_docs=3,chunk_context=title",
    "route1+title_heading:route_docs=1,chunk_context=title_heading",
]
METRICS = ("page/recall@5", "page/recall@10", "page/ndcg@10", "page/hit_rate@5", "doc/recall@5", "doc/mrr")


PAIRED = ("page/recall@5", "page/ndcg@10")
NOT_SETTINGS = {"name", "mode", *METRICS, "seconds", "latency_total_p50_ms", "route_hit", "latency_route_p50_ms",
                "per_query", "intervals", "vs_first"}


def add_statistics(row: dict, first: dict | None, query_ids: list[str]) -> None:
    """Intervals of the paired metrics, and the paired comparison against the first set (per-query lists,
    in the order of `query_ids`, the same for every set)."""
    from dataclasses import asdict

    from rag_core.finetune.significance import paired_comparison
    from rag_core.workbench.statistics.intervals import bootstrap_interval

    row["intervals"] = {name: asdict(bootstrap_interval(row["per_query"][name])) for name in PAIRED}
    if first is not None:
        row["vs_first"] = {name: paired_comparison(dict(zip(query_ids, first["per_query"][name])),
                                                   dict(zip(query_ids, row["per_query"][name]))).as_dict()
                           for name in PAIRED}


def markdown(rows: list[dict]) -> str:
    def cell(row: dict, name: str) -> str:
        interval = row["intervals"][name]
        return interval_text(interval["estimate"], interval["low"], interval["high"], row.get("vs_first", {}).get(name))

    lines = [f"| set | mode | settings | {PAIRED[0]} [95% CI] (paired vs first) | {PAIRED[1]} [95% CI] (paired vs first) |",
             "|---|---|---|---|---|"]
    for row in rows:
        settings = ", ".join(f"{key}={value}" for key, value in row.items() if key not in NOT_SETTINGS)
        lines.append(f"| {row['name']} | {row['mode']} | {settings or 'the base'} | {cell(row, PAIRED[0])} | {cell(row, PAIRED[1])} |")
    return "\n".join(lines)


def parse_set(text: str) -> tuple[str, dict[str, str]]:
    name, _, body = text.partition(":")
    return name, dict(item.split("=", 1) for item in re.split(r",(?=\w+=)", body) if item)


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
    parser.add_argument("--config", help="YAML of base settings (e.g. experiments/filings-best.yaml)")
    parser.add_argument("--mode", help="retrieval mode of every set [the config's, else bm25]")
    parser.add_argument("--set", action="append", dest="sets", help="name:key=value,key=value (repeatable)")
    parser.add_argument("--out", default=str(RESULTS / "filings_techniques.json"))
    args = parser.parse_args()
    started = time.perf_counter()
    inputs = load_eval_inputs(input_dir=args.input, golden=args.golden, store_dir=args.store, progress=True)
    read_seconds = time.perf_counter() - started
    base = {"mode": "bm25", "rerank_depth": 0, **(read_yaml_settings(args.config) if args.config else {})}
    if args.mode:
        base["mode"] = args.mode
    rows = []
    for name, settings in map(parse_set, args.sets or DEFAULT_SETS):
        config = RagConfig.from_dict({**base, **settings})
        began = time.perf_counter()
        report = evaluate_config(config, inputs.corpus, inputs.queries, args.store)
        row = {"name": name, "mode": config.mode, **settings, **{m: report.metrics.get(m, 0.0) for m in METRICS},
               "seconds": time.perf_counter() - began,
               "latency_total_p50_ms": report.metrics.get("latency/total_p50_ms", 0.0)}
        if config.route_docs:
            row["route_hit"] = routing_hit(report, config.route_docs)
            row["latency_route_p50_ms"] = report.metrics.get("latency/route_p50_ms", 0.0)
        query_ids = [query_row["query_id"] for query_row in report.per_query]
        row["per_query"] = {name: [query_row[name] for query_row in report.per_query] for name in PAIRED}
        add_statistics(row, rows[0] if rows else None, query_ids)
        rows.append(row)
        print(f"{name:<28} " + " ".join(f"{m}={row[m]:.3f}" for m in METRICS)
              + (f" route_hit={row['route_hit']:.3f}" if "route_hit" in row else "")
              + (f" p={row['vs_first']['page/recall@5']['p_ttest']:.3g}" if "vs_first" in row else "")
              + f" ({row['seconds']:.0f} s)",
              flush=True)
    print(markdown(rows))
    write_results({"input": args.input, "golden": args.golden, "queries": len(inputs.queries),
                   "documents": len(inputs.corpus), "read_seconds": read_seconds, "rows": rows}, args.out)


if __name__ == "__main__":
    main()
