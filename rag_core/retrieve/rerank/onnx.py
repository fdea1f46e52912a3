"""The cross-encoder on ONNX Runtime: a sentence-transformers ``CrossEncoder`` exported by
``rag_core.retrieve.onnx_export`` (fp32, or int8 with dynamic quantization), cached in the store.

The ``onnx`` (fp32) and ``onnx-int8`` re-rank backends (``open_scorer``; the registry is
``rag_core.retrieve.rerank.RERANK_BACKENDS``). Scores are the same raw logits as ``CrossEncoder.predict`` with an Identity activation, shape
``(n,)``, from the same tokenizer, truncation (``longest_first``) and ``max_length``. fp32 agrees with
torch to ~1e-7; int8 moves scores by a few 1e-3 (see ``onnx_export``), which swaps neighbours closer
than that.

Left out: loading without torch (the cache key fingerprints the loaded weights, so the torch model is
loaded once per process even when ONNX scores); see ``onnx_export`` for what the exporter leaves out.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from rag_core.retrieve.models import RANDOM_HEAD_SEED, load_cross_encoder
from rag_core.retrieve.onnx_export import (  # noqa: F401  (re-exported: the backend's public names)
    INT8_RECIPE, MANIFEST_FILE, MODEL_FILE, ExportSpec, OnnxExportError, import_onnxruntime, load_or_export,
    open_session, tokenizer_inputs,
)

OUTPUT_NAME = "logits"


def cross_encoder_spec(model: Any) -> ExportSpec:
    """What to export of a loaded ``CrossEncoder``: its HF module, returning the logits only."""
    import torch

    input_names = tokenizer_inputs(model.tokenizer)

    class Logits(torch.nn.Module):
        """The HF module with positional inputs and the logits as its only output."""

        def __init__(self, module: torch.nn.Module) -> None:
            super().__init__()
            self.module = module

        def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
            return self.module(**dict(zip(input_names, inputs))).logits

    source = str(getattr(model.model, "name_or_path", "") or type(model.model).__name__)
    return ExportSpec("cross-encoder", source, Logits(model.model), model.tokenizer, int(model.max_seq_length),
                      input_names, OUTPUT_NAME, {"config": model.model.config.to_json_string(use_diff=False)})


def cache_key(model: Any, quantize: bool) -> str:
    """The export cache key of a loaded ``CrossEncoder`` (see ``onnx_export.cache_key``)."""
    from rag_core.retrieve.onnx_export import cache_key as spec_key

    return spec_key(cross_encoder_spec(model), quantize)


class OnnxCrossEncoder:
    """Scores (query, passage) pairs with an exported cross-encoder on ONNX Runtime (CPU)."""

    def __init__(self, directory: Path, threads: int | None = None) -> None:
        """Open the finished export in `directory` (see `load` for exporting and caching)."""
        from transformers import AutoTokenizer

        self.session, self.manifest = open_session(directory, threads)
        self.directory = directory
        self.tokenizer = AutoTokenizer.from_pretrained(str(directory))

    @classmethod
    def load(cls, model_dir_or_crossencoder: str | Path | Any, cache_dir: Path, quantize: bool = False,
             threads: int | None = None) -> "OnnxCrossEncoder":
        """The ONNX version of a model directory or a loaded ``CrossEncoder``, exported on first use and
        cached under ``cache_dir/<key>/``. A directory is loaded the way the offline stand-in is: a
        missing classification head is initialised from ``RANDOM_HEAD_SEED``."""
        import_onnxruntime()  # fail before loading torch models
        model = model_dir_or_crossencoder
        if isinstance(model, (str, Path)):
            model = _load_seeded_cross_encoder(Path(model))
        return cls(load_or_export(cross_encoder_spec(model), cache_dir, quantize), threads)

    @property
    def max_length(self) -> int:
        return self.manifest.max_length

    def predict(self, pairs: Sequence[tuple[str, str]], batch_size: int = 16) -> np.ndarray:
        """Raw logits, one per pair, in the order given: shape (n,), float32."""
        # Longest first, as CrossEncoder.predict batches, so that a batch pads little.
        order = np.argsort([-(len(query) + len(passage)) for query, passage in pairs], kind="stable")
        scores = np.empty(len(pairs), dtype=np.float32)
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            features = self.tokenizer([pairs[i][0] for i in batch], [pairs[i][1] for i in batch], padding=True,
                                      truncation="longest_first", max_length=self.max_length, return_tensors="np")
            inputs = {name: features[name].astype(np.int64) for name in self.manifest.input_names}
            logits = self.session.run([self.manifest.output_name], inputs)[0]  # (batch, 1)
            scores[batch] = logits[:, 0]
        return scores


def _load_seeded_cross_encoder(path: Path) -> Any:
    import torch
    from sentence_transformers import CrossEncoder

    torch.manual_seed(RANDOM_HEAD_SEED)
    return CrossEncoder(str(path), num_labels=1, device="cpu", activation_fn=torch.nn.Identity())


@functools.lru_cache(maxsize=4)
def open_scorer(model_name: str, export_dir: Path | None, quantize: bool = False) -> OnnxCrossEncoder:
    """The ``onnx`` / ``onnx-int8`` backends: `model_name`'s export in `export_dir` (made on first use),
    opened once per process."""
    if export_dir is None:
        raise ValueError(f"rerank_backend {'onnx-int8' if quantize else 'onnx'!r} needs a folder for its export (export_dir)")
    return OnnxCrossEncoder.load(load_cross_encoder(model_name).model, export_dir, quantize=quantize)
