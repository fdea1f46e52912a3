"""``rag-pipeline sweep FILE``: run a sweep (a grid, or a search with ``strategy: tpe | halving``) and
print its comparison table (or JSON), every metric with its bootstrap 95% interval, what a search did,
and, when the sweep holds out queries, the honest winner. ``--dry-run`` prints the estimated cost only.

Left out: the sweep itself (``rag_core.workbench``), its text (``rag_core.workbench.reports.text``).
"""

from __future__ import annotations

import argparse
import json
import sys

from rag_core.cli.common import EXIT_FAILURE, EXIT_OK, config_from_args, setting_flags, store_from_args
from rag_core.errors import ConfigError
from rag_core.writes import check_output_folder

NAME = "sweep"
HELP = "run a grid of settings (or a search over them) through the evaluation notebook, logged to MLflow"
DESCRIPTION = ("Execute notebooks/02-evaluate.ipynb once per grid point of FILE, in one warm Jupyter kernel per "
               "worker; one MLflow parent run per sweep and one child run per point. Points already finished with the "
               "same settings are skipped (--rerun runs them again). Points that need a cross-encoder that cannot be "
               "loaded are not run, and the sweep says so. With strategy: tpe or halving in FILE, Optuna picks the "
               "points within the file's budget (a stopped search resumes).")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help="sweep file, e.g. experiments/grid.yaml")
    parser.add_argument("--workers", type=int, default=1, metavar="N", help="grid points run in parallel [1]")
    parser.add_argument("--input", metavar="DIR",
                        help="documents folder instead of the file's input (with --golden: one sweep file, such as "
                             "experiments/chunkers.yaml, run on any corpus)")
    parser.add_argument("--golden", metavar="FILE",
                        help="golden set instead of the file's: a JSONL file or mlflow:NAME[@VERSION] (an MLflow golden "
                             "dataset; its newest version is pinned when the sweep starts)")
    parser.add_argument("--output", metavar="DIR", help="where executed notebooks go [experiments/runs/<sweep>]")
    parser.add_argument("--rerun", action="store_true",
                        help="run every point again under a new parent run, even those finished before")
    parser.add_argument("--dry-run", action="store_true",
                        help="run nothing: print the space's size, the chunkings and models to embed, the estimated "
                             "time from this machine's measured throughputs and any LLM tokens and cost")
    parser.add_argument("--wide", action="store_true",
                        help="print every metric of the comparison table with its interval, and the run ids (the "
                             "default table fits 120 columns: rank, verdict, settings, the primary metric, held-out, "
                             "latency)")
    parser.add_argument("--executor", choices=("local", "ray"), default="local",
                        help="local: worker threads on this machine; ray: index builds and points scheduled on a Ray "
                             "cluster, one actor with a warm kernel per worker, a point retried when its worker dies "
                             "(the store path and the tracking URI must be reachable from every node) [local]")
    parser.add_argument("--ray-address", metavar="ADDR",
                        help="Ray cluster to join with --executor ray, e.g. 10.0.0.5:6379 (default: $RAY_ADDRESS, "
                             "a cluster started on this machine with `ray start`, else a new local one)")


def run(args: argparse.Namespace) -> int:
    """0 when every point that could run finished, 1 when some failed. The sweep file's base sits
    between ``--config`` and the setting flags."""
    config_from_args(args)  # settings errors, before anything runs
    from rag_core.workbench import load_sweep, run_sweep
    from rag_core.workbench.reports.text import format_sweep, search_summary

    if args.ray_address and args.executor != "ray":
        raise ConfigError("--ray-address needs --executor ray")
    spec = load_sweep(args.file, config_file=args.config, overrides=setting_flags(args))
    spec = with_input(spec, args.input)
    spec = with_golden(spec, args.golden)  # mlflow:NAME pinned to its newest version, the file's or the flag's
    if args.output:
        check_output_folder(args.output, "--output")  # a file there: before any point runs
    if args.dry_run:
        return dry_run(spec, args)
    echo = (lambda line: print(line, file=sys.stderr, flush=True)) if args.json else (lambda line: print(line, flush=True))
    result = run_sweep(spec, store_from_args(args), workers=args.workers, output_dir=args.output, echo=echo,
                       rerun=args.rerun, executor=args.executor, ray_address=args.ray_address)
    if args.json:
        print(json.dumps({
            "name": result.name, "experiment": result.experiment, "parent_run_id": result.parent_run_id,
            "tracking_uri": result.tracking_uri, "primary_metric": result.primary_metric, "work": result.work,
            "unavailable": result.unavailable, "merged": result.merged,
            "points": [{"label": o.point.label, "settings": o.point.changes, "status": o.status, "run_id": o.run_id,
                        "error": o.error} for o in result.outcomes],
            "table": json.loads(result.table.to_json(orient="records")),
            "holdout": result.holdout.as_dict() if result.holdout else None,
            "search": search_summary(result.search) if result.search else None,
        }, indent=2, default=str))
    else:
        print("\n" + format_sweep(result, wide=args.wide))
    return EXIT_FAILURE if result.failed else EXIT_OK


def with_input(spec, input_dir: str | None):
    """`spec` on the documents below `input_dir` (None: its own input)."""
    import dataclasses
    from pathlib import Path

    if input_dir is None:
        return spec
    if spec.beir is not None:
        raise ConfigError(f"{spec.path}: a BEIR sweep brings its own corpus; --input does not apply")
    if not Path(input_dir).is_dir():
        raise ConfigError(f"--input {input_dir}: not a folder")
    return dataclasses.replace(spec, input_dir=Path(input_dir).resolve())


def with_golden(spec, golden: str | None):
    """`spec` on the golden set `golden` (None: its own); an MLflow golden dataset named without a version
    (``mlflow:NAME``) pinned to its newest version now, so that every point reads the same one."""
    import dataclasses
    from pathlib import Path

    from rag_core.evaluate.golden_records import is_dataset_ref, parse_dataset_ref
    from rag_core.workbench.tracking.golden_datasets import resolve

    if golden is None:
        if spec.golden is None or not is_dataset_ref(str(spec.golden)):
            return spec
        golden = str(spec.golden)
    if spec.beir is not None:
        raise ConfigError(f"{spec.path}: a BEIR sweep brings its own queries; --golden does not apply")
    if is_dataset_ref(golden):
        return dataclasses.replace(spec, golden=Path(resolve(parse_dataset_ref(golden)).ref))
    return dataclasses.replace(spec, golden=Path(golden).resolve())


def dry_run(spec, args: argparse.Namespace) -> int:
    """Print what the sweep would cost (``rag_core.workbench.plans.cost``); run nothing."""
    from rag_core.workbench.execution.evaluation import load_eval_inputs
    from rag_core.workbench.plans.cost import estimate, machine
    from rag_core.workbench.reports.text import format_estimate
    from rag_core.workbench.statistics.holdout import split_queries

    store_dir = store_from_args(args)
    inputs = load_eval_inputs(input_dir=spec.input_dir, golden=spec.golden, beir=spec.beir, split=spec.split,
                              store_dir=store_dir, max_queries=spec.max_queries)
    queries = len(inputs.queries)
    if spec.holdout is not None and spec.search.is_search:  # a search sees the tuning queries only
        queries = len(split_queries([query.id for query in inputs.queries], spec.holdout, spec.holdout_seed).tuning)
    cost = estimate(spec, inputs.corpus, queries, store_dir)
    if args.json:
        print(json.dumps({"name": spec.name, "machine": machine(), **cost.as_dict()}, indent=2, default=str))
    else:
        print(format_estimate(spec, cost, machine(), len(inputs.queries)))
    return EXIT_OK
