"""BM25 keyword search over chunks (Robertson & Zaragoza, "The Probabilistic Relevance Framework:
BM25 and Beyond", 2009), with two backends chosen by name (the ``bm25_backend`` setting).

Both backends get the same tokens from ``rag_core.retrieve.tokenizer``; they differ in the formula
(variants as named by Kamphuis, de Vries, Boytsov & Lin, "Which BM25 Do You Mean?", ECIR 2020):

- ``"bm25s"`` (default; Lù, "BM25S", 2024), method ``"lucene"``:
  ``idf(t) = log(1 + (N - n_t + 0.5) / (n_t + 0.5))`` (never negative) and
  ``score = sum_t idf(t) * tf / (tf + k1 * (1 - b + b * dl / avgdl))``, without the constant
  ``(k1 + 1)`` factor, as Lucene >= 8. Scores are precomputed per (term, document) in float32,
  so a query only adds up sparse columns: fast.
- ``"rank_bm25"``: ``BM25Okapi`` of rank-bm25, the classic Okapi formula (Robertson et al., "Okapi
  at TREC-3", 1994): ``idf(t) = log((N - n_t + 0.5) / (n_t + 0.5))``, which rank-bm25 replaces by
  ``0.25 * mean idf`` when negative (a term in more than half the documents), and
  ``score = sum_t idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))``. Scores
  are computed at query time in Python over all documents: slower; kept as the classic reference.

The two agree on the order for one-term queries (same term-frequency curve, both idfs positive
when the term is in fewer than half the documents); with several terms their idf curves weigh the
terms differently, so rankings can differ. Only the bm25s scores are comparable with Lucene/Pyserini.
A query term repeated in the query counts once per occurrence, in both backends.
With ``numbers`` (the ``bm25_numbers`` setting) documents and queries are tokenized with numbers in one
form (``rag_core.retrieve.tokenizer.with_numbers``: ``1,234.5``, ``(1,234)``, ``$1.2 billion``).

A filter (``allowed``) masks the scores before the top k is taken. Weighted queries
(``retrieve_weighted``) serve RM3 query expansion (``rag_core.retrieve.expansion.rm3``).
Left out: BM25F fields, incremental updates (``index`` rebuilds from scratch).
A saved ``rank_bm25`` index is a pickle: load only directories you wrote yourself.
"""

from __future__ import annotations

import json
import logging
import pickle
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from rag_core.records import ScoredId
from rag_core.retrieve.retrievers import BM25_BACKENDS  # name -> backend class (BM25sBackend, RankBM25Backend)
from rag_core.retrieve.tokenizer import NUMBERS_VERSION, TOKENIZER_VERSION, get_tokenizer, with_numbers

if TYPE_CHECKING:
    from rag_core.components.config_fields import ConfigFields

FORMAT_VERSION = 1
META_FILE = "bm25_meta.json"  # settings, versions, document count
IDS_FILE = "bm25_ids.json"  # ids in insertion order


class BM25LoadError(ValueError):
    """A saved index is missing, of another format version, or was built with other settings."""


@dataclass(frozen=True)
class BM25Settings:
    backend: str = "bm25s"
    tokenizer: str = "stem"
    k1: float = 1.5
    b: float = 0.75
    numbers: bool = False  # numbers in one form (tokenizer.with_numbers)


class BM25sBackend:
    """bm25s, Lucene variant; saved with bm25s's own ``save`` (numpy arrays + JSON vocabulary)."""

    subdir = "bm25s"

    def __init__(self, model: Any) -> None:
        self.model = model

    @classmethod
    def build(cls, corpus_tokens: list[list[str]], k1: float, b: float) -> "BM25sBackend":
        bm25s = import_bm25s()
        model = bm25s.BM25(k1=k1, b=b, method="lucene", backend="numpy")
        # No "" token: empty queries never reach the backend (see BM25Index.retrieve).
        model.index(corpus_tokens, create_empty_token=False, show_progress=False)
        return cls(model)

    def scores(self, query_tokens: list[str]) -> np.ndarray | None:
        token_ids = self.model.get_tokens_ids(query_tokens)  # unknown tokens left out
        return self.model.get_scores_from_ids(token_ids) if token_ids else None

    def term_scores(self, token: str) -> np.ndarray | None:
        token_ids = self.model.get_tokens_ids([token])
        return self.model.get_scores_from_ids(token_ids) if token_ids else None

    def save(self, directory: Path) -> None:
        self.model.save(directory / self.subdir, show_progress=False)

    @classmethod
    def load(cls, directory: Path) -> "BM25sBackend":
        return cls(import_bm25s().BM25.load(directory / cls.subdir, mmap=False, show_progress=False))


class RankBM25Backend:
    """rank-bm25's BM25Okapi; saved as a pickle of the fitted object."""

    file = "rank_bm25.pkl"

    def __init__(self, model: Any) -> None:
        self.model = model

    @classmethod
    def build(cls, corpus_tokens: list[list[str]], k1: float, b: float) -> "RankBM25Backend":
        try:
            from rank_bm25 import BM25Okapi
        except ImportError:
            raise ImportError("bm25_backend 'rank_bm25' needs rank-bm25: pip install rank-bm25") from None
        return cls(BM25Okapi(corpus_tokens, k1=k1, b=b))

    def scores(self, query_tokens: list[str]) -> np.ndarray | None:
        known = [token for token in query_tokens if token in self.model.idf]
        return self.model.get_scores(known) if known else None

    def term_scores(self, token: str) -> np.ndarray | None:
        return self.model.get_scores([token]) if token in self.model.idf else None

    def save(self, directory: Path) -> None:
        with open(directory / self.file, "wb") as handle:
            pickle.dump(self.model, handle, protocol=pickle.HIGHEST_PROTOCOL)

    @classmethod
    def load(cls, directory: Path) -> "RankBM25Backend":
        with open(directory / cls.file, "rb") as handle:
            return cls(pickle.load(handle))


class BM25Index:
    """Settings in ``__init__``, then ``index()``, ``retrieve()``, ``save()``, ``load()``."""

    def __init__(self, backend: str = "bm25s", tokenizer: str = "stem", k1: float = 1.5, b: float = 0.75,
                 numbers: bool = False) -> None:
        BM25_BACKENDS.get(backend)  # UnknownComponent (a ValueError) listing the valid backends
        if k1 < 0 or not 0 <= b <= 1:
            raise ValueError(f"BM25 needs k1 >= 0 and 0 <= b <= 1, got k1={k1}, b={b}")
        self.settings = BM25Settings(backend, tokenizer, float(k1), float(b), bool(numbers))
        self.tokenize = get_tokenizer(tokenizer)  # raises ValueError listing the tokenizers
        if numbers:
            self.tokenize = with_numbers(self.tokenize)
        self.ids: list[str] = []
        self._backend: Any = None

    @classmethod
    def from_config(cls, config: ConfigFields) -> "BM25Index":
        """From a ``RagConfig`` (its ``bm25_backend``, ``tokenizer``, ``bm25_k1``, ``bm25_b``, ``bm25_numbers``)."""
        return cls(config.bm25_backend, config.tokenizer, config.bm25_k1, config.bm25_b,
                   config.bm25_numbers)

    def __len__(self) -> int:
        return len(self.ids)

    def index(self, ids: Sequence[str], texts: Sequence[str]) -> None:
        if len(ids) != len(texts):
            raise ValueError(f"index() got {len(ids)} ids but {len(texts)} texts")
        if not ids:
            raise ValueError("cannot build a BM25 index over no documents")
        if len(set(ids)) != len(ids):
            duplicate = next(item for item, count in Counter(ids).items() if count > 1)
            raise ValueError(f"duplicate id {duplicate!r} in the documents to index")
        corpus_tokens = [self.tokenize(text) for text in texts]
        if not any(corpus_tokens):
            raise ValueError(f"no document has a token left after the {self.settings.tokenizer!r} tokenizer")
        self._backend = BM25_BACKENDS.load(self.settings.backend).build(corpus_tokens, self.settings.k1, self.settings.b)
        self.ids = list(ids)

    def retrieve(self, query: str, k: int, allowed: np.ndarray | None = None) -> list[ScoredId]:
        """At most ``k`` documents with score > 0, best first; ties keep insertion order. `allowed`
        (a boolean per document, in insertion order) restricts the ranking to those documents before
        the top ``k`` is taken (a metadata filter), not after."""
        if self._backend is None:
            raise RuntimeError("the BM25 index is empty: call index() or BM25Index.load() first")
        if k <= 0:
            return []
        scores = self._backend.scores(self.tokenize(query))  # doc position -> score, or None
        if scores is None:
            return []
        if allowed is not None:
            scores = np.where(allowed, scores, 0.0)
        return [ScoredId(self.ids[position], float(scores[position])) for position in _top_positive(scores, k)]

    def retrieve_weighted(self, token_weights: Mapping[str, float], k: int,
                          allowed: np.ndarray | None = None) -> list[ScoredId]:
        """Like ``retrieve``, for a query given as weighted tokens (already tokenized, e.g. by RM3):
        ``score(d) = sum_t weight(t) * bm25(t, d)``."""
        if self._backend is None:
            raise RuntimeError("the BM25 index is empty: call index() or BM25Index.load() first")
        total: np.ndarray | None = None
        for token, weight in token_weights.items():
            scores = self._backend.term_scores(token)
            if scores is not None:
                total = weight * scores if total is None else total + weight * scores
        if total is None or k <= 0:
            return []
        if allowed is not None:
            total = np.where(allowed, total, 0.0)
        return [ScoredId(self.ids[position], float(total[position])) for position in _top_positive(total, k)]

    def save(self, directory: str | Path) -> None:
        if self._backend is None:
            raise RuntimeError("nothing to save: call index() first")
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / META_FILE).unlink(missing_ok=True)  # a half-written directory must not load
        self._backend.save(directory)
        (directory / IDS_FILE).write_text(json.dumps(self.ids))
        meta = {
            "format_version": FORMAT_VERSION,
            "tokenizer_version": TOKENIZER_VERSION,
            "n_documents": len(self.ids),
            **asdict(self.settings),
        }
        if self.settings.numbers:
            meta["numbers_version"] = NUMBERS_VERSION
        else:  # the meta of before bm25_numbers
            del meta["numbers"]
        (directory / META_FILE).write_text(json.dumps(meta, indent=2))

    @classmethod
    def load(
        cls,
        directory: str | Path,
        *,
        backend: str | None = None,
        tokenizer: str | None = None,
        k1: float | None = None,
        b: float | None = None,
        numbers: bool | None = None,
    ) -> "BM25Index":
        """Open a saved index. Settings given here must match the saved ones (``BM25LoadError``)."""
        directory = Path(directory)
        try:
            meta = json.loads((directory / META_FILE).read_text())
        except FileNotFoundError:
            raise BM25LoadError(f"no BM25 index in {directory} (missing {META_FILE})") from None
        for key, expected in (("format_version", FORMAT_VERSION), ("tokenizer_version", TOKENIZER_VERSION)):
            if meta.get(key) != expected:
                raise BM25LoadError(
                    f"BM25 index in {directory} has {key} {meta.get(key)!r}, this code reads {expected}; rebuild it"
                )
        meta.setdefault("numbers", False)
        if meta["numbers"] and meta.get("numbers_version") != NUMBERS_VERSION:
            raise BM25LoadError(f"BM25 index in {directory} has numbers_version {meta.get('numbers_version')!r}, "
                                f"this code reads {NUMBERS_VERSION}; rebuild it")
        wanted = {"backend": backend, "tokenizer": tokenizer, "k1": k1, "b": b, "numbers": numbers}
        differences = [
            f"{key}={meta.get(key)!r} (wanted {value!r})"
            for key, value in wanted.items()
            if value is not None and meta.get(key) != (float(value) if key in ("k1", "b") else value)
        ]
        if differences:
            raise BM25LoadError(f"BM25 index in {directory} was built with other settings: {', '.join(differences)}")
        index = cls(meta["backend"], meta["tokenizer"], meta["k1"], meta["b"], meta["numbers"])
        index._backend = BM25_BACKENDS.load(meta["backend"]).load(directory)
        index.ids = json.loads((directory / IDS_FILE).read_text())
        if len(index.ids) != meta["n_documents"]:
            raise BM25LoadError(f"BM25 index in {directory} is inconsistent: {len(index.ids)} ids")
        return index


def _top_positive(scores: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` best scores > 0, best first, ties by position (insertion order)."""
    positive = np.flatnonzero(scores > 0)
    if len(positive) > k:
        # Keep everything tied with the k-th best, so the tie-break below sees all of them.
        kth_best = np.partition(scores[positive], len(positive) - k)[len(positive) - k]
        positive = positive[scores[positive] >= kth_best]
    order = np.lexsort((positive, -scores[positive]))  # last key sorts first
    return positive[order][:k]


def import_bm25s() -> Any:
    try:
        import bm25s
    except ImportError:
        raise ImportError("bm25_backend 'bm25s' needs bm25s: pip install bm25s (or use 'rank_bm25')") from None
    logging.getLogger("bm25s").setLevel(logging.WARNING)  # bm25s sets DEBUG on import
    return bm25s
