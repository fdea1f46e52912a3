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
from rag_core.workbench.cost import CostEstimate
from rag_core.workbench.honest import HoldoutReport
from rag_core.workbench.search import SearchHistory
from rag_core.workbench.sweep_file import SweepSpec
from rag_core.workbench.intervals import shown_with_intervals


def format_result(result: SweepResult) -> str:
    """The comparison table (best first), what was not run and why, and where things are."""
    import pandas as pd

    with pd.option_context("display.width", 250, "display.max_columns", 50, "display.max_colwidth", 40):
        table = shown_with_intervals(result.table).to_string(index=False, float_format=lambda v: f"{v:.3f}")
    work = result.work
    ranked_by = f"tune/{result.primary_metric} (the tuning queries)" if result.holdout else result.primary_metric
    lines = [
        f"Sweep {result.name!r}: best first by {ranked_by}; [95% bootstrap interval over queries]",
        table,
        "",
        *([format_search(result.search), ""] if result.search else []),
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


def format_holdout(report: HoldoutReport) -> str:
    """The honest winner: chosen on the tuning queries, scored on the held-out ones, next to the default."""
    split, metric = report.split, report.metric
    lines = [f"Held out {len(split.held_out)} of {len(split.tuning) + len(split.held_out)} queries "
             f"(holdout {split.fraction:g}, seed {split.seed}); {metric}:",
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
    if args.dry_run:
        return run_dry_run(spec, store_dir, args.json)
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
            "search": search_summary(result.search) if result.search else None,
        }, indent=2, default=str))
    else:
        print("\n" + format_result(result))
    return 1 if result.failed else 0


# --- searches ------------------------------------------------------------------------------------
def search_summary(history: SearchHistory) -> dict:
    best = history.best
    return {"strategy": history.strategy, "study": history.study_name, "storage": history.storage,
            "budget": history.budget, "rungs": list(history.rungs), "stopped": history.stopped,
            "spent_points": history.spent_points, "spent_seconds": history.spent_seconds, "counts": history.counts(),
            "optimizer_seconds_per_trial": history.metrics()["search/optimizer_seconds_per_trial"],
            "best": {"trial": best.number, "settings": best.changes, "value": best.value, "queries": best.queries}
            if best else None}


def format_search(history: SearchHistory) -> str:
    """What the search did: trials by outcome, what it spent, where the study is, the winner."""
    counts = ", ".join(f"{count} {status}" for status, count in sorted(history.counts().items()))
    best = history.best
    rungs = f" in rungs of {'/'.join(map(str, history.rungs))} queries" if len(history.rungs) > 1 else ""
    lines = [f"Search ({history.strategy}{rungs}): {len(history.trials)} trials ({counts}); spent "
             f"{history.spent_points:.1f} points and {history.spent_seconds:.0f} s of the budget "
             f"({', '.join(f'{key} {value:g}' for key, value in history.budget.items())}); stopped: {history.stopped}",
             f"  optimizer: {history.metrics()['search/optimizer_seconds_per_trial'] * 1000:.0f} ms per trial; "
             f"study {history.study_name!r} in {history.storage} (run the command again to resume or continue)"]
    if best:
        settings = " ".join(f"{key}={value}" for key, value in best.changes.items())
        lines.append(f"  best: trial {best.number} ({settings}): {best.value:.3f} on {best.queries} tuning queries")
    return "\n".join(lines)


def run_dry_run(spec: SweepSpec, store_dir: Path, as_json: bool) -> int:
    """Print what the sweep would cost (``rag_core.workbench.cost``); run nothing."""
    from rag_core.workbench.cost import estimate, machine
    from rag_core.workbench.evaluation import load_eval_inputs
    from rag_core.workbench.holdout import split_queries

    inputs = load_eval_inputs(input_dir=spec.input_dir, golden=spec.golden, beir=spec.beir, split=spec.split,
                              store_dir=store_dir, max_queries=spec.max_queries)
    queries = len(inputs.queries)
    if spec.holdout is not None and spec.search.is_search:  # a search sees the tuning queries only
        queries = len(split_queries([query.id for query in inputs.queries], spec.holdout, spec.holdout_seed).tuning)
    cost = estimate(spec, inputs.corpus, queries, store_dir)
    if as_json:
        print(json.dumps({"name": spec.name, "machine": machine(), **cost.as_dict()}, indent=2, default=str))
        return 0
    print(format_estimate(spec, cost, machine(), len(inputs.queries)))
    return 0


def format_estimate(spec: SweepSpec, cost: CostEstimate, host: str, all_queries: int) -> str:
    def duration(seconds: float | None) -> str:
        if seconds is None:
            return "unknown"
        return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"

    budget = f", budget {cost.budget}" if cost.budget else ""
    size = f"{cost.space_size:,} configurations" if cost.space_size is not None else "a continuous space"
    lines = [f"Dry run of sweep {spec.name!r} (strategy {cost.strategy}{budget}): nothing is run.",
             f"  space: {size}" + ("" if cost.strategy == "grid" else ": " + "; ".join(spec.space.describe())),
             f"  queries per full evaluation: {cost.queries} (of {all_queries})",
             f"  chunkings: {cost.chunkings if cost.chunkings is not None else 'many'} distinct; embedding models: "
             f"{', '.join(cost.models) or 'none (BM25 only)'}"]
    if cost.to_embed:
        limit = f"; max_new_chunkings {cost.embed_limit}" if cost.embed_limit is not None else ""
        lines.append(f"  to embed: {len(cost.to_embed)} dense index(es) not in the store{limit}:")
        lines += [f"    {need.label}: ~{need.chunks:,} chunks, {duration(need.seconds)}" for need in cost.to_embed]
    else:
        lines.append("  to embed: nothing (every dense index is in the store)")
    warm = ", ".join(f"{mode} {duration(seconds) if seconds is None or seconds >= 1 else f'{seconds:.2f} s'}"
                     for mode, seconds in cost.warm_seconds.items())
    evaluations = f"{cost.evaluations:g}" if cost.evaluations is not None else "as many as the seconds allow"
    lines.append(f"  evaluations: {evaluations}; warm time per evaluation: {warm}; embedding: {duration(cost.cold_seconds)}")
    lines.append(f"  estimated time: {duration(cost.total_seconds)} on one worker (throughputs measured on {host}; "
                 f"provisional: a shared or busy machine is slower)")
    lines.append(f"  LLM: {cost.llm or 'none (no LLM query expansion in the space; sweeps do not run the judge)'}")
    lines += [f"  note: {note}" for note in cost.notes]
    return "\n".join(lines)
