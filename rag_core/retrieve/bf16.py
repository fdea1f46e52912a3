"""bf16 on torch: whether the hardware runs it natively, the autocast that runs a model in it, and
the agreement check a bf16 backend passes at first use before it replaces fp32.

Hardware: a CUDA device that supports bf16 (``torch.cuda.is_bf16_supported``), or an x86 CPU with
``avx512_bf16`` or ``amx_bf16`` (Linux: ``/proc/cpuinfo``). Elsewhere bf16 is emulated (slower than
fp32, not faster), so the bf16 backends fall back to fp32, announced.

The check (``agreement``): the model embeds (or scores) a small fixed sample (``SAMPLE_PASSAGES``,
``SAMPLE_QUERIES``: distinct topics, so that the fp32 ranking has no near-ties) in fp32 and in bf16;
bf16 is used only when every passage's cosine to fp32 is >= ``MIN_COSINE`` and every query ranks
the passages' top ``TOP_K`` the same (the same passages in the same order). A failure is announced on
stderr in one line, once per process, and the backend runs fp32. Measured on this CPU (packaged MiniLM): cosine >= 0.998.
A model is checked once per process (the figures are kept with the loaded model; the verdict is taken
from them at each use): a sweep opens an embedder per chunking, and each check costs about 0.1 s.
Left out: fp16 on CPUs (no native kernels), bf16 on Apple MPS.
"""

from __future__ import annotations

import contextlib
import logging
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

log = logging.getLogger(__name__)
MIN_COSINE = 0.99
TOP_K = 3
CPU_FLAGS = ("avx512_bf16", "amx_bf16")
CPUINFO = Path("/proc/cpuinfo")
_CHECKED: "weakref.WeakKeyDictionary[Any, dict[tuple[str, str], Agreement]]" = weakref.WeakKeyDictionary()

SAMPLE_PASSAGES = (
    "The mitochondria produce most of the cell's supply of adenosine triphosphate through respiration.",
    "Quarterly revenue rose 12% to $4.2 billion, driven by higher subscription sales in Europe.",
    "The Treaty of Westphalia ended the Thirty Years' War in 1648 and reshaped European borders.",
    "To reset the router, hold the recessed button for ten seconds until the light blinks amber.",
    "Photosynthesis converts light energy into chemical energy stored in glucose molecules.",
    "The central bank raised its benchmark interest rate by a quarter point to curb inflation.",
    "A sonnet has fourteen lines, traditionally written in iambic pentameter with a set rhyme scheme.",
    "Knead the dough for eight minutes, then let it rise in a warm place until doubled in size.",
    "Black holes form when massive stars collapse under their own gravity at the end of their lives.",
    "The defendant appealed the verdict, arguing that the jury instructions were misleading.",
    "Regular aerobic exercise lowers resting heart rate and improves insulin sensitivity.",
    "Python lists are dynamic arrays; appending an element takes amortised constant time.",
)
SAMPLE_QUERIES = (
    "how do cells make energy",
    "company sales growth last quarter",
    "when did the thirty years war end",
    "interest rates and inflation policy",
    "how to bake bread",
)


@dataclass(frozen=True)
class Agreement:
    min_cosine: float | None  # lowest per-passage cosine to fp32 (None where scores, not vectors, are compared)
    ranks_agree: int  # queries whose top TOP_K passages are the same, in the same order
    queries: int

    @property
    def passed(self) -> bool:
        return (self.min_cosine is None or self.min_cosine >= MIN_COSINE) and self.ranks_agree == self.queries

    def describe(self) -> str:
        cosine = "" if self.min_cosine is None else f"min cosine {self.min_cosine:.4f} (>= {MIN_COSINE}), "
        return f"{cosine}top-{TOP_K} agree on {self.ranks_agree}/{self.queries} queries (all needed)"


def cpu_has_bf16(cpuinfo: Path = CPUINFO) -> bool:
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return False
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    return any(flag in flags for flag in CPU_FLAGS)


def missing_bf16(device: str) -> str | None:
    """None when `device` ("cpu", "cuda", "cuda:0"...) runs bf16 natively, else why not."""
    import torch

    if device.startswith("cuda"):
        return None if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "this GPU has no bf16"
    if device == "cpu":
        return None if cpu_has_bf16() else f"this CPU has none of {', '.join(CPU_FLAGS)}"
    return f"no bf16 backend for device {device}"


@contextlib.contextmanager
def autocast(device: str) -> Iterator[None]:
    import torch

    with torch.autocast(device.split(":")[0], dtype=torch.bfloat16):
        yield


def agreement(reference: np.ndarray, fast: np.ndarray, n_queries: int, vectors: bool = True) -> Agreement:
    """Compare fp32 (`reference`) with bf16 (`fast`). Vectors: rows are `n_queries` query vectors then
    the passages' (unit vectors). Scores (`vectors=False`): a (queries, passages) score matrix each."""
    if vectors:
        cosine = np.sum(reference[n_queries:] * fast[n_queries:], axis=1)
        min_cosine = float(cosine.min())
        reference = reference[:n_queries] @ reference[n_queries:].T
        fast = fast[:n_queries] @ fast[n_queries:].T
    else:
        min_cosine = None
    top = lambda scores: np.argsort(-scores, axis=1, kind="stable")[:, :TOP_K]  # noqa: E731
    ranks_agree = int(np.sum(np.all(top(reference) == top(fast), axis=1)))
    return Agreement(min_cosine, ranks_agree, n_queries)


_ANNOUNCED: set[str] = set()  # refusals this process has printed


def first_use(what: str, device: str, check: Callable[[], Agreement], model: Any) -> Agreement | None:
    """The check's result when `device` has bf16 and it passes; else None, logged as a warning in one
    line naming `what` and why (fp32 runs instead). `check` runs once per loaded `model` and `what`."""
    missing = missing_bf16(device)
    result = None
    if missing is None:
        checked = _CHECKED.setdefault(model, {})
        result = checked[what, device] = checked.get((what, device)) or check()
    if result is not None and not result.passed:
        missing = f"disagrees with fp32: {result.describe()}"
    if missing:
        line = f"{what}: bf16 refused ({missing}); running fp32"
        if line not in _ANNOUNCED:  # a demo opens an embedder per question and per chunking: said once
            _ANNOUNCED.add(line)
            log.warning("%s", line)
        return None
    return result


def model_device(model: Any) -> str:
    return str(next(model.parameters()).device)


__all__ = ["Agreement", "MIN_COSINE", "SAMPLE_PASSAGES", "SAMPLE_QUERIES", "TOP_K", "agreement", "first_use",
           "autocast", "cpu_has_bf16", "missing_bf16", "model_device"]
