"""The smoke sweep on a 2-worker local Ray cluster vs the local executor: wall time both ways and whether
every point's metrics are identical; prints a table, writes benchmarks/results/sweep_ray.json.

Each executor runs the sweep (default ``experiments/smoke.yaml``) with ``--workers 2`` into its own
fresh store and SQLite tracking store under ``benchmarks/results/sweep-ray-run/`` (models cached on
disk), so both pay for chunking, embedding and two kernels. The Ray cluster (``ray start --head`` on
127.0.0.1, 2 CPUs, no dashboard) is started by this script and stopped at the end; its start-up is
reported apart, not counted in the Ray sweep's wall time (a team's cluster is already up); joining it
(``ray.init``) is counted.
Usage: python benchmarks/sweep_ray.py [--sweep experiments/smoke.yaml] [--workers 2]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the tests' server helpers

from servers import ray_cluster  # noqa: E402

from rag_core.paths import EXPERIMENTS_DIR  # noqa: E402
from rag_core.workbench import load_sweep, run_sweep  # noqa: E402
from results_file import RESULTS, write_results  # noqa: E402

QUALITY = ("chunk", "page", "doc", "context")  # metric families a point's settings determine


def run(spec, folder: Path, workers: int, executor: str, address: str | None) -> dict:
    folder.mkdir(parents=True)
    (folder / "mlruns").mkdir()
    uri = f"sqlite:///{folder / 'mlruns' / 'mlflow.db'}"
    started = time.perf_counter()
    result = run_sweep(spec, folder / "store", workers=workers, output_dir=folder / "notebooks", tracking_uri=uri,
                       executor=executor, ray_address=address, echo=lambda line: print(f"  {executor}: {line}", flush=True))
    wall = time.perf_counter() - started
    return {"wall_seconds": round(wall, 1), "failed": len(result.failed),
            "notebook_seconds": round(result.work["sweep/notebook_seconds"], 1),
            "kernels_started": int(result.work["sweep/kernels_started"]),
            "metrics": {o.point.label: {k: v for k, v in o.metrics.items() if k.split("/")[0] in QUALITY}
                        for o in result.outcomes}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", default=str(EXPERIMENTS_DIR / "smoke.yaml"))
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    spec = load_sweep(args.sweep)
    work = RESULTS / "sweep-ray-run"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)

    local = run(spec, work / "local", args.workers, "local", None)
    cluster_started = time.perf_counter()
    with ray_cluster(work, num_cpus=args.workers) as address:
        cluster_seconds = time.perf_counter() - cluster_started
        try:
            on_ray = run(spec, work / "ray", args.workers, "ray", address)
        finally:
            import ray

            ray.shutdown()  # before the cluster goes: a driver left connected aborts when its GCS disappears
    identical = local["metrics"] == on_ray["metrics"]
    differences = sorted({f"{label} {name}" for label, metrics in local["metrics"].items()
                          for name, value in metrics.items() if on_ray["metrics"].get(label, {}).get(name) != value})
    report = {"sweep": spec.name, "points": len(local["metrics"]), "workers": args.workers,
              "local": {k: v for k, v in local.items() if k != "metrics"},
              "ray": {k: v for k, v in on_ray.items() if k != "metrics"},
              "ray_cluster_start_seconds": round(cluster_seconds, 1),
              "ray_over_local": round(on_ray["wall_seconds"] / local["wall_seconds"], 2),
              "metrics_identical": identical, "metric_differences": differences[:20],
              "cpu_count": os.cpu_count(), "load_average_1min": round(os.getloadavg()[0], 1)}
    print(f"\n{'executor':<8} {'wall s':>7} {'notebook s':>10} {'kernels':>7} {'failed':>6}")
    for name in ("local", "ray"):
        row = report[name]
        print(f"{name:<8} {row['wall_seconds']:>7} {row['notebook_seconds']:>10} "
              f"{row['kernels_started']:>7} {row['failed']:>6}")
    print(f"Ray cluster start-up {report['ray_cluster_start_seconds']} s (not counted); ray/local "
          f"{report['ray_over_local']}x; metrics identical for all {report['points']} points: {identical}")
    write_results(report, RESULTS / "sweep_ray.json")
    return 0 if identical and not local["failed"] and not on_ray["failed"] else 1


if __name__ == "__main__":
    sys.exit(main())
