"""Cost of each built-in chunker relative to ``recursive``: chunking time and embeddings computed, on the
sample corpus and on one filing, with the packaged MiniLM; prints a table, writes JSON under
benchmarks/results/.

Per corpus and chunker, at the default settings (chunk_size 512, overlap 64 words; semantic_buffer 1,
semantic_percentile 95, cluster_piece_size 50): the chunks made; the chunking's wall and CPU seconds
with an empty embedding cache (the model is loaded and run once before, so its start-up is not counted);
the embeddings computed while chunking; those a dense index of the chunks adds (one per chunk) and the
seconds they take (the chunks embedded by the same model); then a second chunking over the same cache (a
sweep's next chunk size, or a store built again): its seconds and the embeddings it recomputes (0
expected: the cache is keyed by model as loaded and text). Ratios are against ``recursive`` of the same
run: chunking time; chunking and embedding the chunks (what a dense index costs); and embeddings to chunk
and index (the chunking's plus one per chunk) over recursive's (one per chunk). The documents are read
once, before any timing.

Usage: python benchmarks/chunkers_cost.py [--filing PDF] [--backend torch] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from rag_core.config import RagConfig  # noqa: E402
from rag_core.ingest.chunkers import make_chunker  # noqa: E402
from rag_core.ingest.files import read_documents  # noqa: E402
from rag_core.paths import SAMPLE_DOCUMENTS_DIR  # noqa: E402
from rag_core.retrieve.cache import ScoreCache  # noqa: E402
from rag_core.retrieve.embedding.embedder import Embedder  # noqa: E402
from results_file import RESULTS, write_results  # noqa: E402

CHUNKERS = ("recursive", "fixed", "sentences", "semantic", "cluster", "structure")
MODEL = "packaged:minilm"


def cached_embeddings(path: Path) -> int:
    """Rows of the embedding cache at `path`: each embedding computed adds one (a text cached adds none)."""
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT count(*) FROM embeddings").fetchone()[0]


def chunking_run(chunker: Any, cache: Path, documents: list) -> dict[str, Any]:
    """One chunking of `documents`: chunks, wall and CPU seconds, embeddings computed (new rows in `cache`)."""
    before = cached_embeddings(cache)
    wall, cpu = time.perf_counter(), time.process_time()
    chunks = chunker.chunk_corpus(documents)
    return {"chunks": chunks, "wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu,
            "embeddings_computed": cached_embeddings(cache) - before}


def measure(name: str, documents: list, backend: str, folder: Path) -> dict[str, Any]:
    """The cold and the second chunking of `documents` by chunker `name`, each chunker with a cache of its own."""
    cache = folder / f"{name}.sqlite"
    embedder = Embedder(MODEL, cache=ScoreCache(cache), backend=backend)
    embedder.embed_query("the model loaded and run once before timing")  # start-up not counted; nothing cached
    chunker = make_chunker(RagConfig(chunker=name, embed_model=MODEL, embed_backend=backend), None, embedder)
    cold = chunking_run(chunker, cache, documents)
    started = time.perf_counter()
    _, index_stats = embedder.embed_documents([chunk.text for chunk in cold["chunks"]])
    index_wall = time.perf_counter() - started
    second = chunking_run(chunker, cache, documents)
    assert second["chunks"] == cold["chunks"]
    return {"chunker": name, "chunks": len(cold["chunks"]), "chunking_wall_s": round(cold["wall_s"], 3),
            "chunking_cpu_s": round(cold["cpu_s"], 3), "chunking_embeddings": cold["embeddings_computed"],
            "index_embeddings": len(cold["chunks"]), "index_embeddings_computed": index_stats.embedded,
            "index_embed_wall_s": round(index_wall, 3), "second_wall_s": round(second["wall_s"], 3),
            "second_embeddings_recomputed": second["embeddings_computed"], "model_used": embedder.cache_name}


def with_ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    base = next(row for row in rows if row["chunker"] == "recursive")
    base_total = base["chunking_wall_s"] + base["index_embed_wall_s"]
    for row in rows:
        row["time_ratio"] = round(row["chunking_wall_s"] / max(base["chunking_wall_s"], 1e-6), 1)
        row["with_index_time_ratio"] = round((row["chunking_wall_s"] + row["index_embed_wall_s"]) / base_total, 2)
        row["embeddings_ratio"] = round((row["chunking_embeddings"] + row["index_embeddings"]) / base["index_embeddings"], 2)
    return rows


def print_table(corpus: str, rows: list[dict[str, Any]]) -> None:
    print(f"\n{corpus}")
    print(f"{'chunker':<11}{'chunks':>7}{'chunk s':>9}{'x rec.':>8}{'+ embed s':>10}{'x rec.':>8}{'embedded':>10}"
          f"{'+ index':>9}{'x rec.':>8}{'2nd s':>8}{'2nd emb.':>9}")
    for row in rows:
        print(f"{row['chunker']:<11}{row['chunks']:>7}{row['chunking_wall_s']:>9.2f}{row['time_ratio']:>8.1f}"
              f"{row['index_embed_wall_s']:>10.2f}{row['with_index_time_ratio']:>8.2f}"
              f"{row['chunking_embeddings']:>10}{row['index_embeddings']:>9}{row['embeddings_ratio']:>8.2f}"
              f"{row['second_wall_s']:>8.2f}{row['second_embeddings_recomputed']:>9}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--filing", help="one PDF filing (e.g. a FinanceBench 10-K); left out: the sample corpus only")
    parser.add_argument("--backend", default="torch", help="embed_backend (default torch: fp32, as on any CPU)")
    parser.add_argument("--out", default=str(RESULTS / "chunkers_cost.json"))
    args = parser.parse_args()
    corpora = {"sample corpus (data/documents)": SAMPLE_DOCUMENTS_DIR}
    if args.filing:
        corpora[f"filing {Path(args.filing).name}"] = Path(args.filing)
    results = []
    with tempfile.TemporaryDirectory() as folder:
        for number, (corpus, path) in enumerate(corpora.items()):
            documents = read_documents(path).documents
            words = sum(len(document.text.split()) for document in documents)
            caches = Path(folder) / str(number)
            caches.mkdir()
            rows = with_ratios([measure(name, documents, args.backend, caches) for name in CHUNKERS])
            print_table(f"{corpus}: {len(documents)} documents, {words} words", rows)
            results.append({"corpus": corpus, "documents": len(documents), "words": words, "chunkers": rows})
    write_results({"model": MODEL, "backend": args.backend, "settings": "chunk_size 512, overlap 64 words (defaults)",
                   "command": "python benchmarks/chunkers_cost.py" + (f" --filing {args.filing}" if args.filing else ""),
                   "corpora": results}, args.out)


if __name__ == "__main__":
    main()
