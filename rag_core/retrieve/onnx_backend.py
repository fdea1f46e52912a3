"""The cross-encoder on ONNX Runtime: export a sentence-transformers ``CrossEncoder`` to ONNX (fp32, or
int8 with dynamic quantization), cache the export in the store, and score pairs with it.

Backends by name (``quantize_for``): ``"onnx"`` (fp32) and ``"onnx-int8"``; ``"torch"`` stays with the
caller. Scores are the same raw logits as ``CrossEncoder.predict`` with an Identity activation, shape
``(n,)``, from the same tokenizer, truncation (``longest_first``) and ``max_length``. fp32 agrees with
torch to ~1e-7. int8 (``onnxruntime.quantization.quantize_dynamic``: int8 weights with per-channel
scales, MatMul and Gemm only, activations quantized per batch at run time; see ``INT8_RECIPE``) is
faster on CPU and moves scores by a few 1e-3, which swaps neighbours closer than that. Because the
activation scales come from the whole batch, an int8 score also depends on the pairs batched with it
(by up to ~6e-3 on the stand-in model): int8 scores are not bit-reproducible across batchings.

Exporter: ``torch.onnx.export(dynamo=True)``, the default and maintained exporter of torch 2.13. It
needs ``onnxscript`` (and ``onnx``, which quantization needs anyway), both plain PyPI wheels that
change nothing else in the environment. The legacy TorchScript exporter (``dynamo=False``) is
deprecated and traces Python control flow in transformers' mask code into constants (it warns so);
its graph happened to be correct for BERT, but a trace that silently fixes shapes is the wrong
default for "whatever model directory is configured". sentence-transformers' own ONNX backend is
not used: it goes through optimum-onnx, which pins transformers below the installed version.

The cache: ``cache_dir/<key>/`` holds ``model.onnx``, the tokenizer files and ``export.json``, where
the key hashes the source model's identity (name or path, config, and a fingerprint of every weight,
so the offline stand-in's seeded random head is covered, and an unseeded random head never hits),
``max_length``, the quantization recipe and the exporter version (this module's, torch's and
onnxruntime's). An export is written in a temporary directory and renamed into place, and
``export.json`` is written last: a directory without it (a killed export) is never used.

Left out: GPU execution providers (the session runs on CPU), models over 2 GB (ONNX external
data), static (calibrated) quantization, loading without torch (the key fingerprints the loaded
model's weights, so the torch model is loaded once per process even when ONNX scores), and pruning
old cache entries (delete ``cache_dir`` to start over).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import uuid
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

EXPORTER_VERSION = 2  # bump when the export below changes: old cache entries are then not used
MODEL_FILE = "model.onnx"
MANIFEST_FILE = "export.json"  # written last: its presence marks a finished export
OUTPUT_NAME = "logits"
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")  # those the tokenizer produces are used
OPSET = 18
# quantize_dynamic keyword arguments; part of the cache key. Measured on the sample golden queries
# (36 x 20 BM25 passages, seeded random-head MiniLM-L6, mean Kendall tau against torch): all supported
# ops per-tensor 0.745; MatMul + Gemm per-tensor 0.763; per-channel 0.851 (0.857 on the eager-attention
# export), no slower: chosen. Per-channel with the FFN output projections kept fp32: 0.886, but a third
# of the linear FLOPs back in fp32. Pooler and classifier kept fp32: no change.
INT8_RECIPE: dict[str, Any] = {"per_channel": True, "op_types_to_quantize": ["MatMul", "Gemm"]}


QUANTIZE_BY_BACKEND = {"onnx": False, "onnx-int8": True}  # re-ranking backend name -> int8


def quantize_for(backend: str) -> bool:
    """Whether the ONNX backend called `backend` is int8; ValueError naming the valid ones otherwise."""
    if backend not in QUANTIZE_BY_BACKEND:
        raise ValueError(f"unknown ONNX re-ranking backend {backend!r}; valid: {', '.join(QUANTIZE_BY_BACKEND)}")
    return QUANTIZE_BY_BACKEND[backend]


class OnnxExportError(RuntimeError):
    """A cross-encoder could not be exported to ONNX; the message names the model and the cause."""


@dataclass(frozen=True)
class ExportManifest:
    source: str  # the model's name or path
    max_length: int
    input_names: tuple[str, ...]
    quantized: bool
    exporter: str  # this module's, torch's and onnxruntime's versions

    @classmethod
    def read(cls, directory: Path) -> "ExportManifest | None":
        """The manifest of a finished export in `directory`, or None (missing, unfinished, unreadable)."""
        try:
            fields = json.loads((directory / MANIFEST_FILE).read_text())
            manifest = cls(**{**fields, "input_names": tuple(fields["input_names"])})
        except (OSError, ValueError, TypeError, KeyError):
            return None
        return manifest if (directory / MODEL_FILE).is_file() else None


def import_onnxruntime() -> Any:
    try:
        import onnxruntime
    except ImportError as exc:
        raise ImportError("the ONNX re-ranking backends need onnxruntime, onnx and onnxscript: "
                          "pip install onnxruntime onnx onnxscript") from exc
    return onnxruntime


def exporter_version() -> str:
    import torch

    return f"rag_core.retrieve.onnx_backend {EXPORTER_VERSION}, torch {torch.__version__}, onnxruntime {import_onnxruntime().__version__}"


def export_cross_encoder(model: Any, out_dir: Path, *, quantize: bool) -> Path:
    """Export a loaded ``CrossEncoder`` to ``out_dir/model.onnx`` (int8 when `quantize`), with its
    tokenizer and manifest beside it; returns the model file. Dynamic batch and sequence axes."""
    import_onnxruntime()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    input_names = model_input_names(model)
    source = source_name(model)
    fp32_file = out_dir / f".{MODEL_FILE}.{uuid.uuid4().hex}.fp32.tmp"
    int8_file = out_dir / f".{MODEL_FILE}.{uuid.uuid4().hex}.int8.tmp"
    previous_disable = logging.root.manager.disable
    logging.disable(logging.WARNING)  # the exporter's "torchvision is not installed", the quantizer's advice
    try:
        _export_fp32(model, input_names, fp32_file)
        if quantize:
            from onnxruntime.quantization import QuantType, quantize_dynamic

            quantize_dynamic(fp32_file, int8_file, weight_type=QuantType.QInt8, **INT8_RECIPE)
        os.replace(int8_file if quantize else fp32_file, out_dir / MODEL_FILE)
        model.tokenizer.save_pretrained(str(out_dir))
    except Exception as exc:
        raise OnnxExportError(f"cannot export the cross-encoder {source!r} to ONNX "
                              f"({type(exc).__name__}: {exc})") from exc
    finally:
        logging.disable(previous_disable)
        fp32_file.unlink(missing_ok=True)
        int8_file.unlink(missing_ok=True)
    manifest = ExportManifest(source, int(model.max_seq_length), input_names, quantize, exporter_version())
    _write_atomically(out_dir / MANIFEST_FILE, json.dumps(asdict(manifest), indent=2))
    return out_dir / MODEL_FILE


def _export_fp32(model: Any, input_names: tuple[str, ...], out_file: Path) -> None:
    import torch

    class Logits(torch.nn.Module):
        """The HF module with positional inputs and the logits as its only output."""

        def __init__(self, module: torch.nn.Module) -> None:
            super().__init__()
            self.module = module

        def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
            return self.module(**dict(zip(input_names, inputs))).logits

    wrapper = Logits(model.model).eval()
    device = next(model.model.parameters()).device
    example = model.tokenizer(["a short query", "another query"], ["a passage", "a longer passage than that"],
                              padding=True, truncation="longest_first", return_tensors="pt")
    args = tuple(example[name].to(device) for name in input_names)
    dynamic = {"inputs": tuple({0: torch.export.Dim.DYNAMIC, 1: torch.export.Dim.DYNAMIC} for _ in input_names)}
    # Eager attention exports as plain MatMul/Softmax, which ONNX Runtime runs ~25% faster than the
    # decomposed scaled_dot_product_attention (same logits to ~1e-7); the caller's model is restored.
    attention = getattr(model.model.config, "_attn_implementation", None)
    switch = attention not in (None, "eager") and hasattr(model.model, "set_attn_implementation")
    try:
        if switch:
            model.model.set_attn_implementation("eager")
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(wrapper, args, str(out_file), input_names=list(input_names), output_names=[OUTPUT_NAME],
                              dynamo=True, dynamic_shapes=dynamic, opset_version=OPSET, external_data=False,
                              verbose=False)
    finally:
        if switch:
            model.model.set_attn_implementation(attention)


def model_input_names(model: Any) -> tuple[str, ...]:
    """The inputs the tokenizer produces, in `INPUT_NAMES` order (no token_type_ids for RoBERTa-likes)."""
    produced = set(model.tokenizer.model_input_names)
    return tuple(name for name in INPUT_NAMES if name in produced)


def source_name(model: Any) -> str:
    return str(getattr(model.model, "name_or_path", "") or type(model.model).__name__)


def cache_key(model: Any, quantize: bool) -> str:
    """Hex key of (model name or path, config, weights fingerprint, max_length, recipe, exporter version)."""
    import torch

    digest = hashlib.sha256()
    identity = {"source": source_name(model), "config": model.model.config.to_json_string(use_diff=False),
                "tokenizer": type(model.tokenizer).__name__, "vocabulary": len(model.tokenizer),
                "max_length": int(model.max_seq_length), "quantize": quantize,
                "recipe": INT8_RECIPE if quantize else None, "exporter": exporter_version()}
    digest.update(json.dumps(identity, sort_keys=True).encode())
    for name, tensor in sorted(model.model.state_dict().items()):  # every weight, the head included
        flat = tensor.detach().cpu().contiguous().reshape(-1)
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)}".encode())
        digest.update(flat.view(dtype=torch.uint8).numpy())
    return digest.hexdigest()[:24]


class OnnxCrossEncoder:
    """Scores (query, passage) pairs with an exported cross-encoder on ONNX Runtime (CPU)."""

    def __init__(self, directory: Path, threads: int | None = None) -> None:
        """Open the finished export in `directory` (see `load` for exporting and caching)."""
        ort = import_onnxruntime()
        from transformers import AutoTokenizer

        manifest = ExportManifest.read(directory)
        if manifest is None:
            raise FileNotFoundError(f"no finished ONNX export in {directory} ({MANIFEST_FILE} or {MODEL_FILE} missing)")
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.inter_op_num_threads = 1
        if threads:
            options.intra_op_num_threads = threads
        self.directory = directory
        self.manifest = manifest
        self.tokenizer = AutoTokenizer.from_pretrained(str(directory))
        self.session = ort.InferenceSession(str(directory / MODEL_FILE), options, providers=["CPUExecutionProvider"])

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
        cache_dir = Path(cache_dir)
        entry = cache_dir / cache_key(model, quantize)
        if ExportManifest.read(entry) is None:
            scratch = Path(tempfile.mkdtemp(prefix=f".{entry.name}.", suffix=".tmp", dir=_mkdir(cache_dir)))
            try:
                export_cross_encoder(model, scratch, quantize=quantize)
                shutil.rmtree(entry, ignore_errors=True)  # an unfinished export under the final name
                try:
                    os.rename(scratch, entry)
                except OSError:  # another process finished the same export first: use theirs
                    if ExportManifest.read(entry) is None:
                        raise
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
        return cls(entry, threads)

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
            logits = self.session.run([OUTPUT_NAME], inputs)[0]  # (batch, 1)
            scores[batch] = logits[:, 0]
        return scores


def _load_seeded_cross_encoder(path: Path) -> Any:
    import torch
    from sentence_transformers import CrossEncoder

    from rag_core.retrieve.models import RANDOM_HEAD_SEED

    torch.manual_seed(RANDOM_HEAD_SEED)
    return CrossEncoder(str(path), num_labels=1, device="cpu", activation_fn=torch.nn.Identity())


def _mkdir(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def _write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    temporary.write_text(text)
    os.replace(temporary, path)
