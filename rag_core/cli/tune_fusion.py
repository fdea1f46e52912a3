"""``rag-pipeline tune-fusion --golden FILE [--test-golden FILE2]``: learn the fusion of the retrievers'
lists (those of ``--mode`` when it names several, else dense and BM25) on one golden set
(``ranx.optimize_fusion``), keep it only if it beats each retriever alone there, report it on another,
and print the YAML lines to paste into a config.

Left out: the tuning itself (``rag_core.workbench.search.fusion_tuning``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys

from rag_core.cli.common import EXIT_OK, config_from_args, store_from_args
from rag_core.errors import BadInput

NAME = "tune-fusion"
HELP = "learn per-retriever fusion weights on one golden set (ranx), report them on another"
DESCRIPTION = ("Retrieve each retriever's list (those of --mode when it names several, else dense and BM25) for every "
               "query of --golden, let ranx.optimize_fusion find one weight per retriever for --method (or RRF's k) "
               "that maximises --metric, and keep the best on --golden of that fusion and each retriever alone (so the "
               "choice is never below its best input there). Then evaluate the starting configuration, the tuned one "
               "and the other candidates on --test-golden (and on --golden for reference). Prints a table and the YAML "
               "lines to paste into a config. Weighted methods learn their weights after each normalisation of --norm and keep "
               "the best there.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--golden", required=True, metavar="FILE", help="golden set to learn the weights on")
    parser.add_argument("--test-golden", metavar="FILE", help="golden set to report them on (default: --golden itself)")
    parser.add_argument("--input", metavar="DIR", help="documents (default: the store's documents)")
    parser.add_argument("--method", default="wsum", help="wsum | wmnz | mixed | w_bordafuse | w_condorcet | rrf [wsum]")
    parser.add_argument("--metric", default="ndcg@10", help="ranx metric optimised, at chunk level [ndcg@10]")
    parser.add_argument("--step", type=float, default=0.1, help="weight grid step [0.1]")
    parser.add_argument("--norm", default="all", metavar="NAMES",
                        help="score normalisations to try, comma-separated (min-max, max, sum, zmuv, rank, borda, none), "
                             "or 'all' (every one but none, the fusion_norm setting first); a tie goes to the earlier one [all]")


def run(args: argparse.Namespace) -> int:
    config, store_dir = config_from_args(args), store_from_args(args)
    from rag_core.evaluate.golden import load_golden
    from rag_core.workbench.execution.evaluation import load_eval_inputs
    from rag_core.workbench.search.fusion_tuning import TUNE_METHODS, parse_norms, tune_fusion

    if args.method not in TUNE_METHODS:
        raise BadInput(f"--method must be one of {', '.join(TUNE_METHODS)}, got {args.method!r}")
    try:
        norms = parse_norms(args.norm, config.fusion_norm)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    if not 0 < args.step <= 0.5:
        raise BadInput(f"--step must be > 0 and <= 0.5, got {args.step}")
    with contextlib.redirect_stdout(sys.stderr):
        inputs = load_eval_inputs(input_dir=args.input, golden=args.golden, store_dir=store_dir, progress=True)
        test = load_golden(args.test_golden, doc_ids=inputs.corpus.by_id) if args.test_golden else inputs.queries
        result = tune_fusion(config, inputs.corpus, inputs.queries, test, store_dir, method=args.method,
                             metric=args.metric, step=args.step, norms=norms, progress=True)
    if args.json:
        print(json.dumps({"method": result.method, "norm": result.norm, "norm_scores": result.norm_scores,
                          "metric": result.metric,
                          "learned": result.learned, "candidates": result.candidates,
                          "chosen": result.chosen, "rows": result.rows, "yaml": result.yaml_lines()}, indent=2))
        return EXIT_OK
    import pandas as pd

    with pd.option_context("display.width", 200, "display.max_columns", 20):
        table = pd.DataFrame(result.rows).to_string(index=False, float_format=lambda v: f"{v:.3f}")
    same = "" if args.test_golden else " (no --test-golden: the test rows are the training set, in-sample)"
    compared = ", ".join(f"{label} {value:.3f}" for label, value in result.candidates.items())
    norms_tried = ", ".join(f"{norm} {value:.3f}" for norm, value in result.norm_scores.items())
    print(f"Fusion {result.method} learned on {args.golden} ({len(inputs.queries)} queries) by {result.metric}: "
          f"{result.learned} after {result.norm}{same}\nOn {args.golden} by chunk {result.metric}: the fusion after "
          f"each normalisation: {norms_tried}; {compared}; tuned = {result.chosen}"
          f"\n\n{table}\n\nSettings to paste into a config:\n" + "\n".join(result.yaml_lines()))
    return EXIT_OK
