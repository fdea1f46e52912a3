"""Tokenizers for keyword search, chosen by name (the ``tokenizer`` setting).

- ``"stem"`` (default): Unicode NFKC, lowercase, split on non-alphanumerics, drop English stop
  words, Snowball English ("Porter2") stemming (Porter, "Snowball: A language for stemming
  algorithms", 2001) through PyStemmer, or the pure-Python ``snowballstemmer`` when PyStemmer is
  missing; both run the same Snowball algorithm.
- ``"simple"``: NFKC, lowercase, split on non-alphanumerics. No stop words, no stemming.
- ``"whitespace"``: ``str.split()``. Nothing else: case and punctuation are kept.

Digits are kept, and underscores and hyphens split tokens: ``QM-4021`` -> ``qm``, ``4021`` and
``max_inflight_batches`` -> ``max``, ``inflight``, ``batch``. Queries go through the same tokenizer,
so such identifiers stay searchable. NFKC turns PDF ligatures (``ﬁ``) into plain letters.

Left out on purpose: re-joining words hyphenated across line breaks (``retriev-\\nal``), language
detection, and any stop-word list but the fixed one below, so that results do not depend on which
packages are installed. Bump ``TOKENIZER_VERSION`` whenever the output of a tokenizer changes:
saved BM25 indexes record it and refuse to load under another version.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from typing import Callable

Tokenizer = Callable[[str], list[str]]  # text -> tokens

TOKENIZER_VERSION = 1

# Lucene's EnglishAnalyzer stop set (ENGLISH_STOP_WORDS_SET, 33 words), also used by Anserini/Pyserini.
ENGLISH_STOP_WORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then "
    "there these they this to was will with".split()
)

# Runs of letters or digits in any script: \w without the underscore.
_ALPHANUMERIC_RUN = re.compile(r"[^\W_]+")


def _words(text: str) -> list[str]:
    return _ALPHANUMERIC_RUN.findall(unicodedata.normalize("NFKC", text).lower())


@lru_cache(maxsize=1)
def _stem_word_function() -> Callable[[str], str]:
    """The Snowball English ``stemWord`` of PyStemmer, or of snowballstemmer as a fallback."""
    try:
        import Stemmer  # PyStemmer (C)

        return Stemmer.Stemmer("english").stemWord
    except ImportError:
        pass
    try:
        import snowballstemmer  # pure Python, same algorithm

        return snowballstemmer.stemmer("english").stemWord
    except ImportError:
        raise ImportError(
            "the 'stem' tokenizer needs a Snowball stemmer: pip install PyStemmer "
            "(or snowballstemmer); or set tokenizer to 'simple'"
        ) from None


@lru_cache(maxsize=1 << 17)
def stem(word: str) -> str:
    """Snowball English stem of one lowercased word (cached: corpora repeat words a lot)."""
    return _stem_word_function()(word)


def tokenize_stem(text: str) -> list[str]:
    return [stem(word) for word in _words(text) if word not in ENGLISH_STOP_WORDS]


def tokenize_simple(text: str) -> list[str]:
    return _words(text)


def tokenize_whitespace(text: str) -> list[str]:
    return text.split()


# name -> tokenizer
TOKENIZERS: dict[str, Tokenizer] = {
    "stem": tokenize_stem,
    "simple": tokenize_simple,
    "whitespace": tokenize_whitespace,
}


def get_tokenizer(name: str) -> Tokenizer:
    """The tokenizer registered under ``name``; ``ValueError`` listing the valid names otherwise."""
    try:
        return TOKENIZERS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown tokenizer {name!r}; valid tokenizers: {', '.join(TOKENIZERS)}") from None
