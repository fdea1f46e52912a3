"""Retrieve: embeddings in a vector store, BM25, Reciprocal Rank Fusion and cross-encoder re-ranking,
composed by ``Pipeline``; the models and the on-disk cache they share; metadata filters, document
routing and contextual chunk text."""

from rag_core._lazy import lazy_exports

__getattr__, __all__ = lazy_exports(__name__, {
    "Pipeline": "pipeline", "Retrieval": "pipeline", "Index": "index", "BM25Index": "bm25", "Embedder": "embed",
    "Reranker": "rerank", "RerankScores": "rerank", "reciprocal_rank_fusion": "fusion",
    "ChromaVectorStore": "vectorstore", "ScoreCache": "cache", "ModelLoadError": "models",
    "VectorStoreError": "vector_errors", "ChromaServerStore": "chroma_server", "QdrantVectorStore": "qdrant_store",
    "open_vector_store": "vector_backends", "parse_vector_store": "vector_backends",
    "Router": "routing", "parse_where": "filters", "FilterError": "filters",
})
