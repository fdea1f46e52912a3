"""Pseudo-queries: (query, positive passage) pairs made from a corpus's own documents, so that a model
can be adapted to a corpus that has no labelled questions (``rag-pipeline finetune --self-supervised``).

Three kinds (``PSEUDO_QUERY_KINDS``), each from the documents alone:

- ``heading``: a heading is the query and the text of its section (up to the next heading, at most
  ``passage_words`` words, the heading left out) the positive. Headings are ``Document.headings``
  (PDF extraction's); a document without any whose first paragraph is one short line (``title_words``
  words at most, as a title is: BEIR's ``title``) has that line as its heading. A heading that several
  documents share ("Introduction", "Results") names no passage and is left out.
- ``ict``: inverse cloze (Lee, Chang & Toutanova, "Latent Retrieval for Weakly Supervised Open Domain
  Question Answering", ACL 2019): a sentence of a chunk is the query and the chunk without it the
  positive; the sentence stays in ``keep_share`` of the time (ICT keeps it in 10%), so that word
  overlap is not unlearned. Sentences of ``min_query_words`` to ``max_query_words`` words, headings
  never; ``ict_per_chunk`` per chunk.
- ``table_row``: a Markdown table row (``| label | v1 | v2 |``, as ``extract_tables`` writes tables) whose
  first cell is not a number: its label with the table's column headers is the query, the chunk holding
  the table the positive; ``rows_per_table`` rows per table.

Choices are seeded (``random.Random(f"{seed}:{chunk or document}")``): the same documents and recipe
give the same pairs, and adding a document leaves the other documents' pairs alone; ``max_queries``
then keeps a seeded sample. Shape: ``PseudoQuery(id, kind, doc_id, text, positive, chunks)`` where
``chunks`` are the ids of the chunks the positive was cut from (never its negatives).
Left out: generated questions (GPL's doc2query needs a generation model; none is available offline),
tables in other layouts than Markdown rows.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Mapping, Sequence

from rag_core.config import ConfigError
from rag_core.finetune.fingerprints import normalise_query
from rag_core.generate.sentences import split_sentences
from rag_core.records import Chunk, Document

PSEUDO_QUERY_KINDS = ("heading", "ict", "table_row")
_PARAGRAPH = re.compile(r"\n\s*\n")
_TABLE_LINE = re.compile(r"^\|.*\|$")
_RULE_CELL = re.compile(r"^:?-{3,}:?$")
_NUMBER = re.compile(r"^[\s$€£(+-]*[\d.,]+[%)]?\s*$")


@dataclass(frozen=True)
class PseudoQueryRecipe:
    kinds: tuple[str, ...] = PSEUDO_QUERY_KINDS
    ict_per_chunk: int = 1  # sentences taken out of each chunk
    keep_share: float = 0.1  # share of the inverse-cloze positives that keep their sentence
    min_query_words: int = 5  # an inverse-cloze sentence's length, in words
    max_query_words: int = 64
    title_words: int = 30  # a lone first line this short is a document's heading
    passage_words: int = 200  # a heading's section, cut to this many words
    rows_per_table: int = 2
    max_queries: int = 0  # 0: every pair; else a seeded sample of this many
    seed: int = 0

    def __post_init__(self) -> None:
        unknown = [kind for kind in self.kinds if kind not in PSEUDO_QUERY_KINDS]
        if unknown or not self.kinds:
            raise ConfigError(f"pseudo-query kinds must be some of {', '.join(PSEUDO_QUERY_KINDS)}, got "
                              f"{', '.join(self.kinds) or 'none'}")
        if not 0 <= self.keep_share <= 1:
            raise ConfigError(f"keep_share must be between 0 and 1, got {self.keep_share}")
        if min(self.ict_per_chunk, self.rows_per_table, self.max_queries) < 0 or self.min_query_words < 1 \
                or self.max_query_words < self.min_query_words or min(self.title_words, self.passage_words) < 1:
            raise ConfigError(f"invalid pseudo-query recipe: {self}")

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "kinds": list(self.kinds)}


@dataclass(frozen=True)
class PseudoQuery:
    id: str  # "<doc_id>#<kind>-<n>"
    kind: str  # PSEUDO_QUERY_KINDS
    doc_id: str
    text: str  # the query
    positive: str  # the passage it should find
    chunks: tuple[str, ...]  # ids of the chunks the positive was cut from


def document_headings(document: Document, title_words: int = 30) -> list[tuple[int, str]]:
    """(offset, heading): the document's own, else its first paragraph when that is one short line."""
    if document.headings:
        return list(document.headings)
    first = _PARAGRAPH.split(document.text.lstrip(), maxsplit=1)
    lead = first[0].strip()
    if len(first) == 2 and lead and "\n" not in lead and len(lead.split()) <= title_words:
        return [(document.text.index(lead), lead)]
    return []


def build_pseudo_queries(documents: Sequence[Document], chunks: Sequence[Chunk],
                         recipe: PseudoQueryRecipe = PseudoQueryRecipe()) -> list[PseudoQuery]:
    """Every pseudo-query of `documents` (chunked as `chunks`), in document order, then sampled to
    ``recipe.max_queries``."""
    by_doc: dict[str, list[Chunk]] = {}
    for chunk in chunks:
        by_doc.setdefault(chunk.doc_id, []).append(chunk)
    headings = {document.doc_id: document_headings(document, recipe.title_words) for document in documents}
    shared = Counter(key for found in headings.values() for key in {normalise_query(text) for _, text in found})
    found: list[PseudoQuery] = []
    for document in documents:
        doc_chunks = by_doc.get(document.doc_id, [])
        kept = [(at, text) for at, text in headings[document.doc_id] if shared[normalise_query(text)] == 1]
        made: list[tuple[str, str, str, tuple[str, ...]]] = []  # (kind, query, positive, chunk ids)
        if "heading" in recipe.kinds:
            made += _heading_pairs(document, headings[document.doc_id], kept, doc_chunks, recipe.passage_words)
        if "ict" in recipe.kinds:
            spans = [(at, at + len(text)) for at, text in headings[document.doc_id]]
            made += [pair for chunk in doc_chunks for pair in _ict_pairs(chunk, spans, recipe)]
        if "table_row" in recipe.kinds:
            made += [pair for chunk in doc_chunks for pair in _row_pairs(chunk, recipe)]
        counts: Counter[str] = Counter()
        for kind, query, positive, from_chunks in made:
            counts[kind] += 1
            found.append(PseudoQuery(f"{document.doc_id}#{kind}-{counts[kind]}", kind, document.doc_id, query,
                                     positive, from_chunks))
    if recipe.max_queries and len(found) > recipe.max_queries:
        chosen = set(random.Random(recipe.seed).sample(range(len(found)), recipe.max_queries))
        found = [query for number, query in enumerate(found) if number in chosen]
    return found


def _heading_pairs(document: Document, every: list[tuple[int, str]], kept: Iterable[tuple[int, str]],
                   chunks: Sequence[Chunk], passage_words: int) -> list[tuple[str, str, str, tuple[str, ...]]]:
    """A heading against its section's text (to the next heading of `every`, cut to `passage_words` words)."""
    starts = sorted(at for at, _ in every)
    pairs = []
    for at, heading in kept:
        begin = at + len(heading)
        end = next((start for start in starts if start >= begin), len(document.text))
        words = document.text[begin:end].split()[:passage_words]
        if not words:
            continue
        stop = begin + _span_of_words(document.text[begin:end], len(words))
        inside = tuple(chunk.id for chunk in chunks if chunk.char_start < stop and chunk.char_end > begin)
        pairs.append(("heading", heading.strip(), " ".join(words), inside))
    return pairs


def _span_of_words(text: str, count: int) -> int:
    """The offset in `text` just after its first `count` words."""
    matches = list(re.finditer(r"\S+", text))
    return matches[count - 1].end() if count else 0


def _ict_pairs(chunk: Chunk, headings: Sequence[tuple[int, int]],
               recipe: PseudoQueryRecipe) -> list[tuple[str, str, str, tuple[str, ...]]]:
    """Sentences taken out of `chunk`: (ict, sentence, the chunk without it, (chunk id,)). `headings`:
    (start, end) document offsets of the document's headings, which are never sentences."""
    text = chunk.text
    spans = [(begin + start, begin + end) for begin, stop in _between(chunk, headings)
             for start, end in split_sentences(text[begin:stop])]
    eligible = [span for span in spans if "|" not in text[span[0]:span[1]]
                and recipe.min_query_words <= len(text[span[0]:span[1]].split()) <= recipe.max_query_words]
    if len(spans) < 2 or not eligible:  # a sentence with nothing around it has no context to find
        return []
    rng = random.Random(f"{recipe.seed}:{chunk.id}")
    pairs = []
    for start, end in sorted(rng.sample(eligible, min(recipe.ict_per_chunk, len(eligible)))):
        keep = rng.random() < recipe.keep_share
        rest = text if keep else text[:start] + " " + text[end:]
        pairs.append(("ict", " ".join(text[start:end].split()), " ".join(rest.split()), (chunk.id,)))
    return pairs


def _between(chunk: Chunk, headings: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """(start, end) offsets in the chunk's text of the stretches between the headings inside it."""
    pieces, begin = [], 0
    for start, end in sorted(headings):
        start, end = max(start - chunk.char_start, 0), min(end - chunk.char_start, len(chunk.text))
        if end <= 0 or start >= len(chunk.text):
            continue
        pieces.append((begin, start))
        begin = max(begin, end)
    pieces.append((begin, len(chunk.text)))
    return [(start, end) for start, end in pieces if chunk.text[start:end].strip()]


def _row_pairs(chunk: Chunk, recipe: PseudoQueryRecipe) -> list[tuple[str, str, str, tuple[str, ...]]]:
    """Markdown table rows of `chunk`: (table_row, "<row label> <column headers>", chunk text, (chunk id,))."""
    pairs: list[tuple[str, str, str, tuple[str, ...]]] = []
    for table in _tables(chunk.text):
        header, rows = table[0], table[1:]
        columns = " ".join(cell for cell in header[1:] if cell)
        labelled = [row for row in rows if row and row[0] and not _NUMBER.match(row[0])]
        rng = random.Random(f"{recipe.seed}:{chunk.id}:{len(pairs)}")
        for row in rng.sample(labelled, min(recipe.rows_per_table, len(labelled))):
            query = " ".join(f"{row[0]} {columns}".split())
            pairs.append(("table_row", query, " ".join(chunk.text.split()), (chunk.id,)))
    return pairs


def _tables(text: str) -> list[list[list[str]]]:
    """Runs of Markdown table lines as rows of cells, the ``|---|`` rule left out; the first row is the header."""
    tables: list[list[list[str]]] = []
    current: list[list[str]] = []
    for line in [*text.splitlines(), ""]:
        line = line.strip()
        if _TABLE_LINE.match(line):
            cells = [cell.strip() for cell in line[1:-1].split("|")]
            if any(cells) and not all(_RULE_CELL.match(cell) for cell in cells if cell):
                current.append(cells)
        elif current:
            if len(current) > 1:
                tables.append(current)
            current = []
    return tables


def counts_by_kind(queries: Iterable[PseudoQuery]) -> Mapping[str, int]:
    return dict(Counter(query.kind for query in queries))
