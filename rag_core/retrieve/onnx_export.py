"""One exporter for every model run on ONNX Runtime: export a torch module to ONNX (fp32, or int8 with
dynamic quantization), cache the export in the store, and open it in an ONNX Runtime session.

A model is described by an ``ExportSpec``: the torch module to export (positional tensor inputs, one
output), the tokenizer saved beside it, its input and output names, and what identifies it for the
cache. ``rag_core.retrieve.rerank.onnx`` builds the cross-encoder's spec (logits) and
``rag_core.retrieve.embedding.onnx`` the embedding model's (the whole sentence-transformers module
chain: transformer, pooling, normalisation, as the model's modules config says).

Exporter: ``torch.onnx.export`` with the TorchScript tracer first (``dynamo=False``: 1.7 s for MiniLM-L6
against 17 s for the dynamo exporter, measured 2026-12-01 on a quiet 2-core machine), which is what
lets a store export its model at first use without a pause the user notices (fp32 only: int8 is
quantized from a dynamo graph, see ``export_fp32``). A trace can turn Python
control flow into constants of the example's shapes, so the traced graph is checked on a probe batch
of other shapes (``PROBE``: another batch size and sequence length) against the torch module, and
used only when they agree to ``TRACE_TOLERANCE``; otherwise (or when the tracer fails, or a later
torch drops it) the model is exported again with ``dynamo=True`` (needs the plain PyPI wheels
``onnxscript`` and ``onnx``). The manifest records which exporter made the file. sentence-transformers'
own ONNX backend is not used: it goes through optimum-onnx, which pins transformers below the
installed version. Attention is exported eager (plain MatMul/Softmax), which ONNX Runtime runs ~25%
faster than the decomposed scaled_dot_product_attention; the caller's model is restored afterwards.

int8 (``INT8_RECIPE``): ``quantize_dynamic`` with int8 weights and per-channel scales, MatMul and Gemm
only; activations are quantized per batch at run time, so an int8 result also depends on what it was
batched with (by a few 1e-3), and is not bit-reproducible across batchings. Measured alternatives are
listed at ``INT8_RECIPE``.

The cache: ``cache_dir/<key>/`` holds ``model.onnx``, the tokenizer files and ``export.json``; the key
hashes the spec's identity, every weight of the module (so the offline stand-in's seeded random head
is covered, and an unseeded one never hits), the quantization recipe and the exporter version (this
module's, torch's and onnxruntime's). An export is written in a temporary directory and renamed into
place, ``export.json`` last: a directory without it (a killed export) is never used.
An export whose ``export.json`` is missing, unreadable or describes another export, or whose
``model.onnx`` is missing, is exported again with a warning naming the file; a ``model.onnx`` ONNX
Runtime cannot load (truncated, overwritten) is a ``DamagedStore`` (exit 1) naming it and the repair
(``rag-pipeline repair``, which deletes every export ``export_problem`` finds damaged).

Left out: GPU execution providers (the installed onnxruntime is the CPU build), models over 2 GB
(ONNX external data), static (calibrated) quantization, loading without torch (the key fingerprints
the loaded weights), and pruning old cache entries (delete ``cache_dir`` to start over).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import shutil
import tempfile
import uuid
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

from rag_core.ingest.corpus import derived_damage

log = logging.getLogger(__name__)

EXPORTER_VERSION = 4  # bump when the export changes: old cache entries are then not used
MODEL_FILE = "model.onnx"
# The trace's check: a batch whose size and lengths differ from the export's example (2 pairs of a
# few words), compared with the torch module's output.
PROBE = (["what was the total revenue reported for the fiscal year ended in december", "cells", "a b c"],
         ["revenue rose twelve percent to four billion dollars driven by subscriptions in europe", "x",
          "the mitochondria produce most of the cell's supply of energy"])
TRACE_TOLERANCE = 1e-4
MANIFEST_FILE = "export.json"  # written last: its presence marks a finished export
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")  # those the tokenizer produces are used
OPSET = 18
# quantize_dynamic keyword arguments; part of the cache key. Measured on the sample golden queries
# (36 x 20 BM25 passages, seeded random-head MiniLM-L6 cross-encoder, mean Kendall tau against torch):
# all supported ops per-tensor 0.745; MatMul + Gemm per-tensor 0.763; per-channel 0.851, no slower:
# chosen. Per-channel with the FFN output projections kept fp32: 0.886, but a third of the linear
# FLOPs back in fp32. All ops (the word-embedding Gather too: a 4x smaller file) and reduce_range
# were no faster beyond noise on the loaded 2-core machine, and reduce_range lowers the cosine.
# Why int8 swaps near-ties (2026-12-01, quiet machine, spread-head stand-in of
# benchmarks/rerank_backends.py, score error std against torch in logits): ORT's dynamic path
# quantizes activations with one range per tensor, and BERT's [CLS] token carries values ~15x the
# median in a few channels (FFN input channel 99: 28 vs 2), so every other token gets coarse steps.
# Error std by group quantized alone: FFN in 0.14, FFN out 0.14, Q/K/V 0.08, attention out 0.04;
# all 0.23 (top-5 identical 75%). Tried, none meeting both targets (<= 45% of torch, top-5 >= 90%):
# SmoothQuant (alpha 0.5, all or FFN linears): no gain; outlier channels split off in fp32: error
# 0.11, 55-61% of torch; [CLS] row apart in fp32: 0.14, 89%, 55%; 8-bit weight-only MatMulNBits
# (block 32, int8 compute): 0.05, 92%, 72-79%; QAttention through the legacy exporter: 45% vs 47%,
# 0.22. A per-row activation range (emulated in torch: 0.10, 96%) is not in ORT's CPU kernels.
INT8_RECIPE: dict[str, Any] = {"per_channel": True, "op_types_to_quantize": ["MatMul", "Gemm"]}
# Before quantization: ONNX Runtime's transformer fusion (onnxruntime.transformers.optimizer). In the
# dynamo graph of a BERT it finds the Gelu (BiasGelu: 6 in MiniLM-L6), which ORT's own session-time
# fusions miss there, but no Attention pattern; measured on MiniLM-L6 embeddings: fp32 1.25x -> 1.41x
# torch, int8 2.34x -> 2.63x (one run, loaded machine). Outputs equal to ~1e-6. Part of the cache key.
FUSION: dict[str, Any] = {"model_type": "bert", "num_heads": 0, "hidden_size": 0, "opt_level": 0}
def register_runtimes(registry: Any, torch_target: str, onnx_target: str, model_setting: str) -> None:
    """Register a model's three runtimes in `registry` (the embedding or the re-rank backends):
    ``torch``, and ``onnx`` / ``onnx-int8`` (``quantize`` option) exported from `model_setting`."""
    registry.register("torch", torch_target, help="sentence-transformers on torch")
    registry.register("onnx", onnx_target, quantize=False,
                      help=f"ONNX Runtime, fp32, exported from {model_setting} once into the store")
    registry.register("onnx-int8", onnx_target, quantize=True,
                      help="ONNX Runtime, int8 dynamic quantization (INT8_RECIPE), exported once into the store")


class OnnxExportError(RuntimeError):
    """A model could not be exported to ONNX; the message names the model and the cause."""


@dataclass(frozen=True)
class ExportSpec:
    kind: str  # "cross-encoder" | "embedder": named in errors, part of the key
    source: str  # the model's name or path
    module: Any  # torch.nn.Module: forward(*inputs in input_names order) -> the one output
    tokenizer: Any  # saved beside the model
    max_length: int
    input_names: tuple[str, ...]
    output_name: str
    identity: Mapping[str, Any] = field(default_factory=dict)  # config, pooling...: JSON, part of the key


@dataclass(frozen=True)
class ExportManifest:
    source: str
    max_length: int
    input_names: tuple[str, ...]
    output_name: str
    quantized: bool
    fused: dict[str, int]  # fused operator -> count (empty: the fusion failed or found nothing)
    exporter: str  # this module's, torch's and onnxruntime's versions

    @classmethod
    def read(cls, directory: Path) -> "ExportManifest | None":
        """The manifest of a finished export in `directory`, or None (missing, unfinished, unreadable)."""
        try:
            fields_ = json.loads((directory / MANIFEST_FILE).read_text())
            manifest = cls(**{**fields_, "input_names": tuple(fields_["input_names"])})
        except (OSError, ValueError, TypeError, KeyError):
            return None
        return manifest if (directory / MODEL_FILE).is_file() else None

    def matches(self, spec: "ExportSpec", quantize: bool) -> bool:
        """Whether this manifest describes an export of `spec` (`quantize`: int8)."""
        return (self.source == spec.source and self.max_length == spec.max_length and self.quantized == quantize
                and self.input_names == tuple(spec.input_names) and self.output_name == spec.output_name)


def export_problem(directory: Path) -> tuple[Path, str] | None:
    """(the damaged file, why) when the export in `directory` (a finished one: exports are renamed
    into place whole) is damaged: ``export.json`` missing or not a manifest, or ``model.onnx``
    missing or not a whole ONNX model; None when it is intact."""
    manifest_path, model = directory / MANIFEST_FILE, directory / MODEL_FILE
    if not manifest_path.exists():
        return manifest_path, "missing"
    if not model.is_file():
        return model, "missing"
    if ExportManifest.read(directory) is None:
        return manifest_path, "not a complete export manifest"
    try:
        import onnx

        onnx.load(str(model), load_external_data=False)
    except ImportError:
        return None
    except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError and the like: not a model
        return model, f"not a whole ONNX model ({type(exc).__name__})"
    return None


def import_onnxruntime() -> Any:
    try:
        import onnxruntime
    except ImportError as exc:
        raise ImportError("the ONNX backends need onnxruntime, onnx and onnxscript: "
                          "pip install onnxruntime onnx onnxscript") from exc
    return onnxruntime


def exporter_version() -> str:
    import torch

    return f"rag_core.retrieve.onnx_export {EXPORTER_VERSION}, torch {torch.__version__}, onnxruntime {import_onnxruntime().__version__}"


def tokenizer_inputs(tokenizer: Any) -> tuple[str, ...]:
    """The inputs `tokenizer` produces, in `INPUT_NAMES` order (no token_type_ids for RoBERTa-likes)."""
    produced = set(tokenizer.model_input_names)
    return tuple(name for name in INPUT_NAMES if name in produced)


def cache_key(spec: ExportSpec, quantize: bool) -> str:
    """Hex key of (kind, source, identity, tokenizer, max_length, recipe, exporter version, weights)."""
    import torch

    digest = hashlib.sha256()
    identity = {"kind": spec.kind, "source": spec.source, "identity": dict(spec.identity),
                "tokenizer": type(spec.tokenizer).__name__, "vocabulary": len(spec.tokenizer),
                "max_length": spec.max_length, "quantize": quantize,
                "recipe": INT8_RECIPE if quantize else None, "fusion": FUSION, "exporter": exporter_version()}
    digest.update(json.dumps(identity, sort_keys=True, default=str).encode())
    for name, tensor in sorted(spec.module.state_dict().items()):  # every weight, a head included
        flat = tensor.detach().cpu().contiguous().reshape(-1)
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)}".encode())
        digest.update(flat.view(dtype=torch.uint8).numpy())
    return digest.hexdigest()[:24]


def load_or_export(spec: ExportSpec, cache_dir: Path, quantize: bool) -> Path:
    """The directory of the finished export of `spec` under ``cache_dir/<key>/``, exported now if missing."""
    import_onnxruntime()
    cache_dir = Path(cache_dir)
    entry = cache_dir / cache_key(spec, quantize)
    manifest = ExportManifest.read(entry)
    if manifest is not None and not manifest.matches(spec, quantize):
        log.warning("the store's file %s is damaged (it describes another export); exporting the model again",
                    entry / MANIFEST_FILE)
        manifest = None
    elif manifest is None and entry.exists():
        problem = export_problem(entry)
        if problem is not None:
            log.warning("the store's file %s is damaged (%s); exporting the model again", *problem)
    if manifest is None:
        cache_dir.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=f".{entry.name}.", suffix=".tmp", dir=cache_dir))
        try:
            export(spec, scratch, quantize=quantize)
            shutil.rmtree(entry, ignore_errors=True)  # an unfinished export under the final name
            try:
                os.rename(scratch, entry)
            except OSError:  # another process finished the same export first: use theirs
                if ExportManifest.read(entry) is None:
                    raise
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return entry


def export(spec: ExportSpec, out_dir: Path, *, quantize: bool) -> Path:
    """Export `spec` to ``out_dir/model.onnx`` (int8 when `quantize`), with its tokenizer and manifest
    beside it; returns the model file. Dynamic batch and sequence axes."""
    import_onnxruntime()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    fp32_file = out_dir / f".{MODEL_FILE}.{uuid.uuid4().hex}.fp32.tmp"
    fused_file = out_dir / f".{MODEL_FILE}.{uuid.uuid4().hex}.fused.tmp"
    int8_file = out_dir / f".{MODEL_FILE}.{uuid.uuid4().hex}.int8.tmp"
    previous_disable = logging.root.manager.disable
    logging.disable(logging.WARNING)  # the exporter's "torchvision is not installed", the quantizer's advice
    try:
        exporter = export_fp32(spec, fp32_file, trace=not quantize)
        fused = fuse(fp32_file, fused_file)
        fp32_model = fused_file if fused else fp32_file
        if quantize:
            from onnxruntime.quantization import QuantType, quantize_dynamic

            quantize_dynamic(fp32_model, int8_file, weight_type=QuantType.QInt8, **INT8_RECIPE)
        os.replace(int8_file if quantize else fp32_model, out_dir / MODEL_FILE)
        spec.tokenizer.save_pretrained(str(out_dir))
    except Exception as exc:
        raise OnnxExportError(f"cannot export the {spec.kind} {spec.source!r} to ONNX "
                              f"({type(exc).__name__}: {exc})") from exc
    finally:
        logging.disable(previous_disable)
        for temporary in (fp32_file, fused_file, int8_file):
            temporary.unlink(missing_ok=True)
    manifest = ExportManifest(spec.source, spec.max_length, spec.input_names, spec.output_name, quantize, fused,
                              f"{exporter_version()}, {exporter}")
    _write_atomically(out_dir / MANIFEST_FILE, json.dumps(asdict(manifest), indent=2))
    return out_dir / MODEL_FILE


def export_fp32(spec: ExportSpec, out_file: Path, trace: bool = True) -> str:
    """Write `spec`'s fp32 graph to `out_file`; returns the exporter used ("torchscript" or "dynamo").
    `trace` False: dynamo only (the int8 path: ONNX Runtime's fusions of a traced graph leave
    operators the quantizer cannot type, and ``INT8_RECIPE`` was measured on dynamo graphs)."""
    import torch

    example = spec.tokenizer(["a short query", "another query"], ["a passage", "a longer passage than that"],
                             padding=True, truncation="longest_first", return_tensors="pt")
    device = next(spec.module.parameters()).device
    args = tuple(example[name].to(device) for name in spec.input_names)
    switched = [(module, module.config._attn_implementation) for module in spec.module.modules()
                if hasattr(module, "set_attn_implementation") and getattr(module, "config", None) is not None
                and getattr(module.config, "_attn_implementation", None) not in (None, "eager")]
    try:
        for module, _ in switched:
            module.set_attn_implementation("eager")
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            if trace and _traced(spec, args, out_file, device):
                return "torchscript"
            dynamic = {"inputs": tuple({0: torch.export.Dim.DYNAMIC, 1: torch.export.Dim.DYNAMIC}
                                       for _ in spec.input_names)}
            torch.onnx.export(spec.module.eval(), args, str(out_file), input_names=list(spec.input_names),
                              output_names=[spec.output_name], dynamo=True, dynamic_shapes=dynamic,
                              opset_version=OPSET, external_data=False, verbose=False)
            return "dynamo"
    finally:
        for module, attention in switched:
            module.set_attn_implementation(attention)


def _traced(spec: ExportSpec, args: tuple[Any, ...], out_file: Path, device: Any) -> bool:
    """Export `spec` to `out_file` with the TorchScript tracer; whether the graph is usable (it agrees
    with torch on ``PROBE``). A failure or a disagreement is logged: the caller then uses dynamo."""
    import torch

    try:
        axes = {name: {0: "batch", 1: "sequence"} for name in spec.input_names}
        torch.onnx.export(spec.module.eval(), args, str(out_file), input_names=list(spec.input_names),
                          output_names=[spec.output_name], dynamo=False, dynamic_axes=axes,
                          opset_version=OPSET, verbose=False)
        if trace_agrees(spec, out_file, device):
            return True
        log.info("the traced ONNX graph of %s disagrees with torch on the probe batch; using dynamo", spec.source)
    except Exception as exc:  # noqa: BLE001 - the dynamo exporter is the fallback
        log.info("the TorchScript exporter failed on %s (%s); using dynamo", spec.source, exc)
    return False


def trace_agrees(spec: ExportSpec, model_file: Path, device: Any) -> bool:
    """Whether the graph in `model_file` gives the torch module's output on ``PROBE`` (to ``TRACE_TOLERANCE``)."""
    import numpy as np
    import torch

    probe = spec.tokenizer(*PROBE, padding=True, truncation="longest_first", return_tensors="pt")
    with torch.no_grad():
        expected = spec.module(*(probe[name].to(device) for name in spec.input_names)).float().cpu().numpy()
    session = import_onnxruntime().InferenceSession(str(model_file), providers=["CPUExecutionProvider"])
    got = session.run(None, {name: probe[name].numpy().astype(np.int64) for name in spec.input_names})[0]
    return got.shape == expected.shape and bool(np.allclose(got, expected, atol=TRACE_TOLERANCE, rtol=0))


def fuse(model_file: Path, out_file: Path) -> dict[str, int]:
    """Write `model_file` with ONNX Runtime's transformer fusions (``FUSION``) applied to `out_file`;
    the fused operators and their counts, or {} (nothing written) when none was found or the
    optimizer failed on this graph: the unfused graph is then used, and runs as well, only slower."""
    try:
        import onnx
        from onnxruntime.transformers import optimizer

        before = {node.op_type for node in onnx.load(str(model_file), load_external_data=False).graph.node}
        with contextlib.redirect_stdout(io.StringIO()):  # it prints "failed in shape inference"
            model = optimizer.optimize_model(str(model_file), **FUSION)
        fused = {name: count for name, count in sorted(model.get_fused_operator_statistics().items())
                 if count and name not in before}  # LayerNormalization is counted though already there
        if fused:
            model.save_model_to_file(str(out_file))
        return fused
    except Exception:  # noqa: BLE001 - an optimization, never a reason to fail the export
        return {}


def open_session(directory: Path, threads: int | None = None) -> tuple[Any, ExportManifest]:
    """(an ONNX Runtime CPU session on the finished export in `directory`, its manifest)."""
    ort = import_onnxruntime()
    manifest = ExportManifest.read(directory)
    if manifest is None:
        raise FileNotFoundError(f"no finished ONNX export in {directory} ({MANIFEST_FILE} or {MODEL_FILE} missing)")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.inter_op_num_threads = 1
    if threads:
        options.intra_op_num_threads = threads
    try:
        session = ort.InferenceSession(str(directory / MODEL_FILE), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 - ORT's InvalidProtobuf, Fail, InvalidGraph: a damaged file
        if isinstance(exc, MemoryError):
            raise
        cause = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        raise derived_damage(directory / MODEL_FILE, directory.parent.parent,
                             f"ONNX Runtime cannot load it: {cause}") from None
    return session, manifest


def _write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    temporary.write_text(text)
    os.replace(temporary, path)
