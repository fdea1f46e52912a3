"""The built-in settings as typed attributes: ``RagConfig`` (``rag_core.config``) is a ``ConfigFields``.

Each setting is declared once, with its type and default, beside the component that reads it (a
``Setting`` in the one table, ``rag_core.components.SETTINGS``); ``RagConfig`` reads its values from
that table at run time. This class only states, for a type checker and an editor, that
``config.chunk_size`` is an ``int``: one annotation per built-in setting, nothing at run time.
``tests/unit/test_catalog.py`` keeps it in step with the table (a built-in setting added,
removed or retyped without its line here fails, and prints the line to paste).

A plugin's settings are not listed: they are read through ``RagConfig.__getattr__`` (typed ``Any``).
Modules below ``rag_core.config`` in the layers (``retrieve/``, ``llm/``, ``ingest/``, whose registries
config reads through ``rag_core.catalog``) annotate their ``config`` parameters with ``ConfigFields``:
importing ``RagConfig`` there would be an arrow up the layers (``tests/unit/test_layers.py``);
everything above config uses ``RagConfig``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["ConfigFields"]


class ConfigFields:
    """Every built-in setting, by group in the settings table's order."""

    __slots__ = ()

    # plugins
    plugins: tuple[str, ...]
    # chunking
    chunk_size: int
    overlap: int
    chunk_unit: str
    per_page: bool
    chunker: str
    child_size: int
    semantic_buffer: int
    semantic_percentile: float
    cluster_piece_size: int
    # ingest
    extract_tables: bool
    table_text: bool
    chunk_context: str
    metadata_pattern: str
    # routing
    doc_evidence: str
    doc_evidence_weight: float
    doc_evidence_docs: int
    route_docs: int
    route_when: str
    # retrieval
    mode: str
    k: int
    retrieve_depth: int
    # fusion
    rrf_k: int
    fusion: str
    fusion_norm: str
    fusion_weights: tuple[float, ...]
    # expansion
    query_expansion: str
    rm3_docs: int
    rm3_terms: int
    rm3_weight: float
    multi_query_n: int
    # rerank
    rerank_depth: int
    reranker: str
    rerank_fusion: str
    rerank_model: str
    rerank_backend: str
    min_rerank_score: float
    # bm25
    bm25_backend: str
    tokenizer: str
    bm25_k1: float
    bm25_b: float
    bm25_numbers: bool
    # embedding
    dense_pooling: str
    dense_stride: int
    page_pooling: str
    embed_model: str
    embed_backend: str
    embed_batch_size: int
    model_fallback: bool
    # vector_store
    dense_search: str
    dense_exact_max: int
    vector_store: str
    vector_store_timeout_s: float
    # generation
    llm_provider: str
    llm_model: str
    max_answer_tokens: int
    llm_timeout_s: float
    llm_max_retries: int
    min_retriever_agreement: int
    # evaluation
    metrics_k: tuple[int, ...]
    page_score: str
    page_top_m: int
    page_credit: str
    context_budgets: tuple[int, ...]
    answers: bool
    tracing: bool
    trace_queries: bool

    if TYPE_CHECKING:
        def __getattr__(self, name: str) -> Any:  # a plugin's setting
            ...
