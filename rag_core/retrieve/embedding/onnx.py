"""The embedding model on ONNX Runtime: a loaded sentence-transformers model exported whole by
``rag_core.retrieve.onnx_export`` (fp32 or int8), cached in the store: the ``onnx`` and ``onnx-int8``
embedding backends (``open_encoder``).

The exported graph is the model's own module chain (``Transformer``, then whatever its modules config
adds: ``Pooling`` with its configured mode, ``Normalize``), so pooling and normalisation are the
model's, not a re-implementation. Texts are tokenized as sentence-transformers does (truncation to
``max_seq_length``), with the model's ``query`` / ``document`` prompt prepended when it has one, and
the vectors are L2-normalised (``normalize_embeddings=True``). fp32 vectors agree with torch's to a
cosine of ~1 - 1e-7; int8 ones to ~0.99 (measured in ``benchmarks/embed_backends.py``).

A model on a GPU is exported from a float32 CPU copy (the installed onnxruntime runs on the CPU).
Left out: GPU execution providers, models whose modules are not text-only (images, audio).
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from rag_core.retrieve.onnx_export import ExportSpec, import_onnxruntime, load_or_export, open_session, tokenizer_inputs

OUTPUT_NAME = "sentence_embedding"  # not "embedding": the exporter names the word-embedding lookup so


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
            features = self.tokenizer([prompt + texts[i] for i in batch], padding=True, truncation=True,
                                      max_length=self.manifest.max_length, return_tensors="np")
            inputs = {name: features[name].astype(np.int64) for name in self.manifest.input_names}
            output = self.session.run([self.manifest.output_name], inputs)[0]
            if vectors is None:
                vectors = np.empty((len(texts), output.shape[1]), dtype=np.float32)
            vectors[batch] = output
        if vectors is None:
            return np.zeros((0, 0), dtype=np.float32)
        return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


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
    return OnnxEmbedder.load(loaded.model, export_dir, quantize=quantize)
