"""``rag-pipeline sweep FILE``: run a sweep and print its comparison table (or JSON), every metric with
its bootstrap 95% interval, and, when the sweep holds out queries, the honest winner.

Left out: the sweep itself (``rag_core.workbench``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rag_core.config import ConfigError, setting_names
from rag_core.workbench import SweepResult, load_sweep, run_sweep
from rag_core.workbench.honest import WinnerReport
from rag_core.workbench.intervals import shown_with_intervals
from rag_core.workbench.sweep_report import VS_BEST_LEGEND


def format_result(result: SweepResult) -> str:
    """The comparison table (best first), what was not run and why, and where things are."""
    import pandas as pd

    with pd.option_context("display.width", 250, "display.max_columns", 50, "display.max_colwidth", 40):
        table = shown_with_intervals(result.table).to_string(index=False, float_format=lambda v: f"{v:.3f}", na_rep="")
    work = result.work
    ranked_by = f"tune/{result.primary_metric} (the tuning queries)" if result.holdout else result.primary_metric
    lines = [
        f"Sweep {result.name!r}: best first by {ranked_by}; [95% bootstrap interval over queries]",
        table,
        *([VS_BEST_LEGEND] if "vs best" in result.table else []),
        "",
        *([format_holdout(result.holdout), ""] if result.holdout else []),
        f"Work: {int(work['sweep/points'])} points, {int(work['sweep/distinct_chunkings'])} distinct chunkings, "
        f"{int(work['sweep/dense_indexes_built'])} dense indexes built, {int(work['sweep/chunks_embedded'])} chunks "
        f"embedded ({int(work['sweep/embed_cache_hits'])} from cache), {int(work['sweep/candidates_reused'])} "
        f"query candidate lists reused ({int(work['sweep/candidates_computed'])} computed), "
        f"{int(work['sweep/rerank_pairs_scored'])} cross-encoder pairs scored "
        f"({int(work['sweep/rerank_cache_hits'])} from cache); {work['sweep/wall_seconds']:.0f} s",
        f"MLflow: experiment {result.experiment!r}, parent run {result.parent_run_id} ({result.tracking_uri})",
        f"Executed notebooks: {result.output_dir}",
    ]
    if result.unavailable:
        lines.append(result.unavailable[0].upper() + result.unavailable[1:])
    if result.failed:
        lines.append(f"{len(result.failed)} point(s) FAILED: " + "; ".join(
            f"{outcome.point.label}: {(outcome.error or '').splitlines()[0][:150]}" for outcome in result.failed)
            + ". Run the sweep again to retry them.")
    return "\n".join(lines)


def format_holdout(report: WinnerReport) -> str:
    """The honest winner: chosen on the tuning queries, scored on the held-out ones, next to the default."""
    split, metric = report.split, report.metric
    lines = [f"Held out {len(split.held_out)} of {len(split.tuning) + len(split.held_out)} queries "
             f"(holdout {split.fraction:g}, seed {split.seed}); {metric}; winner by select: {report.selection.rule}; "
             f"{len(report.selection.indistinguishable())} point(s) indistinguishable from the best on the tuning queries:",
             f"  winner  {report.winner.label}: tuning {report.winner.tune}, held-out {report.winner.holdout}; "
             f"optimism (tuning - held-out) {report.optimism:+.3f}"]
    if report.default is None:
        lines.append(f"  default configuration: {report.default_status}")
    else:
        lines.append(f"  default {report.default.label} ({report.default_status}): tuning {report.default.tune}, "
                     f"held-out {report.default.holdout}")
        drop = report.default.tune.estimate - report.default.holdout.estimate
        lines.append(f"  the default's own tuning - held-out difference: {drop:+.3f} (the parts differ in difficulty); "
                     f"the winner's optimism beyond that: {report.optimism - drop:+.3f}")
        if report.gain is not None:
            lines.append(f"  winner - default on the held-out queries: {report.gain.estimate:+.3f} "
                         f"[{report.gain.low:+.3f}, {report.gain.high:+.3f}]")
    return "\n".join(lines)


def run_sweep_command(args: argparse.Namespace, store_dir: Path) -> int:
    """0 when every point that could run finished, 1 when some failed. The sweep file's base sits
    between ``--config`` and the setting flags."""
    flags = {name: getattr(args, name) for name in setting_names() if getattr(args, name, None) is not None}
    if args.ray_address and args.executor != "ray":
        raise ConfigError("--ray-address needs --executor ray")
    spec = load_sweep(args.file, config_file=args.config, overrides=flags)
    echo = (lambda line: print(line, file=sys.stderr, flush=True)) if args.json else (lambda line: print(line, flush=True))
    result = run_sweep(spec, store_dir, workers=args.workers, output_dir=args.output, echo=echo, rerun=args.rerun,
                       executor=args.executor, ray_address=args.ray_address)
    if args.json:
        print(json.dumps({
            "name": result.name, "experiment": result.experiment, "parent_run_id": result.parent_run_id,
            "tracking_uri": result.tracking_uri, "primary_metric": result.primary_metric, "work": result.work,
            "unavailable": result.unavailable,
            "points": [{"label": o.point.label, "settings": o.point.changes, "status": o.status, "run_id": o.run_id,
                        "error": o.error} for o in result.outcomes],
            "table": json.loads(result.table.to_json(orient="records")),
            "holdout": result.holdout.as_dict() if result.holdout else None,
        }, indent=2, default=str))
    else:
        print("\n" + format_result(result))
    return 1 if result.failed else 0
