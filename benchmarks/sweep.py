"""What a sweep costs, and where the time goes; prints a table, writes benchmarks/results/sweep.json.

Runs a sweep of the sample corpus (default ``experiments/grid.yaml``) into a fresh store and tracking
store under ``benchmarks/results/sweep-run/``, then reads every point's timings back from MLflow and
splits each point's time into:
- read + chunk + embed: reading the corpus, chunking, embedding, building BM25, loading the models;
- retrieval + metrics: every query through the pipeline (cross-encoder included) and the metrics
  (ranx, whose numba functions compile anew in every process: a few seconds per point);
- notebook overhead: papermill starting the kernel, imports, everything in the notebook outside
  evaluation and logging;
- MLflow logging: the notebook's logging plus the sweep's own calls for the point.

Work counted: points, distinct chunkings, dense indexes built (must equal the distinct chunkings: no
chunking embedded twice), chunks embedded, cross-encoder pairs scored vs cache hits.
Target: papermill + MLflow overhead below 25% of the sweep's wall time.
Usage: python benchmarks/sweep.py [--sweep experiments/demo.yaml] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from rag_core.compare import load_runs  # noqa: E402
from rag_core.paths import EXPERIMENTS_DIR  # noqa: E402
from rag_core.cli.sweep import format_result
from rag_core.workbench import load_sweep, run_sweep  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
TARGET_OVERHEAD_SHARE = 0.25
COLUMNS = ("read+chunk+embed", "retrieval+metrics", "notebook overhead", "mlflow logging", "point total")


def point_times(metrics: dict[str, float]) -> dict[str, float]:
    """One point's seconds, split as in the module docstring (timings logged by the notebook and the sweep)."""
    read, build = metrics["timing/read_seconds"], metrics["timing/build_seconds"]
    evaluate, log = metrics["timing/evaluate_seconds"], metrics["timing/log_seconds"]
    notebook, sweep_side = metrics["timing/notebook_seconds"], metrics.get("timing/sweep_tracking_seconds", 0.0)
    return {
        "read+chunk+embed": read + build,
        "retrieval+metrics": evaluate - build,
        "notebook overhead": notebook - read - evaluate - log,
        "mlflow logging": log + sweep_side,
        "point total": notebook + sweep_side,
    }


def _count(value) -> int:
    """A per-point count; absent (NaN) where the point has no such stage (no re-ranking)."""
    return 0 if value is None or math.isnan(value) else int(value)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", default=str(EXPERIMENTS_DIR / "grid.yaml"), help="sweep file [experiments/grid.yaml]")
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()

    folder = RESULTS / "sweep-run"
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "mlruns").mkdir(parents=True)
    uri = f"sqlite:///{folder.resolve() / 'mlruns' / 'mlflow.db'}"
    spec = load_sweep(args.sweep)
    started = time.perf_counter()
    result = run_sweep(spec, folder / "store", workers=args.workers, output_dir=folder / "notebooks", tracking_uri=uri)
    wall = time.perf_counter() - started
    print("\n" + format_result(result))

    runs = load_runs(result.experiment, parent_run_id=result.parent_run_id, tracking_uri=uri)
    points = []
    for _, run in runs.iterrows():
        times = point_times(run.to_dict())
        points.append({"point": run["run_name"], **{name: round(value, 2) for name, value in times.items()},
                       "rerank_pairs_scored": _count(run.get("rerank/pairs_scored")),
                       "rerank_cache_hits": _count(run.get("rerank/cache_hits"))})
    totals = {name: round(sum(point[name] for point in points), 1) for name in COLUMNS}
    overhead = totals["notebook overhead"] + totals["mlflow logging"]
    work = result.work
    summary = {
        "sweep": str(Path(args.sweep).name), "workers": args.workers, "cpu_count": os.cpu_count(),
        "wall_seconds": round(wall, 1),
        "points": int(work["sweep/points"]), "distinct_chunkings": int(work["sweep/distinct_chunkings"]),
        "dense_indexes_built": int(work["sweep/dense_indexes_built"]),
        "chunks_embedded": int(work["sweep/chunks_embedded"]), "embed_cache_hits": int(work["sweep/embed_cache_hits"]),
        "rerank_pairs_scored": int(work["sweep/rerank_pairs_scored"]),
        "rerank_cache_hits": int(work["sweep/rerank_cache_hits"]),
        "seconds": totals,
        "sweep_process_seconds": round(wall - totals["point total"], 1) if args.workers == 1 else None,
        "overhead_share": round(overhead / wall, 3),
        "target_overhead_share": TARGET_OVERHEAD_SHARE,
        "no_chunking_embedded_twice": work["sweep/dense_indexes_built"] <= work["sweep/distinct_chunkings"],
        "per_point": points,
    }

    width = max(len(point["point"]) for point in points)
    print(f"\n{'point':<{width}}" + "".join(f"{name:>20}" for name in COLUMNS) + f"{'pairs scored/cached':>22}")
    for point in points:
        print(f"{point['point']:<{width}}" + "".join(f"{point[name]:>20.1f}" for name in COLUMNS)
              + f"{point['rerank_pairs_scored']:>14}/{point['rerank_cache_hits']:<7}")
    print(f"{'total (s)':<{width}}" + "".join(f"{totals[name]:>20.1f}" for name in COLUMNS))
    print(f"\nwall {wall:.0f} s for {summary['points']} points ({args.workers} worker(s), {os.cpu_count()} CPUs); "
          f"papermill + MLflow overhead {overhead:.0f} s = {100 * summary['overhead_share']:.0f}% of wall "
          f"(target < {100 * TARGET_OVERHEAD_SHARE:.0f}%)")
    print(f"distinct chunkings {summary['distinct_chunkings']}, dense indexes built {summary['dense_indexes_built']}, "
          f"chunks embedded {summary['chunks_embedded']} ({summary['embed_cache_hits']} from cache), cross-encoder "
          f"pairs scored {summary['rerank_pairs_scored']} vs cache hits {summary['rerank_cache_hits']}")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "sweep.json").write_text(json.dumps(summary, indent=2))
    print(f"written {RESULTS / 'sweep.json'}")
    ok = summary["overhead_share"] < TARGET_OVERHEAD_SHARE and summary["no_chunking_embedded_twice"]
    return 0 if ok and not result.failed else 1


if __name__ == "__main__":
    sys.exit(main())
