"""Checks of the store's derived files, and the one repair that ``ingest`` and ``repair`` share.

What is checked (each failure is a ``DamagedStore`` naming the file and the repair, exit 1):
- ``chroma/chroma.sqlite3``: an SQLite file (not empty, not garbage), not truncated (its size covers
  the page count its header states), holding Chroma's tables (a foreign SQLite file has none).
  Checked before Chroma opens it: Chroma would otherwise write its tables into an empty or foreign
  file, or stop with a traceback. ``thorough`` adds SQLite's ``quick_check`` (a full read).
- ``cache.sqlite`` (the embedding and score cache): the same SQLite checks; ``ScoreCache`` sets a
  damaged one aside itself (``cache.sqlite.damaged``) and starts again, with a warning.
- dense manifests ``chunks/<key>/dense-*.json``: a JSON object with the fields the dense retriever
  reads (``read_manifest``); a damaged one is rebuilt on the spot from the collection (the vectors
  come from the embedding cache), with a warning.
- ONNX exports ``onnx/<key>/``: ``export.json`` readable and complete, ``model.onnx`` a whole ONNX
  model (``check_onnx_export``).
A folder is a store when an ingest wrote it (``is_store``: the lock files every ingest leaves); a
folder that holds files of a store's names without them is someone else's (``foreign_folder``), and
neither ``repair`` nor ``ingest`` touches it.

``repair_store`` (run under the ingest lock by every ingest and, with ``quick_check``, by
``rag-pipeline repair``) repairs the documents (``DocumentStore.repair``), sets a damaged Chroma
folder, cache or manifest aside (``<name>.damaged``) and deletes a damaged ONNX export; the build
that follows writes them again from the chunks and the embedding cache (nothing is re-embedded) and
exports the model again. Documents, chunks, BM25 indexes and an intact cache are never touched.
Left out: Chroma's HNSW segment files (exact search reads the vectors from SQLite; the default), and
damage that only ``quick_check`` finds, in queries and ingests (a full read of each database).
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any, Callable, Iterator

from rag_core.errors import DamagedStore
from rag_core.ingest.corpus import DocumentStore, derived_damage, derived_repair, read_store_json
from rag_core.retrieve.cache import open_in_this_process
from rag_core.retrieve.onnx_export import export_problem

log = logging.getLogger(__name__)

SQLITE_MAGIC = b"SQLite format 3\x00"
CHROMA_TABLES = frozenset({"collections", "segments", "embeddings", "embedding_metadata"})
CACHE_TABLES = frozenset({"embeddings"})
ONNX_EXPORT_DELETED = "the model is exported again"  # in repair_store's line for a deleted export
MANIFEST_FIELDS = {"model": str, "collection": str, "chunks": int, "truncated": int, "max_seq_length": int}


STORE_MARKERS = ("ingest.lock", "documents/.lock")  # every ingest (and registry write) leaves them behind


def foreign_folder(store_dir: Path) -> list[str]:
    """The files of `store_dir` that an ingest would set aside or rewrite, when the folder is not one an
    ingest wrote (none of ``STORE_MARKERS``): a user's own ``documents/registry.json``, or an SQLite
    file of a store's name that is not the store's kind (a seeded embedding cache is not foreign).
    Empty for a store, a new or an unrelated folder."""
    store_dir = Path(store_dir)
    if any((store_dir / marker).exists() for marker in STORE_MARKERS):
        return []
    found = ["documents/registry.json"] if (store_dir / "documents" / "registry.json").exists() else []
    for name, tables, owner in (("cache.sqlite", CACHE_TABLES, "cache"), ("chroma/chroma.sqlite3", CHROMA_TABLES, "Chroma")):
        try:
            if (store_dir / name).is_file():
                check_sqlite(store_dir / name, store_dir, tables, owner)
        except (DamagedStore, OSError, sqlite3.Error):
            found.append(name)
    return found


def is_store(store_dir: Path) -> bool:
    """Whether `store_dir` is a folder an ingest wrote: a ``documents/`` folder and a store marker."""
    store_dir = Path(store_dir)
    return (store_dir / "documents").is_dir() and any((store_dir / marker).exists() for marker in STORE_MARKERS)


def chroma_file(store_dir: Path) -> Path:
    return Path(store_dir) / "chroma" / "chroma.sqlite3"


def truncation(path: Path, page_size: int) -> str | None:
    """"truncated: ..." when the SQLite file at `path` is shorter than its header says and no write-ahead log
    holds the rest; else None. The header is read before the size, so that a file extended between the two
    reads looks longer, not shorter; a commit still in progress can show a header ahead of the file all the
    same, which ``under_read_lock`` settles."""
    with path.open("rb") as handle:
        pages = int.from_bytes(handle.read(100)[28:32], "big")
    size = path.stat().st_size
    wal = Path(f"{path}-wal")
    if (not wal.exists() or not wal.stat().st_size) and (size % page_size or size < pages * page_size):
        return f"truncated: {size} bytes, its header says {pages * page_size}"
    return None


def under_read_lock(path: Path, check: Callable[[], str | None]) -> str | None:
    """`check` again while this process holds a read transaction on the SQLite file at `path`: the bytes read
    without one can be those of another process's write in progress (an ingest beside a query), which no
    reader that takes SQLite's locks ever sees. When SQLite cannot read the file either, `check` decides."""
    try:
        connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=60)
        try:
            connection.execute("BEGIN")
            connection.execute("SELECT count(*) FROM sqlite_master").fetchall()
            return check()
        finally:
            connection.close()
    except sqlite3.DatabaseError:
        return check()


def check_sqlite(path: Path, store_dir: Path, tables: frozenset[str], owner: str, thorough: bool = False) -> None:
    """``DamagedStore`` when the SQLite file at `path` is empty, not SQLite, truncated, lacks `tables`
    (a foreign file), or (`thorough`) fails SQLite's ``quick_check``. Opens it read-only."""
    size = path.stat().st_size
    with path.open("rb") as handle:
        header = handle.read(100)
    if not size:
        raise derived_damage(path, store_dir, "empty")
    if not header.startswith(SQLITE_MAGIC) or len(header) < 100:
        raise derived_damage(path, store_dir, "not an SQLite database")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    if page_size < 512 or page_size & (page_size - 1):  # a power of two from 512 to 65536 in every SQLite file
        raise derived_damage(path, store_dir, f"not an SQLite database (its header's page size is {page_size})")
    if truncation(path, page_size) and (reason := under_read_lock(path, lambda: truncation(path, page_size))):
        raise derived_damage(path, store_dir, reason)
    try:
        connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=60)
        try:
            found = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not tables <= found:
                raise derived_damage(path, store_dir, f"no {owner} tables: a foreign SQLite file")
            if thorough:
                result = [row[0] for row in connection.execute("PRAGMA quick_check")]
                if result != ["ok"]:
                    raise derived_damage(path, store_dir, f"SQLite quick_check: {'; '.join(result[:2])[:120]}")
        finally:
            connection.close()
    except sqlite3.DatabaseError as exc:
        if isinstance(exc, sqlite3.OperationalError) and "malformed" not in str(exc) and "not a database" not in str(exc):
            raise  # locked or unreadable: the store's failure (StoreError), not damage
        raise derived_damage(path, store_dir, f"SQLite: {exc}") from None


def check_chroma(store_dir: Path, thorough: bool = False) -> None:
    """``DamagedStore`` when ``chroma/chroma.sqlite3`` exists and is damaged or foreign."""
    path = chroma_file(store_dir)
    if path.exists():
        check_sqlite(path, Path(store_dir), CHROMA_TABLES, "Chroma", thorough)


def read_manifest(path: Path, store_dir: Path) -> dict[str, Any]:
    """The dense manifest at `path`; ``DamagedStore`` when it is not JSON or lacks a field."""
    data = read_store_json(path, store_dir, derived_repair(store_dir))
    if not isinstance(data, dict):
        raise derived_damage(path, store_dir, f"a JSON {type(data).__name__}, not a manifest")
    wrong = [name for name, kind in MANIFEST_FIELDS.items()
             if not isinstance(data.get(name), kind) or isinstance(data.get(name), bool)]
    if wrong:
        raise derived_damage(path, store_dir, f"not a dense manifest (field {wrong[0]} missing or of the wrong type)")
    return data


def manifest_or_none(path: Path, store_dir: Path) -> dict[str, Any] | None:
    """The dense manifest at `path`; None when missing, or damaged (with a warning: the collection is
    then checked against the chunks and completed from the embedding cache, and the manifest written again)."""
    if not path.exists():
        return None
    try:
        return read_manifest(path, store_dir)
    except DamagedStore as exc:
        log.warning("%s; rebuilding it now", str(exc).split("; repair:")[0])
        return None


def check_onnx_export(directory: Path, store_dir: Path) -> None:
    """``DamagedStore`` when the export in `directory` is damaged (``onnx_export.export_problem``)."""
    problem = export_problem(directory)
    if problem is not None:
        raise derived_damage(problem[0], store_dir, problem[1])


def onnx_exports(store_dir: Path) -> list[Path]:
    """The export folders under ``onnx/`` (not the hidden scratch folders of exports in progress)."""
    return sorted(path for path in Path(store_dir).glob("onnx/*") if path.is_dir() and not path.name.startswith("."))


def set_aside(path: Path) -> Path:
    """Rename `path` to ``<name>.damaged`` (replacing an older one); return the new path."""
    target = path.with_name(path.name + ".damaged")
    if target.is_dir():
        shutil.rmtree(target)
    os.replace(path, target)
    return target


def damaged_derived(store_dir: Path, thorough: bool = True) -> Iterator[tuple[str, Path, DamagedStore]]:
    """(kind, the path to set aside or delete, the error) for each damaged derived file: ``chroma``
    (the folder), ``cache``, ``manifest`` or ``onnx`` (the export folder)."""
    store_dir = Path(store_dir)
    checks: list[tuple[str, Path, Callable[[], None]]] = [
        ("chroma", store_dir / "chroma", lambda: check_chroma(store_dir, thorough))]
    cache = store_dir / "cache.sqlite"
    if cache.exists() and not open_in_this_process(cache):  # in use here: opened fine, and see OPEN_HERE
        checks.append(("cache", cache, lambda: check_sqlite(cache, store_dir, CACHE_TABLES, "cache", thorough)))
    checks += [("manifest", path, functools.partial(read_manifest, path, store_dir))
               for path in sorted(store_dir.glob("chunks/*/dense-*.json"))]
    checks += [("onnx", directory, functools.partial(check_onnx_export, directory, store_dir))
               for directory in onnx_exports(store_dir)]
    for kind, path, check in checks:
        try:
            check()
        except DamagedStore as exc:
            yield kind, path, exc


def check_store(store_dir: Path, thorough: bool = True) -> list[DamagedStore]:
    """Every damaged file of the store (none when it is intact), the documents' included."""
    found: list[DamagedStore] = []
    try:
        DocumentStore(store_dir).corpus()
    except DamagedStore as exc:
        found.append(exc)
    return found + [exc for _, _, exc in damaged_derived(store_dir, thorough)]


def repair_store(store_dir: Path, thorough: bool = False) -> dict[str, Any]:
    """Repair what can be repaired before a build (call it under the ingest lock): the documents
    (``DocumentStore.repair``), and the damaged derived files set aside (Chroma's folder, the cache,
    dense manifests) or deleted (an ONNX export), each with a warning. Returns what was done:
    ``registry_rebuilt``, ``dropped_damaged`` and ``repaired`` (one line per derived file). `thorough`
    (``rag-pipeline repair``) adds SQLite's ``quick_check``, a full read of each database, which an
    ingest skips (seconds per GB)."""
    store_dir = Path(store_dir)
    done = DocumentStore(store_dir).repair()
    repaired: list[str] = []
    for kind, path, exc in list(damaged_derived(store_dir, thorough)):
        if kind == "onnx":
            shutil.rmtree(path)
            action = (f"deleted the export {path.name}; {ONNX_EXPORT_DELETED} (an ingest or repair whose settings "
                      "use it does it now; otherwise the next query that uses it)")
        else:
            if kind == "cache":
                for suffix in ("-wal", "-shm"):
                    Path(f"{path}{suffix}").unlink(missing_ok=True)
            action = f"moved {path} aside to {set_aside(path).name}" + {
                "chroma": "; its collections are rebuilt from the embedding cache",
                "cache": " and started again", "manifest": "; written again once the collection is checked"}[kind]
        line = f"{str(exc).split('; repair:')[0]}; {action}"
        log.warning("%s", line)
        repaired.append(line)
    return {**done, "repaired": repaired}
