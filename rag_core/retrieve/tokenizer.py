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

from rag_core.components import Registry

Tokenizer = Callable[[str], list[str]]  # text -> tokens

TOKENIZER_VERSION = 1

# NLTK's English stop-word list (179 words). Lucene's 33-word set keeps question words ("what",
# "how", "which", "who", "do"), which then match almost every chunk: RAG queries are questions, and
# keyword agreement is one of the no-answer signals, so the longer list is the better default here.
ENGLISH_STOP_WORDS = frozenset(
    "i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself yourselves "
    "he him his himself she she's her hers herself it it's its itself they them their theirs themselves "
    "what which who whom this that that'll these those am is are was were be been being have has had "
    "having do does did doing a an the and but if or because as until while of at by for with about "
    "against between into through during before after above below to from up down in out on off over "
    "under again further then once here there when where why how all any both each few more most other "
    "some such no nor not only own same so than too very s t can will just don don't should should've "
    "now d ll m o re ve y ain aren aren't couldn couldn't didn didn't doesn doesn't hadn hadn't hasn "
    "hasn't haven haven't isn isn't ma mightn mightn't mustn mustn't needn needn't shan shan't shouldn "
    "shouldn't wasn wasn't weren weren't won won't wouldn wouldn't".split()
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


# name -> tokenizer (a plugin registers its own: TOKENIZERS.register("mine", function))
TOKENIZERS = Registry("tokenizer", setting="tokenizer", group="bm25")
TOKENIZERS.register("stem", tokenize_stem, help="NFKC, lowercase, alphanumeric runs, English stop words, Snowball stems")
TOKENIZERS.register("simple", tokenize_simple, help="NFKC, lowercase, alphanumeric runs")
TOKENIZERS.register("whitespace", tokenize_whitespace, help="str.split()")


def get_tokenizer(name: str) -> Tokenizer:
    """The tokenizer registered under ``name``; ``ValueError`` listing the valid names otherwise."""
    return TOKENIZERS.load(name)
