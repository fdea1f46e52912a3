"""Chunkers: the registry ``CHUNKERS`` (the ``chunker`` setting), the chunking settings every chunker may
read (``chunk_size``, ``overlap``, ``chunk_unit``, ``per_page``), the built-ins (one file each, registered
here by name so that listing them imports none) and ``make_chunker``, which the index calls.

- ``recursive`` (``recursive.py``, the default): separators coarse to fine, merged up to ``chunk_size``
  with ``overlap`` repeated.

The contract is in ``base.py`` (``Chunker``, ``span_chunk``): every chunk is an exact span of the
document's text, its pages those its characters come from. A chunker declares its own settings at
registration (stage ``chunking``); they join the chunking's key by that stage
(``rag_core.retrieve.index.chunking_settings``). ``rag_core.ingest.chunking`` is this package's import path
of before, kept for plugins.
Left out: chunkers that rewrite the text (an LLM's summaries): a chunk is always a span of the document.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from rag_core.components import SETTINGS, Rule, Setting
from rag_core.ingest.chunkers.base import CHUNKERS, WORD, Chunker, Count, Span, count_words, span_chunk

if TYPE_CHECKING:
    from rag_core.components.config_fields import ConfigFields

__all__ = ["CHUNKERS", "CHUNK_UNITS", "DEFAULT_CHUNKER", "WORD", "Chunker", "Count", "Span", "chunker_key",
           "count_words", "make_chunker", "span_chunk"]

DEFAULT_CHUNKER = "recursive"
CHUNK_UNITS = ("words", "tokens")


def make_chunker(config: ConfigFields, count_tokens: Count | None = None) -> Chunker:
    """The configured chunker; with ``chunk_unit: tokens``, sizes count `count_tokens` (the embedding
    model's tokens of a text)."""
    chunker = CHUNKERS.load(config.chunker)(config.chunker, config)
    if config.chunk_unit == "tokens":
        if count_tokens is None:
            raise ValueError("chunk_unit tokens needs the embedding model's token counter")
        chunker.count = count_tokens
    return chunker


def chunker_key(config: ConfigFields) -> dict[str, Any]:
    """The chunking settings as the store's chunking key of format 1 spells them: chunk_size, overlap,
    per_page, the tokenizer when sizes count tokens, and a chunker other than the built-in. A chunker's own
    settings join the key by their stage (``rag_core.retrieve.index.chunking_settings``)."""
    key: dict[str, Any] = {"chunk_size": config.chunk_size, "overlap": config.overlap, "per_page": config.per_page}
    if config.chunk_unit == "tokens":  # only then, so that the keys of words stay as they were
        key.update(chunk_unit="tokens", tokenizer=config.embed_model)
    if config.chunker != DEFAULT_CHUNKER:
        key["chunker"] = config.chunker
    return key


def _overlap_below_chunk_size(values: Mapping[str, Any]) -> tuple[str, str] | None:
    if not 0 <= values["overlap"] < values["chunk_size"]:
        return "overlap", "overlap must be >= 0 and < chunk_size"
    return None


SETTINGS.declare(
    Setting("chunk_size", int, 512, "chunk length in words (chunk_unit)", above=0, group="chunking", stage="chunking"),
    Setting("overlap", int, 64, "words (chunk_unit) repeated from the previous chunk", group="chunking",
            stage="chunking"),
    Setting("chunk_unit", str, "words", "what chunk_size, overlap and child_size count: words | tokens (of "
            "embed_model's tokenizer, special tokens not counted)", choices=CHUNK_UNITS, group="chunking",
            stage="chunking",
            brings=lambda unit: ("embed_model",) if unit == "tokens" else ()),  # its tokenizer counts the chunks
    Setting("per_page", bool, False, "chunk inside pages instead of across them", group="chunking", stage="chunking"),
    Setting("chunker", str, DEFAULT_CHUNKER, "how documents are split: recursive, or a chunker a plugin registers",
            choices=CHUNKERS.names, group="chunking", stage="chunking"),
    owner="chunking")
SETTINGS.add_rule(Rule(_overlap_below_chunk_size, "chunking"))
CHUNKERS.register(DEFAULT_CHUNKER, "rag_core.ingest.chunkers.recursive:RecursiveChunker", help="paragraphs, then lines, sentences, words, merged up to "
                  "chunk_size words with overlap words repeated")
