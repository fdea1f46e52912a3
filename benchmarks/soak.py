"""Soak test: query processes hammer a store while an ingest keeps adding documents to it.

`--processes` query processes (`--hybrid` of them in hybrid mode, the rest BM25, no re-ranking, no
LLM) warm up (one untimed query), then all together answer questions in a loop, the way `rag-pipeline query` does (``service.answer_query``:
registry, chunks, indexes read afresh for every query), for `--seconds`. Meanwhile this process
ingests the sample corpus and then, round after round, writes two new documents, deletes one written
two rounds before and renames another (the ingest removes what is gone: issue 20), and ingests the
folder again. All of it on local files; nothing listens on the network.

Checked: every query answers (no exception), from a consistent store (every passage's chunk belongs
to a registered document and is that document's text; no query had to build an index), and at the
end the store equals one made by a single serial ingest of the final folder (registry, chunk ids,
and the vector collection's size). The serial store starts from a copy of the embedding cache, so it
does not pay for embeddings again: embeddings are a pure function of (model, text).

Prints a table and writes JSON (query count, p50/p95 latency, errors, ingest rounds) to
benchmarks/results/soak.json.   Usage: python benchmarks/soak.py [--seconds 60] [--processes 8]
Left out: re-ranking and LLM calls (their costs are measured elsewhere), documents whose content
changes during the run, several ingests at once (the ingest lock serialises them).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

from rag_core.config import RagConfig  # noqa: E402
from rag_core.ingest.corpus import DocumentStore  # noqa: E402
from rag_core.paths import SAMPLE_DOCUMENTS_DIR, SAMPLE_GOLDEN_FILE  # noqa: E402
from results_file import RESULTS, write_results  # noqa: E402

SETTINGS = {"rerank_depth": 0, "chunk_size": 256, "overlap": 32}  # the mode is per process
REGIONS = ["eu-west", "us-east", "ap-south", "sa-east", "af-north", "me-central"]


# --- the documents the ingest adds ------------------------------------------------------------------
def addendum(number: int) -> tuple[str, str]:
    """(file name, text) of the `number`-th added document: made-up limits a query can find."""
    region = f"{REGIONS[number % len(REGIONS)]}-{number}"
    text = (f"Regional addendum {number}. In region {region} the publish limit is {1000 + 37 * number} "
            f"messages per second and the retention ceiling is {number % 30 + 1} days. Queues in {region} "
            f"replicate to {REGIONS[(number + 1) % len(REGIONS)]} every {number % 9 + 1} minutes; error "
            f"QS-{7000 + number} means the regional quota of {region} is exhausted.\n\n") * 3
    return f"addenda/region-{number:03d}.txt", text


def questions() -> list[str]:
    with SAMPLE_GOLDEN_FILE.open(encoding="utf-8-sig") as lines:
        golden = [json.loads(line)["query"] for line in lines if line.strip()]
    added = [f"What is the publish limit in region {REGIONS[n % len(REGIONS)]}-{n}?" for n in range(40)]
    return [question for pair in zip(golden, added) for question in pair]


# --- one query process ------------------------------------------------------------------------------
def query_worker(store: Path, mode: str, ready: Path, go: Path) -> dict:
    """Warm up (imports, models: one untimed query), say so in `ready`, wait for `go` to hold the end
    time (epoch seconds), answer questions until then; return latencies and errors."""
    config = RagConfig(mode=mode, **SETTINGS)
    asked = questions()
    ask(asked[0], store, config)
    ready.write_text("ready")
    while not go.exists():
        time.sleep(0.05)
    until = float(go.read_text())
    latencies, errors = [], []
    while time.time() < until:
        question = asked[len(latencies) % len(asked)]
        started = time.perf_counter()
        try:
            problem = ask(question, store, config)
        except Exception as exc:  # every failure is a finding of the soak: count it, show a few
            problem = f"{type(exc).__name__}: {exc}"
        latencies.append((time.perf_counter() - started) * 1000)
        if problem:
            errors.append(f"{mode}: {question[:40]}: {problem}"[:300])
    return {"mode": mode, "latencies_ms": latencies, "errors": errors}


def ask(question: str, store: Path, config: RagConfig) -> str | None:
    """Answer as `rag-pipeline query --no-llm` does (``service.answer_query``, step by step, to see
    the index's work); say why the answer did not come from a consistent store, or None."""
    from rag_core.generate.answer import answer_question
    from rag_core.service import open_pipeline

    before = DocumentStore(store).registry()  # the ingest adds and removes documents meanwhile
    pipeline = open_pipeline(store, config, progress=False)
    retrieval = pipeline.retrieve(question)
    answer_question(question, retrieval.hits, config, use_llm=False)
    work = pipeline.index.stats
    if work.chunkings_built or work.embed_seconds or work.bm25_seconds:
        return f"the query built an index of {len(pipeline.corpus)} documents (an ingest left it unbuilt)"
    registered = before.keys() | DocumentStore(store).registry().keys()  # registered at some time of the query
    for hit in retrieval.hits:
        document = pipeline.corpus.by_id.get(hit.chunk.doc_id)
        if document is None or hit.chunk.doc_id not in registered:
            return f"passage {hit.chunk.id} of unregistered document {hit.chunk.doc_id!r}"
        if document.text[hit.chunk.char_start : hit.chunk.char_end] != hit.chunk.text:
            return f"passage {hit.chunk.id} is not the text of {hit.chunk.doc_id!r}"
    return None


# --- the soak -------------------------------------------------------------------------------------
def soak(seconds: float, processes: int, hybrid: int, workdir: Path) -> dict:
    from rag_core.service import ingest_directory

    folder, store = workdir / "input", workdir / "store"
    shutil.copytree(SAMPLE_DOCUMENTS_DIR, folder, ignore=shutil.ignore_patterns(".*"))
    config = RagConfig(mode="hybrid", **SETTINGS)
    ingest_directory(folder, store, config)  # queries start from a store that answers

    workers = [_start_worker(store, "hybrid" if n < hybrid else "bm25", workdir, n) for n in range(processes)]
    _wait_until_ready(workers, workdir)
    until = time.time() + seconds
    (workdir / "go.tmp").write_text(repr(until))  # all start together, warm, while the ingest runs
    (workdir / "go.tmp").rename(workdir / "go")  # at once: a worker never reads it half written
    rounds, added, removed = 0, 0, 0
    while time.time() < until:
        for _ in range(2):
            name, text = addendum(added)
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(text)
            added += 1
        if added >= 4:  # one document disappears and one is renamed each round: a removal and an addition
            gone, moved = folder / addendum(added - 4)[0], folder / addendum(added - 3)[0]
            gone.unlink(missing_ok=True)
            if moved.exists():
                moved.rename(moved.with_name("renamed-" + moved.name))
            removed += 1
        ingest_directory(folder, store, config)
        rounds += 1
    results = [_finish_worker(worker) for worker in workers]
    latencies = [ms for result in results for ms in result["latencies_ms"]]
    errors = [error for result in results for error in result["errors"]]
    return {
        "seconds": seconds, "processes": processes, "hybrid_processes": hybrid,
        "queries": len(latencies), "queries_per_s": len(latencies) / seconds,
        "p50_ms": _percentile(latencies, 50), "p95_ms": _percentile(latencies, 95),
        "max_ms": max(latencies, default=0.0),
        "by_mode": {mode: _summary([ms for r in results if r["mode"] == mode for ms in r["latencies_ms"]])
                    for mode in ("bm25", "hybrid")},
        "errors": len(errors), "error_samples": errors[:10],
        "ingest_rounds": rounds, "documents_added": added, "documents_removed": removed,
        **compare_with_serial(folder, store, workdir / "serial-store", config),
    }


def compare_with_serial(folder: Path, store: Path, serial: Path, config: RagConfig) -> dict:
    """Ingest the final folder once into a fresh store and compare it with the soaked one."""
    from rag_core.service import ingest_directory

    serial.mkdir()
    with sqlite3.connect(store / "cache.sqlite") as source, sqlite3.connect(serial / "cache.sqlite") as target:
        source.backup(target)
    ingest_directory(folder, serial, config)
    soaked, fresh = store_summary(store), store_summary(serial)
    return {"final_documents": soaked["documents"], "final_chunks": soaked["chunks"],
            "final_store_equals_serial": soaked == fresh,
            "differences": sorted(key for key in soaked if soaked[key] != fresh[key])}


def store_summary(store: Path) -> dict:
    """What a store holds: registry, active chunk ids, and the vector collection's size."""
    from rag_core.retrieve.vector_stores.chroma import ChromaVectorStore

    key = json.loads((store / "active.json").read_text())["chunking_key"]
    with (store / "chunks" / key / "chunks.jsonl").open() as lines:
        chunk_ids = [json.loads(line)["id"] for line in lines]
    [manifest_path] = (store / "chunks" / key).glob("dense-*.json")
    manifest = json.loads(manifest_path.read_text())
    return {"registry": DocumentStore(store).registry(), "documents": len(DocumentStore(store).registry()),
            "chunks": len(chunk_ids), "chunk_ids": chunk_ids,
            "vectors": ChromaVectorStore(store / "chroma").count(manifest["collection"])}


def _start_worker(store: Path, mode: str, workdir: Path, number: int) -> tuple[subprocess.Popen, Path]:
    output = workdir / f"worker-{number}.json"
    command = [sys.executable, __file__, "--worker", mode, "--store", str(store), "--output", str(output),
               "--ready", str(workdir / f"ready-{number}"), "--go", str(workdir / "go")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[1]),
                                                                      os.environ.get("PYTHONPATH")]))}
    return subprocess.Popen(command, env=env), output


def _wait_until_ready(workers: list[tuple[subprocess.Popen, Path]], workdir: Path, timeout_s: float = 600) -> None:
    deadline = time.time() + timeout_s
    while len(list(workdir.glob("ready-*"))) < len(workers):
        if time.time() > deadline or any(process.poll() is not None for process, _ in workers):
            raise RuntimeError("a query process failed to start (see its output above)")
        time.sleep(0.1)


def _finish_worker(worker: tuple[subprocess.Popen, Path]) -> dict:
    process, output = worker
    if process.wait(timeout=600) != 0 or not output.exists():
        return {"mode": "?", "latencies_ms": [], "errors": [f"query process exited with {process.returncode}"]}
    return json.loads(output.read_text())


def _percentile(samples: list[float], q: float) -> float:
    return float(np.percentile(samples, q)) if samples else 0.0


def _summary(latencies: list[float]) -> dict:
    return {"queries": len(latencies), "p50_ms": _percentile(latencies, 50), "p95_ms": _percentile(latencies, 95)}


def print_table(result: dict) -> None:
    rows = [
        ("query processes", f"{result['processes']} ({result['hybrid_processes']} hybrid)"),
        ("seconds", f"{result['seconds']:g}"),
        ("queries", f"{result['queries']}, {result['queries_per_s']:.1f}/s"),
        ("latency p50 / p95 / max", f"{result['p50_ms']:.0f} / {result['p95_ms']:.0f} / {result['max_ms']:.0f} ms"),
        *((f"  {mode}: queries, p50 / p95", f"{by['queries']}, {by['p50_ms']:.0f} / {by['p95_ms']:.0f} ms")
          for mode, by in result["by_mode"].items()),
        ("errors", str(result["errors"])),
        ("ingest rounds", f"{result['ingest_rounds']} ({result['documents_added']} documents added, "
                          f"{result['documents_removed']} removed, as many renamed)"),
        ("final store", f"{result['final_documents']} documents, {result['final_chunks']} chunks"),
        ("equals a serial ingest", "yes" if result["final_store_equals_serial"] else f"NO: {result['differences']}"),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    for error in result["error_samples"]:
        print(f"  error: {error}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the queries run [60]")
    parser.add_argument("--processes", type=int, default=8, help="query processes [8]")
    parser.add_argument("--hybrid", type=int, default=2, help="of which in hybrid mode; the rest BM25 [2]")
    parser.add_argument("--output", type=Path, default=RESULTS / "soak.json", help="JSON results [%(default)s]")
    parser.add_argument("--worker", choices=("bm25", "hybrid"), help=argparse.SUPPRESS)
    parser.add_argument("--store", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--ready", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--go", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        args.output.write_text(json.dumps(query_worker(args.store, args.worker, args.ready, args.go)))
        return 0
    with tempfile.TemporaryDirectory(prefix="rag-soak-") as workdir:
        result = soak(args.seconds, args.processes, min(args.hybrid, args.processes), Path(workdir))
    print_table(result)
    write_results(result, args.output)
    return 0 if result["errors"] == 0 and result["final_store_equals_serial"] else 1


if __name__ == "__main__":
    sys.exit(main())
