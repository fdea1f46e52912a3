"""Chunkers: the contract (``Chunker``), the registry (``CHUNKERS``, the ``chunker`` setting) and the
built-in ``recursive`` chunker, with page spans and character offsets.

A chunker is registered as a class ``(name, config)`` whose ``chunk(document)`` returns the document's
chunks in text order, each an exact span of ``Document.text`` (``span_chunk`` makes one from offsets:
id, text and pages). ``chunk_size``, ``overlap`` and ``per_page`` are every chunker's settings (one
may ignore some); a chunker declares its own at registration (stage ``chunking``), and they join the
chunking's key by that stage (the built-in's key is the three alone, as before chunkers were pluggable).

``recursive``: the text is split with the coarsest separator that works (paragraph, then line, then sentence, then
word) until every piece fits in ``chunk_size`` words; neighbouring pieces are then merged back into
chunks of at most ``chunk_size`` words, each new chunk repeating up to ``overlap`` words from the end
of the previous one (from a sentence start where possible). Chunking runs over the whole document,
so a chunk may cross pages; ``per_page=True`` chunks inside each page instead.

Every chunk is an exact span of ``Document.text``: ``text == document.text[char_start:char_end]``.
``chunk_unit`` says what sizes count: ``words`` (whitespace-separated) or ``tokens`` of the embedding
model's tokenizer (special tokens not counted; the index passes the model's counter to ``make_chunker``).
Left out: semantic splitting.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

from rag_core.components import SETTINGS, Registry, Rule, Setting
from rag_core.components.faults import calling, component_fault
from rag_core.records import Chunk, Document

if TYPE_CHECKING:
    from rag_core.components.config_fields import ConfigFields

CHUNKERS = Registry("chunker", setting="chunker", group="chunking")
DEFAULT_CHUNKER = "recursive"

# Coarse to fine. Each pattern matches the separator itself; pieces keep no separator text at their ends.
SEPARATORS: tuple[re.Pattern[str], ...] = (
    re.compile(r"\n\s*\n"),  # paragraph
    re.compile(r"\n"),  # line
    re.compile(r"(?<=[.!?])\s+"),  # sentence
    re.compile(r"\s+"),  # word
)
_WORD = re.compile(r"\S+")
CHUNK_UNITS = ("words", "tokens")
Count = Callable[[str], int]  # text -> its length in the chunk unit

Span = tuple[int, int]  # (start, end) offsets into the document text


def count_words(text: str) -> int:
    return len(_WORD.findall(text))


def chunk_document(document: Document, chunk_size: int, overlap: int, per_page: bool = False,
                   count: Count = count_words) -> list[Chunk]:
    """Split one document into chunks of at most `chunk_size` words, or units of `count` (a single
    word longer than that stays whole)."""
    if overlap >= chunk_size:
        raise ValueError("overlap must be smaller than chunk_size")
    text = document.text
    regions: list[Span]
    if per_page:
        regions = [
            (start, start + len(document.page_text(page)))
            for page, start in enumerate(document.page_starts, start=1)
        ]
    else:
        regions = [(0, len(text))]
    chunks = []
    for region in regions:
        pieces = _split(text, region, chunk_size, level=0, count=count)
        for start, end in _merge(text, pieces, chunk_size, overlap, count):
            chunk_text = text[start:end]
            chunks.append(
                Chunk(
                    id=Chunk.make_id(document.doc_id, start, end, chunk_text),
                    doc_id=document.doc_id,
                    text=chunk_text,
                    char_start=start,
                    char_end=end,
                    page_start=document.page_at(start),
                    page_end=document.page_at(end - 1),
                )
            )
    return chunks


def split_span(text: str, region: Span, chunk_size: int, overlap: int = 0, count: Count = count_words) -> list[Span]:
    """(start, end) spans of at most `chunk_size` words (units of `count`) inside `region` of `text`,
    split and merged as ``chunk_document`` does (used for the child chunks inside a parent chunk)."""
    return _merge(text, _split(text, region, chunk_size, level=0, count=count), chunk_size, overlap, count)


def chunk_corpus(documents: Iterable[Document], chunk_size: int, overlap: int, per_page: bool = False) -> list[Chunk]:
    return [
        chunk
        for document in documents
        for chunk in chunk_document(document, chunk_size, overlap, per_page)
    ]


def _strip(text: str, span: Span) -> Span | None:
    """Trim whitespace off a span; None when nothing is left."""
    start, end = span
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if start < end else None


def _split(text: str, span: Span, chunk_size: int, level: int, count: Count = count_words) -> list[Span]:
    """Pieces of `span`, each of at most `chunk_size` words, split at the coarsest separator possible."""
    stripped = _strip(text, span)
    if stripped is None:
        return []
    start, end = stripped
    if count(text[start:end]) <= chunk_size or level == len(SEPARATORS):
        return [stripped]
    pieces: list[Span] = []
    cursor = start
    for match in SEPARATORS[level].finditer(text, start, end):
        pieces.extend(_split(text, (cursor, match.start()), chunk_size, level + 1, count))
        cursor = match.end()
    pieces.extend(_split(text, (cursor, end), chunk_size, level + 1, count))
    return pieces


def _merge(text: str, pieces: Sequence[Span], chunk_size: int, overlap: int, count: Count = count_words) -> list[Span]:
    """Greedily join consecutive pieces into chunks of at most `chunk_size` words. Each chunk after
    the first starts with the last `overlap` words (or fewer) of the previous one, cut at a sentence
    start where one is close enough, so overlap works even when the pieces are whole paragraphs."""
    sizes = [count(text[start:end]) for start, end in pieces]
    chunks: list[Span] = []
    carry: tuple[int, int] | None = None  # (start offset, words) repeated from the previous chunk
    index = 0  # next piece to place
    while index < len(pieces):
        start, words = carry if carry and carry[1] + sizes[index] <= chunk_size else (pieces[index][0], 0)
        words += sizes[index]
        while index + 1 < len(pieces) and words + sizes[index + 1] <= chunk_size:
            index += 1
            words += sizes[index]
        end = pieces[index][1]
        chunks.append((start, end))
        index += 1
        carry = _tail(text, start, end, overlap, count) if overlap and index < len(pieces) else None
    return chunks


def _tail(text: str, start: int, end: int, overlap: int, count: Count = count_words) -> tuple[int, int]:
    """(offset, size) of the last at most `overlap` words (units of `count`) of text[start:end],
    beginning at the first sentence start among them if there is one; never the whole span, so chunks
    always advance."""
    words = [match.start() for match in _WORD.finditer(text, start, end)]
    first = max(1, len(words) - overlap)
    if count is not count_words:  # the fewest last words that hold at most `overlap` units
        first = len(words)
        while first > 1 and count(text[words[first - 1]:end]) <= overlap:
            first -= 1
        first = min(first, len(words) - 1)  # a last word longer than `overlap` is repeated whole
    for index in range(first, len(words)):
        before = text[start:words[index]].rstrip()
        if before.endswith((".", "!", "?")) or "\n" in text[words[index - 1]:words[index]]:
            first = index
            break
    return words[first], (len(words) - first) if count is count_words else count(text[words[first]:end])


# --- the contract -------------------------------------------------------------------------------
class Chunker:
    """Settings from the config (``chunk_size``, ``overlap``, ``per_page`` and its own)."""

    def __init__(self, name: str, config: ConfigFields) -> None:
        self.name = name
        self.config = config

    def chunk(self, document: Document) -> list[Chunk]:
        raise NotImplementedError

    def chunk_corpus(self, documents: Iterable[Document]) -> list[Chunk]:
        """Every document's chunks, checked to be distinct, non-empty exact spans of their document's
        text; a chunker that breaks that (or raises, for a plugin) is a ``ComponentFault`` naming it."""
        chunks, seen = [], set()
        component = CHUNKERS.get(self.name)
        for document in documents:
            with calling(component, "chunk"):
                found = self.chunk(document)
            for chunk in found:
                problem = _span_problem(chunk, document, seen)
                if problem:
                    raise component_fault(component, f"chunk() returned {problem} for {document.doc_id!r} (the contract: "
                                                     "distinct non-empty spans of the text, made with span_chunk)")
                seen.add(chunk.id)
                chunks.append(chunk)
        return chunks


def _span_problem(chunk: Any, document: Document, seen: set[str]) -> str | None:
    if not isinstance(chunk, Chunk):
        return f"a {type(chunk).__name__}, not a Chunk,"
    span = f"[{chunk.char_start}:{chunk.char_end}]"
    if chunk.doc_id != document.doc_id:
        return f"a chunk of {chunk.doc_id!r}"
    if not (isinstance(chunk.char_start, int) and isinstance(chunk.char_end, int)
            and 0 <= chunk.char_start < chunk.char_end <= len(document.text)):
        return f"the span {span}, empty or outside the text's {len(document.text)} characters,"
    if chunk.text != document.text[chunk.char_start:chunk.char_end]:
        return f"a chunk whose text is not the span {span} of the document's text"
    if chunk.id in seen:
        return f"the chunk {span} (id {chunk.id!r}) twice"
    return None


def span_chunk(document: Document, start: int, end: int) -> Chunk:
    """The chunk of `document` spanning ``text[start:end]``: its id, text and pages."""
    text = document.text[start:end]
    return Chunk(Chunk.make_id(document.doc_id, start, end, text), document.doc_id, text, start, end,
                 document.page_at(start), document.page_at(end - 1))


class RecursiveChunker(Chunker):
    count: Count = staticmethod(count_words)  # chunk_unit tokens: the embedding model's counter (make_chunker)

    def chunk(self, document: Document) -> list[Chunk]:
        return chunk_document(document, self.config.chunk_size, self.config.overlap, self.config.per_page, self.count)


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
CHUNKERS.register(DEFAULT_CHUNKER, RecursiveChunker, help="paragraphs, then lines, sentences, words, merged up to "
                  "chunk_size words with overlap words repeated")
