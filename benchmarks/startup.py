"""Process time of the commands a user runs most, as a user runs them (a new process each time);
prints a table, writes benchmarks/results/startup.json.

- ``rag-pipeline --help``;
- ``rag-pipeline query "..." --mode bm25 --rerank-depth 0 --no-llm`` on the sample corpus (no torch, no
  mlflow, no papermill may be imported: the script checks ``sys.modules`` of a query in-process too);
- ``rag-pipeline eval --beir`` on 5,000 synthetic abstracts, ``--mode bm25 --rerank-depth 0``: the first
  run (BM25 index built) and the next (index loaded), with MLflow logging and without.
Target (issue 7): the BEIR eval at most 5 s after the first run.
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
HEAVY = ("torch", "mlflow", "papermill", "ranx", "sentence_transformers", "chromadb")


def timed(*args: str, env: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "rag_core.cli", *args], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, env={**os.environ, **(env or {})})
    return time.perf_counter() - started


def heavy_modules_of_a_bm25_query(store: Path) -> list[str]:
    code = ("import sys; from rag_core.cli import main; "
            f"main(['query', 'rate limit', '--mode', 'bm25', '--rerank-depth', '0', '--no-llm', '--store', {str(store)!r}]); "
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
        subprocess.run([sys.executable, "-m", "rag_core.cli", "ingest", "--input", str(SAMPLE_DOCUMENTS_DIR), "--mode",
                        "bm25", "--store", str(store)], check=True, capture_output=True)
        beir_args = ("eval", "--beir", str(beir), "--mode", "bm25", "--rerank-depth", "0", "--store", str(folder / "beir-store"))
        first = timed(*beir_args, env=mlflow_env)
        rows = {
            "rag-pipeline --help": [timed("--help") for _ in range(args.repeat)],
            "query --mode bm25 --rerank-depth 0": [timed("query", "What does QS-4021 mean?", "--mode", "bm25", "--rerank-depth",
                                                          "0", "--no-llm", "--store", str(store)) for _ in range(args.repeat)],
            "eval --beir (5,000 abstracts), first run": [first],
            "eval --beir, next runs, MLflow logging": [timed(*beir_args, env=mlflow_env) for _ in range(args.repeat)],
            "eval --beir, next runs, --no-mlflow": [timed(*beir_args, "--no-mlflow") for _ in range(args.repeat)],
        }
        heavy = heavy_modules_of_a_bm25_query(store)
    summary = {name: {"median_s": round(statistics.median(values), 2), "runs": [round(v, 2) for v in values]}
               for name, values in rows.items()}
    summary["heavy_modules_in_bm25_query"] = heavy
    summary["target_beir_seconds"] = TARGET_BEIR_SECONDS
    width = max(map(len, rows))
    print(f"{'command':<{width}}  {'median s':>9}  runs")
    for name, values in rows.items():
        print(f"{name:<{width}}  {statistics.median(values):>9.2f}  {', '.join(f'{v:.2f}' for v in values)}")
    print(f"heavy modules imported by a bm25 query: {heavy or 'none'}")
    write_results(summary, RESULTS / "startup.json")
    beir_next = summary["eval --beir, next runs, MLflow logging"]["median_s"]
    return 0 if beir_next <= TARGET_BEIR_SECONDS and not heavy else 1


if __name__ == "__main__":
    sys.exit(main())
