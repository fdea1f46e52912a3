"""Ingest: documents from PDFs (PyMuPDF, 1-based pages), ``.txt`` and ``.md``; the document store;
chunking (``chunkers/``: recursive, fixed, sentences, semantic, cluster, structure) with page and character
offsets; sentences and sections of a text; tables, titles and headings from PDFs; document metadata.
(BEIR datasets, which bring queries too, are read by ``rag_core.evaluate.beir``.)"""

from rag_core._lazy import lazy_exports

__getattr__, __all__ = lazy_exports(__name__, {
    "read_documents": "files", "IngestResult": "files", "chunk_corpus": "chunking", "Corpus": "corpus",
    "DocumentStore": "corpus", "store_corpus": "corpus", "prepare_corpus": "extraction", "read_sidecar": "metadata",
    "extract_pdf": "pdf_extract",
})
