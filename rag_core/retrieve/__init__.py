"""Retrieve: the first stage (retrievers, query expansion, fusion: ``candidates``), re-ranking, and
``Pipeline``, which composes them; one folder per kind of component, each with its contract and its
registry (``retrievers``, ``fusion``, ``expansion``, ``rerank``, ``embedding``, ``vector_stores``); the
models and the on-disk cache they share; metadata filters, document routing and contextual chunk text."""

from rag_core._lazy import lazy_exports

__getattr__, __all__ = lazy_exports(__name__, {
    "Pipeline": "pipeline", "Retrieval": "pipeline", "Index": "index", "BM25Index": "bm25",
    "Embedder": "embedding.embedder", "Reranker": "rerank.cross_encoder", "RerankScores": "rerank.cross_encoder",
    "reciprocal_rank_fusion": "fusion.rrf", "ChromaVectorStore": "vector_stores.chroma", "ScoreCache": "cache",
    "ModelLoadError": "models", "VectorStoreError": "vector_stores.errors",
    "ChromaServerStore": "vector_stores.chroma_server", "QdrantVectorStore": "vector_stores.qdrant",
    "open_vector_store": "vector_stores", "parse_vector_store": "vector_stores", "Router": "routing",
    "parse_where": "filters", "FilterError": "filters", "RETRIEVERS": "retrievers", "Retriever": "retrievers",
    "FUSIONS": "fusion", "QUERY_EXPANSIONS": "expansion", "RERANKERS": "rerank", "EMBED_BACKENDS": "embedding",
    "RERANK_BACKENDS": "rerank", "VECTOR_STORES": "vector_stores",
})
