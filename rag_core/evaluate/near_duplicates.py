"""Near-duplicate questions: the same question with other word order, case or punctuation, or a few words more.

Two questions are near-duplicates when rapidfuzz's ``token_set_ratio`` of their lower-cased words
(punctuation dropped) is at least the threshold (0-100). ``token_set_ratio`` scores 100 when one
question's words are a subset of the other's ("What is the default visibility timeout?" and "What
is the default visibility timeout for new queues?"), which is intended: a golden set gains little
from both. Left out: semantic (embedding) similarity, which would also catch paraphrases.
"""

from __future__ import annotations

import re
from typing import Sequence

from rapidfuzz import fuzz, process


def near_duplicate(question: str, kept: Sequence[str], threshold: float) -> str | None:
    """The kept question most like `question` if their token_set_ratio reaches `threshold`, else None."""
    if not kept:
        return None
    match = process.extractOne(_words(question), [_words(q) for q in kept], scorer=fuzz.token_set_ratio,
                               score_cutoff=threshold)
    return kept[match[2]] if match else None


def _words(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))
