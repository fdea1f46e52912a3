"""The embedding model on ONNX Runtime: a loaded sentence-transformers model exported whole by
``rag_core.retrieve.onnx_export`` (fp32 or int8), cached in the store: the ``onnx`` and ``onnx-int8``
embedding backends (``open_encoder``).

The exported graph is the model's own module chain (``Transformer``, then whatever its modules config
adds: ``Pooling`` with its configured mode, ``Normalize``), so pooling and normalisation are the
model's, not a re-implementation. Texts are tokenized as sentence-transformers does (truncation to
``max_seq_length``), with the model's ``query`` / ``document`` prompt prepended when it has one, and
the vectors are L2-normalised (``normalize_embeddings=True``). fp32 vectors agree with torch's to a
cosine of ~1 - 1e-7; int8 ones to ~0.99 (measured in ``benchmarks/embed_backends.py``).

Opening without torch (``open_exported``, what a query process does): the export is made with torch,
but beside it go the fast tokenizer (``query-tokenizer.json``, saved by ``tokenizers``) and what
encoding needs (``query.json``: prompts, padding, truncation), and ``onnx/source-<key>.json`` names
the export by the weights' folder (``rag_core.retrieve.models.embedder_source``: which folder
``load_embedder`` would load, the packaged fallback included, known without torch when the hub is off)
and the installed versions. A later process whose model resolves to the same unchanged folder opens
the export with ``tokenizers`` and ``onnxruntime`` only (``QueryEmbedder``: the same token ids, so the
same vectors); any doubt (the hub reachable, a folder changed, a slow tokenizer) loads the model.

A model on a GPU is exported from a float32 CPU copy (the installed onnxruntime runs on the CPU).
Left out: GPU execution providers, models whose modules are not text-only (images, audio).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import logging
from importlib import metadata
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from rag_core.retrieve.bf16 import cpu_has_bf16
from rag_core.retrieve.models import LoadedModel, ModelSource, embedder_source
from rag_core.ingest.corpus import write_json_atomic
from rag_core.retrieve.onnx_export import (EXPORTER_VERSION, FUSION, INT8_RECIPE, ExportSpec, import_onnxruntime,
                                           load_or_export, open_session, tokenizer_inputs)

log = logging.getLogger(__name__)
OUTPUT_NAME = "sentence_embedding"  # not "embedding": the exporter names the word-embedding lookup so
QUERY_FILE = "query.json"  # beside model.onnx: what QueryEmbedder needs; written last
QUERY_TOKENIZER_FILE = "query-tokenizer.json"  # the fast tokenizer, saved by the tokenizers library


def embedder_spec(model: Any) -> ExportSpec:
    """What to export of a loaded ``SentenceTransformer``: all its modules, returning the sentence embedding."""
    import torch

    parameter = next(model.parameters())
    if parameter.device.type != "cpu" or parameter.dtype != torch.float32:
        model = copy.deepcopy(model).to("cpu", torch.float32)
    input_names = tokenizer_inputs(model.tokenizer)

    class SentenceEmbedding(torch.nn.Module):
        """The sentence-transformers module chain with positional inputs and one output."""

        def __init__(self, chain: torch.nn.Module) -> None:
            super().__init__()
            self.chain = chain

        def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
            return self.chain(dict(zip(input_names, inputs)))["sentence_embedding"]

    source = str(getattr(model, "name_or_path", "") or model.model_card_data.base_model or type(model).__name__)
    identity = {"modules": repr(model), "config": model[0].auto_model.config.to_json_string(use_diff=False)}
    return ExportSpec("embedding model", source, SentenceEmbedding(model), model.tokenizer,
                      int(model.max_seq_length), input_names, OUTPUT_NAME, identity)


class OnnxEmbedder:
    """Embeds texts with an exported sentence-transformers model on ONNX Runtime (CPU)."""

    def __init__(self, directory: Path, prompts: dict[str, str] | None = None, threads: int | None = None) -> None:
        """Open the finished export in `directory`; `prompts` maps "query" / "document" to a prefix."""
        from transformers import AutoTokenizer

        self.session, self.manifest = open_session(directory, threads)
        self.directory = directory
        self.prompts = dict(prompts or {})
        self.tokenizer = AutoTokenizer.from_pretrained(str(directory))

    def _features(self, texts: list[str]) -> dict[str, np.ndarray]:
        features = self.tokenizer(texts, padding=True, truncation=True, max_length=self.manifest.max_length,
                                  return_tensors="np")
        return {name: features[name].astype(np.int64) for name in self.manifest.input_names}

    @classmethod
    def load(cls, model: Any, cache_dir: Path, quantize: bool = False, threads: int | None = None) -> "OnnxEmbedder":
        """The ONNX version of a loaded ``SentenceTransformer``, exported on first use and cached under
        ``cache_dir/<key>/``."""
        import_onnxruntime()
        return cls(load_or_export(embedder_spec(model), cache_dir, quantize), model_prompts(model), threads)

    def encode(self, texts: Sequence[str], kind: str = "document", batch_size: int = 32) -> np.ndarray:
        """Unit vectors, one row per text in the order given, float32; `kind` is "query" or "document"."""
        prompt = self.prompts.get(kind, "")
        order = np.argsort([-len(text) for text in texts], kind="stable")  # longest first: little padding
        vectors: np.ndarray | None = None
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            inputs = self._features([prompt + texts[i] for i in batch])
            output = self.session.run([self.manifest.output_name], inputs)[0]
            if vectors is None:
                vectors = np.empty((len(texts), output.shape[1]), dtype=np.float32)
            vectors[batch] = output
        if vectors is None:
            return np.zeros((0, 0), dtype=np.float32)
        return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


class QueryEmbedder(OnnxEmbedder):
    """An export opened with ``tokenizers`` and ``onnxruntime`` only (no torch, no transformers): the
    tokenizer and settings ``write_query_files`` saved beside the model. Same vectors as
    ``OnnxEmbedder`` on the same export (the fast tokenizer is the same Rust tokenizer)."""

    def __init__(self, directory: Path, threads: int | None = None) -> None:  # noqa: D107 - no super(): no transformers
        from tokenizers import Tokenizer

        self.session, self.manifest = open_session(directory, threads)
        self.directory = directory
        settings = json.loads((directory / QUERY_FILE).read_text())
        self.prompts = dict(settings["prompts"])
        self.tokenizer = Tokenizer.from_file(str(directory / QUERY_TOKENIZER_FILE))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(self.manifest.max_length, strategy="longest_first",
                                         direction=settings["truncation_side"])
        padding = settings["padding"]
        self.tokenizer.enable_padding(direction=padding["side"], pad_id=padding["id"], pad_type_id=padding["type_id"],
                                      pad_token=padding["token"])

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens per text, special tokens included, untruncated: the export's tokenizer, a copy of it
        without the truncation and padding that encoding uses (``Embedder.token_counts`` without torch)."""
        from tokenizers import Tokenizer

        counter = Tokenizer.from_file(str(self.directory / QUERY_TOKENIZER_FILE))
        counter.no_truncation()
        counter.no_padding()
        return [len(item.ids) for item in counter.encode_batch(list(texts), add_special_tokens=True)]

    def _features(self, texts: list[str]) -> dict[str, np.ndarray]:
        encoded = self.tokenizer.encode_batch(texts)
        columns = {"input_ids": "ids", "attention_mask": "attention_mask", "token_type_ids": "type_ids"}
        return {name: np.array([getattr(item, columns[name]) for item in encoded], dtype=np.int64)
                for name in self.manifest.input_names}


def write_query_files(model: Any, directory: Path) -> bool:
    """Save beside the export in `directory` what ``QueryEmbedder`` needs (the fast tokenizer, its
    padding and truncation, the prompts); False (nothing written) for a tokenizer that is not a fast one."""
    tokenizer = model.tokenizer
    if not getattr(tokenizer, "is_fast", False):
        return False
    if not (directory / QUERY_FILE).is_file():
        write_json_atomic(directory / QUERY_TOKENIZER_FILE, json.loads(tokenizer.backend_tokenizer.to_str()))
        settings = {"max_seq_length": int(model.max_seq_length), "prompts": model_prompts(model),
                    "output_name": OUTPUT_NAME, "truncation_side": tokenizer.truncation_side,
                    "padding": {"side": tokenizer.padding_side, "id": tokenizer.pad_token_id,
                                "type_id": tokenizer.pad_token_type_id, "token": tokenizer.pad_token}}
        write_json_atomic(directory / QUERY_FILE, settings)  # last: marks them complete
    return True


def source_record(source: ModelSource, export_dir: Path, quantize: bool) -> Path:
    """Where the export of the weights in `source` is named (``source-<key>.json`` in `export_dir`): the
    key hashes the request, the folder's files (names, sizes, modification times), the backend and the
    installed versions the export's own key depends on, all read without importing them."""
    files = sorted((str(path.relative_to(source.path)), stat.st_size, stat.st_mtime_ns)
                   for path in source.path.rglob("*") if path.is_file() for stat in (path.stat(),))
    versions = {}
    for package in ("torch", "onnxruntime", "sentence-transformers", "transformers", "tokenizers"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    identity = {"requested": source.requested, "used": source.used, "fallback": source.fallback,
                "path": str(source.path.resolve()), "files": files, "quantize": quantize, "exporter": EXPORTER_VERSION,
                "recipe": INT8_RECIPE if quantize else None, "fusion": FUSION, "versions": versions}
    key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:24]
    return Path(export_dir) / f"source-{key}.json"


def record_export(loaded: Any, entry: Path, export_dir: Path, quantize: bool) -> None:
    """After an export opened with torch: name it by its source (``source_record``), so that the next
    process finds it without torch. Nothing is recorded when the source is not certain without torch."""
    source = embedder_source(loaded.requested, True)
    if source is None or (source.used, source.fallback) != (loaded.used, loaded.fallback):
        return
    if write_query_files(loaded.model, entry):
        write_json_atomic(source_record(source, export_dir, quantize),
                          {"entry": entry.name, "requested": source.requested, "used": source.used})


def bf16_record(source: ModelSource, export_dir: Path) -> Path:
    """Beside the fp32 export's ``source-<key>.json``: ``bf16-<key>.json``, the bf16 backend's record."""
    record = source_record(source, export_dir, False)
    return record.with_name("bf16-" + record.name.removeprefix("source-"))


def write_bf16_record(loaded: Any, export_dir: Path, backend_used: str) -> None:
    """After a bf16 build: which backend its collection is named by (``bf16``, ``bf16 (cuda)``, or
    ``torch`` where bf16 was refused), for query processes that do not load the model."""
    source = embedder_source(loaded.requested, True)
    if source is not None and (source.used, source.fallback) == (loaded.used, loaded.fallback):
        write_json_atomic(bf16_record(source, export_dir), {"used": source.used, "backend_used": backend_used})


def read_bf16_record(name: str, fallback: bool, export_dir: Path) -> str | None:
    """The backend the store's last bf16 build ran as (``write_bf16_record``), or None (not recorded)."""
    source = embedder_source(name, fallback)
    try:
        record = json.loads(bf16_record(source, export_dir).read_text()) if source is not None else None
    except (OSError, ValueError):
        return None
    backend = record.get("backend_used") if isinstance(record, dict) and record.get("used") == source.used else None
    if not isinstance(backend, str):  # none, another model's, or damaged: the model is loaded and decides
        return None
    # Built with bf16 on another machine (a store moved): this CPU's run is decided by loading the model.
    return None if backend == "bf16" and not cpu_has_bf16() else backend


@functools.lru_cache(maxsize=4)
def open_exported(name: str, fallback: bool, export_dir: Path, quantize: bool) -> tuple[LoadedModel, QueryEmbedder] | None:
    """The ``onnx`` / ``onnx-int8`` backend without torch: (the model as named, with no model object;
    its ``QueryEmbedder``) when the export of the weights ``load_embedder(name, fallback)`` would load
    is in `export_dir` with its query files; else None (load with torch). A fallback is announced as
    ``load_embedder`` does. Opened once per process."""
    source = embedder_source(name, fallback)
    if source is None:
        return None
    try:
        record = json.loads(source_record(source, export_dir, quantize).read_text())
        entry = Path(export_dir) / record["entry"]
    except (OSError, ValueError, TypeError, KeyError):
        return None
    if record.get("used") != source.used or not (entry / QUERY_FILE).is_file():
        return None
    try:
        encoder = QueryEmbedder(entry)
    except FileNotFoundError:
        return None
    if source.announcement:
        log.warning("%s", source.announcement)
    return LoadedModel(None, name, source.used, source.fallback), encoder


def model_prompts(model: Any) -> dict[str, str]:
    """The prefix sentence-transformers puts before queries and documents (``encode_query`` /
    ``encode_document``): the model's "query" / "document" prompt, else its default prompt, else none."""
    prompts = dict(getattr(model, "prompts", None) or {})
    default = prompts.get(getattr(model, "default_prompt_name", None) or "", "")
    return {kind: prompts.get(kind, default) for kind in ("query", "document")}


@functools.lru_cache(maxsize=4)
def open_encoder(loaded: Any, export_dir: Path | None, quantize: bool = False) -> OnnxEmbedder:
    """The ``onnx`` / ``onnx-int8`` backends: the loaded model's export in `export_dir` (made on first
    use), opened once per process."""
    if export_dir is None:
        raise ValueError(f"embed_backend {'onnx-int8' if quantize else 'onnx'!r} needs a folder for its export (export_dir)")
    encoder = OnnxEmbedder.load(loaded.model, export_dir, quantize=quantize)
    record_export(loaded, encoder.directory, export_dir, quantize)
    return encoder
