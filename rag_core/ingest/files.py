"""Reading input files into ``Document`` records: PDFs through PyMuPDF (1-based pages), ``.txt`` and ``.md``.

A document's id is its path relative to the input root, so two ``report.pdf`` in different folders
are two documents; control characters in the path are escaped (``rag_core.doc_ids``). Bad files
never stop the run: each is reported with its path and the reason (corrupt, encrypted, no
extractable text, empty, unsupported type, unreadable or an I/O error, not a regular file: a FIFO,
socket or device, a broken symbolic link or a symbolic link loop) and the rest are read. Folders are
walked without following symbolic links to folders, so a link loop cannot make the walk endless.
An input folder is a boundary: a symbolic link (or a chain of them) whose target lies outside the
folder is skipped and listed ("symbolic link to a file outside the input folder"), so a link to
``/proc/self/environ`` or ``../outside/secret.txt`` never puts that file into the store; a link to
a file inside the folder is read (it names a file the folder holds anyway). A single file given as
the input is read wherever it points: the user named it.
PDFs also give a title and headings, and with ``extract_tables`` their tables as Markdown rows
(``rag_core.ingest.pdf_extract``); what a PDF gave is cached per file hash and settings when a
``cache_dir`` is given, so a sweep or a second eval extracts once. A ``metadata.jsonl`` in the input
root (``rag_core.ingest.metadata``) gives documents metadata and is not itself a document.
Files are read in parallel by a process pool when there are enough PDFs to extract to pay for it
(``extraction_workers``: ``PARALLEL_MIN_PDFS`` or more whose extraction is not cached yet, at most one
worker per usable core and per ``PDFS_PER_WORKER`` PDFs; ``workers=1`` reads in this process); the
documents and skipped files come back in the same order, with the same content, as a sequential read.
Left out: OCR of scanned pages and layout (text is extracted in reading order, ligatures
expanded and line-end hyphenation joined by PyMuPDF).
"""

from __future__ import annotations

import errno
import hashlib
import logging
import multiprocessing
import os
import stat
import sys
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from rag_core.doc_ids import printable_doc_id
from rag_core.errors import IngestError
from rag_core.ingest.extraction import cache_path, cached_extraction
from rag_core.ingest.metadata import SIDECAR, attach_metadata, read_sidecar
from rag_core.ingest.pdf_extract import read_pdf, readable_name
from rag_core.progress import progress as progress_bar
from rag_core.records import Document

log = logging.getLogger(__name__)  # skipped files (the ingest summary lists them too)
pool_log = log.getChild("pool")  # the extraction pool's own warnings

PDF_SUFFIXES = {".pdf"}
TEXT_SUFFIXES = {".txt", ".md"}
SUPPORTED_SUFFIXES = PDF_SUFFIXES | TEXT_SUFFIXES
PARALLEL_MIN_PDFS = 8  # fewer: a pool's start-up (about a second) costs more than it saves
PDFS_PER_WORKER = 4


@dataclass(frozen=True)
class Skipped:
    path: str
    reason: str


@dataclass(frozen=True)
class IngestResult:
    documents: list[Document]
    skipped: list[Skipped]


def discover_files(root: Path) -> list[Path]:
    """Every entry below `root` that is not a folder (hidden files and folders excluded), in a stable
    order: regular files, and also FIFOs, sockets and broken or looping links, which `read_document`
    reports. Links to folders are not followed."""
    if not root.is_dir():
        return [root]
    found = []
    for folder, subfolders, names in os.walk(root):
        subfolders[:] = [name for name in subfolders if not name.startswith(".")]
        found += [Path(folder, name) for name in names if not name.startswith(".")]
    return sorted(found)


def read_documents(root: str | Path, files: Iterable[Path] | None = None, progress: bool = False,
                   extract_tables: bool = False, cache_dir: Path | None = None, workers: int | None = None) -> IngestResult:
    """Read every supported file below `root` into a Document; report the others in `skipped`.
    `workers`: processes reading files (None: ``extraction_workers`` chooses; 1: this process only)."""
    root = Path(root)
    if not root.exists():
        raise FileNotFoundError(f"input not found: {root}")
    base = root if root.is_dir() else root.parent
    paths = list(files) if files is not None else [path for path in discover_files(root) if path != base / SIDECAR]
    sidecar = read_sidecar(base / SIDECAR) if root.is_dir() else {}
    documents, skipped = [], []
    doc_ids = [printable_doc_id(path.relative_to(base).as_posix()) for path in paths]
    inside = base if root.is_dir() else None  # the folder links must stay in
    read = partial(_read_one, base=inside, extract_tables=extract_tables, cache_dir=cache_dir)
    to_extract = paths if cache_dir is None or workers is not None else [
        path for path in paths if not _extraction_cached(path, inside, cache_dir, extract_tables)]
    results = _read_all(read, list(zip(paths, doc_ids)), extraction_workers(to_extract, workers))
    for doc_id, outcome in zip(doc_ids, progress_bar(results, progress and len(paths) > 1, "Reading documents",
                                                      unit="file", total=len(paths))):
        if isinstance(outcome, Document):
            documents.append(attach_metadata(outcome, sidecar.get(doc_id, {})))
        else:
            log.warning("skipped %s: %s", doc_id, outcome)
            skipped.append(Skipped(doc_id, outcome))
    unknown = sorted(set(sidecar) - {document.doc_id for document in documents} - {item.path for item in skipped})
    if unknown:
        log.warning("%s names documents that are not in %s: %s", SIDECAR, root, ", ".join(unknown[:5]))
    return IngestResult(documents, skipped)


def extraction_workers(paths: Sequence[Path], workers: int | None = None) -> int:
    """How many processes read `paths`: `workers` when given, else 1 below ``PARALLEL_MIN_PDFS`` PDFs,
    else one per ``PDFS_PER_WORKER`` PDFs, at most the usable cores."""
    if workers is not None:
        return max(1, workers)
    pdfs = sum(path.suffix.lower() in PDF_SUFFIXES for path in paths)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return 1 if pdfs < PARALLEL_MIN_PDFS else max(1, min(cores, pdfs // PDFS_PER_WORKER))


def _extraction_cached(path: Path, base: Path | None, cache_dir: Path, tables: bool) -> bool:
    """Whether `path` is a PDF whose extraction `cache_dir` holds already (reading it then costs a hash
    and a JSON file, too little for a process pool); False for anything the reader must look at."""
    if path.suffix.lower() not in PDF_SUFFIXES:
        return True  # not extracted at all (text) or refused (unsupported): cheap either way
    try:
        if base is not None:
            _check_inside(path, base)
        data = _read_regular_file(path)
    except IngestError:
        return True  # refused by the reader, cheaply
    return cache_path(cache_dir, hashlib.sha256(data).hexdigest(), tables).exists()


def _read_all(read: "partial[Document | str]", items: list[tuple[Path, str]], workers: int) -> Iterator[Document | str]:
    """`read` over `items` in order: in this process, or in a pool of `workers` processes. The pool
    forks while torch is not loaded (nothing is imported again, and a script without a ``__main__``
    guard works); else it uses a fork server (forking torch's threads is unsafe). A pool that breaks
    (a worker killed, a script that starts one at import) is announced and the rest read here."""
    if workers <= 1 or len(items) <= 1:
        yield from (read(path, doc_id) for path, doc_id in items)
        return
    methods = multiprocessing.get_all_start_methods()
    method = "fork" if "fork" in methods and "torch" not in sys.modules else (
        "forkserver" if "forkserver" in methods else "spawn")
    done = 0
    try:
        with ProcessPoolExecutor(min(workers, len(items)), mp_context=multiprocessing.get_context(method)) as pool:
            for outcome in pool.map(read, *zip(*items), chunksize=1):
                done += 1
                yield outcome
    except BrokenProcessPool as exc:
        pool_log.warning("parallel extraction stopped (%s); reading the remaining %d file(s) in this process",
                         exc, len(items) - done)
        yield from (read(path, doc_id) for path, doc_id in items[done:])


def _read_one(path: Path, doc_id: str, base: Path | None, extract_tables: bool,
              cache_dir: Path | None) -> Document | str:
    """One file's Document, or why it is skipped (`base`: the input folder it must stay inside)."""
    try:
        if base is not None:
            _check_inside(path, base)
        return read_document(path, doc_id, extract_tables, cache_dir)
    except IngestError as exc:
        return str(exc)


def read_document(path: Path, doc_id: str, extract_tables: bool = False, cache_dir: Path | None = None) -> Document:
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        raise IngestError(f"unsupported file type {suffix or '(none)'!r}; supported: .pdf, .txt, .md")
    data = _read_regular_file(path)
    if not data:
        raise IngestError("empty file (0 bytes)")
    content_hash = hashlib.sha256(data).hexdigest()
    source = str(path.resolve())
    if suffix not in PDF_SUFFIXES:
        text = _decode_text(data)
        if not text.strip():
            raise IngestError("no text (file holds only whitespace)")
        return Document.from_pages(doc_id, [text], content_hash, title=readable_name(doc_id), source=source)
    pdf = cached_extraction(cache_dir, content_hash, extract_tables, lambda: read_pdf(data, doc_id, extract_tables))
    if not any(page.strip() for page in pdf.pages):
        raise IngestError("no extractable text (image-only or scanned PDF? OCR is not supported)")
    return Document.from_pages(doc_id, list(pdf.pages), content_hash, page_headings=pdf.headings, title=pdf.title,
                               extraction="tables" if extract_tables else "", source=source)


def _check_inside(path: Path, folder: Path) -> None:
    """An IngestError when `path` (a link, a chain of links, or a path through linked folders) leads
    outside `folder`; nothing is opened."""
    target = Path(os.path.realpath(path))
    if target.is_relative_to(Path(os.path.realpath(folder))):
        return
    shown = os.readlink(path) if path.is_symlink() else str(target)
    raise IngestError(f"symbolic link to a file outside the input folder (to {shown!r}); not read")


def _read_regular_file(path: Path) -> bytes:
    """The file's bytes; an IngestError for anything that is not a readable regular file (checked
    before opening it: opening a FIFO would wait for a writer)."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise IngestError("symbolic link loop") from None
        if exc.errno == errno.ENOENT and path.is_symlink():
            raise IngestError(f"broken symbolic link (to {os.readlink(path)!r}, which does not exist)") from None
        raise IngestError(f"cannot read: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        raise IngestError(f"not a regular file ({_FILE_KINDS.get(stat.S_IFMT(mode), 'special file')})")
    try:
        return path.read_bytes()
    except OSError as exc:  # PermissionError, EIO from a failing disk or network mount, ...
        raise IngestError(f"cannot read: {exc.strerror or exc}") from None


_FILE_KINDS = {stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a character device",
               stat.S_IFBLK: "a block device"}


def _decode_text(data: bytes) -> str:
    try:
        return data.decode("utf-8-sig").strip()
    except UnicodeDecodeError:
        raise IngestError("not UTF-8 text") from None

