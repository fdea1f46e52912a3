"""``notebooks/01-explore.ipynb`` on the sample corpus as a new user runs it offline: papermill, no
HF_HUB_OFFLINE, and a hub that cannot be reached (HF_ENDPOINT at a refused 127.0.0.1 port, so the
result does not depend on this machine's DNS). Prints each cell's time (papermill's own record in
the executed notebook) and writes benchmarks/results/explore_offline.json.

Target (issue 36): every cell under 10 s. Before the hub probe moved into the model loaders the
token-count cell waited about 80 s while huggingface_hub retried the hub. Exit 1 when a cell is slower.
Left out: a cold store (the first run of the notebook on a store also ingests; ``make demo`` has done
that for the default store, and ``--store`` names another).
Usage: python benchmarks/explore_offline.py [--store DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

from results_file import RESULTS, write_results

TARGET_CELL_SECONDS = 10.0
NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "01-explore.ipynb"


def refused_endpoint() -> str:
    """An http URL on 127.0.0.1 where nothing listens (connections are refused at once)."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    server.close()
    return f"http://127.0.0.1:{port}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default=None, help="index store [$RAG_STORE or .rag_store]")
    parser.add_argument("--out", default=str(RESULTS / "explore_offline.json"))
    args = parser.parse_args()
    os.environ.pop("HF_HUB_OFFLINE", None)  # the kernel inherits this environment
    os.environ["HF_ENDPOINT"] = endpoint = refused_endpoint()
    import nbformat
    import papermill

    parameters = {"store": args.store} if args.store else {}
    with tempfile.TemporaryDirectory() as folder:
        output = Path(folder) / "01-explore.ipynb"
        started = time.perf_counter()
        papermill.execute_notebook(str(NOTEBOOK), str(output), parameters=parameters, progress_bar=False,
                                   cwd=str(NOTEBOOK.parent), kernel_name="python3")
        wall = time.perf_counter() - started
        executed = nbformat.read(output, as_version=4)
    cells = []
    for number, cell in enumerate(executed.cells, start=1):
        if cell.cell_type != "code":
            continue
        stderr = "".join(out.get("text", "") for out in cell.get("outputs", []) if out.get("name") == "stderr")
        cells.append({"cell": number, "seconds": round(cell.metadata.papermill.duration or 0.0, 2),
                      "source": cell.source.splitlines()[0][:70] if cell.source else "",
                      "announced_offline": "working offline" in stderr})
    print(f"01-explore, HF_HUB_OFFLINE unset, HF_ENDPOINT={endpoint} (refused): {wall:.1f} s wall\n")
    print(f"{'cell':>4}  {'seconds':>7}  first line")
    for row in cells:
        print(f"{row['cell']:>4}  {row['seconds']:>7.2f}  {row['source']}")
    slowest = max(cells, key=lambda row: row["seconds"])
    announced = sum(row["announced_offline"] for row in cells)
    print(f"\nslowest cell: {slowest['cell']} ({slowest['seconds']:.2f} s; target < {TARGET_CELL_SECONDS:g} s); "
          f"'working offline' announced in {announced} cell(s)")
    write_results({"endpoint": endpoint, "wall_seconds": round(wall, 2), "cells": cells,
                   "target_cell_seconds": TARGET_CELL_SECONDS, "announced_in_cells": announced}, args.out)
    return 0 if slowest["seconds"] < TARGET_CELL_SECONDS else 1


if __name__ == "__main__":
    sys.exit(main())
