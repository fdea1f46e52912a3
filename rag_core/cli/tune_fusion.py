"""``rag-pipeline tune-fusion --golden FILE [--test-golden FILE2]``: learn the fusion of the dense and
BM25 lists on one golden set (``ranx.optimize_fusion``), report it on another, and print the YAML
lines to paste into a config.

Left out: the tuning itself (``rag_core.workbench.fusion_tuning``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys

from rag_core.cli.common import EXIT_OK, config_from_args, store_from_args
from rag_core.errors import BadInput

NAME = "tune-fusion"
HELP = "learn dense/BM25 fusion weights on one golden set (ranx), report them on another"
DESCRIPTION = ("Retrieve the dense and BM25 lists of every query of --golden, let ranx.optimize_fusion find the "
               "weights of --method (or RRF's k) that maximise --metric, then evaluate the starting and the tuned "
               "fusion on --test-golden (and on --golden for reference). Prints a table and the YAML lines to "
               "paste into a config. The normalisation is the fusion_norm setting.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--golden", required=True, metavar="FILE", help="golden set to learn the weights on")
    parser.add_argument("--test-golden", metavar="FILE", help="golden set to report them on (default: --golden itself)")
    parser.add_argument("--input", metavar="DIR", help="documents (default: the store's documents)")
    parser.add_argument("--method", default="wsum", help="wsum | wmnz | mixed | w_bordafuse | w_condorcet | rrf [wsum]")
    parser.add_argument("--metric", default="ndcg@10", help="ranx metric optimised, at chunk level [ndcg@10]")
    parser.add_argument("--step", type=float, default=0.1, help="weight grid step [0.1]")


def run(args: argparse.Namespace) -> int:
    config, store_dir = config_from_args(args), store_from_args(args)
    from rag_core.evaluate.golden import load_golden
    from rag_core.workbench.evaluation import load_eval_inputs
    from rag_core.workbench.fusion_tuning import TUNE_METHODS, tune_fusion

    if args.method not in TUNE_METHODS:
        raise BadInput(f"--method must be one of {', '.join(TUNE_METHODS)}, got {args.method!r}")
    if not 0 < args.step <= 0.5:
        raise BadInput(f"--step must be > 0 and <= 0.5, got {args.step}")
    with contextlib.redirect_stdout(sys.stderr):
        inputs = load_eval_inputs(input_dir=args.input, golden=args.golden, store_dir=store_dir, progress=True)
        test = load_golden(args.test_golden, doc_ids=inputs.corpus.by_id) if args.test_golden else inputs.queries
        result = tune_fusion(config, inputs.corpus, inputs.queries, test, store_dir, method=args.method,
                             metric=args.metric, step=args.step, progress=True)
    if args.json:
        print(json.dumps({"method": result.method, "norm": result.norm, "metric": result.metric,
                          "learned": result.learned, "rows": result.rows, "yaml": result.yaml_lines()}, indent=2))
        return EXIT_OK
    import pandas as pd

    with pd.option_context("display.width", 200, "display.max_columns", 20):
        table = pd.DataFrame(result.rows).to_string(index=False, float_format=lambda v: f"{v:.3f}")
    same = "" if args.test_golden else " (no --test-golden: the test rows are the training set, in-sample)"
    print(f"Fusion {result.method} learned on {args.golden} ({len(inputs.queries)} queries) by {result.metric}: "
          f"{result.learned}{same}\n\n{table}\n\nSettings to paste into a config:\n" + "\n".join(result.yaml_lines()))
    return EXIT_OK
