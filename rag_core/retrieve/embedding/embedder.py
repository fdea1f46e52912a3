"""Dense embeddings with sentence-transformers: normalised, batched, cached, with a progress bar.

Passages go through ``encode_document`` and queries through ``encode_query``, so a model that asks
for query/passage prompts (BGE, E5) gets them. Every text's embedding is cached on disk by
(model, text), so nothing unchanged is embedded twice, and each batch is committed to the cache as
soon as it is computed: an ingest killed at 90% resumes from there. Texts are embedded longest first
(what sentence-transformers does inside one call), so each batch holds texts of similar length.
``count_truncated`` reports how many texts are longer than the model's maximum sequence length
(their tails are not embedded).

Backends (``embed_backend``, the registry ``rag_core.retrieve.embedding.EMBED_BACKENDS``): ``torch``
(``TorchEncoder``: sentence-transformers; on a GPU in half precision, see ``models.half_precision``),
``bf16`` (``Bf16Encoder``: the same under bf16 autocast, where the hardware has bf16 and the first-use
agreement check of ``rag_core.retrieve.bf16`` passes; else fp32, announced, with torch's cache key;
the default, chosen by ``benchmarks/embed_backends.py``),
``onnx`` and ``onnx-int8`` (ONNX Runtime, ``rag_core.retrieve.embedding.onnx``, exported into the
store's ``onnx/`` folder on first use). Vectors differ slightly per backend, so each backend has its
own cache entries and collection (``cache_name``).

Queries of the ``bf16`` backend are embedded in fp32 (``query_encoder``): bf16 buys nothing on one
short text, and fp32 is what bf16 was checked against. In a store they run on the fp32 ONNX export of
the model (the ``onnx`` backend's, made at first use in 2-4 s), so a query process opens it without
torch; ``bf16-<key>.json`` in the export folder records which collection the last bf16 ingest built
(bf16 or, refused, torch's), so that such a process names it without loading the model. Outside a
store (no export folder), or where the export fails (announced), queries run on torch in fp32: the
same vectors to ~1e-7. ``max_seq_length`` and ``token_counts`` read the export too while the model
is not loaded (``notebooks/01-explore.ipynb`` counts tokens without importing torch). Left out: several
devices at once.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from rag_core.progress import progress
from rag_core.retrieve import bf16
from rag_core.retrieve.cache import ScoreCache, text_sha1
from rag_core.retrieve.embedding import EMBED_BACKENDS
from rag_core.retrieve.embedding.onnx import open_encoder, open_exported, read_bf16_record, write_bf16_record
from rag_core.retrieve.onnx_export import OnnxExportError
from rag_core.retrieve.models import LoadedModel, half_precision, load_embedder, timed_import

log = logging.getLogger(__name__)

HEAD_CHARS_PER_TOKEN = 6  # count_truncated: heads this long (English: ~4.5 characters a token) usually decide


@dataclass(frozen=True)
class EmbedStats:
    texts: int
    embedded: int  # computed by the model in this call
    cache_hits: int
    seconds: float


class Embedder:
    def __init__(self, model_name: str, batch_size: int = 32, cache: ScoreCache | None = None,
                 fallback: bool = True, progress: bool = False, backend: str = "torch",
                 export_dir: Path | None = None):
        self.model_name = model_name
        self.backend = backend
        self.export_dir = export_dir  # where ONNX exports are cached (the store's onnx/ folder)
        self.batch_size = batch_size
        self.cache = cache
        self.fallback = fallback
        self.progress = progress
        self._loaded: LoadedModel | None = None
        self._encoder: Any = None
        self._exported: tuple[LoadedModel, Any] | None | bool = False  # False: not looked for yet
        self._query_encoder: Any = None
        self._recorded_backend: str | None = None  # bf16: the backend the store's last ingest ran as
        # This process's start-up cost of the model, ms: import (of its runtime), load, first_call; and what ran.
        self.startup: dict[str, Any] = {}

    @property
    def loaded(self) -> LoadedModel:
        if self._loaded is None:
            imported = timed_import("sentence_transformers")  # torch's start-up: unavoidable on this path
            started = time.perf_counter()
            self._loaded = load_embedder(self.model_name, self.fallback)
            self.startup.update(runtime="torch + sentence-transformers", import_ms=imported,
                                load_ms=(time.perf_counter() - started) * 1000)
        return self._loaded

    @property
    def exported(self) -> tuple[LoadedModel, Any] | None:
        """An ONNX export already in the store, opened without torch: (the model as named, without a
        model object; its encoder), or None (the model is loaded). For ``onnx`` / ``onnx-int8`` the
        backend's own export; for ``bf16`` the fp32 export its queries run on, with the store's record
        of the collection (documents still need the model)."""
        if self._exported is False:
            options = EMBED_BACKENDS.get(self.backend).options
            quantize = options["quantize"] if "quantize" in options else (False if self.backend == "bf16" else None)
            found = None
            if quantize is not None and self.export_dir is not None and self._loaded is None:
                imported = timed_import("onnxruntime", "tokenizers")
                started = time.perf_counter()
                found = open_exported(self.model_name, self.fallback, Path(self.export_dir), quantize)
                if found and self.backend == "bf16":
                    self._recorded_backend = read_bf16_record(self.model_name, self.fallback, Path(self.export_dir))
                    found = found if self._recorded_backend else None
                if found:
                    self.startup.update(runtime="onnxruntime + tokenizers (export in the store, no torch)",
                                        import_ms=imported, load_ms=(time.perf_counter() - started) * 1000)
            self._exported = found
        return self._exported

    @property
    def name_used(self) -> str:
        return self.exported[0].used if self.exported else self.loaded.used

    @property
    def backend_used(self) -> str:
        """The backend as run: ``torch``, ``torch fp16 (cuda)``, ``bf16``, ``bf16 (cuda)``, ``onnx`` or
        ``onnx-int8``. A ``bf16`` backend that refused bf16 runs (and is named) as ``torch``; a query
        process that did not load the model takes the store's record of its last ingest."""
        if self.backend == "bf16" and self._loaded is None and self.exported:
            return str(self._recorded_backend)
        if self.backend == "bf16" and self.encoder.active:
            device = self.loaded.model.device.type
            return "bf16" if device == "cpu" else f"bf16 ({device})"
        if self.backend not in ("torch", "bf16"):
            return self.backend
        precision = half_precision(self.loaded.model)
        return f"torch {precision} ({self.loaded.model.device.type})" if precision else "torch"

    @property
    def cache_name(self) -> str:
        """The model's key in the embedding cache and the dense collection key: each backend's own."""
        backend = self.backend_used
        return self.name_used if backend == "torch" else f"{self.name_used} [{backend}]"

    @property
    def max_seq_length(self) -> int:
        if self._loaded is None and self.exported:  # the export's (the model's, recorded): no torch
            return int(self.exported[1].manifest.max_length)
        return int(self.loaded.model.max_seq_length)

    def embed_documents(self, texts: Sequence[str]) -> tuple[np.ndarray, EmbedStats]:
        started = time.perf_counter()
        cached = self.cache.get_embeddings(self.cache_name, texts) if self.cache else {}
        missing = sorted(dict.fromkeys(text for text in texts if text_sha1(text) not in cached), key=len, reverse=True)
        batches = [missing[start : start + self.batch_size] for start in range(0, len(missing), self.batch_size)]
        for batch in progress(batches, self.progress and len(missing) > 64, "Embedding", unit="batch"):
            vectors = self._encode(batch, "document")
            if self.cache:
                self.cache.put_embeddings(self.cache_name, batch, vectors)  # committed: survives a kill
            cached.update((text_sha1(text), vector) for text, vector in zip(batch, vectors))
        matrix = np.stack([cached[text_sha1(text)] for text in texts]) if texts else np.zeros((0, 0), np.float32)
        stats = EmbedStats(len(texts), len(missing), len(texts) - len(missing), time.perf_counter() - started)
        return matrix, stats

    def embed_query(self, query: str) -> np.ndarray:
        return self._encode([query], "query")[0]

    def prepare_queries(self) -> None:
        """``bf16`` in a store: open (and at first, make) the export its queries run on now, at ingest,
        so that the first query process need not load the model."""
        if self.backend == "bf16" and self.export_dir is not None:
            self.query_encoder  # noqa: B018 - opened for its side effect

    @property
    def query_encoder(self) -> Any:
        """What embeds queries: the backend's encoder; for ``bf16``, fp32 (see the module's docstring)."""
        if self.backend != "bf16":
            return self.encoder
        if self._query_encoder is None and self.exported:
            self._query_encoder = self.exported[1]
        if self._query_encoder is None:
            self._query_encoder = TorchEncoder(self.loaded)
            if self.export_dir is not None:
                started = time.perf_counter()
                try:
                    self._query_encoder = open_encoder(self.loaded, Path(self.export_dir), False)
                    write_bf16_record(self.loaded, Path(self.export_dir), self.backend_used)
                except (OnnxExportError, ImportError) as exc:
                    log.warning("bf16 queries: no ONNX export (%s); queries run on torch in fp32", exc)
                self.startup["load_ms"] = self.startup.get("load_ms", 0.0) + (time.perf_counter() - started) * 1000
        return self._query_encoder

    @property
    def encoder(self) -> Any:
        """The configured backend's encoder, opened at first use (an existing ONNX export without torch)."""
        if self._encoder is None and self.backend != "bf16" and self.exported:  # bf16's export is for queries
            self._encoder = self.exported[1]
        if self._encoder is None:
            backend = EMBED_BACKENDS.get(self.backend)
            loaded = self.loaded
            started = time.perf_counter()  # an ONNX backend opens (or makes) its export here: part of the load
            self._encoder = backend.load()(loaded, self.export_dir, **backend.options)
            self.startup["load_ms"] = self.startup.get("load_ms", 0.0) + (time.perf_counter() - started) * 1000
        return self._encoder

    def _encode(self, texts: list[str], kind: str) -> np.ndarray:
        """Unit vectors of `texts` (kind "query" or "document"), float32, on the configured backend."""
        encoder = self.query_encoder if kind == "query" else self.encoder
        if "first_call_ms" in self.startup:
            return encoder.encode(texts, kind, self.batch_size)
        started = time.perf_counter()
        vectors = encoder.encode(texts, kind, self.batch_size)
        self.startup["first_call_ms"] = (time.perf_counter() - started) * 1000
        return vectors

    def count_truncated(self, texts: Sequence[str]) -> int:
        """How many texts have more tokens (special tokens included) than the model reads.
        Tokenizers split words at spaces, so a text's head cut at a space gives the first of its tokens:
        a head already over the limit decides (about half the work for long chunks); the other texts
        are tokenized whole."""
        limit = self.max_seq_length
        cut = limit * HEAD_CHARS_PER_TOKEN
        heads = [text[:space] if len(text) > cut and (space := text.rfind(" ", 0, cut)) > 0 else text
                 for text in texts]
        over = [length > limit for length in self.token_counts(heads)]
        undecided = [text for text, head, longer in zip(texts, heads, over) if not longer and head is not text]
        return sum(over) + sum(length > limit for length in self.token_counts(undecided))

    @property
    def window_tokens(self) -> int:
        """Tokens of text one input of the model holds: ``max_seq_length`` less the special tokens and
        the document prompt's tokens (what a window of ``rag_core.retrieve.windows`` may hold)."""
        model = self.loaded.model
        tokenizer = model.tokenizer
        prompt = (getattr(model, "prompts", None) or {}).get("document", "")
        prompt_tokens = len(tokenizer(prompt, add_special_tokens=False)["input_ids"]) if prompt else 0
        return max(1, self.max_seq_length - tokenizer.num_special_tokens_to_add(False) - prompt_tokens)

    def token_offsets(self, texts: Sequence[str], whole: bool = True) -> list[list[tuple[int, int]]]:
        """Each text's tokens as (start, end) character offsets, special tokens left out. Without
        `whole`, a long text's head only (cut at a space, as ``count_truncated`` does) when the head
        already holds more than ``window_tokens``: enough to know what truncation reads."""
        limit = self.window_tokens
        if whole:
            return self._offsets(texts)
        cut = (limit + 1) * HEAD_CHARS_PER_TOKEN
        heads = [text[:space] if len(text) > cut and (space := text.rfind(" ", 0, cut)) > 0 else text
                 for text in texts]
        found = self._offsets(heads)
        undecided = [i for i, (text, head, offsets) in enumerate(zip(texts, heads, found))
                     if head is not text and len(offsets) <= limit]
        for i, offsets in zip(undecided, self._offsets([texts[i] for i in undecided])):
            found[i] = offsets
        return found

    def count_tokens(self, text: str) -> int:
        """The model's tokens in `text`, special tokens not counted (``chunk_unit: tokens``)."""
        return len(self.loaded.model.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _offsets(self, texts: Sequence[str]) -> list[list[tuple[int, int]]]:
        tokenizer = self.loaded.model.tokenizer
        found: list[list[tuple[int, int]]] = []
        for start in range(0, len(texts), 256):
            encoded = tokenizer(list(texts[start : start + 256]), add_special_tokens=False, truncation=False,
                                return_offsets_mapping=True)["offset_mapping"]
            found += [[(int(a), int(b)) for a, b in offsets] for offsets in encoded]
        return found

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        """Tokens per text, special tokens included, untruncated, by the model's tokenizer: the store's
        export's (the same fast tokenizer) while the model is not loaded, so that counting loads no torch."""
        if self._loaded is None and self.exported:
            return self.exported[1].count_tokens(texts)
        tokenizer = self.loaded.model.tokenizer
        counts: list[int] = []
        for start in range(0, len(texts), 256):
            encoded = tokenizer(list(texts[start : start + 256]), add_special_tokens=True, truncation=False)["input_ids"]
            counts += [len(ids) for ids in encoded]
        return counts


class TorchEncoder:
    """The ``torch`` backend: sentence-transformers' own ``encode_query`` / ``encode_document``."""

    def __init__(self, loaded: LoadedModel, export_dir: Path | None = None) -> None:
        self.model = loaded.model

    def encode(self, texts: Sequence[str], kind: str, batch_size: int) -> np.ndarray:
        encode = self.model.encode_query if kind == "query" else self.model.encode_document
        return encode(list(texts), batch_size=batch_size, normalize_embeddings=True, show_progress_bar=False,
                      convert_to_numpy=True).astype(np.float32)


class Bf16Encoder(TorchEncoder):
    """The ``bf16`` backend: ``TorchEncoder`` under ``torch.autocast(dtype=bfloat16)``, used only where
    the device has bf16 and the sample's vectors agree with fp32 (``rag_core.retrieve.bf16``); else
    fp32, announced on stderr (``active`` False). ``agreement`` holds the check's figures when active."""

    def __init__(self, loaded: LoadedModel, export_dir: Path | None = None) -> None:
        super().__init__(loaded, export_dir)
        self.device = bf16.model_device(self.model)
        self.agreement = bf16.first_use(f"embedding backend bf16 ({loaded.used})", self.device, self.check,
                                        self.model)
        self.active = self.agreement is not None

    def check(self) -> bf16.Agreement:
        """fp32 against bf16 on the fixed sample (queries then passages)."""
        queries, passages = list(bf16.SAMPLE_QUERIES), list(bf16.SAMPLE_PASSAGES)
        both = lambda encode: np.concatenate([encode(queries, "query", 16), encode(passages, "document", 16)])  # noqa: E731
        return bf16.agreement(both(super().encode), both(self._encode_bf16), len(queries))

    def encode(self, texts: Sequence[str], kind: str, batch_size: int) -> np.ndarray:
        return self._encode_bf16(texts, kind, batch_size) if self.active else super().encode(texts, kind, batch_size)

    def _encode_bf16(self, texts: Sequence[str], kind: str, batch_size: int) -> np.ndarray:
        with bf16.autocast(self.device):
            vectors = super().encode(texts, kind, batch_size)
        return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)  # unit in float32
