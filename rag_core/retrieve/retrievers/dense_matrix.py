"""The dense collection's vectors as a plain matrix file beside its manifest, so that exact search
(``dense_search: auto`` up to ``dense_exact_max`` chunks, ``exact``) opens no vector store client at
query time (embedded Chroma costs seconds to import, a server a connection).

``matrix-<key>.npy`` (float32, one row per chunk) and ``matrix-<key>.json`` (the
collection, the ids and document ids in row order, the dimension, and a digest of the manifest the
matrix was written under) are derived data: written when the dense retriever has read the vectors from
its store (at ingest, or at the first query after), used only when they still match the manifest and
the chunks (same collection, same count, same ids, same dimension, the manifest unchanged), and
rewritten from the store otherwise. The vector store stays the source of truth.
Left out: approximate search (it needs the store's index), memory-mapping very large matrices.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from rag_core.ingest.corpus import umask_mode, write_json_atomic
from rag_core.retrieve.retrievers.base import ChunkSet
from rag_core.retrieve.vector_stores.exact import ExactSearch

PREFIX = "matrix-"  # not "dense-": dense-*.json are the manifests
MATRIX_SUFFIX = ".npy"
ROWS_SUFFIX = ".json"  # written last: its presence marks a complete pair


def matrix_paths(manifest_path: Path) -> tuple[Path, Path]:
    """(the matrix file, its rows file) beside the dense manifest ``dense-<key>.json`` at `manifest_path`:
    ``matrix-<key>.npy``, ``matrix-<key>.json``."""
    stem = PREFIX + manifest_path.name.removesuffix(".json").removeprefix("dense-")
    return manifest_path.with_name(stem + MATRIX_SUFFIX), manifest_path.with_name(stem + ROWS_SUFFIX)


def manifest_digest(manifest_path: Path) -> str:
    return hashlib.sha256(manifest_path.read_bytes()).hexdigest()


def read_matrix(manifest_path: Path, manifest: dict[str, Any], chunks: ChunkSet) -> ExactSearch | None:
    """The exact index from the matrix file, or None when it is missing, unreadable or does not match
    the manifest at `manifest_path` (`manifest`, as read) and `chunks`."""
    matrix_file, rows_file = matrix_paths(manifest_path)
    try:
        rows = json.loads(rows_file.read_text())
        if (rows["collection"] != manifest["collection"] or rows["manifest"] != manifest_digest(manifest_path)
                or not len(rows["ids"]) == len(rows["doc_ids"]) == manifest["chunks"] == len(chunks.chunks)
                or set(rows["ids"]) != set(chunks.ids)):
            return None
        matrix = np.load(matrix_file, allow_pickle=False)
    except (OSError, ValueError, TypeError, KeyError):
        return None
    if matrix.dtype != np.float32 or matrix.shape != (len(rows["ids"]), rows["dimension"]):
        return None
    return ExactSearch(rows["ids"], matrix, rows["doc_ids"])


def write_matrix(manifest_path: Path, manifest: dict[str, Any], index: ExactSearch) -> None:
    """Write `index`'s vectors beside the manifest (atomically: the matrix, then the rows file)."""
    matrix_file, rows_file = matrix_paths(manifest_path)
    rows_file.unlink(missing_ok=True)  # a matrix without its rows file is never read
    handle, temp = tempfile.mkstemp(dir=matrix_file.parent, prefix=".tmp-", suffix=".npy")
    try:
        os.fchmod(handle, umask_mode())
        with os.fdopen(handle, "wb") as out:
            np.save(out, np.ascontiguousarray(index.matrix, dtype=np.float32), allow_pickle=False)
        os.replace(temp, matrix_file)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    doc_ids = [None if doc_id is None else str(doc_id) for doc_id in
               (index.doc_ids if index.doc_ids is not None else [None] * len(index.ids))]
    write_json_atomic(rows_file, {"collection": manifest["collection"], "manifest": manifest_digest(manifest_path),
                                  "dimension": int(index.matrix.shape[1]) if index.matrix.ndim == 2 else 0,
                                  "ids": [str(id_) for id_ in index.ids], "doc_ids": doc_ids})
