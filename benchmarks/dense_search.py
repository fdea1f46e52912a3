"""Where does approximate (HNSW) dense search start to pay? Exact numpy search against embedded Chroma.

For each size (default 1k, 5k, 20k, 100k vectors of 384 dimensions, MiniLM's), builds a Chroma collection
as the workbench does (``ChromaVectorStore``: cosine HNSW, Chroma's defaults) and a float32 matrix, then
times ``--queries`` single-query searches of depth ``--depth`` in each: Chroma's ``query`` and the
dense retriever's exact search (``ExactSearch`` over the vectors read back from the store: one
matrix-vector product, ties by id). Reports the build (upsert) time, the time to read the vectors back
for exact search, per-query p50 and p95, and HNSW's recall@depth against the exact lists. Vectors are random unit
vectors (seeded), or ``--vectors FILE.npy``: a matrix of real embeddings, resampled with replacement
plus small noise up to each size. Random vectors are HNSW's hard case (no cluster structure): their
recall is a lower bound; real embeddings usually do better. Timing ratios on a loaded machine are
provisional; re-run on a quiet one.
Usage: python benchmarks/dense_search.py [--sizes 1000,5000,20000,100000] [--queries 100] [--depth 20]
       [--vectors FILE.npy]
Writes ``benchmarks/results/dense_search.json``.
Left out: other vector stores (``benchmarks/vector_stores.py``), filtered search, GPU search.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

# before numpy loads OpenBLAS: one query is a memory-bound matrix-vector product, and on a shared machine
# a second BLAS thread only waits (5,000 x 384: 1.6 ms with 1 thread, 16 ms with 2, load average 10).
# Set OPENBLAS_NUM_THREADS yourself to measure another count.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np  # noqa: E402

from results_file import RESULTS, write_results

DIMENSIONS = 384


def unit(matrix: np.ndarray) -> np.ndarray:
    return (matrix / np.linalg.norm(matrix, axis=1, keepdims=True)).astype(np.float32)


def vectors_of(size: int, source: np.ndarray | None, rng: np.random.Generator) -> np.ndarray:
    if source is None:
        return unit(rng.standard_normal((size, DIMENSIONS)))
    picked = source[rng.integers(0, len(source), size)]
    return unit(picked + rng.normal(0, 0.01, picked.shape))  # distinct vectors near the real ones


def exact_top(matrix: np.ndarray, query: np.ndarray, depth: int) -> list[int]:
    scores = matrix @ query
    head = np.argpartition(-scores, depth)[:depth]
    return [int(i) for i in head[np.lexsort((head, -scores[head]))]]


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def measure(size: int, args: argparse.Namespace, source: np.ndarray | None, rng: np.random.Generator) -> dict:
    import chromadb

    from rag_core.retrieve.vector_stores.chroma import ChromaVectorStore
    from rag_core.retrieve.vector_stores.exact import ExactSearch

    matrix = vectors_of(size, source, rng)
    queries = vectors_of(args.queries, source, rng)
    ids = [f"{i:07d}" for i in range(size)]
    with tempfile.TemporaryDirectory(prefix="rag-dense-search-") as folder:
        store = ChromaVectorStore(folder)
        started = time.perf_counter()
        store.upsert("bench", ids, matrix, [{"doc_id": "d"}] * size, [""] * size)
        build_seconds = time.perf_counter() - started
        del store
        store = ChromaVectorStore(folder)  # a new client, as a query process would open it
        store.search("bench", queries[0], args.depth)  # loads the index
        started = time.perf_counter()
        exact = ExactSearch.from_store(store, "bench")
        load_seconds = time.perf_counter() - started
        hnsw_ms, exact_ms, recalls = [], [], []
        for query in queries:
            started = time.perf_counter()
            found = store.search("bench", query, args.depth)
            hnsw_ms.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            truth = {hit.id for hit in exact.search(query, args.depth)}
            exact_ms.append((time.perf_counter() - started) * 1000)
            recalls.append(len({hit.id for hit in found} & truth) / args.depth)
            if truth != {ids[i] for i in exact_top(matrix, query, args.depth)}:
                raise SystemExit("error: exact search over the stored vectors differs from numpy over the originals")
        del store
        chromadb.api.client.SharedSystemClient.clear_system_cache()
    return {"size": size, "build_seconds": build_seconds, "exact_load_seconds": load_seconds, "hnsw_p50_ms": percentile(hnsw_ms, 50),
            "hnsw_p95_ms": percentile(hnsw_ms, 95), "exact_p50_ms": percentile(exact_ms, 50),
            "exact_p95_ms": percentile(exact_ms, 95), "hnsw_recall": statistics.mean(recalls),
            "exact_matrix_mb": matrix.nbytes / 2**20}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,5000,20000,100000")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--depth", type=int, default=20)
    parser.add_argument("--vectors", default=None, help="a .npy matrix of real embeddings to resample")
    args = parser.parse_args()
    source = unit(np.load(args.vectors)) if args.vectors else None
    rng = np.random.default_rng(0)
    rows = []
    print(f"{'size':>7} {'build s':>8} {'load s':>7} {'HNSW p50 ms':>11} {'p95':>7} {'exact p50 ms':>12} {'p95':>7} "
          f"{'HNSW recall@' + str(args.depth):>15}")
    for size in (int(value) for value in args.sizes.split(",")):
        row = measure(size, args, source, rng)
        rows.append(row)
        print(f"{size:>7} {row['build_seconds']:>8.1f} {row['exact_load_seconds']:>7.2f} {row['hnsw_p50_ms']:>11.2f} {row['hnsw_p95_ms']:>7.2f} "
              f"{row['exact_p50_ms']:>12.2f} {row['exact_p95_ms']:>7.2f} {row['hnsw_recall']:>15.4f}", flush=True)
    write_results({"vectors": args.vectors or "random unit", "depth": args.depth, "queries": args.queries,
                   "blas_threads": os.environ["OPENBLAS_NUM_THREADS"], "rows": rows},
                  RESULTS / "dense_search.json")


if __name__ == "__main__":
    main()
