"""Re-ranking: the registry of re-rankers (``RERANKERS``, the ``reranker`` setting) with the built-in
cross-encoder, and the registry of its runtimes (``RERANK_BACKENDS``, the ``rerank_backend`` setting):
``torch`` (sentence-transformers), ``bf16`` (the same under bf16 autocast, checked against fp32 at
first use) and ``onnx`` / ``onnx-int8`` (ONNX Runtime, exported on first use
into the store's ``onnx/`` folder).

A re-ranker is a ``BaseReranker`` (``rag_core.retrieve.rerank.base``, the contract: ``from_config``,
``score(query, texts) -> RerankScores`` or ``score_passages(query, passages)`` (``RerankPassage``: the
chunk with its pages, its document's metadata and heading), ``unavailable()``, ``model_name`` / ``name_used``, and
``score_threshold(config)``, its no-answer threshold) registered as a class with the settings it
declares. The built-in one is ``cross_encoder`` (``CrossEncoderReranker``; ``min_rerank_score`` is its
setting); a plugin registers its own (``docs/rerankers.md``). The pipeline re-scores the
top ``rerank_depth`` fused candidates with it (0: off); ``rerank_unavailable(config)`` is the one
check sweeps and searches make before running a re-ranked point.

A re-rank backend is registered as an opener ``open(model_name, export_dir, **options) -> scorer``
whose ``predict(pairs, batch_size)`` returns one raw score per (query, passage) pair.
Left out: listwise re-rankers.
"""

from __future__ import annotations

from rag_core._lazy import lazy_exports
from rag_core.components import SETTINGS, Registry, Setting
from rag_core.retrieve.onnx_export import register_runtimes

DEFAULT_RERANK_MODEL = "cross-encoder/ms-marco-MiniLM-L6-v2"

RERANK_FUSIONS = ("none", "rrf")  # the rerank_fusion setting's choices (rag_core.retrieve.rerank.fusion)
RERANKERS = Registry("reranker", setting="reranker", group="rerank")
RERANK_BACKENDS = Registry("rerank_backend", setting="rerank_backend", group="rerank")
register_runtimes(RERANK_BACKENDS, "rag_core.retrieve.rerank.cross_encoder:TorchScorer",
                  "rag_core.retrieve.rerank.onnx:open_scorer", "rerank_model")
RERANK_BACKENDS.register("bf16", "rag_core.retrieve.rerank.cross_encoder:Bf16Scorer",
                         help="sentence-transformers under bf16 autocast (CPUs with AVX512-BF16/AMX, GPUs); "
                              "checked against fp32 at first use, else fp32, announced")

SETTINGS.declare(
    Setting("rerank_depth", int, 20, "fused candidates re-scored by the re-ranker (0 = off)", minimum=0, group="rerank",
            stage="rerank"),
    Setting("reranker", str, "cross_encoder", "re-ranker: cross_encoder, or one a plugin registers",
            choices=RERANKERS.names, group="rerank", stage="rerank"),
    Setting("rerank_fusion", str, "none", "none: the re-ranked head in the re-ranker's order; rrf: that order fused "
            "by RRF (rrf_k) with the first stage's order of the same passages", choices=RERANK_FUSIONS, group="rerank",
            stage="rerank"),
    owner="rerank")
RERANKERS.register(
    "cross_encoder", "rag_core.retrieve.rerank.cross_encoder:CrossEncoderReranker",
    help="a sentence-transformers cross-encoder scores each (query, passage) pair; scores cached in the store",
    settings=[
        Setting("rerank_model", str, DEFAULT_RERANK_MODEL, "cross-encoder, hub name or local directory "
                "(env RAG_RERANK_MODEL)", env="RAG_RERANK_MODEL", group="rerank", stage="rerank"),
        Setting("rerank_backend", str, "torch", "cross-encoder runtime: torch | bf16 (checked against fp32 at "
                "first use) | onnx | onnx-int8 (ONNX Runtime, exported once into the store)", choices=RERANK_BACKENDS.names, group="rerank",
                stage="rerank"),
        Setting("min_rerank_score", float, 0.0, "no-answer threshold on the cross-encoder logit (the cross_encoder "
                "re-ranker's; another re-ranker has its own)", group="rerank", stage="rerank"),
    ],
)

__getattr__, _lazy_all = lazy_exports(__name__, {
    "BaseReranker": "base", "RerankPassage": "base", "RerankScores": "base", "rerank_unavailable": "base",
    "score_threshold": "base",
    "CrossEncoderReranker": "cross_encoder", "Reranker": "cross_encoder", "OnnxCrossEncoder": "onnx"})
__all__ = ["DEFAULT_RERANK_MODEL", "RERANKERS", "RERANK_BACKENDS", "RERANK_FUSIONS", *_lazy_all]
