"""Embedding: the ``Embedder`` (sentence-transformers models, normalised, batched, cached) and the
registry of its runtimes (``EMBED_BACKENDS``, the ``embed_backend`` setting): ``torch``
(sentence-transformers), ``bf16`` (the same under bf16 autocast, checked against fp32 at first use;
``rag_core.retrieve.bf16``), ``onnx`` and ``onnx-int8`` (ONNX Runtime, exported from the model on first
use into the store's ``onnx/`` folder).

An embedding backend is registered as an opener ``open(loaded, export_dir, **options) -> encoder``:
``loaded`` is the ``rag_core.retrieve.models.LoadedModel``, ``export_dir`` the store's folder for
exports, ``options`` the registration's (``quantize``); the encoder's ``encode(texts, kind,
batch_size)`` returns unit vectors, one float32 row per text (``kind`` is ``query`` or ``document``).
Left out: embedding APIs over the network.
"""

from __future__ import annotations

from rag_core._lazy import lazy_exports
from rag_core.components import SETTINGS, Registry, Setting
from rag_core.retrieve.onnx_export import register_runtimes

DEFAULT_EMBED_MODEL = "BAAI/bge-small-en-v1.5"

EMBED_BACKENDS = Registry("embed_backend", setting="embed_backend", group="embedding")
register_runtimes(EMBED_BACKENDS, "rag_core.retrieve.embedding.embedder:TorchEncoder",
                  "rag_core.retrieve.embedding.onnx:open_encoder", "embed_model")
EMBED_BACKENDS.register("bf16", "rag_core.retrieve.embedding.embedder:Bf16Encoder",
                        help="sentence-transformers under bf16 autocast (CPUs with AVX512-BF16/AMX, GPUs); "
                             "checked against fp32 at first use, else fp32, announced")

SETTINGS.declare(
    Setting("embed_model", str, DEFAULT_EMBED_MODEL, "embedding model, hub name or local directory (env RAG_EMBED_MODEL)",
            env="RAG_EMBED_MODEL", group="embedding", stage="index"),
    Setting("embed_backend", str, "bf16", "embedding runtime: bf16 (torch under bf16 autocast, checked against "
            "fp32 at first use, else fp32; queries in fp32) | torch | onnx | onnx-int8 (ONNX Runtime, exported "
            "once into the store)", choices=EMBED_BACKENDS.names, group="embedding", stage="index"),
    Setting("embed_batch_size", int, 32, "texts per embedding batch", above=0, group="embedding", stage="evaluation"),
    Setting("model_fallback", bool, True, "offline: fall back to the packaged MiniLM (announced, recorded)",
            group="embedding", stage="index"),
    owner="embedding")

__getattr__, _lazy_all = lazy_exports(__name__, {"Embedder": "embedder", "EmbedStats": "embedder",
                                                 "OnnxEmbedder": "onnx"})
__all__ = ["DEFAULT_EMBED_MODEL", "EMBED_BACKENDS", *_lazy_all]
