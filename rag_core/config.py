"""One frozen dataclass holds every setting; YAML files and CLI flags set them.

Precedence, lowest first: defaults, the YAML file, environment variables (models, LLM provider and
LLM timeout / retries only: ``ENV_OVERRIDES``), explicit overrides (CLI flags, notebook parameters).
Unknown keys are an error naming the key; every numeric setting is checked against its range (NaN
and infinity included) before anything runs.
Where the store lives is not a setting: it changes where results are kept, never what they are.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Mapping

import yaml

from rag_core.errors import ConfigError  # re-exported: rag_core.config.ConfigError
from rag_core.retrieve.tokenizer import TOKENIZERS
from rag_core.retrieve.vector_backends import is_valid_vector_store, valid_forms

DEFAULT_EMBED_MODEL = "BAAI/bge-small-en-v1.5"
DEFAULT_RERANK_MODEL = "cross-encoder/ms-marco-MiniLM-L6-v2"
DEFAULT_LLM_MODEL = "claude-sonnet-5-5"

MODES = ("dense", "bm25", "hybrid")
BM25_BACKENDS = ("bm25s", "rank_bm25")
LLM_PROVIDERS = ("anthropic", "openai")
RERANK_BACKENDS = ("torch", "onnx", "onnx-int8")
CHUNK_CONTEXTS = ("none", "title", "title_heading")
ROUTE_WHEN = ("named", "always")  # route_when: only questions naming a document, or every question
QUERY_EXPANSIONS = ("none", "rm3", "multi_query", "hyde")
# rrf: this project's RRF (weights optional); the others are ranx.fuse methods (rag_core.retrieve.fusion_ranx)
FUSIONS = ("rrf", "sum", "mnz", "max", "min", "med", "anz", "gmnz", "isr", "log_isr", "logn_isr", "rbc",
           "bordafuse", "condorcet", "wsum", "wmnz", "mixed", "w_bordafuse", "w_condorcet")
WEIGHTED_FUSIONS = ("rrf", "wsum", "wmnz", "mixed", "w_bordafuse", "w_condorcet")  # take fusion_weights
FUSION_NORMS = ("min-max", "max", "sum", "zmuv", "rank", "borda", "none")
EMBED_BACKENDS = ("torch", "onnx", "onnx-int8")

# setting -> environment variable that overrides it
ENV_OVERRIDES = {
    "embed_model": "RAG_EMBED_MODEL",
    "rerank_model": "RAG_RERANK_MODEL",
    "llm_model": "RAG_LLM_MODEL",
    "llm_provider": "LLM_PROVIDER",
    "llm_timeout_s": "RAG_LLM_TIMEOUT_S",
    "llm_max_retries": "RAG_LLM_MAX_RETRIES",
}


@dataclass(frozen=True)
class RagConfig:
    # chunking (sizes count words)
    chunk_size: int = 512
    overlap: int = 64
    per_page: bool = False
    # extraction, context and metadata (rag_core.ingest.pdf_extract, rag_core.retrieve.context, rag_core.ingest.metadata)
    extract_tables: bool = False  # PDF tables as Markdown rows with their header cells
    chunk_context: str = "none"  # none | title | title_heading: prefix of the embedded and BM25-indexed text
    metadata_pattern: str = ""  # regex with named groups over document ids, e.g. (?P<year>\d{4})
    route_docs: int = 0  # retrieve only within the best N documents (rag_core.retrieve.routing); 0 = off
    route_when: str = "named"  # named: route only questions sharing a word with some document's name | always
    # retrieval
    mode: str = "hybrid"  # dense | bm25 | hybrid
    k: int = 5  # passages kept at the end
    retrieve_depth: int = 20  # candidates taken from each retriever
    rrf_k: int = 60
    rerank_depth: int = 20  # fused candidates re-scored by the cross-encoder; 0 = no re-ranking
    fusion: str = "rrf"  # rrf | a ranx.fuse method (FUSIONS)
    fusion_norm: str = "min-max"  # score normalisation before a ranx fusion (FUSION_NORMS)
    fusion_weights: tuple[float, ...] = ()  # per retriever (dense, bm25); () = equal
    # query expansion
    query_expansion: str = "none"  # none | rm3 | multi_query | hyde
    rm3_docs: int = 10  # feedback documents (top BM25 chunks)
    rm3_terms: int = 10  # expansion terms kept
    rm3_weight: float = 0.5  # weight of the original query in the expanded one
    multi_query_n: int = 3  # rephrasings the LLM writes
    # parent-child chunks
    child_size: int = 0  # words per searched child chunk inside each chunk_size parent; 0 = off
    # BM25
    bm25_backend: str = "bm25s"  # bm25s | rank_bm25
    tokenizer: str = "stem"  # stem | simple | whitespace (see rag_core.retrieve.tokenizer)
    bm25_k1: float = 1.5
    bm25_b: float = 0.75
    # models
    embed_model: str = DEFAULT_EMBED_MODEL
    rerank_model: str = DEFAULT_RERANK_MODEL
    rerank_backend: str = "torch"  # torch | onnx | onnx-int8 (ONNX Runtime, exported from rerank_model)
    embed_backend: str = "torch"  # torch | onnx | onnx-int8 (ONNX Runtime, exported from embed_model)
    embed_batch_size: int = 32
    model_fallback: bool = True  # offline: fall back to the packaged MiniLM, announced and recorded
    # vector store (rag_core.retrieve.vector_backends): chroma | chroma+http://HOST:PORT | qdrant:PATH | qdrant+http://HOST:PORT
    vector_store: str = "chroma"
    vector_store_timeout_s: float = 60.0  # per request to a vector store server
    # generation
    llm_provider: str = "anthropic"
    llm_model: str = DEFAULT_LLM_MODEL
    max_answer_tokens: int = 1024
    llm_timeout_s: float = 20.0  # per request; with llm_max_retries 2, a query waits about 60 s at most
    llm_max_retries: int = 2  # retries of a timed-out, rate-limited, 5xx or malformed request
    min_rerank_score: float = 0.0  # no-answer threshold on the cross-encoder score (logit)
    min_retriever_agreement: int = 2  # without re-ranker: a passage must be found by this many retrievers
    # evaluation
    metrics_k: tuple[int, ...] = (5, 10)
    tracing: bool = True  # one MLflow trace per evaluated query (rag_core.workbench.traces)

    def __post_init__(self) -> None:
        # Each message starts with the setting's name; NaN passes no comparison, so finiteness comes first.
        checks = [
            *((math.isfinite(getattr(self, name)), f"{name} must be a finite number")
              for name in ("bm25_k1", "bm25_b", "min_rerank_score", "llm_timeout_s", "vector_store_timeout_s",
                           "rm3_weight")),
            (self.chunk_size > 0, "chunk_size must be > 0"),
            (0 <= self.overlap < self.chunk_size, "overlap must be >= 0 and < chunk_size"),
            (self.mode in MODES, f"mode must be one of {', '.join(MODES)}"),
            (self.chunk_context in CHUNK_CONTEXTS, f"chunk_context must be one of {', '.join(CHUNK_CONTEXTS)}"),
            (self.route_docs >= 0, "route_docs must be >= 0 (0 = off)"),
            (self.route_when in ROUTE_WHEN, f"route_when must be one of {', '.join(ROUTE_WHEN)}"),
            (self.k > 0, "k must be > 0"),
            (self.retrieve_depth > 0, "retrieve_depth must be > 0"),
            (self.rrf_k >= 0, "rrf_k must be >= 0"),
            (self.rerank_depth >= 0, "rerank_depth must be >= 0"),
            (self.fusion in FUSIONS, f"fusion must be one of {', '.join(FUSIONS)}"),
            (self.fusion_norm in FUSION_NORMS, f"fusion_norm must be one of {', '.join(FUSION_NORMS)}"),
            (all(math.isfinite(w) and w >= 0 for w in self.fusion_weights) and len(self.fusion_weights) in (0, 2),
             "fusion_weights must be two finite numbers >= 0 (dense, bm25), or empty"),
            (not self.fusion_weights or self.fusion in WEIGHTED_FUSIONS,
             f"fusion_weights apply to fusion {', '.join(WEIGHTED_FUSIONS)} only, not {self.fusion}"),
            (self.query_expansion in QUERY_EXPANSIONS, f"query_expansion must be one of {', '.join(QUERY_EXPANSIONS)}"),
            (self.query_expansion != "hyde" or self.mode != "bm25", "mode must be dense or hybrid for query_expansion hyde (it embeds a passage)"),
            (self.query_expansion != "rm3" or self.mode != "dense", "query_expansion rm3 expands the BM25 query: it needs mode bm25 or hybrid"),
            (self.rm3_docs > 0, "rm3_docs must be > 0"),
            (self.rm3_terms > 0, "rm3_terms must be > 0"),
            (0 <= self.rm3_weight <= 1, "rm3_weight must be between 0 and 1"),
            (self.multi_query_n > 0, "multi_query_n must be > 0"),
            (0 <= self.child_size < self.chunk_size or self.child_size == 0, "child_size must be 0 (off) or > 0 and < chunk_size"),
            (self.tokenizer in TOKENIZERS, f"tokenizer must be one of {', '.join(TOKENIZERS)}"),
            (self.bm25_backend in BM25_BACKENDS, f"bm25_backend must be one of {', '.join(BM25_BACKENDS)}"),
            (self.rerank_backend in RERANK_BACKENDS, f"rerank_backend must be one of {', '.join(RERANK_BACKENDS)}"),
            (self.embed_backend in EMBED_BACKENDS, f"embed_backend must be one of {', '.join(EMBED_BACKENDS)}"),
            (self.bm25_k1 >= 0, "bm25_k1 must be >= 0"),
            (0 <= self.bm25_b <= 1, "bm25_b must be between 0 and 1"),
            (self.embed_batch_size > 0, "embed_batch_size must be > 0"),
            (is_valid_vector_store(self.vector_store), f"vector_store must be one of: {valid_forms()}"),
            (self.vector_store_timeout_s > 0, "vector_store_timeout_s must be > 0 (seconds)"),
            (self.llm_provider in LLM_PROVIDERS, f"llm_provider must be one of {', '.join(LLM_PROVIDERS)}"),
            (self.max_answer_tokens > 0, "max_answer_tokens must be > 0"),
            (self.llm_timeout_s > 0, "llm_timeout_s must be > 0 (seconds)"),
            (self.llm_max_retries >= 0, "llm_max_retries must be >= 0"),
            (self.min_retriever_agreement >= 0, "min_retriever_agreement must be >= 0"),
            (bool(self.metrics_k) and all(k > 0 for k in self.metrics_k), "metrics_k must hold positive integers"),
            (isinstance(self.tracing, bool), "tracing must be true or false"),
        ]
        for ok, message in checks:
            if not ok:
                setting = message.split()[0]
                raise ConfigError(f"{message}, got {getattr(self, setting)!r}")
        if self.metadata_pattern:
            from rag_core.ingest.metadata import check_pattern

            problem = check_pattern(self.metadata_pattern)
            if problem:
                raise ConfigError(f"metadata_pattern {problem}, got {self.metadata_pattern!r}")

    # --- building ---------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, values: Mapping[str, Any], *, where: str = "config") -> "RagConfig":
        known = {f.name: f for f in fields(cls)}
        unknown = [key for key in values if key not in known]
        if unknown:
            raise ConfigError(
                f"unknown setting {unknown[0]!r} in {where}; valid settings: {', '.join(sorted(known))}"
            )
        return cls(**{key: _coerce(known[key], value, where) for key, value in values.items()})

    def replace(self, **changes: Any) -> "RagConfig":
        merged = {**self.as_dict(), **changes}
        return RagConfig.from_dict(merged)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def as_params(self) -> dict[str, str]:
        """Flat string params for MLflow (tuples joined with commas)."""
        return {
            key: ",".join(map(str, value)) if isinstance(value, tuple) else str(value)
            for key, value in self.as_dict().items()
        }

    def chunking_key(self) -> dict[str, Any]:
        key = {"chunk_size": self.chunk_size, "overlap": self.overlap, "per_page": self.per_page}
        if self.child_size:  # only when on, so the keys of existing stores stay as they were
            key["child_size"] = self.child_size
        return key


# One line per setting, for `--help`.
SETTING_HELP = {
    "chunk_size": "chunk length in words",
    "overlap": "words repeated from the previous chunk",
    "per_page": "chunk inside pages instead of across them",
    "extract_tables": "write PDF tables as Markdown rows with their header cells (PyMuPDF find_tables; slow, cached)",
    "chunk_context": "prefix the indexed text of each chunk: none | title | title_heading (shown text unchanged)",
    "metadata_pattern": "regex with named groups over document ids giving metadata, e.g. (?P<company>[^_]+)_(?P<year>\\d{4})",
    "route_docs": "first rank documents, then retrieve only within the best N (0 = off)",
    "route_when": "named: route only questions that share a word with some document's name (title, metadata); "
                  "others search every document | always",
    "mode": "retrieval: dense | bm25 | hybrid",
    "k": "passages returned (and given to the LLM)",
    "retrieve_depth": "candidates taken from each retriever",
    "rrf_k": "Reciprocal Rank Fusion constant",
    "rerank_depth": "fused candidates re-scored by the cross-encoder (0 = off)",
    "fusion": "how dense and BM25 lists merge: rrf, or a ranx method (wsum, wmnz, sum, mnz, max, ...)",
    "fusion_norm": "score normalisation before a ranx fusion: min-max | zmuv | max | sum | rank | borda | none",
    "fusion_weights": "weights of the dense and BM25 lists, comma-separated (empty: equal); see tune-fusion",
    "query_expansion": "none | rm3 (BM25 pseudo-relevance feedback) | multi_query | hyde (these two need an LLM key)",
    "rm3_docs": "RM3: top BM25 chunks used as feedback",
    "rm3_terms": "RM3: expansion terms kept",
    "rm3_weight": "RM3: weight of the original query (0..1) against the feedback terms",
    "multi_query_n": "multi_query: rephrasings the LLM writes (each retrieved, fused with RRF)",
    "child_size": "parent-child: words per searched child chunk (0 = off); the chunk_size parent is returned",
    "bm25_backend": "bm25s | rank_bm25",
    "tokenizer": "BM25 tokenizer: stem | simple | whitespace",
    "bm25_k1": "BM25 term-frequency saturation",
    "bm25_b": "BM25 length normalisation",
    "embed_model": "embedding model, hub name or local directory (env RAG_EMBED_MODEL)",
    "rerank_model": "cross-encoder, hub name or local directory (env RAG_RERANK_MODEL)",
    "rerank_backend": "cross-encoder runtime: torch | onnx | onnx-int8 (ONNX Runtime, exported once into the store)",
    "embed_backend": "embedding runtime: torch | onnx | onnx-int8 (ONNX Runtime, exported once into the store)",
    "embed_batch_size": "texts per embedding batch",
    "model_fallback": "offline: fall back to the packaged MiniLM (announced, recorded)",
    "vector_store": "where dense vectors live: chroma (embedded) | chroma+http://HOST:PORT | qdrant:PATH | "
                    "qdrant+http://HOST:PORT",
    "vector_store_timeout_s": "seconds to wait for one request to a vector store server",
    "llm_provider": "anthropic | openai (env LLM_PROVIDER)",
    "llm_model": "LLM model name (env RAG_LLM_MODEL)",
    "max_answer_tokens": "maximum tokens in a generated answer",
    "llm_timeout_s": "seconds to wait for one LLM request (env RAG_LLM_TIMEOUT_S)",
    "llm_max_retries": "retries of a timed-out, rate-limited or failed LLM request (env RAG_LLM_MAX_RETRIES)",
    "min_rerank_score": "no-answer threshold on the cross-encoder logit",
    "min_retriever_agreement": "without re-ranking: retrievers that must find a passage for an answer",
    "metrics_k": "K values for Recall@K / nDCG@K / hit rate, comma-separated",
    "tracing": "log each evaluated query as an MLflow trace with a span per stage (--no-tracing: off)",
}


def setting_names() -> list[str]:
    return [f.name for f in fields(RagConfig)]


def load_config(path: str | Path | None = None, overrides: Mapping[str, Any] | None = None) -> RagConfig:
    """Defaults < YAML file < environment (models, provider) < overrides."""
    values: dict[str, Any] = {}
    if path is not None:
        values.update(read_yaml_settings(path))
    for key, env_name in ENV_OVERRIDES.items():
        if os.environ.get(env_name):
            values[key] = os.environ[env_name]
    values.update({key: value for key, value in (overrides or {}).items() if value is not None})
    return RagConfig.from_dict(values, where=str(path) if path else "settings")


def read_yaml_mapping(path: str | Path, expected: str = "setting: value") -> dict[str, Any]:
    """A YAML file that must hold a mapping; errors name the file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"file not found: {path}")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a mapping of {expected}")
    return data


def read_yaml_settings(path: str | Path) -> dict[str, Any]:
    data = read_yaml_mapping(path)
    RagConfig.from_dict(data, where=str(path))  # unknown keys and bad values, named with the file
    return data


def _coerce(field: dataclasses.Field, value: Any, where: str) -> Any:
    """Turn YAML/CLI values into the field's type, with an error naming the key."""
    kind = field.type if isinstance(field.type, str) else getattr(field.type, "__name__", str(field.type))
    try:
        if kind == "bool":
            if isinstance(value, str):
                if value.lower() in ("true", "1", "yes", "on"):
                    return True
                if value.lower() in ("false", "0", "no", "off"):
                    return False
                raise ValueError(value)
            return bool(value)
        if kind == "int":
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError(value)
            return int(value)
        if kind == "float":
            return float(value)
        if kind.startswith("tuple"):
            items = [item for item in value.split(",") if item.strip()] if isinstance(value, str) else list(value)
            return tuple((float if "float" in kind else int)(item) for item in items)
        return str(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: int(inf)
        raise ConfigError(f"setting {field.name!r} in {where}: cannot use {value!r} as {kind}") from None
