"""notebooks/03-compare.ipynb end to end, as a user runs it on the demo's sweep: a new kernel each time
(papermill), every cell timed; prints a table, writes benchmarks/results/compare_notebook.json.

One run first (not counted: the operating system's file cache, Matplotlib's font list), then
``--repeat`` runs; the table shows each cell's median and the kernel's start and papermill's own work
(the total minus the cells). Beside it, in new processes, the paired test of the notebook's two runs
the way the notebook did it before (``ranx.compare``, whose typed containers numba compiles in every
process) and the way it does now (``rag_core.workbench.statistics.paired_tests``). Target (issue 36): the
notebook under 15 s warm on 2 cores. Exit 1 when the median misses it.
Needs a finished sweep in the tracking store: run ``make demo`` (or ``python -m rag_core.demo``) first.
Usage: python benchmarks/compare_notebook.py [--repeat 3] [--experiment "documents | golden"]
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

from rag_core.paths import NOTEBOOKS_DIR  # noqa: E402
from results_file import RESULTS, write_results  # noqa: E402

TARGET_SECONDS = 15.0
NOTEBOOK = NOTEBOOKS_DIR / "03-compare.ipynb"
# The notebook's paired test in a new process, timed after the runs are read (the notebook's earlier cells
# read them): RANX forces the ranx.compare path the notebook used before.
PAIRED_TEST = """
import sys, time
import rag_core.workbench.reports.compare as compare
from rag_core.workbench.reports.compare import load_runs, significance
if sys.argv[1] == "ranx":
    compare.STAT_TEST = "ranx.compare"  # no test is named so: significance() goes to ranx.compare
runs = load_runs(sys.argv[2])
started = time.perf_counter()
significance([runs.iloc[0], runs.iloc[-1]], ["page/ndcg@10", "page/recall@5"])
first = time.perf_counter() - started
started = time.perf_counter()
significance([runs.iloc[0], runs.iloc[-1]], ["page/ndcg@10", "page/recall@5"])
print(first, time.perf_counter() - started)
"""


def run_notebook(experiment: str, folder: Path) -> tuple[float, list[tuple[str, float]]]:
    """(seconds for the whole execution, [(cell's first line, seconds)] for its code cells)."""
    import nbformat
    import papermill

    output = folder / "compare.ipynb"
    started = time.perf_counter()
    papermill.execute_notebook(str(NOTEBOOK), str(output), parameters={"experiment": experiment}, progress_bar=False,
                               cwd=str(NOTEBOOKS_DIR), kernel_name="python3", log_output=False)
    total = time.perf_counter() - started
    cells = [(cell.source.splitlines()[0][:60], float(cell.metadata["papermill"]["duration"]))
             for cell in nbformat.read(str(output), as_version=4).cells
             if cell.cell_type == "code" and not {"parameters", "injected-parameters"} & set(cell.metadata.get("tags", []))]
    return total, cells


def paired_test_seconds(path: str, experiment: str) -> tuple[float, float]:
    """(first call, second call) of the notebook's paired test in a new process, by `path` (ranx | own)."""
    completed = subprocess.run([sys.executable, "-c", PAIRED_TEST, path, experiment], capture_output=True, text=True,
                               check=True)
    first, second = completed.stdout.split()[-2:]
    return float(first), float(second)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--experiment", default="documents | golden", help="the demo's experiment [documents | golden]")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rag-compare-notebook-") as temp:
        run_notebook(args.experiment, Path(temp))  # warm-up, not counted
        runs = [run_notebook(args.experiment, Path(temp)) for _ in range(args.repeat)]
    totals = [total for total, _ in runs]
    names = [name for name, _ in runs[0][1]]
    cells = {name: [cells[i][1] for _, cells in runs] for i, name in enumerate(names)}
    cells["kernel start and papermill (total - cells)"] = [total - sum(s for _, s in cells_) for total, cells_ in runs]
    paired = {"ranx.compare (before)": paired_test_seconds("ranx", args.experiment),
              "paired_tests (now)": paired_test_seconds("own", args.experiment)}
    median = statistics.median(totals)
    summary = {
        "notebook": str(NOTEBOOK.relative_to(NOTEBOOKS_DIR.parent)), "experiment": args.experiment,
        "total_median_s": round(median, 2), "totals_s": [round(value, 2) for value in totals],
        "cells_median_s": {name: round(statistics.median(values), 3) for name, values in cells.items()},
        "paired_test_new_process_s": {name: {"first_call": round(first, 3), "second_call": round(second, 3)}
                                      for name, (first, second) in paired.items()},
        "target_s": TARGET_SECONDS, "cpus": os.cpu_count(),
        "load_average_1_5_15": [round(value, 2) for value in os.getloadavg()],
    }
    width = max(map(len, cells))
    print(f"{'cell':<{width}}  {'median s':>9}  runs")
    for name, values in cells.items():
        print(f"{name:<{width}}  {statistics.median(values):>9.2f}  {', '.join(f'{v:.2f}' for v in values)}")
    print(f"{'whole notebook':<{width}}  {median:>9.2f}  {', '.join(f'{v:.2f}' for v in totals)}  "
          f"(target {TARGET_SECONDS:g} s)")
    for name, (first, second) in paired.items():
        print(f"paired test in a new process, {name}: first call {first:.2f} s, then {second:.2f} s")
    print(f"load average (1, 5, 15 min) at the end: {summary['load_average_1_5_15']}")
    write_results(summary, RESULTS / "compare_notebook.json")
    return 0 if median <= TARGET_SECONDS else 1


if __name__ == "__main__":
    sys.exit(main())
