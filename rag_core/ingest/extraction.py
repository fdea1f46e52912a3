"""The corpus a configuration reads: documents extracted with its settings, with its metadata.

A corpus is read once (``rag-pipeline eval --input``, a sweep, the store) with the default
extraction; ``prepare_corpus`` gives each configuration its own view of it: PDFs extracted again
with tables when ``extract_tables`` is on (through the extraction cache, so a sweep extracts each
file once per setting: ``<store>/extracted/<file hash>-<settings>.json``), and metadata from the
``metadata_pattern`` setting added. Extraction settings and metadata are part of the corpus
fingerprint, so the chunks, vectors and BM25 indexes of two settings never mix.
``table_text`` extracts each PDF again with its table rows as lines (``rag_core.ingest.table_text``,
cached as ``<file hash>-<text|tables>+rows``): the page texts are those of the same extraction without
it, so the chunks are the same and only the indexed text of chunks with table rows changes; with the
setting off nothing is extracted again and every key stays as it was.
Left out: evicting old cache entries (delete ``<store>/extracted`` to free the space).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, replace
from pathlib import Path
from typing import Callable

from rag_core.errors import BadInput, IngestError
from rag_core.ingest.corpus import Corpus, write_json_atomic
from rag_core.ingest.metadata import attach_metadata, pattern_metadata
from rag_core.ingest.pdf_extract import ExtractedPdf, read_pdf
from rag_core.records import Document

EXTRACTION_VERSION = 1  # bump when extraction code changes what it gives
TABLES_VERSION = 3  # the same for extraction with tables (3: cells are the words inside their boxes)


class ExtractionError(BadInput, ValueError):
    """A document must be extracted again and its file is gone or changed (exit code 2)."""


def extraction_name(tables: bool, rows: bool = False) -> str:
    """``Document.extraction`` of these settings: "" (the default), "tables", "table_text", "tables+table_text"."""
    return "+".join(name for name, on in (("tables", tables), ("table_text", rows)) if on)


def cache_path(cache_dir: Path, content_hash: str, tables: bool, rows: bool = False) -> Path:
    """Where the extraction of the file with `content_hash` under these settings is kept."""
    mode = ("tables" if tables else "text") + ("+rows" if rows else "")
    return Path(cache_dir) / f"{content_hash}-{mode}-v{TABLES_VERSION if tables or rows else EXTRACTION_VERSION}.json"


def cached_extraction(cache_dir: Path | None, content_hash: str, tables: bool,
                      extract: Callable[[], ExtractedPdf], rows: bool = False) -> ExtractedPdf:
    """What `extract` gives, kept in `cache_dir` per file hash and settings (no cache: extract)."""
    if cache_dir is None:
        return extract()
    path = cache_path(cache_dir, content_hash, tables, rows)
    if path.exists():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return ExtractedPdf(tuple(data["pages"]), data["title"], tuple(map(tuple, data["headings"])), data["tables"],
                                tuple(map(tuple, data.get("table_rows", ()))))
        except (ValueError, TypeError, KeyError, RecursionError):  # damaged: a cache, so extracted again
            pass
    result = extract()
    written = asdict(result)
    if not written["table_rows"]:
        del written["table_rows"]  # the files of before table_text
    write_json_atomic(path, written)
    return result


def prepare_corpus(corpus: Corpus, extract_tables: bool, metadata_pattern: str, cache_dir: Path | None,
                   table_text: bool = False) -> Corpus:
    """`corpus` as these settings read it (the same object when nothing changes)."""
    wanted = extraction_name(extract_tables, table_text)
    changed = False
    documents = []
    for document in corpus.documents:
        updated = document
        if document.extraction != wanted and document.doc_id.lower().endswith(".pdf"):
            updated = _extract_again(document, extract_tables, cache_dir, table_text)
        if metadata_pattern:
            updated = attach_metadata(updated, pattern_metadata(metadata_pattern, document.doc_id))
        changed |= updated is not document
        documents.append(updated)
    return Corpus.of(documents) if changed else corpus


def _extract_again(document: Document, tables: bool, cache_dir: Path | None, rows: bool = False) -> Document:
    def extract() -> ExtractedPdf:
        path = Path(document.source) if document.source else None
        data = path.read_bytes() if path is not None and path.is_file() else None
        if data is None or hashlib.sha256(data).hexdigest() != document.content_hash:
            raise ExtractionError(
                f"{document.doc_id} must be extracted again for extract_tables={tables}"
                f"{', table_text=true' if rows else ''}, but its file "
                f"{document.source or '(unknown)'} is {'changed' if data is not None else 'not there'}: "
                f"ingest it again with these settings (rag-pipeline ingest --input DIR"
                f"{' --extract-tables' if tables else ''}{' --table-text' if rows else ''})")
        try:
            return read_pdf(data, document.doc_id, tables, rows)
        except IngestError as exc:
            raise ExtractionError(f"{document.doc_id}: {exc}") from None

    pdf = cached_extraction(cache_dir, document.content_hash, tables, extract, rows)
    fresh = Document.from_pages(document.doc_id, list(pdf.pages), document.content_hash, page_headings=pdf.headings,
                                page_table_rows=pdf.table_rows, title=pdf.title,
                                extraction=extraction_name(tables, rows), source=document.source)
    return replace(fresh, metadata=document.metadata)
