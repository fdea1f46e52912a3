"""Token windows against truncation on real corpora (issue 35, item 4): ``dense_pooling: first`` (the model
reads each unit's first 256 tokens) against ``mean_top2`` and ``max`` (every word read, as windows), per
chunking and retrieval mode, through the CLI (``rag-pipeline eval --per-query FILE``, one process per cell,
as a user runs it).

Suites (``SUITES``): ``sample-tokens`` (the bundled sample corpus at 128, 256 and 512 tokens, dense and hybrid),
``filings-best`` (FinanceBench dev, ``experiments/filings-best.yaml``: hybrid, 256 words,
doc_evidence search), ``filings-tokens`` (that file at 128, 256 and 512 tokens, dense and hybrid),
``filings-512-hybrid``, ``filings-1024-dense``, ``filings-1024-hybrid`` (FinanceBench dev), ``scifact``
(SciFact train, dense and hybrid at the default chunking and at 256 tokens; ``scifact-128`` at 128 tokens).
Reported per cell: page/recall@5 and page/nDCG@10 (doc/nDCG@10 and doc/recall@5 for SciFact, whose units are
abstracts) with 95% bootstrap intervals over the questions (``rag_core.workbench.statistics.intervals``),
the paired difference against ``first`` in the same chunking and mode with its bootstrap interval and
paired t-test p (``rag_core.finetune.significance.paired_comparison``), the units longer than the window,
the share of indexed text ``first`` never reads, the vectors embedded, and the wall and CPU seconds of the
command; the JSON adds each dense collection of the store with its vectors and the bytes of its HNSW
segment. SciFact is scored on a held-out half of its claims: ``split_by_text(claims, 0.5, 13)``'s held-out
half, the split ``benchmarks/self_supervised.py`` reports on (``--claims-seed``), so the figures compare.

A cell whose per-query CSV is already in ``--work`` is not run again (reruns only analyse); one ``--store``
per suite keeps the embedding cache, so ``max`` reuses ``mean_top2``'s windows and no text is embedded twice.
Usage: nice -n 10 python benchmarks/dense_windows_grid.py SUITE --store DIR --work DIR [--only first,mean_top2]
       [--out FILE]
Left out: repeats, other embedding models (the packaged MiniLM only: the hub is offline), the re-ranker.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_file import RESULTS, interval_text, write_results  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DATASETS = ROOT.parent / "shared" / "datasets"
FILINGS = DATASETS / "financebench-dev"
SCIFACT = DATASETS / "scifact-train"
POOLINGS = ("first", "mean_top2", "max")
CLAIMS_SEED = 13


@dataclass(frozen=True)
class Cell:
    chunking: str  # label, e.g. "256 words"
    mode: str
    pooling: str
    args: tuple[str, ...]

    @property
    def name(self) -> str:
        return f"{self.chunking.replace(' ', '')}-{self.mode}-{self.pooling}"


@dataclass(frozen=True)
class Suite:
    data: str  # "sample" | "filings" | "scifact"
    metrics: tuple[str, str]
    cells: tuple[Cell, ...]


def grid(chunkings: dict[str, tuple[str, ...]], modes: tuple[str, ...], base: tuple[str, ...] = ()) -> tuple[Cell, ...]:
    return tuple(Cell(label, mode, pooling, (*base, *args, "--mode", mode, "--dense-pooling", pooling))
                 for label, args in chunkings.items() for mode in modes for pooling in POOLINGS)


PAGE = ("page/recall@5", "page/ndcg@10")
DOC = ("doc/ndcg@10", "doc/recall@5")
SUITES = {
    # the shipped point: its mode (hybrid), chunking and doc_evidence come from the file
    "filings-best": Suite("filings", PAGE, tuple(
        Cell("256 words", "hybrid", pooling, ("--config", "experiments/filings-best.yaml", "--dense-pooling", pooling))
        for pooling in POOLINGS)),
    "filings-512-hybrid": Suite("filings", PAGE, grid({"512 words": ("--chunk-size", "512")}, ("hybrid",),
                                                      ("--rerank-depth", "0"))),
    "filings-1024-dense": Suite("filings", PAGE, grid({"1024 words": ("--chunk-size", "1024")}, ("dense",),
                                                      ("--rerank-depth", "0"))),
    "filings-1024-hybrid": Suite("filings", PAGE, grid({"1024 words": ("--chunk-size", "1024")}, ("hybrid",),
                                                       ("--rerank-depth", "0"))),
    # experiments/filings-best.yaml (doc_evidence search, overlap 32) with its chunk length counted in tokens
    "filings-tokens": Suite("filings", PAGE, grid(
        {f"{size} tokens": ("--chunk-unit", "tokens", "--chunk-size", str(size)) for size in (128, 256, 512)},
        ("dense", "hybrid"), ("--config", "experiments/filings-best.yaml"))),
    "scifact": Suite("scifact", DOC, grid(
        {"512 words": (), "256 tokens": ("--chunk-unit", "tokens", "--chunk-size", "256")}, ("dense", "hybrid"),
        ("--rerank-depth", "0", "--embed-model", "packaged:minilm"))),
    "sample-tokens": Suite("sample", PAGE, grid(
        {f"{size} tokens": ("--chunk-unit", "tokens", "--chunk-size", str(size)) for size in (128, 256, 512)},
        ("dense", "hybrid"), ("--rerank-depth", "0"))),
    "scifact-128": Suite("scifact", DOC, grid(
        {"128 tokens": ("--chunk-unit", "tokens", "--chunk-size", "128")}, ("dense", "hybrid"),
        ("--rerank-depth", "0", "--embed-model", "packaged:minilm"))),
}


def data_args(data: str) -> list[str]:
    if data == "filings":
        return ["--golden", str(FILINGS / "golden.jsonl"), "--input", str(FILINGS / "documents")]
    if data == "sample":
        return ["--golden", str(ROOT / "data" / "golden" / "golden.jsonl"), "--input", str(ROOT / "data" / "documents")]
    return ["--beir", str(SCIFACT), "--split", "train"]


def held_out_ids(data: str) -> set[str] | None:
    """The query ids scored: every filings question; SciFact's held-out half of the claims."""
    if data != "scifact":
        return None
    from rag_core.evaluate.beir import load_beir
    from rag_core.finetune.data import split_by_text

    claims = load_beir(SCIFACT, "train")[1]
    return {query.id for query in split_by_text(claims, 0.5, CLAIMS_SEED, lambda query: query.query)[1]}


def run_cell(cell: Cell, data: str, store: Path, work: Path) -> dict[str, Any]:
    """Run one cell (unless its per-query CSV exists) and return its index figures and cost."""
    csv_path, json_path, log = (work / f"{cell.name}{ext}" for ext in (".csv", ".json", ".err"))
    if not csv_path.exists():
        command = [sys.executable, "-m", "rag_core.cli", "eval", *data_args(data), "--store", str(store),
                   "--no-mlflow", "--json", "--per-query", str(csv_path), *cell.args]
        print(f"running {cell.name}: rag-pipeline {' '.join(command[3:])}", flush=True)
        before, started = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        with log.open("w") as err:
            done = subprocess.run(command, stdout=subprocess.PIPE, stderr=err, text=True, cwd=ROOT,
                                  env={**os.environ, "HF_HUB_OFFLINE": "1"})
        wall, after = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            csv_path.unlink(missing_ok=True)
            raise SystemExit(f"error: {cell.name} failed (exit {done.returncode}); see {log}")
        report = json.loads(done.stdout)
        report["cost"] = {"wall_seconds": round(wall, 1), "load_average": os.getloadavg()[0],
                          "cpu_seconds": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1),
                          "command": "rag-pipeline " + " ".join(command[3:])}
        json_path.write_text(json.dumps({key: report[key] for key in ("metrics", "params", "cost")}, indent=1))
    recorded = json.loads(json_path.read_text())
    index = {key.split("/", 1)[1]: value for key, value in recorded["metrics"].items() if key.startswith("index/")}
    return {"index": index, "cost": recorded["cost"]}


def collection_sizes(store: Path) -> list[dict[str, Any]]:
    """Each dense collection of the store's Chroma folder: its vectors and the bytes of its vector segment
    (the HNSW files; the vectors' metadata share ``chroma.sqlite3`` and are not split by collection)."""
    import sqlite3

    database = store / "chroma" / "chroma.sqlite3"
    if not database.exists():
        return []
    sizes = []
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as connection:
        for collection_id, name in connection.execute("SELECT id, name FROM collections ORDER BY name"):
            segments = dict(connection.execute("SELECT scope, id FROM segments WHERE collection = ?", (collection_id,)))
            vectors = connection.execute("SELECT COUNT(*) FROM embeddings WHERE segment_id = ?",
                                         (segments.get("METADATA"),)).fetchone()[0]
            folder = store / "chroma" / str(segments.get("VECTOR"))
            size = sum(path.stat().st_size for path in folder.rglob("*") if path.is_file()) if folder.is_dir() else 0
            sizes.append({"collection": name, "vectors": vectors, "vector_segment_bytes": size})
    return sizes


def per_query(path: Path, metrics: tuple[str, ...], ids: set[str] | None) -> dict[str, dict[str, float]]:
    with path.open(newline="") as handle:
        rows = {row["query_id"]: {m: float(row[m]) for m in metrics} for row in csv.DictReader(handle)}
    return {qid: row for qid, row in rows.items() if ids is None or qid in ids}


def analyse(suite: Suite, cells: list[Cell], work: Path, ids: set[str] | None) -> list[dict[str, Any]]:
    from rag_core.finetune.significance import paired_comparison
    from rag_core.workbench.statistics.intervals import bootstrap_interval

    rows = []
    for cell in cells:
        values = per_query(work / f"{cell.name}.csv", suite.metrics, ids)
        base_cell = Cell(cell.chunking, cell.mode, "first", ())
        base_path = work / f"{base_cell.name}.csv"
        base = per_query(base_path, suite.metrics, ids) if cell.pooling != "first" and base_path.exists() else None
        row: dict[str, Any] = {"chunking": cell.chunking, "mode": cell.mode, "pooling": cell.pooling,
                               "queries": len(values), "found@5": sum(v[suite.metrics[1 if suite.data == "scifact" else 0]] > 0
                                                                       for v in values.values())}
        for metric in suite.metrics:
            interval = bootstrap_interval([v[metric] for v in values.values()])
            row[metric] = {"mean": interval.estimate, "low": interval.low, "high": interval.high}
            if base:
                row[metric]["vs_first"] = paired_comparison({q: v[metric] for q, v in base.items()},
                                                            {q: v[metric] for q, v in values.items()}).as_dict()
        rows.append(row)
    return rows


def cell_text(figure: dict[str, Any]) -> str:
    return interval_text(figure["mean"], figure["low"], figure["high"], figure.get("vs_first"))


def table(suite: Suite, rows: list[dict[str, Any]], runs: dict[str, dict[str, Any]]) -> str:
    found = "claims with a relevant abstract in top 5" if suite.data == "scifact" else "queries with a relevant page in top 5"
    lines = [f"| chunking | mode | dense_pooling | {suite.metrics[0]} [95% CI] (paired vs first) | "
             f"{suite.metrics[1]} [95% CI] (paired vs first) | {found} | vectors | wall s | CPU s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for row, (name, run) in zip(rows, runs.items()):
        vectors = run["index"].get("windows") or run["index"].get("chunks")
        lines.append(f"| {row['chunking']} | {row['mode']} | {row['pooling']} | {cell_text(row[suite.metrics[0]])} | "
                     f"{cell_text(row[suite.metrics[1]])} | {row['found@5']} of {row['queries']} | {int(vectors)} | "
                     f"{run['cost']['wall_seconds']:.0f} | {run['cost']['cpu_seconds']:.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suite", choices=sorted(SUITES))
    parser.add_argument("--store", type=Path, required=True, help="index store (its embedding cache is reused)")
    parser.add_argument("--work", type=Path, required=True, help="folder of the per-query CSVs and run reports")
    parser.add_argument("--only", default=",".join(POOLINGS), help="poolings to run, comma-separated, in order")
    parser.add_argument("--chunking", action="append", help="run only this chunking (its label, e.g. '512 words'); repeatable")
    parser.add_argument("--analyse-only", action="store_true", help="run nothing: tabulate the cells already run")
    parser.add_argument("--out", type=Path, help="JSON results [benchmarks/results/dense_windows_grid_<suite>.json]")
    args = parser.parse_args(argv)
    suite = SUITES[args.suite]
    wanted = [pooling for pooling in args.only.split(",") if pooling]
    if unknown := sorted(set(wanted) - set(POOLINGS)):
        print(f"error: unknown pooling(s) {', '.join(unknown)} (choose from {', '.join(POOLINGS)})", file=sys.stderr)
        return 2
    args.work.mkdir(parents=True, exist_ok=True)
    order = {pooling: rank for rank, pooling in enumerate(wanted)}
    # by pooling first: every cell of a pooling reuses the vectors its first cell embedded
    cells = sorted((cell for cell in suite.cells if cell.pooling in order),
                   key=lambda cell: (order[cell.pooling], cell.chunking, cell.mode))
    if args.chunking:
        cells = [cell for cell in cells if cell.chunking in args.chunking]
    if args.analyse_only:
        cells = [cell for cell in cells if (args.work / f"{cell.name}.json").exists()]
    runs = {cell.name: run_cell(cell, suite.data, args.store, args.work) for cell in cells}
    shown = sorted(cells, key=lambda cell: (cell.chunking, cell.mode, POOLINGS.index(cell.pooling)))
    rows = analyse(suite, shown, args.work, held_out_ids(suite.data))
    print(table(suite, rows, {cell.name: runs[cell.name] for cell in shown}))
    out = args.out or RESULTS / f"dense_windows_grid_{args.suite.replace('-', '_')}.json"
    write_results({"suite": args.suite, "data": suite.data, "claims_seed": CLAIMS_SEED if suite.data == "scifact" else None,
                   "rows": rows, "runs": runs, "index_sizes": collection_sizes(args.store)}, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
