"""First-stage retrievers: the registry (``RETRIEVERS``), the built-ins (``bm25``, ``dense``, and ``page_bm25``,
``page_dense``: whole pages, ``rag_core.retrieve.retrievers.pages``) and the
``mode`` setting that chooses them.

``mode`` names one retriever or a comma-separated list of them, each with an optional weight
(``bm25``, ``bm25,mine``, ``dense:0.7,bm25:0.3``); ``hybrid`` is shorthand for ``dense,bm25``. With
several retrievers their lists are fused by ``fusion``. Weights come from the list, or from
``fusion_weights`` in list order (for ``dense``, ``bm25`` and ``hybrid``: ``[w_dense, w_bm25]``, as
before lists existed). In YAML the list may also be written as a list or a mapping of name: weight.

A retriever registers with its settings::

    from rag_core.components import Setting
    from rag_core.retrieve.retrievers import RETRIEVERS, Retriever

    @RETRIEVERS.register("mine", help="...", settings=[Setting("mine_depth", int, 3, "...", minimum=1)])
    class MyRetriever(Retriever): ...   # build(chunks) -> BuildStats | None, search(query, depth, allowed_doc_ids)

Left out: retrievers chained (one re-ranking another's list) below the re-ranker.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from rag_core.components import SETTINGS, Registry, Setting, did_you_mean
from rag_core.retrieve.build_stats import BuildStats
from rag_core.retrieve.retrievers.base import (RETRIEVERS, ChunkSet, Query, Ranked, Resources, Retriever,
                                               checked_hits, checked_ranked, context_key, digest_key)
from rag_core.retrieve.tokenizer import TOKENIZERS

if TYPE_CHECKING:
    from rag_core.components.config_fields import ConfigFields

__all__ = ["BM25_BACKENDS", "BuildStats", "RETRIEVERS", "SHORTHANDS", "ChunkSet", "Query", "Ranked", "Resources", "Retriever",
           "RetrieverChoice", "checked_hits", "checked_ranked", "context_key", "digest_key", "parse_mode", "retriever_choices",
           "uses_embedder"]

SHORTHANDS = {"hybrid": ("dense", "bm25")}  # mode names that stand for a list of retrievers
BUILT_IN_MODES = ("dense", "bm25", "hybrid")  # where fusion_weights are [w_dense, w_bm25]


@dataclass(frozen=True)
class RetrieverChoice:
    name: str
    weight: float | None = None  # its weight in the fusion (None: equal weights)


def parse_mode(mode: str) -> tuple[RetrieverChoice, ...]:
    """The retrievers `mode` names, in order; ``ValueError`` saying what is wrong with its form."""
    if mode in SHORTHANDS:
        return tuple(RetrieverChoice(name) for name in SHORTHANDS[mode])
    choices = []
    for item in (part.strip() for part in str(mode).split(",")):
        if not item:
            continue
        name, separator, weight = (text.strip() for text in item.partition(":"))
        value = None
        if separator:
            try:
                value = float(weight)
            except ValueError:
                raise ValueError(f"the weight {weight!r} of {name!r} is not a number") from None
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"the weight of {name!r} must be a finite number >= 0")
        choices.append(RetrieverChoice(name, value))
    names = [choice.name for choice in choices]
    if not names:
        raise ValueError("no retriever is named")
    if len(set(names)) != len(names):
        raise ValueError("a retriever is named twice")
    if len({choice.weight is None for choice in choices}) > 1:
        raise ValueError("some retrievers have a weight and others not")
    return tuple(choices)


def _mode_value(value: Any) -> str:
    """YAML forms of ``mode``: a string, a list of names (or name: weight mappings), a mapping name: weight."""
    if isinstance(value, Mapping):
        return ",".join(f"{name}:{weight}" for name, weight in value.items())
    if isinstance(value, (list, tuple)):
        return ",".join(_mode_value(item) for item in value)
    if isinstance(value, (bool, int, float)):
        raise ValueError(value)
    return str(value).strip()


def _mode_problem(mode: str) -> str | None:
    registered = RETRIEVERS.names()
    expected = (f"must be one of {', '.join((*registered, *SHORTHANDS))} or a comma-separated list of retrievers "
                f"({', '.join(registered)}), each with an optional :weight")
    try:
        choices = parse_mode(mode)
    except ValueError as exc:
        return f"{expected} ({exc})"
    unknown = [choice.name for choice in choices if choice.name not in registered]
    if unknown:
        return f"{expected}; unknown retriever {unknown[0]!r}{did_you_mean(unknown[0], [*registered, *SHORTHANDS])}"
    return None


def retriever_choices(config: ConfigFields) -> tuple[RetrieverChoice, ...]:
    """The retrievers a config runs, with their weights (from ``mode``, else ``fusion_weights``)."""
    choices = parse_mode(config.mode)
    weights = tuple(config.fusion_weights)
    if len(choices) == 1:  # nothing to fuse: weights do not apply
        return (RetrieverChoice(choices[0].name),)
    if not weights or any(choice.weight is not None for choice in choices):
        return choices
    return tuple(RetrieverChoice(choice.name, weight) for choice, weight in zip(choices, weights))


RETRIEVERS.chosen = lambda config: tuple(choice.name for choice in parse_mode(config.mode))  # stages' keys


def uses_embedder(config: ConfigFields) -> bool:
    """Whether a retriever of the config searches with the query's embedding (routing then uses it too)."""
    return any(RETRIEVERS.get(choice.name).options.get("embeds_query") for choice in parse_mode(config.mode))


SETTINGS.declare(Setting("mode", str, "hybrid", "retrievers: dense | bm25 | hybrid (= dense,bm25), or a comma-separated "
                         "list of registered retrievers, each with an optional :weight (bm25,mine; dense:0.7,bm25:0.3); "
                         "several are fused by fusion", rule=_mode_problem, parse=_mode_value, group="retrieval",
                         stage="index"),
                 owner="retrieval")

# --- the built-in retrievers, and BM25's backends -------------------------------------------------
BM25_BACKENDS = Registry("bm25_backend", setting="bm25_backend", group="bm25")
BM25_BACKENDS.register("bm25s", "rag_core.retrieve.bm25:BM25sBackend", help="bm25s, Lucene BM25 (fast)")
BM25_BACKENDS.register("rank_bm25", "rag_core.retrieve.bm25:RankBM25Backend", help="rank-bm25's BM25Okapi (classic Okapi)")

RETRIEVERS.register(
    "dense", "rag_core.retrieve.retrievers.dense:DenseRetriever",
    help="cosine similarity of embed_model embeddings in the vector store",
    embeds_query=True, uses=("embed_model", "embed_backend", "vector_store"),
    settings=[
        Setting("dense_search", str, "auto", "dense search: auto (exact up to dense_exact_max chunks, else the vector "
                "store's approximate search) | exact (every vector scored; reproducible, ties by chunk id) | "
                "approximate", choices=("auto", "exact", "approximate"), group="vector_store", stage="candidates"),
        Setting("dense_exact_max", int, 50_000, "dense_search auto: the most chunks searched exactly",
                minimum=0, group="vector_store", stage="candidates"),
        Setting("dense_pooling", str, "mean_top2", "a unit (chunk, parent, child) longer than the embedding model's window "
                "is embedded as overlapping windows, scored by its best window (max) or the mean of its two best "
                "(mean_top2); first: no windows, the model reads the first window's tokens only (truncation)",
                choices=("max", "mean_top2", "first"), group="embedding", stage="index"),
        Setting("dense_stride", int, 0, "tokens between the starts of a unit's windows (0 = three quarters of the "
                "model's window; at most the window)", minimum=0, group="embedding", stage="index"),
    ],
)
RETRIEVERS.register(
    "bm25", "rag_core.retrieve.retrievers.bm25:BM25Retriever",
    help="BM25 keyword search over the indexed chunk texts (rag_core.retrieve.bm25)",
    settings=[
        Setting("bm25_backend", str, "bm25s", "bm25s | rank_bm25", choices=BM25_BACKENDS.names, group="bm25",
                stage="index"),
        Setting("tokenizer", str, "stem", "BM25 tokenizer: stem | simple | whitespace", choices=TOKENIZERS.names,
                group="bm25", stage="index"),
        Setting("bm25_k1", float, 1.5, "BM25 term-frequency saturation", minimum=0, group="bm25", stage="index"),
        Setting("bm25_b", float, 0.75, "BM25 length normalisation", minimum=0, maximum=1, group="bm25", stage="index"),
        Setting("bm25_numbers", bool, False, "numbers in one form for BM25, in documents and queries: 1,234.5 = 1234.5, "
                "(1,234) = -1,234, $1.2 billion = 1.2 billion = 1,200,000,000 (rag_core.retrieve.tokenizer)",
                group="bm25", stage="index"),
    ],
)
# Pages as retrieval units (rag_core.retrieve.retrievers.pages): each ranks whole pages with the
# retriever it wraps and answers with the chunks on them, so it fuses with the chunk retrievers.
RETRIEVERS.register(
    "page_bm25", "rag_core.retrieve.retrievers.pages:PageBM25Retriever",
    help="BM25 (the bm25 settings) over whole pages, answered with the chunks on the best pages",
    uses=("bm25_backend", "tokenizer", "bm25_k1", "bm25_b", "bm25_numbers"),
)
RETRIEVERS.register(
    "page_dense", "rag_core.retrieve.retrievers.pages:PageDenseRetriever",
    help="dense search over whole pages embedded as token windows, answered with the chunks on the best pages",
    embeds_query=True, uses=("embed_model", "embed_backend", "vector_store", "dense_search", "dense_exact_max",
                             "dense_stride", "tokenizer"),
    settings=[Setting("page_pooling", str, "mean_top2", "page_dense: a page's score from its token windows: its best "
                      "window (max) or the mean of its two best (mean_top2); pages are never truncated",
                      choices=("max", "mean_top2"), group="embedding", stage="candidates")],
)
