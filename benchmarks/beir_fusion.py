"""Learn the fusion on part of a BEIR split and report it on the claims held out (issue 17 item 5).

Splits the split's queries with the sweep's seeded hash (``rag_core.workbench.statistics.holdout.split_queries``),
runs ``tune_fusion`` (``rag-pipeline tune-fusion``: one weight per retriever learned by
``ranx.optimize_fusion`` on the tuning part after each score normalisation, the best normalisation
there kept, and the fusion kept only if it beats each retriever alone there) and
prints every candidate's doc/ndcg@10 on both parts. Nothing is chosen on the held-out part.
Usage: python benchmarks/beir_fusion.py DIR [--split train] [--holdout 0.25] [--seed 17] [--method wsum]
       [--store DIR] [--step 0.1] [--norm all]
Writes ``benchmarks/results/beir_fusion.json``. Left out: cross-validation (one split, stated).
"""

from __future__ import annotations

import argparse

from results_file import RESULTS, write_results

from rag_core.config import RagConfig
from rag_core.workbench.execution.evaluation import load_eval_inputs
from rag_core.workbench.search.fusion_tuning import parse_norms, tune_fusion
from rag_core.workbench.statistics.holdout import split_queries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("beir")
    parser.add_argument("--split", default="train")
    parser.add_argument("--holdout", type=float, default=0.25)
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--method", default="wsum")
    parser.add_argument("--step", type=float, default=0.1)
    parser.add_argument("--norm", default="all", help="normalisations to try, comma-separated, or all")
    parser.add_argument("--store", required=True)
    args = parser.parse_args()
    inputs = load_eval_inputs(beir=args.beir, split=args.split, store_dir=args.store, progress=True)
    split = split_queries([query.id for query in inputs.queries], args.holdout, args.seed)
    held_out = set(split.held_out)
    tuning = [query for query in inputs.queries if query.id not in held_out]
    test = [query for query in inputs.queries if query.id in held_out]
    config = RagConfig(mode="hybrid", rerank_depth=0)
    norms = parse_norms(args.norm, config.fusion_norm)
    result = tune_fusion(config, inputs.corpus, tuning, test, args.store, method=args.method, step=args.step,
                         norms=norms, progress=True)
    print(f"{len(tuning)} tuning claims, {len(test)} held out (holdout {args.holdout}, seed {args.seed}); "
          f"learned {result.learned} after {result.norm}; on the tuning claims by chunk {result.metric}: "
          f"by normalisation {result.norm_scores}, {result.candidates}; "
          f"tuned = {result.chosen}")
    for row in result.rows:
        print(f"{row['golden']:>5} {row['config']:<16} {row['fusion']:<40} doc/ndcg@10 {row['doc/ndcg@10']:.4f} "
              f"doc/recall@5 {row['doc/recall@5']:.4f}")
    write_results({"beir": args.beir, "split": args.split, "holdout": args.holdout, "seed": args.seed,
                   "tuning_queries": len(tuning), "held_out_queries": len(test), "method": result.method,
                   "learned": result.learned, "norm": result.norm, "norm_scores": result.norm_scores,
                   "candidates": result.candidates, "chosen": result.chosen,
                   "yaml": result.yaml_lines(), "rows": result.rows}, RESULTS / "beir_fusion.json")


if __name__ == "__main__":
    main()
