"""Cold ingest with token windows against truncation (issue 35): the sample corpus ingested into a fresh
store (nothing cached) with ``dense_pooling: first`` (the model reads each chunk's first 256 tokens)
and with windows (``mean_top2``, the default: every word read), one run each, through the CLI
(``rag-pipeline ingest --json``), so each time includes the process's start-up and model load.

A third ingest reads every word another way: chunks that fit the window (``--chunk-unit tokens --chunk-size
254 --overlap 32``, ``--fit`` to change them), so no chunk needs windows.

Reported per ingest: the wall time of the command, the embedding seconds and vectors embedded (from the
ingest report), the units longer than the window, the share of the indexed text never read, and the
store's size on disk; then the ratio to ``first`` of the wall time (target: at most 1.5) and of the
embedding time. The load average (1 min) is recorded before and after: one run on a shared machine is noisy.
Usage: python benchmarks/dense_windows.py [--input DIR] [--chunk-size 512] [--fit 254,32] [--out FILE]
Left out: repeats (the issue asks for one run), other corpora and models.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_file import RESULTS, write_results  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TARGET_RATIO = 1.5


def size_on_disk(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def cold_ingest(input_dir: Path, pooling: str, chunking: tuple[str, ...], label: str, work: Path) -> dict:
    store = work / f"store-{label.replace(' ', '-')}"
    command = [sys.executable, "-m", "rag_core.cli", "ingest", "--input", str(input_dir), "--store", str(store),
               "--json", "--dense-pooling", pooling, *chunking, "--mode", "dense"]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"error: ingest {label} failed ({done.returncode}): {done.stderr[-500:]}")
    report = json.loads(done.stdout)
    return {"ingest": label, "pooling": pooling, "wall_seconds": round(wall, 2), "embed_seconds": report["seconds"]["embedding"],
            "chunks": report["chunks"], "vectors": report.get("dense_vectors", 0), "longer": report["truncated"],
            "unread_share": report.get("unread_share", 0.0), "store_bytes": size_on_disk(store)}


def size_and_overlap(text: str) -> tuple[int, int]:
    """``--fit``: "SIZE,OVERLAP" in tokens, the overlap smaller than the size."""
    try:
        size, overlap = (int(value) for value in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected SIZE,OVERLAP in tokens (e.g. 254,32), got {text!r}") from None
    if not 0 <= overlap < size:
        raise argparse.ArgumentTypeError(f"the overlap must be at least 0 and below the size, got {text!r}")
    return size, overlap


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", type=Path, default=ROOT / "data" / "documents")
    parser.add_argument("--chunk-size", type=int, default=512)
    parser.add_argument("--fit", type=size_and_overlap, default=(254, 32),
                        help="chunk size and overlap in tokens of the third ingest [254,32]")
    parser.add_argument("--out", type=Path, default=RESULTS / "dense_windows.json")
    args = parser.parse_args(argv)
    fit_size, fit_overlap = args.fit
    words = ("--chunk-size", str(args.chunk_size))
    ingests = [(f"{args.chunk_size} words", "first", words), (f"{args.chunk_size} words", "mean_top2", words),
               (f"{fit_size} tokens", "mean_top2",
                ("--chunk-unit", "tokens", "--chunk-size", str(fit_size), "--overlap", str(fit_overlap)))]
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as work:
        rows = [cold_ingest(args.input, pooling, chunking, f"{label} {pooling}", Path(work))
                for label, pooling, chunking in ingests]
    first = rows[0]
    for row in rows:
        row["wall_ratio"] = row["wall_seconds"] / first["wall_seconds"]
        row["embed_ratio"] = row["embed_seconds"] / first["embed_seconds"] if first["embed_seconds"] else float("nan")
    print(f"{'ingest':<22}{'wall s':>8}{'embed s':>9}{'chunks':>8}{'vectors':>9}{'longer':>8}"
          f"{'unread':>8}{'store MB':>10}{'x first':>9}")
    for row in rows:
        print(f"{row['ingest']:<22}{row['wall_seconds']:>8.1f}{row['embed_seconds']:>9.1f}{row['chunks']:>8}"
              f"{row['vectors']:>9}{row['longer']:>8}{100 * row['unread_share']:>7.1f}%{row['store_bytes'] / 1e6:>10.1f}"
              f"{row['wall_ratio']:>8.2f}x")
    windows = rows[1]
    print(f"cold ingest, windows / first: {windows['wall_ratio']:.2f}x wall (target <= {TARGET_RATIO}), "
          f"{windows['embed_ratio']:.2f}x embedding; chunks that fit the window: {rows[2]['wall_ratio']:.2f}x wall, "
          f"{rows[2]['embed_ratio']:.2f}x embedding; load average {load_before:.1f} -> {os.getloadavg()[0]:.1f}")
    write_results({"rows": rows, "wall_ratio": windows["wall_ratio"], "embed_ratio": windows["embed_ratio"],
                   "target_ratio": TARGET_RATIO, "chunk_size": args.chunk_size, "fit": [fit_size, fit_overlap],
                   "load_before": load_before, "load_after": os.getloadavg()[0]}, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
