"""The corpus and golden set a benchmark runs on: ``--input`` and ``--golden`` (default: the sample corpus and its
golden set) and how they are read, shared by the benchmarks that evaluate configurations in process.

Left out: BEIR folders (the benchmarks that take one read them with ``rag_core.evaluate.beir``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def add_corpus_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--input", type=Path, default=ROOT / "data" / "documents")
    parser.add_argument("--golden", type=Path, default=ROOT / "data" / "golden" / "golden.jsonl")


def read_corpus(args: argparse.Namespace, extract_tables: bool = False) -> tuple[Any, list[Any]]:
    """(corpus, golden queries) of ``args.input`` and ``args.golden``, every evidence source checked."""
    from rag_core.evaluate.golden import load_golden
    from rag_core.ingest.corpus import Corpus
    from rag_core.ingest.files import read_documents

    corpus = Corpus.of(read_documents(args.input, extract_tables=extract_tables).documents)
    return corpus, load_golden(args.golden, doc_ids=corpus.by_id)
