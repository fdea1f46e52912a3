"""Process time of the commands a user runs most, as a user runs them (a new process each time);
prints a table, writes benchmarks/results/startup.json.

- ``rag-pipeline --help``;
- ``rag-pipeline query "..." --rerank-depth 0 --no-llm`` on the sample corpus (ingested once at the
  default settings, then one warm-up query per row): ``--mode bm25``; hybrid at the default settings
  (``bf16``: fp32 queries on the store's ONNX export); hybrid on the ``torch`` backend; hybrid on
  ``onnx-int8`` (its export made by the warm-up). Runs alternate between the rows, so load on the
  machine falls on each alike; the ratio of each hybrid row to the BM25 row is of this run. The heavy
  modules each query imports are checked in-process (``sys.modules``): only the torch row may import
  torch (onnxruntime's and tokenizers' own imports are not counted);
- ``rag-pipeline eval --beir`` on 5,000 synthetic abstracts, ``--mode bm25 --rerank-depth 0``: the first
  run (BM25 index built) and the next (index loaded), with MLflow logging and without.
Targets: the BEIR eval at most 5 s after the first run (issue 7); the default and the onnx-int8 hybrid
queries at most 3x the BM25 query (issue 21). Exit 1 when one is missed or a query imports a heavy module it should not.
Usage: python benchmarks/startup.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from rag_core.evaluate.beir import write_synthetic_beir  # noqa: E402
from rag_core.paths import SAMPLE_DOCUMENTS_DIR  # noqa: E402
from results_file import RESULTS, write_results  # noqa: E402

TARGET_BEIR_SECONDS = 5.0
TARGET_ONNX_HYBRID_RATIO = 3.0
HEAVY = ("torch", "transformers", "sentence_transformers", "chromadb", "mlflow", "papermill", "ranx")
QUESTION = "What does QS-4021 mean?"
QUERIES = {  # row -> the query's arguments beyond the question and the store
    "query --mode bm25 --rerank-depth 0": ("--mode", "bm25"),
    "query --mode hybrid --rerank-depth 0 (default: bf16)": ("--mode", "hybrid"),
    "query --mode hybrid --rerank-depth 0 (torch)": ("--mode", "hybrid", "--embed-backend", "torch"),
    "query --mode hybrid --rerank-depth 0 --embed-backend onnx-int8": ("--mode", "hybrid", "--embed-backend", "onnx-int8"),
}
ALLOWED = {"query --mode hybrid --rerank-depth 0 (torch)": {"torch", "transformers", "sentence_transformers"}}


def timed(*args: str, env: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "rag_core.cli", *args], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, env={**os.environ, **(env or {})})
    return time.perf_counter() - started


def query_args(store: Path, row: str) -> list[str]:
    return ["query", QUESTION, *QUERIES[row], "--rerank-depth", "0", "--no-llm", "--store", str(store)]


def heavy_modules_of(arguments: list[str]) -> list[str]:
    """The modules of `HEAVY` that the CLI imports in-process for `arguments`."""
    code = ("import sys; from rag_core.cli import main; "
            f"main({arguments!r}); "
            f"print('modules:', *(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)")
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return completed.stderr.strip().splitlines()[-1].split()[1:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rag-startup-") as temp:
        folder = Path(temp)
        store, beir = folder / "store", folder / "beir"
        mlflow_env = {"MLFLOW_TRACKING_URI": f"sqlite:///{folder / 'mlflow.db'}"}
        write_synthetic_beir(beir)
        subprocess.run([sys.executable, "-m", "rag_core.cli", "ingest", "--input", str(SAMPLE_DOCUMENTS_DIR),
                        "--store", str(store)], check=True, capture_output=True)
        for row in QUERIES:  # warm-up: each backend's own collection embedded (and exported), matrix files written
            timed(*query_args(store, row))
        beir_args = ("eval", "--beir", str(beir), "--mode", "bm25", "--rerank-depth", "0", "--store", str(folder / "beir-store"))
        first = timed(*beir_args, env=mlflow_env)
        rows: dict[str, list[float]] = {"rag-pipeline --help": [timed("--help") for _ in range(args.repeat)]}
        for _ in range(args.repeat):  # alternating: a burst of load on the machine falls on every row alike
            for row in QUERIES:
                rows.setdefault(row, []).append(timed(*query_args(store, row)))
        rows.update({
            "eval --beir (5,000 abstracts), first run": [first],
            "eval --beir, next runs, MLflow logging": [timed(*beir_args, env=mlflow_env) for _ in range(args.repeat)],
            "eval --beir, next runs, --no-mlflow": [timed(*beir_args, "--no-mlflow") for _ in range(args.repeat)],
        })
        heavy = {row: heavy_modules_of(query_args(store, row)) for row in QUERIES}
    summary: dict = {name: {"median_s": round(statistics.median(values), 2), "runs": [round(v, 2) for v in values]}
                     for name, values in rows.items()}
    bm25_row = next(iter(QUERIES))
    ratios = {row: round(statistics.median(rows[row]) / statistics.median(rows[bm25_row]), 2) for row in QUERIES}
    unexpected = {row: sorted(set(found) - ALLOWED.get(row, set())) for row, found in heavy.items()}
    summary["ratio_to_bm25_query"] = ratios
    summary["heavy_modules"] = heavy
    summary["heavy_modules_in_bm25_query"] = heavy[bm25_row]
    summary["load_average_1_5_15"] = [round(value, 2) for value in os.getloadavg()]
    summary["target_beir_seconds"] = TARGET_BEIR_SECONDS
    summary["target_onnx_hybrid_ratio"] = TARGET_ONNX_HYBRID_RATIO
    width = max(map(len, rows))
    print(f"{'command':<{width}}  {'median s':>9}  {'x bm25':>6}  runs")
    for name, values in rows.items():
        ratio = f"{ratios[name]:>6.2f}" if name in ratios else " " * 6
        print(f"{name:<{width}}  {statistics.median(values):>9.2f}  {ratio}  {', '.join(f'{v:.2f}' for v in values)}")
    for row, found in heavy.items():
        print(f"heavy modules imported by {row}: {', '.join(found) or 'none'}")
    print(f"load average (1, 5, 15 min) at the end: {summary['load_average_1_5_15']}")
    write_results(summary, RESULTS / "startup.json")
    beir_next = summary["eval --beir, next runs, MLflow logging"]["median_s"]
    fast_ratio = max(ratios[row] for row in QUERIES if row != bm25_row and row not in ALLOWED)
    return 0 if (beir_next <= TARGET_BEIR_SECONDS and fast_ratio <= TARGET_ONNX_HYBRID_RATIO
                 and not any(unexpected.values())) else 1


if __name__ == "__main__":
    sys.exit(main())
