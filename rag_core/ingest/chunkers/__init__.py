"""Chunkers: the registry ``CHUNKERS`` (the ``chunker`` setting), the chunking settings every chunker may
read (``chunk_size``, ``overlap``, ``chunk_unit``, ``per_page``), the built-ins (one file each, registered
here by name so that listing them imports none) and ``make_chunker``, which the index calls.

- ``recursive`` (``recursive.py``, the default): separators coarse to fine, merged up to ``chunk_size``
  with ``overlap`` repeated.
- ``fixed`` (``fixed.py``): windows of ``chunk_size`` words or tokens, ``overlap`` repeated, cut anywhere.
- ``sentences`` (``sentences.py``): whole sentences packed up to ``chunk_size``, whole sentences repeated.
- ``semantic`` (``semantic.py``): boundaries where adjacent sentence groups' embeddings move most (Kamradt).
- ``cluster`` (``cluster.py``): small pieces embedded, runs chosen by a dynamic programme (Chroma's report).
- ``structure`` (``structure.py``): sections from headings, cut by size inside each, never merged.

Each registration says which common settings the chunker reads (``reads``) and its code version
(``version``); ``semantic`` and ``cluster`` use the embedding model (``uses``), which ``make_chunker``
passes as the chunker's ``embedder``.

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
from rag_core.ingest.chunkers.base import (CHUNKERS, WORD, Chunker, Count, Span, TextEmbedder, count_words,
                                           span_chunk)

if TYPE_CHECKING:
    from rag_core.components.config_fields import ConfigFields

__all__ = ["CHUNKERS", "CHUNK_UNITS", "COMMON_SETTINGS", "DEFAULT_CHUNKER", "WORD", "Chunker", "Count", "Span",
           "TextEmbedder", "chunker_key", "count_words", "make_chunker", "span_chunk"]

DEFAULT_CHUNKER = "recursive"
CHUNK_UNITS = ("words", "tokens")
COMMON_SETTINGS = ("chunk_size", "overlap", "chunk_unit", "per_page")  # each chunker reads all or some (reads=)


def make_chunker(config: ConfigFields, count_tokens: Count | None = None,
                 embedder: TextEmbedder | None = None) -> Chunker:
    """The configured chunker; with ``chunk_unit: tokens``, sizes count `count_tokens` (the embedding
    model's tokens of a text). `embedder` (the index's: loads nothing until used) becomes the chunker's
    ``embedder``; a chunker that uses ``embed_model`` cannot be made without one."""
    component = CHUNKERS.get(config.chunker)
    if "embed_model" in component.options.get("uses", ()) and embedder is None:
        raise ValueError(f"chunker {config.chunker!r} needs the embedding model (make_chunker's embedder)")
    chunker = component.load()(config.chunker, config)
    if config.chunk_unit == "tokens":
        if count_tokens is None:
            raise ValueError("chunk_unit tokens needs the embedding model's token counter")
        chunker.count = count_tokens
    if embedder is not None:
        chunker.embedder = embedder
    return chunker


def chunker_key(config: ConfigFields) -> dict[str, Any]:
    """The chunking settings the chosen chunker reads (``reads=``, ``CHUNKERS.reads``), as the store's
    chunking key of format 1 spells them: chunk_size, overlap, per_page, the tokenizer when sizes count
    tokens, and a chunker other than the built-in. A chunker that reads all four (``recursive``, a plugin
    that does not say) keeps the names of before. Its own settings, those it uses and its code version join
    the key elsewhere (``rag_core.retrieve.index.chunking_settings``)."""
    reads = CHUNKERS.reads(config.chunker)
    key: dict[str, Any] = {name: getattr(config, name) for name in ("chunk_size", "overlap", "per_page")
                           if name in reads}
    if config.chunk_unit == "tokens" and "chunk_unit" in reads:  # only then: the keys of words stay as they were
        key.update(chunk_unit="tokens", tokenizer=config.embed_model)
    if config.chunker != DEFAULT_CHUNKER:
        key["chunker"] = config.chunker
    return key


def _overlap_below_chunk_size(values: Mapping[str, Any]) -> tuple[str, str] | None:
    """overlap < chunk_size where the chosen chunker reads both (one that ignores overlap is not refused for it)."""
    reads = CHUNKERS.reads(values.get("chunker", DEFAULT_CHUNKER))
    if {"overlap", "chunk_size"} <= set(reads) and not 0 <= values["overlap"] < values["chunk_size"]:
        return "overlap", "overlap must be >= 0 and < chunk_size"
    if values["overlap"] < 0:
        return "overlap", "overlap must be >= 0"
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
    Setting("chunker", str, DEFAULT_CHUNKER, "how documents are split: recursive, fixed, sentences, semantic, cluster, "
            "structure, or a chunker a plugin registers",
            choices=CHUNKERS.names, group="chunking", stage="chunking"),
    owner="chunking")
CHUNKERS.common = COMMON_SETTINGS  # what a chunker reads unless it registers with reads=(...)
SETTINGS.add_rule(Rule(_overlap_below_chunk_size, "chunking"))
CHUNKERS.register(DEFAULT_CHUNKER, "rag_core.ingest.chunkers.recursive:RecursiveChunker", help="paragraphs, then lines, sentences, words, merged up to "
                  "chunk_size words with overlap words repeated")

# The built-ins beside recursive (one file each; docs/chunkers.md). reads: the common settings each reads
# (the others do not change its chunks); version: its code's, part of the chunking's key.
_EMBEDS = ("embed_model", "embed_backend")  # the model (and runtime) whose vectors place the boundaries


def _piece_below_chunk_size(values: Mapping[str, Any]) -> tuple[str, str] | None:
    if values.get("chunker") == "cluster" and values["cluster_piece_size"] > values["chunk_size"]:
        return "cluster_piece_size", "cluster_piece_size must be <= chunk_size (a chunk holds one piece or more)"
    return None


CHUNKERS.register("fixed", "rag_core.ingest.chunkers.fixed:FixedChunker", reads=COMMON_SETTINGS, version="1",
                  help="windows of chunk_size words (tokens) starting every chunk_size - overlap, cut anywhere: "
                       "the baseline")
CHUNKERS.register("sentences", "rag_core.ingest.chunkers.sentences:SentencesChunker", reads=COMMON_SETTINGS, version="1",
                  help="whole sentences packed up to chunk_size, the last whole sentences of up to overlap "
                       "repeated; a sentence longer than chunk_size split as recursive splits")
CHUNKERS.register("semantic", "rag_core.ingest.chunkers.semantic:SemanticChunker", uses=_EMBEDS, version="1",
                  reads=("chunk_size", "chunk_unit", "per_page"), settings=[
                      Setting("semantic_buffer", int, 1, "semantic: sentences on each side embedded with a sentence",
                              minimum=0, maximum=10, stage="chunking"),
                      Setting("semantic_percentile", float, 95.0, "semantic: a boundary where adjacent groups' "
                              "embedding distance exceeds this percentile of the document's", minimum=0, maximum=100,
                              stage="chunking")],
                  help="Kamradt's semantic splitting: boundaries where adjacent sentence groups' embeddings move "
                       "most (embed_model), segments cut by sentences to at most chunk_size")
CHUNKERS.register("cluster", "rag_core.ingest.chunkers.cluster:ClusterChunker", uses=_EMBEDS, version="1",
                  reads=("chunk_size", "chunk_unit", "per_page"), rules=[_piece_below_chunk_size], settings=[
                      Setting("cluster_piece_size", int, 50, "cluster: words (chunk_unit) per piece embedded",
                              above=0, stage="chunking")],
                  help="Chroma's cluster-semantic chunker: pieces embedded (embed_model), runs of at most "
                       "chunk_size maximising within-run similarity by dynamic programming")
CHUNKERS.register("structure", "rag_core.ingest.chunkers.structure:StructureChunker", reads=COMMON_SETTINGS, version="1",
                  help="sections from headings (Markdown; a PDF's, one level), each cut as recursive cuts, "
                       "never merged across a section")
