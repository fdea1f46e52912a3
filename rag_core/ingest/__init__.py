"""Ingest: documents from PDFs (PyMuPDF, 1-based pages), ``.txt``/``.md`` and BEIR corpora; the document
store; recursive chunking with page and character offsets; tables, titles and headings from PDFs;
document metadata."""

from rag_core._lazy import lazy_exports

__getattr__, __all__ = lazy_exports(__name__, {
    "read_documents": "files", "IngestResult": "files", "chunk_corpus": "chunking", "Corpus": "corpus",
    "DocumentStore": "corpus", "load_beir": "beir", "prepare_corpus": "extraction", "read_sidecar": "metadata",
    "extract_pdf": "pdf_extract",
})
