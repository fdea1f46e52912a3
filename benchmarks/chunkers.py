"""Chunking methods compared (issue 51): every chunker at each size on one corpus, each at its best size against
``recursive`` at the default (512 words, overlap 64), with 95% intervals and paired tests.

For each chunker and size (words; ``overlap`` = size / 8 for a chunker that reads overlap, as the default
512/64 does, else 0) one ``evaluate_config`` on the corpus (one store: ``--store``, or a temporary one), and per
query: the evidence metrics at each context budget (``evidence/recall|iou@B``), over the top 5 and 10 passages
whole (``evidence_top/*@K``, Chroma's protocol), the page and document metrics; per run: chunks made, seconds of
chunking (a chunker's own embeddings included) and of embedding the chunks (0 when the store had them). Beside the
rule's comparisons, every chunker against the baseline's chunker at the same size (``equal_size``: Chroma's report
compares methods at equal size), without a verdict.

**The rule** (docs/chunkers.md, "Which chunker"): on the primary metric (``--primary``, default the sweep's
``evidence/recall@1024``), a chunker's best size is its best mean; each chunker at its best size is compared with
the baseline by a paired t-test over the queries. It is better on this corpus when the difference is positive
with a p < 0.05 Holm-corrected over the chunkers compared, worse when it is negative with an uncorrected p < 0.05
(a guard: not loosened by how many candidates were tried), else a tie. The default across corpora changes to a
chunker only when it is better on one corpus and worse on none.

Usage: python benchmarks/chunkers.py [--input DIR --golden FILE] [--config YAML] [--set KEY=VALUE ...]
         [--chunkers recursive,fixed,...] [--sizes 128,256,512] [--baseline recursive:512] [--primary METRIC]
         [--store DIR] [--out FILE]
       python benchmarks/chunkers.py --markdown benchmarks/results/chunkers_sample.json   (the figures the docs quote)
Left out: re-ranking (no cross-encoder offline), sizes in tokens (``--set chunk_unit=tokens`` counts every size in
the embedding model's tokens instead).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from chunking_metrics import compared, summary  # noqa: E402
from corpus_args import add_corpus_arguments, read_corpus  # noqa: E402
from results_file import RESULTS, write_results  # noqa: E402

ALL_CHUNKERS = "recursive,fixed,sentences,semantic,cluster,structure"
RANKING_METRICS = ("page/recall@5", "page/ndcg@10", "doc/ndcg@10", "chunk/ndcg@10")
INDEX_FIELDS = ("chunks", "chunk_seconds", "embedded", "embed_seconds")


def overlap_for(chunker: str, size: int) -> int:
    """size / 8 (the default's 64 at 512) where the chunker reads overlap, else 0."""
    from rag_core.ingest.chunkers import CHUNKERS

    return size // 8 if "overlap" in CHUNKERS.reads(chunker) else 0


def metric_names(config) -> list[str]:
    from rag_core.evaluate.evidence_budget import evidence_metric_names

    return [*evidence_metric_names(config.context_budgets, config.metrics_k), *RANKING_METRICS]


def per_query(report, names) -> dict[str, dict[str, float]]:
    """query id -> the metrics of `names` this run has for it (an evidence metric: only where evidence was found)."""
    return {row["query_id"]: {name: row[name] for name in names if row.get(name) is not None}
            for row in report.per_query}


def best_sizes(runs: dict[str, dict], primary: str) -> dict[str, str]:
    """chunker -> the label of its size with the best mean `primary` (the smaller size on a tie)."""
    best: dict[str, str] = {}
    for label, run in runs.items():
        mean = run["metrics"].get(primary, {}).get("mean", float("-inf"))
        chosen = best.get(run["chunker"])
        if chosen is None or mean > runs[chosen]["metrics"].get(primary, {}).get("mean", float("-inf")):
            best[run["chunker"]] = label
    return best


def verdicts(comparisons: list[dict], primary: str, alpha: float = 0.05) -> None:
    """Say better / worse / tie on the primary metric: better needs the Holm-corrected t-test p below `alpha`
    (a claim among several candidates), worse only the uncorrected p (a guard against harm is not loosened by
    the number of candidates tested)."""
    from rag_core.workbench.statistics.selection import holm

    tested = [c for c in comparisons if primary in c["paired"]]
    for comparison, adjusted in zip(tested, holm([c["paired"][primary]["p_ttest"] for c in tested])):
        paired = comparison["paired"][primary]
        comparison["p_holm"] = round(adjusted, 4)
        comparison["verdict"] = ("better" if paired["difference"] > 0 and adjusted < alpha else
                                 "worse" if paired["difference"] < 0 and paired["p_ttest"] < alpha else "tie")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_corpus_arguments(parser)
    parser.add_argument("--config", type=Path, help="the base configuration (YAML); default: the defaults")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a setting of the base")
    parser.add_argument("--chunkers", default=ALL_CHUNKERS, help=f"comma-separated [{ALL_CHUNKERS}]")
    parser.add_argument("--sizes", default="128,256,512", help="chunk sizes (words), comma-separated [128,256,512]")
    parser.add_argument("--baseline", default="recursive:512", help="chunker:size every chunker is compared with")
    parser.add_argument("--primary", default="evidence/recall@1024", help="the metric that chooses")
    parser.add_argument("--store", type=Path, help="a store to build in (default: a fresh temporary one)")
    parser.add_argument("--out", type=Path, default=RESULTS / "chunkers.json")
    parser.add_argument("--markdown", type=Path, metavar="RESULTS",
                        help="run nothing: print the tables of a results file as Markdown (the figures docs/chunkers.md quotes)")
    args = parser.parse_args(argv)
    if args.markdown:
        print(markdown(json.loads(args.markdown.read_text())))
        return 0
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from rag_core.config import load_config
    from rag_core.evaluate.evaluator import evaluate_config

    base = load_config(args.config, dict(item.split("=", 1) for item in args.set))
    corpus, queries = read_corpus(args, base.extract_tables)
    names = metric_names(base)
    chunkers = [name.strip() for name in args.chunkers.split(",") if name.strip()]
    sizes = [int(size) for size in args.sizes.split(",") if size.strip()]
    runs, values = {}, {}
    about = {"input": str(args.input), "golden": str(args.golden), "config": str(args.config or "defaults"),
             "set": args.set, "queries": len(queries), "primary": args.primary, "baseline": args.baseline}
    with tempfile.TemporaryDirectory() as work:
        for chunker in chunkers:
            for size in sizes:
                label = f"{chunker}:{size}"
                config = base.replace(chunker=chunker, chunk_size=size, overlap=overlap_for(chunker, size))
                report = evaluate_config(config, corpus, queries, args.store or Path(work) / "store")
                values[label] = per_query(report, names)
                runs[label] = {"chunker": chunker, "size": size, "overlap": config.overlap,
                               "embed_model_used": report.params.get("embed_model_used"),
                               **{field: round(report.metrics.get(f"index/{field}", 0.0), 3) for field in INDEX_FIELDS},
                               "metrics": summary(values[label])}
                print(row_text(label, runs[label], args.primary), flush=True)
                write_results({**about, "runs": runs, "complete": False}, args.out)  # a long run can be read as it goes
    best = best_sizes(runs, args.primary)
    comparisons = [{"baseline": args.baseline, "candidate": label,
                    "paired": compared(values[args.baseline], values[label])}
                   for label in best.values() if label != args.baseline and args.baseline in values]
    verdicts(comparisons, args.primary)
    for comparison in comparisons:
        print(pair_text(comparison, args.primary), flush=True)
    baseline_chunker = args.baseline.split(":")[0]
    equal_size = [{"baseline": f"{baseline_chunker}:{size}", "candidate": f"{chunker}:{size}",
                   "paired": compared(values[f"{baseline_chunker}:{size}"], values[f"{chunker}:{size}"])}
                  for size in sizes for chunker in chunkers
                  if chunker != baseline_chunker and f"{baseline_chunker}:{size}" in values]
    write_results({**about, "runs": runs, "best_sizes": best, "comparisons": comparisons, "equal_size": equal_size,
                   "complete": True}, args.out)
    return 0


MARKDOWN_METRICS = ("evidence/recall@1024", "evidence/recall@512", "evidence/iou@512", "evidence/recall@256",
                    "evidence_top/recall@5", "evidence_top/iou@5", "page/recall@5")


def markdown(result: dict) -> str:
    """The runs (mean [95% interval]) and the comparisons (difference [interval] p) of a results file as tables."""
    shown = [name for name in MARKDOWN_METRICS if any(name in run["metrics"] for run in result["runs"].values())]
    lines = ["| chunker:size | chunks | " + " | ".join(f"`{name}`" for name in shown) + " |",
             "|---|---|" + "---|" * len(shown)]
    for label, run in result["runs"].items():
        cells = [f"{m['mean']:.3f} [{m['low']:.3f}, {m['high']:.3f}]" if (m := run["metrics"].get(name)) else ""
                 for name in shown]
        lines.append(f"| {label} | {run['chunks']:,.0f} | " + " | ".join(cells) + " |")
    for title, comparisons in (("at its best size, against the baseline", result.get("comparisons", [])),
                               ("at equal size", result.get("equal_size", []))):
        if not comparisons:
            continue
        lines += ["", f"| candidate - baseline ({title}) | verdict | "
                  + " | ".join(f"`{name}`" for name in shown) + " |", "|---|---|" + "---|" * len(shown)]
        for comparison in comparisons:
            paired = comparison["paired"]
            cells = [f"{d['difference']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}] p={d['p_ttest']:.2g}"
                     if (d := paired.get(name)) else "" for name in shown]
            verdict = f"{comparison['verdict']} (Holm p={comparison['p_holm']:.2g})" if "verdict" in comparison else ""
            lines.append(f"| {comparison['candidate']} - {comparison['baseline']} | {verdict} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def row_text(label: str, run: dict, primary: str) -> str:
    shown = (primary, "evidence/recall@512", "evidence/iou@512", "evidence_top/iou@5", "evidence_top/recall@5")
    metrics = run["metrics"]
    return (f"{label:>14} {run['chunks']:>6.0f} chunks, chunking {run['chunk_seconds']:.1f} s, embedding "
            f"{run['embed_seconds']:.1f} s; "
            + "; ".join(f"{name} {metrics[name]['mean']:.3f} [{metrics[name]['low']:.3f}, {metrics[name]['high']:.3f}]"
                        for name in dict.fromkeys(shown) if name in metrics))


def pair_text(comparison: dict, primary: str) -> str:
    paired = comparison["paired"]
    shown = (primary, "evidence/iou@512", "evidence_top/iou@5", "page/recall@5")
    return (f"{comparison['candidate']} - {comparison['baseline']}: {comparison.get('verdict', '?')} "
            f"(Holm p={comparison.get('p_holm', float('nan')):.3g}); "
            + "; ".join(f"{name} {paired[name]['difference']:+.3f} [{paired[name]['low']:+.3f}, "
                        f"{paired[name]['high']:+.3f}] p={paired[name]['p_ttest']:.3g}"
                        for name in dict.fromkeys(shown) if name in paired))


if __name__ == "__main__":
    raise SystemExit(main())
