"""What each vector store costs on the same 5,000 BEIR abstracts: upsert (ingest) time and search
latency for Chroma embedded, Chroma server (``chroma run``, started here on 127.0.0.1) and Qdrant local;
prints a table, writes benchmarks/results/vector_stores.json.

The corpus is ``write_synthetic_beir`` (5,000 abstracts, one chunk each with the default chunking).
Vectors are computed once, before any store is timed, so the comparison is the stores' cost only:
``--vectors random`` (default) uses seeded random unit vectors of MiniLM's dimension (384), since
embedding 5,000 abstracts takes minutes on 2 CPU cores; ``--vectors model`` embeds them with the
configured model through the store's cache (a second run reads them from cache.sqlite). Each store
gets the same ids, vectors and metadata; ``recall@10`` is the share of the exact (numpy) top 10 that
it returns (Chroma's HNSW is approximate; Qdrant's local mode searches exactly). ``missing_check_s``
is the cost of asking which of the 5,000 ids are not stored (how a re-run completes an interrupted
ingest), ``reupsert_s`` that of writing them all again. ``upsert_cpu_s`` is this process's CPU time
during the upsert (Chroma embedded and Qdrant local work in-process): on a loaded machine wall time
waits for a core, so the CPU time is the steadier figure (a server's work is not in it).
Usage: python benchmarks/vector_stores.py [--documents 5000] [--queries 200] [--vectors random|model]
[--stores chroma,chroma-server,qdrant]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402

from rag_core.config import RagConfig  # noqa: E402
from rag_core.evaluate.beir import load_beir, write_synthetic_beir  # noqa: E402
from rag_core.ingest.corpus import Corpus  # noqa: E402
from rag_core.retrieve.vector_stores.chroma_process import chroma_server  # noqa: E402
from rag_core.retrieve.index import Index  # noqa: E402
from rag_core.retrieve.vector_stores import open_vector_store  # noqa: E402
from results_file import RESULTS, write_results  # noqa: E402

DIMENSION = 384  # all-MiniLM-L6-v2's
DEPTH = 20  # what the pipeline asks the vector store for (retrieve_depth)


def unit_rows(count: int, seed: int) -> np.ndarray:
    rows = np.random.default_rng(seed).normal(size=(count, DIMENSION)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def measure(setting: str, store_dir: Path, index: Index, vectors: np.ndarray, queries: np.ndarray) -> dict:
    chunks = index.chunks
    ids, texts = [chunk.id for chunk in chunks], [chunk.text for chunk in chunks]
    metadata = [{"doc_id": c.doc_id, "page_start": c.page_start, "page_end": c.page_end} for c in chunks]
    collection = "dense-benchmark"
    store = open_vector_store(setting, store_dir)
    started, cpu_started = time.perf_counter(), time.process_time()
    store.upsert(collection, ids, vectors, metadata, texts)
    upsert_s, upsert_cpu_s = time.perf_counter() - started, time.process_time() - cpu_started
    assert store.count(collection) == len(ids), f"{setting}: {store.count(collection)} of {len(ids)} stored"
    started = time.perf_counter()
    assert store.missing(collection, ids) == []  # what a re-run after an interrupted ingest asks first
    missing_check_s = time.perf_counter() - started
    started = time.perf_counter()
    store.upsert(collection, ids, vectors, metadata, texts)  # writing them all again: same ids, nothing added
    reupsert_s = time.perf_counter() - started
    latencies, recalls = [], []
    exact = np.argsort(-(queries @ vectors.T), axis=1)[:, :10]
    for query, expected in zip(queries, exact):
        started = time.perf_counter()
        hits = store.search(collection, query, DEPTH)
        latencies.append((time.perf_counter() - started) * 1000)
        recalls.append(len({hit.id for hit in hits[:10]} & {ids[i] for i in expected}) / 10)
    return {"upsert_s": round(upsert_s, 2), "upserts_per_s": round(len(ids) / upsert_s), "upsert_cpu_s": round(upsert_cpu_s, 2),
            "missing_check_s": round(missing_check_s, 2), "reupsert_s": round(reupsert_s, 2), "search_p50_ms": round(statistics.median(latencies), 2),
            "search_p95_ms": round(float(np.percentile(latencies, 95)), 2),
            "recall@10_vs_exact": round(float(np.mean(recalls)), 4)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=5000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--vectors", choices=("random", "model"), default="random")
    parser.add_argument("--stores", default="chroma,chroma-server,qdrant", help="which stores, comma-separated")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="rag-vector-stores-") as temp:
        folder = Path(temp)
        write_synthetic_beir(folder / "beir", documents=args.documents)
        documents, golden = load_beir(folder / "beir")
        store_dir = folder / "store"
        index = Index(store_dir, Corpus.of(documents), RagConfig(mode="dense", rerank_depth=0))
        if args.vectors == "model":
            vectors, embed_stats = index.embedder.embed_documents([chunk.text for chunk in index.chunks])
            texts = [query.query for query in golden]
            queries = np.stack([index.embedder.embed_query(texts[i % len(texts)]) for i in range(args.queries)])
            vectors_note = f"{index.embedder.name_used}, {embed_stats.embedded} embedded, {embed_stats.cache_hits} from cache"
        else:
            vectors, queries = unit_rows(len(index.chunks), seed=0), unit_rows(args.queries, seed=1)
            vectors_note = f"random unit vectors, dimension {DIMENSION} (seeded)"
        rows = {}
        stores = set(args.stores.split(","))
        if "chroma" in stores:
            rows["chroma (embedded)"] = measure("chroma", store_dir, index, vectors, queries)
        if "chroma-server" in stores:
            with chroma_server(folder / "chroma-server") as server:
                rows["chroma+http (server)"] = measure(server.setting, store_dir, index, vectors, queries)
        if "qdrant" in stores:
            rows["qdrant:PATH (local)"] = measure("qdrant:qdrant", store_dir, index, vectors, queries)
    summary = {"documents": args.documents, "chunks": len(vectors), "queries": len(queries), "search_depth": DEPTH,
               "vectors": vectors_note, "cpu_count": os.cpu_count(), "load_average_1m": round(os.getloadavg()[0], 2), "load_average_1m_before": round(load_before, 2),
               "stores": rows}
    columns = list(next(iter(rows.values())))
    print(f"{len(vectors)} chunks, {len(queries)} queries; vectors: {vectors_note}; load average (1 min) "
          f"{load_before:.2f} before, {os.getloadavg()[0]:.2f} after, {os.cpu_count()} cores")
    print(f"{'store':<22}" + "".join(f"{name:>20}" for name in columns))
    for name, row in rows.items():
        print(f"{name:<22}" + "".join(f"{row[column]:>20}" for column in columns))
    write_results(summary, RESULTS / "vector_stores.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
