"""What a sweep costs, cold and warm, against one ``rag-pipeline eval`` process; prints a table, writes
benchmarks/results/sweep.json.

Three measurements in one run, on the sample corpus (default ``experiments/grid.yaml``), into a fresh
store and tracking store under ``benchmarks/results/sweep-run/``:
1. cold grid: a fresh store (models cached on disk), split into embed (chunking, embedding, indexes),
   re-rank (the cross-encoder's own time) and the rest;
2. warm grid: the same grid again with ``--rerun`` semantics (every point executed under a new parent
   run; embeddings, cross-encoder scores and indexes cached);
3. one ``rag-pipeline eval`` process for a single point of the grid (its last point), with the same
   warm store: what a user pays to evaluate one configuration; the median of ``--eval-repeats`` runs
   (one run swung from 6.5 to 11.9 s between sessions, and the ratio with it).
Targets: warm grid <= 3x the single eval process (issue 21; issue 7's was 6x); per-point overhead
(kernel, notebook, MLflow: everything but retrieval and metrics) <= 2 s once a worker is warm.

Offline no cross-encoder can be loaded, so re-ranked points are not run; ``--rerank-model
random-head:packaged:minilm`` runs them with the stand-in, which measures their cost only (its scores
mean nothing: never read quality from that run).
Usage: python benchmarks/sweep.py [--sweep experiments/grid.yaml] [--workers 1] [--eval-repeats 3]
[--rerank-model NAME]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from rag_core.paths import EXPERIMENTS_DIR  # noqa: E402
from rag_core.workbench import load_sweep, run_sweep  # noqa: E402
from rag_core.workbench.reports.compare import load_runs  # noqa: E402
from results_file import RESULTS, write_results  # noqa: E402

MAX_RATIO, MAX_POINT_OVERHEAD_S = 3.0, 2.0


def point_times(metrics: dict[str, float]) -> dict[str, float]:
    """One point's seconds: retrieval + metrics, and the overhead around it (kernel, notebook, MLflow)."""
    build, evaluate = metrics["timing/build_seconds"], metrics["timing/evaluate_seconds"]
    total = metrics["timing/notebook_seconds"] + metrics.get("timing/sweep_tracking_seconds", 0.0)
    return {"build": build, "retrieval+metrics": evaluate - build, "overhead": total - evaluate, "total": total}


def run_grid(spec, store: Path, uri: str, workers: int, rerun: bool) -> dict:
    started = time.perf_counter()
    result = run_sweep(spec, store, workers=workers, output_dir=store.parent / "notebooks", tracking_uri=uri,
                       rerun=rerun, echo=lambda line: print(line, flush=True))
    wall = time.perf_counter() - started
    runs = load_runs(result.experiment, parent_run_id=result.parent_run_id, tracking_uri=uri)
    points = [point_times(run.to_dict()) for _, run in runs.iterrows()]
    # the cross-encoder's own time (a warm grid reads it from the cache: there it is not wall time)
    rerank = float(runs["rerank/model_seconds"].fillna(0).sum()) if "rerank/model_seconds" in runs else 0.0
    work = result.work
    return {
        "wall_seconds": round(wall, 1), "points_run": len(result.executed),
        "points_unavailable": int(work["sweep/points_unavailable"]), "failed": len(result.failed),
        "embed_seconds": round(sum(point["build"] for point in points), 1),
        "rerank_model_seconds": round(rerank, 1),
        "retrieval_metrics_seconds": round(sum(point["retrieval+metrics"] for point in points), 1),
        "overhead_seconds": round(sum(point["overhead"] for point in points), 1),
        "overhead_per_point_median": round(statistics.median(point["overhead"] for point in points), 2),
        "overhead_per_point_after_first": round(statistics.median(point["overhead"] for point in points[1:]), 2)
        if len(points) > 1 else None,
        "chunks_embedded": int(work["sweep/chunks_embedded"]), "candidates_reused": int(work["sweep/candidates_reused"]),
        "rerank_pairs_scored": int(work["sweep/rerank_pairs_scored"]),
        "rerank_cache_hits": int(work["sweep/rerank_cache_hits"]), "kernels_started": int(work["sweep/kernels_started"]),
    }


def single_eval_seconds(spec, store: Path, uri: str) -> float:
    """Wall time of one `rag-pipeline eval` process for the grid's last point, as a user runs it."""
    point = spec.points()[0][-1]
    flags = [item for key, value in point.config.as_params().items() if key in spec.grid or key in spec.base
             for item in (f"--{key.replace('_', '-')}", value)]
    command = [sys.executable, "-m", "rag_core.cli", "eval", "--input", str(spec.input_dir), "--golden",
               str(spec.golden), "--store", str(store), *flags]
    started = time.perf_counter()
    subprocess.run(command, check=True, env={**os.environ, "MLFLOW_TRACKING_URI": uri}, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", default=str(EXPERIMENTS_DIR / "grid.yaml"), help="sweep file [experiments/grid.yaml]")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--eval-repeats", type=int, default=3, help="single eval processes timed (median) [3]")
    parser.add_argument("--rerank-model", default=None, help="cross-encoder for the re-ranked points [configured]")
    args = parser.parse_args()
    if args.rerank_model:
        os.environ["RAG_RERANK_MODEL"] = args.rerank_model

    folder = RESULTS / "sweep-run"
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "mlruns").mkdir(parents=True)
    uri = f"sqlite:///{folder.resolve() / 'mlruns' / 'mlflow.db'}"
    spec = load_sweep(args.sweep)
    store = folder / "store"
    print("== cold grid (fresh store)", flush=True)
    cold = run_grid(spec, store, uri, args.workers, rerun=False)
    print("== warm grid (same store, every point run again)", flush=True)
    warm = run_grid(spec, store, uri, args.workers, rerun=True)
    print("== one rag-pipeline eval process (last point of the grid, warm store)", flush=True)
    singles = [single_eval_seconds(spec, store, uri) for _ in range(args.eval_repeats)]
    single = statistics.median(singles)
    ratio = warm["wall_seconds"] / single
    summary = {
        "sweep": Path(args.sweep).name, "workers": args.workers, "cpu_count": os.cpu_count(),
        "rerank_model": os.environ.get("RAG_RERANK_MODEL", "configured default"),
        "cold": cold, "warm": warm, "single_eval_process_seconds": round(single, 1),
        "single_eval_process_runs": [round(seconds, 1) for seconds in singles],
        "warm_grid_over_single_eval": round(ratio, 2), "target_ratio": MAX_RATIO,
        "target_overhead_per_point_s": MAX_POINT_OVERHEAD_S,
    }
    rows = [(name, f"{cold[name]}", f"{warm[name]}") for name in cold]
    width = max(len(name) for name, _, _ in rows)
    print(f"\n{'':<{width}}  {'cold':>10}  {'warm':>10}")
    for name, cold_value, warm_value in rows:
        print(f"{name:<{width}}  {cold_value:>10}  {warm_value:>10}")
    print(f"\none rag-pipeline eval process: {single:.1f} s (median of {len(singles)}); "
          f"warm grid / single eval = {ratio:.2f} "
          f"(target <= {MAX_RATIO}); per-point overhead once warm {warm['overhead_per_point_after_first']} s "
          f"(target <= {MAX_POINT_OVERHEAD_S})")
    write_results(summary, RESULTS / "sweep.json")
    overhead = warm["overhead_per_point_after_first"] or 0.0
    return 0 if ratio <= MAX_RATIO and overhead <= MAX_POINT_OVERHEAD_S and not warm["failed"] else 1


if __name__ == "__main__":
    sys.exit(main())
