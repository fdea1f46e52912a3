"""Reading input files into ``Document`` records: PDFs through PyMuPDF (1-based pages), ``.txt`` and ``.md``.

A document's id is its path relative to the input root, so two ``report.pdf`` in different folders
are two documents. Bad files never stop the run: each is reported with its path and the reason
(corrupt, encrypted, no extractable text, empty, unsupported type) and the rest are read.
Left out: OCR of scanned pages, tables and layout (text is extracted in reading order, ligatures
expanded and line-end hyphenation joined by PyMuPDF).
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from rag_core.records import Document

log = logging.getLogger(__name__)

PDF_SUFFIXES = {".pdf"}
TEXT_SUFFIXES = {".txt", ".md"}
SUPPORTED_SUFFIXES = PDF_SUFFIXES | TEXT_SUFFIXES


class IngestError(Exception):
    """One file could not be read; the message says why."""


@dataclass(frozen=True)
class Skipped:
    path: str
    reason: str


@dataclass(frozen=True)
class IngestResult:
    documents: list[Document]
    skipped: list[Skipped]


def discover_files(root: Path) -> list[Path]:
    """Every regular file below `root` (hidden files and folders excluded), in a stable order."""
    if root.is_file():
        return [root]
    return sorted(
        path
        for path in root.rglob("*")
        if path.is_file() and not any(part.startswith(".") for part in path.relative_to(root).parts)
    )


def read_documents(root: str | Path, files: Iterable[Path] | None = None, progress: bool = False) -> IngestResult:
    """Read every supported file below `root` into a Document; report the others in `skipped`."""
    root = Path(root)
    if not root.exists():
        raise FileNotFoundError(f"input not found: {root}")
    paths = list(files) if files is not None else discover_files(root)
    base = root.parent if root.is_file() else root
    documents, skipped = [], []
    for path in _progress(paths, progress, "Reading documents"):
        doc_id = path.relative_to(base).as_posix()
        try:
            documents.append(read_document(path, doc_id))
        except IngestError as exc:
            log.warning("skipped %s: %s", doc_id, exc)
            skipped.append(Skipped(doc_id, str(exc)))
    return IngestResult(documents, skipped)


def read_document(path: Path, doc_id: str) -> Document:
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        raise IngestError(f"unsupported file type {suffix or '(none)'!r}; supported: .pdf, .txt, .md")
    data = path.read_bytes()
    if not data:
        raise IngestError("empty file (0 bytes)")
    content_hash = hashlib.sha256(data).hexdigest()
    pages = _pdf_pages(data) if suffix in PDF_SUFFIXES else [_decode_text(data)]
    if not any(page.strip() for page in pages):
        if suffix in PDF_SUFFIXES:
            raise IngestError("no extractable text (image-only or scanned PDF? OCR is not supported)")
        raise IngestError("no text (file holds only whitespace)")
    return Document.from_pages(doc_id, pages, content_hash)


def _pdf_pages(data: bytes) -> list[str]:
    import pymupdf

    try:
        pdf = pymupdf.open(stream=data, filetype="pdf")
    except Exception as exc:  # PyMuPDF raises its own FileDataError and friends
        raise IngestError(f"corrupt or unreadable PDF ({exc})") from None
    with pdf:
        if pdf.needs_pass:
            raise IngestError("encrypted PDF (password required)")
        flags = (pymupdf.TEXTFLAGS_TEXT | pymupdf.TEXT_DEHYPHENATE) & ~pymupdf.TEXT_PRESERVE_LIGATURES
        try:
            return [page.get_text("text", flags=flags).strip() for page in pdf]
        except Exception as exc:
            raise IngestError(f"corrupt PDF: text extraction failed ({exc})") from None


def _decode_text(data: bytes) -> str:
    try:
        return data.decode("utf-8-sig").strip()
    except UnicodeDecodeError:
        raise IngestError("not UTF-8 text") from None


def _progress(items: list, enabled: bool, description: str):
    if not enabled or len(items) < 2:
        return items
    from tqdm.auto import tqdm

    return tqdm(items, desc=description, unit="file")
