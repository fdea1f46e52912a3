"""Retrieval latency per stage on a corpus of at least 3,400 chunks; prints a table, writes JSON.

The corpus is synthetic but realistic: the sample corpus's paragraphs, recombined into many
documents with their numbers and identifiers varied, chunked at 100 words. It is built (and
embedded) once under benchmarks/results/store and reused. Measured per query, over a fixed set of
questions: query embedding, vector search, BM25 for each backend, fusion, and re-ranking of 20
candidates with the score cache off (the model's real cost). Index load = BM25 load + vector store
open + first search, in a fresh process.

Targets on a 2-core machine: bm25s p50 <= 5 ms, vector search p50 <= 15 ms, fusion p50 <= 1 ms,
index load <= 1 s.   Usage: python benchmarks/retrieval.py [--queries 50] [--rerank-queries 5]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from rag_core.config import RagConfig  # noqa: E402
from rag_core.ingest.corpus import Corpus  # noqa: E402
from rag_core.retrieve.fusion import reciprocal_rank_fusion  # noqa: E402
from rag_core.retrieve.index import Index  # noqa: E402
from rag_core.ingest.files import read_documents  # noqa: E402
from rag_core.paths import SAMPLE_DOCUMENTS_DIR, SAMPLE_GOLDEN_FILE  # noqa: E402
from rag_core.records import Document  # noqa: E402
from rag_core.retrieve.rerank import Reranker  # noqa: E402
from results_file import RESULTS, write_results  # noqa: E402

TARGETS_MS = {"bm25_bm25s": 5.0, "vector_search": 15.0, "fusion": 1.0}
TARGET_LOAD_S = 1.0
MIN_CHUNKS = 3400


def synthetic_corpus(n_documents: int, seed: int = 0) -> Corpus:
    """Paragraphs of the sample corpus recombined into `n_documents` documents, numbers varied."""
    rng = random.Random(seed)
    paragraphs = [p.strip() for doc in read_documents(SAMPLE_DOCUMENTS_DIR).documents
                  for p in doc.text.split("\n\n") if len(p.split()) > 20]
    documents = []
    for number in range(n_documents):
        chosen = rng.sample(paragraphs, k=min(len(paragraphs), 24))
        varied = [re.sub(r"\d+", lambda m: str(int(m.group()) + rng.randint(0, 9)), p) for p in chosen]
        pages = ["\n\n".join(varied[i : i + 6]) for i in range(0, len(varied), 6)]
        documents.append(Document.from_pages(f"synthetic/doc-{number:04d}.txt", pages, f"synthetic-{seed}-{number}"))
    return Corpus.of(documents)


def questions() -> list[str]:
    with SAMPLE_GOLDEN_FILE.open() as lines:
        return [json.loads(line)["query"] for line in lines if line.strip()]


def percentiles(samples: list[float]) -> dict[str, float]:
    return {"p50_ms": float(np.percentile(samples, 50)), "p95_ms": float(np.percentile(samples, 95)), "n": len(samples)}


def measure_load(store: Path, config: RagConfig, corpus_docs: int) -> float:
    """Seconds to load BM25, open the vector store and run the first search, in a fresh process."""
    code = f"""
import time, sys
sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})
from retrieval import synthetic_corpus
from rag_core.config import RagConfig
from rag_core.retrieve.index import Index
from rag_core.retrieve.vector_stores.chroma import ChromaVectorStore
import numpy as np
corpus = synthetic_corpus({corpus_docs})
index = Index({str(store)!r}, corpus, RagConfig(**{config.as_dict()!r}))
index.chunks
started = time.perf_counter()
bm25 = index.retriever("bm25").index
bm25.retrieve("rate limit", 20)
manifest = next(index.dir.glob("dense-*.json"))
import json
collection = json.loads(manifest.read_text())["collection"]
store = ChromaVectorStore(index.store_dir / "chroma")
store.search(collection, np.ones(384, dtype=np.float32) / 384 ** 0.5, 20)
print(time.perf_counter() - started)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=46, help="synthetic documents (about 75 chunks each)")
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--rerank-queries", type=int, default=5, help="queries re-ranked without cache")
    parser.add_argument("--rerank-model", default=os.environ.get("RAG_RERANK_MODEL", "random-head:packaged:minilm"),
                        help="cross-encoder [$RAG_RERANK_MODEL, else the random-head stand-in: cost only, its scores "
                             "mean nothing]; per-backend cost and agreement: benchmarks/rerank_backends.py")
    args = parser.parse_args()

    RESULTS.mkdir(parents=True, exist_ok=True)
    store = RESULTS / "store"
    config = RagConfig(chunk_size=100, overlap=0)
    corpus = synthetic_corpus(args.documents)
    index = Index(store, corpus, config, progress=True)
    started = time.perf_counter()
    index.build()
    build_s = time.perf_counter() - started
    chunks = len(index.chunks)
    if chunks < MIN_CHUNKS:
        sys.exit(f"only {chunks} chunks; raise --documents")

    queries = (questions() * 10)[: args.queries]
    samples: dict[str, list[float]] = {name: [] for name in
                                       ("embed_query", "vector_search", "bm25_bm25s", "bm25_rank_bm25", "fusion")}
    bm25s_index = index.retriever("bm25").index
    rank_bm25_index = Index(store, corpus, config.replace(bm25_backend="rank_bm25")).retriever("bm25").index
    collection = index.retriever("dense").collection
    for query in queries:
        started = time.perf_counter()
        vector = index.embedder.embed_query(query)
        samples["embed_query"].append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        dense = index.vector_store.search(collection, vector, 20)
        samples["vector_search"].append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        keyword = bm25s_index.retrieve(query, 20)
        samples["bm25_bm25s"].append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        rank_bm25_index.retrieve(query, 20)
        samples["bm25_rank_bm25"].append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        reciprocal_rank_fusion([[h.id for h in dense], [h.id for h in keyword]], k=60)
        samples["fusion"].append((time.perf_counter() - started) * 1000)

    reranker = Reranker(args.rerank_model, cache=None)  # no cache: the model's real cost
    reranker.loaded
    samples["rerank_20"] = []
    for query in queries[: args.rerank_queries]:
        texts = [index.chunk_by_id[h.id].text for h in index.vector_store.search(collection, index.embedder.embed_query(query), 20)]
        started = time.perf_counter()
        reranker.score(query, texts)
        samples["rerank_20"].append((time.perf_counter() - started) * 1000)

    load_s = measure_load(store, config, args.documents)
    results = {
        "chunks": chunks, "documents": len(corpus), "build_seconds": build_s,
        "embed_model": index.embedder.name_used, "rerank_model": reranker.name_used,
        "stages": {name: percentiles(values) for name, values in samples.items()},
        "index_load_seconds": load_s,
        "targets": {**{f"{k}_p50_ms": v for k, v in TARGETS_MS.items()}, "index_load_seconds": TARGET_LOAD_S},
    }
    print(f"\n{chunks} chunks in {len(corpus)} documents (build {build_s:.1f} s, cached after the first run)")
    print(f"{'stage':<18}{'p50 ms':>10}{'p95 ms':>10}{'target p50':>12}")
    for name, stats in results["stages"].items():
        target = TARGETS_MS.get(name)
        verdict = "" if target is None else f"{'<= ' + str(target):>9} {'ok' if stats['p50_ms'] <= target else 'MISSED'}"
        print(f"{name:<18}{stats['p50_ms']:>10.2f}{stats['p95_ms']:>10.2f}  {verdict}")
    print(f"{'index load':<18}{load_s * 1000:>10.0f} ms (target <= {TARGET_LOAD_S * 1000:.0f} ms: "
          f"{'ok' if load_s <= TARGET_LOAD_S else 'MISSED'})")
    print(f"re-rank model: {reranker.name_used}")
    write_results(results, RESULTS / "retrieval.json")


if __name__ == "__main__":
    main()
