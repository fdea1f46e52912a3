"""RAG workbench: retrieval-augmented generation over PDFs, and the measurements to tune it.

Layers, each importing only from those below it (no import cycle, counting imports inside functions;
``tests/unit/test_layers.py`` keeps the order):
- the floor: ``records`` (the typed records stages pass), ``errors`` (error types and what they mean
  to a user), ``jsonl``, ``progress``, ``paths``, ``api_keys``, ``doc_ids``; then ``components`` (the
  registries' machinery and the settings table, which imports no component);
- the components by stage: ``ingest`` (documents, chunks), ``llm`` (the LLM client, its errors and
  retries), ``retrieve`` (dense, BM25, fusion, re-ranking), each registry beside its implementations;
- ``catalog`` (every built-in registry, so the settings table is whole) and ``config`` (``RagConfig``
  built from that table; the components below it read their settings through ``ConfigFields``);
- ``generate`` (grounded answers), ``evaluate`` (golden sets, metrics, judge);
- ``service`` (the ingest/query front door) and ``workbench`` (evaluations logged to MLflow, sweeps,
  notebooks' helpers, every result as text);
- ``cli`` (``rag-pipeline``: arguments and exit codes), ``finetune`` and ``demo``.
The names below are the small public API.
"""

from rag_core._lazy import lazy_exports

__version__ = "0.1.0"
__getattr__, __all__ = lazy_exports(__name__, {
    "RagConfig": "config", "load_config": "config", "Pipeline": "retrieve.pipeline",
    "evaluate_config": "evaluate.evaluator", "load_sweep": "workbench.plans.sweep_file", "run_sweep": "workbench.execution.sweep",
    "ingest_directory": "service", "answer_query": "service",
})
