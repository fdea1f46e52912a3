"""How optimistic is a sweep's best score? The honest-winner report of one finished sweep for many splits.

Reads a sweep's runs and their per-query tables back from MLflow once, then, for each seed and each
selection rule (``--select max,one_se``: ``rag_core.workbench.statistics.selection``), splits the queries
(``holdout`` share), chooses the winner on the tuning queries by the rule and scores it and the default
run on the held-out ones (``rag_core.workbench.statistics.honest``): no point is evaluated again. Prints one row
per seed and rule, and the means per rule; writes ``benchmarks/results/holdout_seeds.json``.
The default run is the sweep's (``rag.default_run_id`` on its parent run, else the run closest to the defaults).
Usage: python benchmarks/holdout_seeds.py [--experiment "documents | golden"] [--parent RUN_ID]
       [--holdout 0.3] [--seeds 20] [--metric page/ndcg@10] [--select max,one_se] [--tracking-uri URI]

Left out: running the sweep (``rag-pipeline sweep experiments/holdout.yaml`` first).
"""

from __future__ import annotations

import argparse
import statistics

from rag_core.workbench.reports.compare import baseline_run, latest_sweep, load_runs
from rag_core.workbench.statistics.holdout import split_queries
from rag_core.workbench.statistics.honest import holdout_report
from rag_core.workbench.statistics.intervals import load_per_query
from rag_core.workbench.statistics.selection import SELECTION_RULES
from rag_core.workbench.tracking.tracker import Tracker
from results_file import RESULTS, write_results



def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiment", default="documents | golden")
    parser.add_argument("--parent", default=None, help="the sweep's parent run [the experiment's latest sweep]")
    parser.add_argument("--holdout", type=float, default=0.3)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--metric", default="page/ndcg@10")
    parser.add_argument("--select", default="max,one_se", help="selection rules, comma-separated [max,one_se]")
    parser.add_argument("--tracking-uri", default=None)
    args = parser.parse_args()
    tracker = Tracker.at(args.tracking_uri)
    parent = args.parent or latest_sweep(args.experiment, tracker.uri)
    runs = load_runs(args.experiment, parent_run_id=parent, tracking_uri=tracker.uri)
    per_query = load_per_query(runs["run_id"], tracker.uri)
    default_id = tracker.client.get_run(parent).data.tags.get("rag.default_run_id") or baseline_run(runs)["run_id"]
    extra = {default_id} if tracker.client.get_run(parent).data.tags.get("rag.default_point") == "extra point" else set()
    query_ids = list(next(iter(per_query.values()))["query_id"])
    rules = [rule.strip() for rule in args.select.split(",") if rule.strip()]
    unknown = [rule for rule in rules if rule not in SELECTION_RULES]
    if unknown or not rules:
        raise SystemExit(f"error: --select takes {', '.join(SELECTION_RULES)}, got {args.select!r}")

    print(f"{len(runs)} runs, {len(query_ids)} queries, holdout {args.holdout}, {args.metric}")
    results = {}
    for rule in rules:
        rows = []
        for seed in range(args.seeds):
            split = split_queries(query_ids, args.holdout, seed)
            report = holdout_report(runs, per_query, split, args.metric, default_id, "default", extra, rule)
            rows.append({"seed": seed, "winner": report.winner.label, "winner_tune": report.winner.tune.estimate,
                         "winner_holdout": report.winner.holdout.estimate, "optimism": report.optimism,
                         "default_tune": report.default.tune.estimate,
                         "default_holdout": report.default.holdout.estimate, "gain_over_default": report.gain.estimate,
                         "indistinguishable": len(report.selection.indistinguishable()),
                         "within_one_se": len(report.selection.eligible)})
        print(f"\nselect: {rule}")
        print(f"{'seed':>4} {'winner tune':>11} {'held-out':>8} {'optimism':>8} {'default h-o':>11} {'gain':>6} "
              f"{'same':>4} {'1 SE':>4}  winner")
        for row in rows:
            print(f"{row['seed']:>4} {row['winner_tune']:>11.3f} {row['winner_holdout']:>8.3f} {row['optimism']:>+8.3f} "
                  f"{row['default_holdout']:>11.3f} {row['gain_over_default']:>+6.3f} {row['indistinguishable']:>4} "
                  f"{row['within_one_se']:>4}  {row['winner']}")
        summary = {name: statistics.mean(row[name] for row in rows)
                   for name in ("winner_tune", "winner_holdout", "optimism", "default_holdout", "gain_over_default",
                                "indistinguishable", "within_one_se")}
        summary["default_tune_minus_holdout"] = statistics.mean(row["default_tune"] - row["default_holdout"] for row in rows)
        summary["optimism_min"] = min(row["optimism"] for row in rows)
        summary["optimism_max"] = max(row["optimism"] for row in rows)
        summary["distinct_winners"] = len({row["winner"] for row in rows})
        print("mean " + ", ".join(f"{name} {value:.3f}" if isinstance(value, float) else f"{name} {value}"
                                  for name, value in summary.items()))
        results[rule] = {"rows": rows, "mean": summary}
    write_results({"parent_run_id": parent, "holdout": args.holdout, "metric": args.metric, "select": results},
                  RESULTS / "holdout_seeds.json")


if __name__ == "__main__":
    main()
