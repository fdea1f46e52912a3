"""``rag-pipeline gate``: exit 1 when a candidate configuration is significantly worse than the baseline.

The test and its statistics are ``rag_core.workbench.statistics.gate`` (both evaluations:
``rag_core.workbench.execution.gate_run``); this module reads the two configuration
files (setting flags apply to both), prints the table (or ``--json``) and turns the verdict into the
exit code: 0 pass, 1 the candidate is worse, 2 bad input. A CI example: ``docs/ci-gate.yml``.
Left out: logging the gate to MLflow (``eval`` logs a configuration's run).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys

from rag_core.cli.common import EXIT_FAILURE, EXIT_OK, store_from_args

NAME = "gate"
HELP = "fail (exit 1) when a candidate configuration is significantly worse than the baseline"
DESCRIPTION = (
    "Evaluate --baseline and --candidate (YAML settings files; setting flags apply to both) on the same golden-set "
    "queries and compare them query by query: the candidate fails when it is worse than the baseline by more than "
    "--margin with a one-sided paired t-test at --alpha (Holm-adjusted over several --metric). Prints both scores "
    "with bootstrap 95%% intervals, the difference and the p-values. Each metric's direction comes from the metric "
    "registry (docs/evaluation.md, 'Every metric'): lower is better for latencies and context/words, higher for "
    "every score; a column that is not a metric is refused. An answer or citation metric (answer/token_f1, "
    "citation/recall) makes both sides answer every query. --judge has the LLM answer for both sides and judge each "
    "pair of answers twice, in both orders (a verdict that flips with the order is a tie), and gates on "
    "judge/pairwise_win too (needs an API key). Exit 0: pass; 1: worse; 2: bad input.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--golden", required=True, metavar="FILE",
                        help="golden set (JSONL), or mlflow:NAME[@VERSION] (an MLflow golden dataset)")
    parser.add_argument("--baseline", required=True, metavar="YAML", help="settings of the baseline configuration")
    parser.add_argument("--candidate", required=True, metavar="YAML", help="settings of the candidate configuration")
    parser.add_argument("--metric", action="append", metavar="M",
                        help="metric to gate on, repeatable (default page/ndcg@10)")
    parser.add_argument("--margin", type=float, default=0.0, metavar="X",
                        help="how much worse the candidate may be before it fails [0]")
    parser.add_argument("--alpha", type=float, default=0.05, metavar="P", help="significance level [0.05]")
    parser.add_argument("--input", metavar="DIR", help="documents to evaluate on (default: the store's documents)")
    parser.add_argument("--judge", action="store_true", help="also compare the two sides' LLM answers with the "
                        "pairwise judge, asked twice with the answers swapped, and gate on judge/pairwise_win "
                        "(needs an API key)")


def run(args: argparse.Namespace) -> int:
    from rag_core.cli.common import setting_flags
    from rag_core.config import load_config
    from rag_core.errors import BadInput
    from rag_core.workbench.execution.gate_run import run_gate
    from rag_core.workbench.statistics.gate import DEFAULT_METRICS

    if args.config:
        raise BadInput("gate takes its two configurations from --baseline and --candidate, not --config")
    flags = setting_flags(args)
    baseline, candidate = load_config(args.baseline, flags), load_config(args.candidate, flags)
    with contextlib.redirect_stdout(sys.stderr):  # progress never mixes with the table or the JSON
        gate = run_gate(baseline, candidate, golden=args.golden, store_dir=store_from_args(args),
                        input_dir=args.input, metrics=args.metric or DEFAULT_METRICS, margin=args.margin,
                        alpha=args.alpha, progress=True, judge=args.judge)
    if args.json:  # "golden": the file or the MLflow dataset version evaluated (mlflow:NAME pinned to its newest)
        print(json.dumps({**gate.as_json(), "baseline": args.baseline, "candidate": args.candidate}, indent=2))
    else:
        print(format_gate(gate.result, args.baseline, args.candidate, gate.golden["source"], gate.pairwise))
    return EXIT_FAILURE if gate.result.failed else EXIT_OK


def format_gate(result, baseline: str, candidate: str, golden: str | None = None, pairwise: dict | None = None) -> str:
    """The gate's table: one row per metric, and the verdict (`golden`: the set both sides read, named above;
    `pairwise`: the pairwise judge's counts, ``gate --judge``)."""
    from rag_core.workbench.statistics.intervals import number

    width = max([16, *(len(gate.metric) for gate in result.metrics)])
    header = (f"{'metric':<{width}} {'better':<7} {'baseline':<24} {'candidate':<24} {'difference':<26} {'p':>8} "
              f"{'p Holm':>8}  verdict")
    rows = [header]
    for gate in result.metrics:
        change = gate.difference
        difference = f"{change.estimate:+.3f} [{change.low:+.3f}, {change.high:+.3f}]"
        rows.append(f"{gate.metric:<{width}} {'higher' if gate.higher_is_better else 'lower':<7} {str(gate.baseline):<24} "
                    f"{str(gate.candidate):<24} {difference:<26} {gate.p:>8.3g} {gate.p_holm:>8.3g}  "
                    f"{'WORSE' if gate.worse else 'ok'}")
    verdict = ("FAIL: the candidate is worse than the baseline" if result.failed else
               "PASS: the candidate is not significantly worse than the baseline")
    return "\n".join([
        f"baseline {baseline} vs candidate {candidate}" + (f" on {golden}" if golden else "") +
        f": {result.queries} queries, margin {number(result.margin)}, "
        f"alpha {result.alpha} (one-sided paired t-test, Holm over {len(result.metrics)} metric(s))",
        "", *rows, *pairwise_lines(pairwise), "", f"{verdict} (exit {1 if result.failed else 0})"])


def pairwise_lines(pairwise: dict | None) -> list[str]:
    """How the pairwise judge decided (``gate --judge``)."""
    if not pairwise:
        return []
    counts = pairwise["counts"]
    return ["", f"Pairwise judge (each pair asked twice, the answers swapped; a verdict that flips is a tie): "
                f"candidate better {int(counts['judge/pairwise_candidate_wins'])}, baseline better "
                f"{int(counts['judge/pairwise_baseline_wins'])}, ties {int(counts['judge/pairwise_ties'])} "
                f"(flipped with the order {int(counts['judge/pairwise_flips'])}); "
                f"{int(counts['judge/failures'])} replies failed after retries (counted as ties)"]
