"""RAG workbench: retrieval-augmented generation over PDFs, and the measurements to tune it.

Subpackages by stage: ``ingest`` (documents, chunks), ``retrieve`` (dense, BM25, fusion, re-ranking),
``generate`` (grounded answers), ``evaluate`` (golden sets, metrics, judge), ``workbench`` (MLflow,
sweeps, notebooks' helpers), ``cli`` (``rag-pipeline``). The names below are the small public API.
"""

from rag_core._lazy import lazy_exports

__version__ = "0.1.0"
__getattr__, __all__ = lazy_exports(__name__, {
    "RagConfig": "config", "load_config": "config", "Pipeline": "retrieve.pipeline",
    "evaluate_config": "evaluate.evaluation", "load_sweep": "workbench.sweep_file", "run_sweep": "workbench.sweep",
    "ingest_directory": "service", "answer_query": "service",
})
