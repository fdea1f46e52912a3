"""Citation checks that need no LLM: are the answer's citations real, and how much of it is cited?

A citation has the form ``[Source: <document>, page N]`` or ``[Source: <document>, pages N-M]``
(what ``Chunk.citation()`` writes); several may share one bracket, separated by ``;``.
Document ids are compared in their printable form (``rag_core.doc_ids``), the form the model was shown.
A citation is *valid* when every page it names lies inside the page span of a passage from that
document that was given to the model (so ``page 4`` is valid for a passage spanning pages 3-5).

Sentences: the answer is split at line breaks and after ``.``, ``!`` or ``?`` followed by
whitespace; a fragment that holds only citations (``... per minute. [Source: a.pdf, page 3]``)
belongs to the sentence before it, and fragments without a letter (bullets, blank lines) are not
sentences. Abbreviations such as "e.g." do split a sentence: a simple rule, applied the same way to
every answer, which is what a comparison between runs needs. Left out: judging whether a citation
*supports* its claim (that is the judge's faithfulness score).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence

from rag_core.doc_ids import escape_controls
from rag_core.records import Hit

_BRACKET = re.compile(r"\[Source:\s*([^\[\]]*)\]", re.IGNORECASE)
# greedy document name, so a name holding a comma still ends at the last ", page"
_ONE = re.compile(r"^\s*(?P<doc>.+),\s*(?:pages?|pp?\.)\s*(?P<start>\d+)(?:\s*[-\u2013]\s*(?P<end>\d+))?\s*$", re.I)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_LETTER = re.compile(r"[^\W\d_]")


@dataclass(frozen=True)
class Citation:
    doc_id: str
    page: int  # first page cited
    page_end: int | None = None  # last page, for "pages N-M"; None for a single page

    @property
    def last_page(self) -> int:
        return self.page if self.page_end is None else self.page_end


@dataclass(frozen=True)
class CitationCheck:
    n_citations: int
    n_valid: int
    invalid: list[str]  # each invalid citation as written: "[Source: x.pdf, page 9]"
    cited_sentence_share: float  # sentences carrying at least one citation / sentences
    all_valid: bool  # every citation valid (true for an answer without citations: see valid_share)
    n_sentences: int = 0

    @property
    def valid_share(self) -> float | None:
        """Valid citations / citations; None when the answer cites nothing."""
        return self.n_valid / self.n_citations if self.n_citations else None


def parse_citations(text: str) -> list[Citation]:
    """Every well-formed citation in ``text``, in order (malformed ones are skipped)."""
    return [citation for _, citation in _scan(text) if citation is not None]


def check_citations(answer_text: str, hits: Sequence[Hit]) -> CitationCheck:
    """Check ``answer_text``'s citations against the passages (``hits``) given to the model."""
    # doc_id -> pages covered by the given passages
    pages: dict[str, set[int]] = {}
    for hit in hits:
        pages.setdefault(escape_controls(hit.chunk.doc_id), set()).update(range(hit.chunk.page_start, hit.chunk.page_end + 1))
    n_citations, invalid = 0, []
    for written, citation in _scan(answer_text):
        n_citations += 1
        covered = pages.get(escape_controls(citation.doc_id.strip()), set()) if citation else set()
        if citation is None or not all(p in covered for p in range(citation.page, citation.last_page + 1)):
            invalid.append(written)
    sentences = split_sentences(answer_text)
    cited = sum(1 for sentence in sentences if _BRACKET.search(sentence))
    return CitationCheck(
        n_citations=n_citations,
        n_valid=n_citations - len(invalid),
        invalid=invalid,
        cited_sentence_share=cited / len(sentences) if sentences else 0.0,
        all_valid=not invalid,
        n_sentences=len(sentences),
    )


def split_sentences(text: str) -> list[str]:
    """Sentences as described in the module docstring; citation-only fragments join the one before."""
    sentences: list[str] = []
    for fragment in _SENTENCE_END.split(text):
        fragment = fragment.strip()
        if not fragment:
            continue
        if not _LETTER.search(_BRACKET.sub("", fragment)):
            if sentences and _BRACKET.search(fragment):
                sentences[-1] = f"{sentences[-1]} {fragment}"
            continue
        sentences.append(fragment)
    return sentences


def strip_citations(text: str) -> str:
    """`text` without its citation markers (``[Source: ...]``), spaces around them closed up."""
    return re.sub(r"[ \t]+([.,;:!?])", r"\1", re.sub(r"[ \t]*" + _BRACKET.pattern, "", text, flags=re.IGNORECASE))


def average_citation_checks(checks: Iterable[CitationCheck | None]) -> dict[str, float]:
    """Means over the answers checked (None = not checked, e.g. an extractive answer).

    ``citation/valid_share`` averages only answers that cite something; an answer that cites
    nothing scores 0 on ``citation/cited_sentence_share`` instead.
    """
    present = [check for check in checks if check is not None]
    metrics: dict[str, float] = {}
    shares = [check.valid_share for check in present if check.valid_share is not None]
    if shares:
        metrics["citation/valid_share"] = sum(shares) / len(shares)
    if present:
        metrics["citation/cited_sentence_share"] = sum(c.cited_sentence_share for c in present) / len(present)
    return metrics


def _scan(text: str) -> list[tuple[str, Citation | None]]:
    """(citation as written, parsed citation or None when malformed), for each citation in text."""
    found: list[tuple[str, Citation | None]] = []
    for bracket in _BRACKET.finditer(text):
        parts = [part for part in bracket.group(1).split(";") if part.strip()] or [""]
        for part in parts:
            written = bracket.group(0) if len(parts) == 1 else f"[Source: {part.strip()}]"
            match = _ONE.match(part)
            if match is None:
                found.append((written, None))
                continue
            start, end = int(match["start"]), int(match["end"]) if match["end"] else None
            if start < 1 or (end is not None and end < start):
                found.append((written, None))
                continue
            found.append((written, Citation(match["doc"].strip(), start, end if end != start else None)))
    return found
