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

Numbers in one form (``with_numbers``, the ``bm25_numbers`` setting): a number written with thousands
separators, decimals, an accounting parenthesis, a minus sign, a currency sign or a scale word gives
the same tokens however it is written, in documents and queries alike:

- ``1,234.50``, ``1234.5``, ``$1,234.5`` -> ``1234.5`` (separators dropped, trailing decimal zeros dropped);
- ``(1,234)``, ``-1,234``, ``\u22121,234`` -> ``1234`` and ``-1234`` (the magnitude, so ``1,234`` finds it,
  and the signed form, so a negative finds a negative);
- ``$1.2 billion``, ``$1.2bn``, ``1.2 billion`` -> ``1.2``, ``billion`` and ``1200000000`` (the number as
  written, the scale word in one spelling, and the value with the scale applied, so ``1,200 million`` and
  ``1,200,000,000`` share a token with it). Scale words: thousand, million, billion, trillion, and
  ``bn``, ``mn`` (spaced or attached); ``k``, ``m``, ``mm``, ``b``, ``t``, ``tn`` only attached right after a
  currency sign (``$5m``: ``5m`` alone may be five metres).
Anything else that looks like a number stays as the tokenizer splits it: versions and addresses
(``2.1.3``, ``10.0.0.1``), dates (``2019-12-31``), ``1,23``, identifiers (``qm4021``, ``3rd``).
Left out: a table's unit line (``in millions``) applied to its cells.

Left out on purpose: re-joining words hyphenated across line breaks (``retriev-\\nal``), language
detection, and any stop-word list but the fixed one below, so that results do not depend on which
packages are installed. Bump ``TOKENIZER_VERSION`` whenever the output of a tokenizer changes:
saved BM25 indexes record it and refuse to load under another version.
"""

from __future__ import annotations

import re
import unicodedata
from decimal import Decimal
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


# --- numbers in one form (with_numbers) ------------------------------------------------------------
NUMBERS_VERSION = 1  # part of a BM25 index's key with bm25_numbers: bump when number_forms changes
_NUMBER = re.compile(
    r"(?<![^\W_])(?<!\d[.,])"  # not inside a word, not the tail of "2.1.3" or "1,23"
    r"(?:(?P<open>\()|(?P<minus>[-\u2212\u2013]))?"  # an accounting parenthesis or a minus sign
    r"(?:(?P<currency>[$\u20ac\u00a3\u00a5])\s?)?"
    r"(?P<int>\d{1,3}(?:,\d{3})+|\d+)(?:\.(?P<frac>\d+))?(?![.,]?\d)"
    r"(?(open)\))"
    r"(?:\s?(?P<scale>thousand|million|billion|trillion|bn|mn)|(?P<abbr>mm|tn|k|m|b|t))?"
    r"(?![^\W_])",
    re.IGNORECASE)
_SCALES = {"thousand": ("thousand", 3), "k": ("thousand", 3), "million": ("million", 6), "mn": ("million", 6),
           "m": ("million", 6), "mm": ("million", 6), "billion": ("billion", 9), "bn": ("billion", 9),
           "b": ("billion", 9), "trillion": ("trillion", 12), "tn": ("trillion", 12), "t": ("trillion", 12)}


def _plain(value: Decimal) -> str:
    """`value` in positional notation without trailing decimal zeros: 1234.50 -> 1234.5, 1.2E+9 -> 1200000000."""
    text = format(value, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def number_forms(match: re.Match) -> list[str] | None:
    """The tokens of one number `match` of ``_NUMBER`` (None: not a number after all, e.g. ``10k``
    without a currency sign): the magnitude, the signed form when negative, and with a scale word
    the scale word and the value with the scale applied."""
    scale = (match["scale"] or "").lower()
    if match["abbr"]:
        if not match["currency"]:
            return None
        scale = match["abbr"].lower()
    digits = match["int"].replace(",", "")
    frac = (match["frac"] or "").rstrip("0")
    magnitude = f"{digits}.{frac}" if frac else digits
    negative = bool(match["open"] or match["minus"])
    forms = [magnitude] + ([f"-{magnitude}"] if negative else [])
    if scale:
        word, power = _SCALES[scale]
        scaled = _plain(Decimal(magnitude).scaleb(power))
        forms += [word, scaled] + ([f"-{scaled}"] if negative else [])
    return forms


def with_numbers(tokenize: Tokenizer) -> Tokenizer:
    """`tokenize` with numbers in one form (see the module's docstring): the text between numbers goes
    through `tokenize`, each number gives ``number_forms`` (scale words through `tokenize` too)."""

    def tokens(text: str) -> list[str]:
        text = unicodedata.normalize("NFKC", text)
        found: list[str] = []
        cursor = 0
        for match in _NUMBER.finditer(text):
            forms = number_forms(match)
            if forms is None:
                continue
            found += tokenize(text[cursor:match.start()])
            found += [token for form in forms for token in ([form] if form[-1].isdigit() else tokenize(form))]
            cursor = match.end()
        return found + tokenize(text[cursor:])

    tokens.__name__ = f"{getattr(tokenize, '__name__', 'tokenize')}_with_numbers"
    return tokens


# name -> tokenizer (a plugin registers its own: TOKENIZERS.register("mine", function))
TOKENIZERS = Registry("tokenizer", setting="tokenizer", group="bm25")
TOKENIZERS.register("stem", tokenize_stem, help="NFKC, lowercase, alphanumeric runs, English stop words, Snowball stems")
TOKENIZERS.register("simple", tokenize_simple, help="NFKC, lowercase, alphanumeric runs")
TOKENIZERS.register("whitespace", tokenize_whitespace, help="str.split()")


def get_tokenizer(name: str) -> Tokenizer:
    """The tokenizer registered under ``name``; ``ValueError`` listing the valid names otherwise."""
    return TOKENIZERS.load(name)
