"""Sentences of a text as offsets: the one splitter that the chunkers (``sentences``, ``semantic``) and the
extractive answers (``rag_core.generate.sentences``) share.

A sentence ends at ``.``, ``!`` or ``?`` before white space (a closing quote or bracket may come between),
not after a few common abbreviations (``e.g.``, ``U.S.``, ...), or at a blank line (a PDF's pages are joined
by one, so no sentence crosses a page). A heading line without a full stop stays with the sentence after it.
Left out: sentence models, abbreviations beyond the short list, scripts without these full stops.
"""

from __future__ import annotations

import re

__all__ = ["ABBREVIATIONS", "SENTENCE_END", "split_sentences"]

ABBREVIATIONS = ("e.g", "i.e", "etc", "vs", "approx", "inc", "corp", "ltd", "mr", "mrs", "dr", "fig", "u.s")
SENTENCE_END = re.compile(r"[.!?](?=[\"')\]]?\s)|\n[ \t]*\n")


def split_sentences(text: str) -> list[tuple[int, int]]:
    """(start, end) offsets of the sentences of `text`, in order, white space at either end left out."""
    spans, start = [], 0
    for match in SENTENCE_END.finditer(text):
        if match.group() == "." and _is_abbreviation(text, match.start()):
            continue
        spans.append((start, match.end() if match.group().strip() else match.start()))
        start = match.end()
    spans.append((start, len(text)))
    trimmed = []
    for begin, end in spans:
        while begin < end and text[begin].isspace():
            begin += 1
        while end > begin and text[end - 1].isspace():
            end -= 1
        if begin < end:
            trimmed.append((begin, end))
    return trimmed


def _is_abbreviation(text: str, dot: int) -> bool:
    word = re.search(r"[\w.]+$", text[max(0, dot - 8):dot])
    return bool(word) and word.group().lower() in ABBREVIATIONS
