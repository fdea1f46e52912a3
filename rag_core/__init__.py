"""RAG workbench: retrieval-augmented generation over PDFs, and the measurements to tune it."""

__version__ = "0.1.0"
