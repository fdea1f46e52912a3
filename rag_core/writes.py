"""Writing files a user names or shares: checked first, written whole, serialised between processes.

Every command that writes a file the user gave (``feedback export --out``, ``--judge-labels``,
``make-golden --out``, ``eval --per-query``, the store's JSON files, figures) goes through here:

- ``check_output_file(path, option)``: bad input (exit 2) before any work when `path` is a folder,
  when a part of its folder is a file, or when it names the same file as another output
  (``check_output_folder``: the same for an output folder, ``sweep --output``);
- ``write_atomic(path, data)`` / ``write_json_atomic``: the new content goes to a temporary file
  beside `path` and replaces it with ``os.replace`` only once complete (text is encoded first, so a
  string that is not valid Unicode fails before the file is touched); a failure leaves the old file
  and no temporary file behind (no fsync: an interrupted process, not a power cut, is what it
  guards). A new file gets the umask's mode, a replaced one keeps its own;
- ``exclusive_lock(path)``: an ``fcntl.flock`` held for a block (released when the process dies);
  ``lock_beside(path)`` holds it on the sidecar ``.<name>.lock``, so that writers which read, add to
  and replace one file (two ``feedback export`` into one golden set) run one after the other;
- ``valid_text(text)``: lone surrogates (what Python makes of bytes that are not UTF-8 in argv, or a
  JSON ``"\\ud800"``) replaced by U+FFFD, for text that must be stored (a traced question).
- ``not_unicode(value)``: which field of a record (nested mappings and lists, keys too) holds a lone
  surrogate, for records that must be refused or skipped instead (a golden line, a label).
Left out: locks on file systems without ``flock`` (some network mounts); Windows.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import tempfile
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Iterator, Mapping

from rag_core.errors import BadInput

log = logging.getLogger(__name__)
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def check_output_file(path: str | Path, option: str, *others: tuple[str, str | Path | None]) -> Path:
    """`path` as a Path when a file can be written there; ``BadInput`` naming `option` when it is a
    folder, when a part of its folder is not a folder, or when it is the same file as one of `others`
    (``(option, path)`` pairs; a None path is ignored)."""
    path = Path(path)
    if path.is_dir():
        raise BadInput(f"{option} {path} is a folder: give a file name (e.g. {path / 'golden.jsonl'})")
    for parent in path.parents:
        if parent.exists() and not parent.is_dir():
            raise BadInput(f"{option} {path}: {parent} is a file, not a folder")
        if parent.exists():
            break
    for other_option, other in others:
        if other is not None and same_file(path, Path(other)):
            raise BadInput(f"{option} and {other_option} name the same file ({path}): give two different files")
    return path


def check_output_folder(path: str | Path, option: str) -> Path:
    """`path` as a Path when it is a folder or can be made one; ``BadInput`` naming `option` when it or
    a folder above it is a file."""
    path = Path(path)
    for folder in (path, *path.parents):
        if folder.exists() and not folder.is_dir():
            raise BadInput(f"{option} {path}: {folder} is a file, not a folder" if folder != path else
                           f"{option} {path} is a file: give a folder")
        if folder.exists():
            break
    return path


def same_file(first: Path, second: Path) -> bool:
    """Whether two paths name one file (links and ``..`` resolved; hard links too when both exist)."""
    if first.exists() and second.exists():
        return os.path.samefile(first, second)
    return first.resolve() == second.resolve()


def valid_text(text: str) -> str:
    """`text` with every lone surrogate (not encodable as UTF-8) replaced by U+FFFD."""
    return LONE_SURROGATE.sub("\ufffd", text)


def not_unicode(value: Any, key: str = "") -> str | None:
    """Which field of `value` (a record: mappings and lists, nested; keys too) is not valid Unicode text (a
    lone surrogate: no UTF-8 file can hold it), as ``'query' is not valid Unicode text (...)``; None when none."""
    if isinstance(value, str):
        found = LONE_SURROGATE.search(value)
        return f"{key!r} is not valid Unicode text (a lone surrogate at character {found.start()})" if found else None
    items = value.items() if isinstance(value, Mapping) else enumerate(value) if isinstance(value, list) else ()
    for inner_key, inner in items:
        if isinstance(inner_key, str) and LONE_SURROGATE.search(inner_key):
            return f"the key {inner_key!r} is not valid Unicode text (a lone surrogate)"  # repr escapes it
        problem = not_unicode(inner, inner_key if isinstance(inner_key, str) else key)
        if problem:
            return problem
    return None


def umask_mode(requested: int = 0o666) -> int:
    """`requested` less the umask: what ``open()`` (0o666) or ``mkdir()`` (0o777) gives a new file or
    folder. (Reading the umask means setting it.)"""
    mask = os.umask(0o022)
    os.umask(mask)
    return requested & ~mask


def write_atomic(path: str | Path, data: str | bytes) -> Path:
    """Write `data` (text is UTF-8) to a temporary file beside `path`, then rename it over `path`."""
    path = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data  # fails before anything is written
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o7777 if path.is_file() else umask_mode()
    # ".tmp-...tmp": the names a store's clean-up (rag_core.service, rag_core.ingest.corpus) knows as leftovers
    handle, temp = tempfile.mkstemp(dir=path.parent, prefix=f".tmp-{path.name[:64]}.", suffix=".tmp")
    try:
        os.fchmod(handle, mode)  # mkstemp makes 0600 files; keep the file's own mode, or what open() gives
        with os.fdopen(handle, "wb") as out:
            out.write(payload)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return path


def write_json_atomic(path: Path, data: Any) -> None:
    write_atomic(path, json.dumps(data))


def jsonl_text(records: Any) -> str:
    """One JSON object per line (non-ASCII kept as is), each line ending in a newline."""
    return "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records)


@contextmanager
def exclusive_lock(path: Path, on_wait: str | None = None) -> Iterator[None]:
    """Hold an exclusive ``flock`` on `path` (created if missing) for the block; released when the
    block ends or the process dies. `on_wait` is logged (a note) when another holder makes us wait.
    Not re-entrant: a second lock of the same file in one process waits for ever."""
    with open(path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if on_wait:
                log.info("%s", on_wait)
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def lock_path_beside(path: Path) -> Path:
    return path.with_name(f".{path.name}.lock")


@contextmanager
def lock_beside(*paths: Path) -> Iterator[None]:
    """Exclusive locks on the sidecars of `paths` (``.<name>.lock`` in each one's folder), taken in
    one order (sorted, each file once) so that two writers of the same files cannot deadlock."""
    unique = sorted({str(lock_path_beside(Path(path).resolve())) for path in paths})
    with ExitStack() as stack:
        for lock in unique:
            Path(lock).parent.mkdir(parents=True, exist_ok=True)
            stack.enter_context(exclusive_lock(Path(lock), on_wait=f"waiting for another writer ({lock})"))
        yield
