"""What a fine-tuned model was trained on, and what its weights are, as small fingerprints.

A model directory written by ``rag-pipeline finetune`` holds ``training_queries.json``: the
fingerprint of every training (and validation) query, ``sha256`` of its normalised text (Unicode
NFKC, case-folded, whitespace collapsed, outer punctuation stripped), so that the same question typed
with other spacing or capitals is still recognised, while the questions themselves are not stored.
``check_trained_on`` compares the queries an evaluation scores with that file; ``eval`` warns when
they overlap (scores on queries a model was trained on are optimistic).

``weights_fingerprint`` hashes the files that decide what a model computes (weights, config,
tokenizer), so that caches keyed by a model's name can tell two trainings written into the same
directory apart (``model_cache_name``). This module imports nothing from ``rag_core``: the retrieval
layer can call it without depending on the training code.
Left out: near-duplicate queries (paraphrases are not caught), signing the file.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

TRAINING_FILE = "training_queries.json"
FORMAT_VERSION = 1
# Files whose bytes decide the model's outputs; README, model cards and training state are left out.
WEIGHT_PATTERNS = ("*.safetensors", "*.bin", "*.onnx", "config.json", "tokenizer.json", "vocab.txt",
                   "tokenizer_config.json", "special_tokens_map.json", "modules.json", "sentence_bert_config.json",
                   "config_sentence_transformers.json", "1_Pooling/config.json")


def normalise_query(text: str) -> str:
    """NFKC, case-folded, runs of whitespace as one space, punctuation at either end removed."""
    folded = " ".join(unicodedata.normalize("NFKC", text).casefold().split())
    return re.sub(r"^[\W_]+|[\W_]+$", "", folded)


def query_fingerprint(text: str) -> str:
    return hashlib.sha256(normalise_query(text).encode("utf-8")).hexdigest()[:32]


def write_training_queries(model_dir: str | Path, queries: Iterable[str], **details: Any) -> Path:
    """Record the fingerprints of `queries` (the texts a model was trained or validated on) in
    ``model_dir/training_queries.json``, with `details` (source, split, counts) beside them."""
    fingerprints = sorted({query_fingerprint(text) for text in queries})
    path = Path(model_dir) / TRAINING_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"format_version": FORMAT_VERSION, "normalisation": "nfkc-casefold-whitespace-strip-punctuation",
               "hash": "sha256[:32]", **details, "queries": len(fingerprints), "fingerprints": fingerprints}
    path.write_text(json.dumps(payload, indent=1, sort_keys=True))
    return path


def training_fingerprints(model_dir: str | Path) -> frozenset[str] | None:
    """The training-query fingerprints recorded in `model_dir`, or None when it records none
    (a hub name, a model not trained by this workbench)."""
    path = Path(model_dir) / TRAINING_FILE
    try:
        return frozenset(json.loads(path.read_text())["fingerprints"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


@dataclass(frozen=True)
class TrainedOn:
    model: str
    recorded: bool  # whether the model records its training queries at all
    checked: int  # queries compared
    overlap: tuple[str, ...]  # ids of the checked queries the model was trained on

    def warning(self) -> str | None:
        """One line for the user when the model was trained on some of the checked queries."""
        if not self.overlap:
            return None
        shown = ", ".join(self.overlap[:5]) + (", ..." if len(self.overlap) > 5 else "")
        return (f"{self.model} was trained on {len(self.overlap)} of the {self.checked} queries scored here "
                f"({shown}): their scores are optimistic; evaluate on queries held out from its training")


def check_trained_on(model_dir: str | Path, queries: Mapping[str, str] | Iterable[str]) -> TrainedOn:
    """Which of `queries` (query id -> text, or bare texts, which then name themselves) `model_dir`
    was trained on, by the fingerprints it recorded; no overlap when it recorded none."""
    items = dict(queries) if isinstance(queries, Mapping) else {text: text for text in queries}
    recorded = training_fingerprints(model_dir)
    overlap = () if recorded is None else tuple(
        query_id for query_id, text in items.items() if query_fingerprint(text) in recorded)
    return TrainedOn(str(model_dir), recorded is not None, len(items), overlap)


def trained_on_warnings(models: Iterable[str], queries: Mapping[str, str]) -> list[str]:
    """A warning per model (names or directories; names that are not folders are skipped) that was
    trained on some of `queries`."""
    warnings = []
    for model in dict.fromkeys(models):
        if model and Path(model).is_dir():
            line = check_trained_on(model, queries).warning()
            if line:
                warnings.append(line)
    return warnings


def weights_fingerprint(model_dir: str | Path) -> str | None:
    """sha256 over the names and bytes of the files that decide a model's outputs (``WEIGHT_PATTERNS``),
    or None when `model_dir` is not a folder. Cached per (path, size, modification time) of those files."""
    directory = Path(model_dir)
    if not directory.is_dir():
        return None
    files = sorted({path for pattern in WEIGHT_PATTERNS for path in directory.glob(pattern) if path.is_file()})
    stamp = tuple((str(path), path.stat().st_size, path.stat().st_mtime_ns) for path in files)
    return _hash_files(stamp)


@functools.lru_cache(maxsize=64)
def _hash_files(stamp: tuple[tuple[str, int, int], ...]) -> str:
    digest = hashlib.sha256()
    for path, _, _ in stamp:
        digest.update(Path(path).name.encode() + b"\0")
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:16]


def model_cache_name(name: str, used: str) -> str:
    """The key caches and dense collections should use for a model asked for as `name` and recorded as
    `used`: `used` itself for a hub name, plus ``@<weights fingerprint>`` for a local folder, so that a
    model trained again into the same folder never reuses the vectors or scores of the old one."""
    fingerprint = weights_fingerprint(name)
    return f"{used} @{fingerprint}" if fingerprint else used
