"""The re-ranker contract: what the pipeline, the answer step and the sweeps ask of a re-ranker.

A re-ranker is registered in ``RERANKERS`` (``rag_core.retrieve.rerank``; the ``reranker`` setting
chooses it) as a class. The pipeline makes one per configuration with
``from_config(config, cache, store_dir)`` and, unless ``rerank_depth`` is 0, asks it:

- ``unavailable()``: None when it can run; else a ``ModelLoadError`` saying why (re-ranking is then
  off for that run, announced once and recorded as ``rerank_model_used = none (unavailable: ...)``);
- ``score_passages(query, passages) -> RerankScores``: what the pipeline calls, with the candidates as
  ``RerankPassage`` records (the chunk: text, document, pages and character offsets; its document's
  metadata fields; the nearest heading above it). Its default calls ``score(query, texts)``, so a
  re-ranker that reads only the text implements ``score`` and one that reads the pages or the section
  implements ``score_passages`` (no edit of ``rag_core`` either way);
- ``score(query, texts) -> RerankScores``: one finite score per text, in the order given, higher =
  more relevant (``rag_core.components.faults.checked_scores`` holds it to that; and the same of
  ``score_passages``);
- ``model_name`` (what it was configured with) and ``name_used`` (the model it actually runs, the
  ``rerank_model_used`` param of every run); both are its name when it runs no model.

Its own settings are declared at registration (``RERANKERS.register(name, cls, settings=[...])``)
and read from ``self.config``. ``score_threshold(config)`` is the score a re-ranked passage must reach
for the answer step to count it relevant (the no-answer rule of ``rag_core.generate.answer``); the
default None says its scores have no calibrated scale, and the answer step then counts the retrievers'
agreement, as without re-ranking. The cross-encoder's threshold is its ``min_rerank_score`` setting.

``rerank_unavailable(config)`` is the one availability check of sweeps and searches: it asks the
configured re-ranker (not the cross-encoder), once per re-ranker and settings in a process.
Left out: listwise re-rankers (a score per passage is the contract).
"""

from __future__ import annotations

from abc import ABC
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from rag_core.records import Chunk
from rag_core.retrieve.models import ModelLoadError

if TYPE_CHECKING:
    from rag_core.components.config_fields import ConfigFields


@dataclass(frozen=True)
class RerankScores:
    scores: list[float]  # one per text, in the order given (higher = more relevant)
    model_seconds: float  # the model's time for these pairs, as measured when each was scored
    computed_seconds: float  # of which spent now (cache misses)
    pairs_scored: int  # computed by the model now
    cache_hits: int

    @classmethod
    def computed(cls, scores: Sequence[float], seconds: float) -> "RerankScores":
        """Scores all computed now, in `seconds` (a re-ranker without a cache)."""
        return cls([float(score) for score in scores], seconds, seconds, len(scores), 0)


@dataclass(frozen=True)
class RerankPassage:
    """One candidate as a re-ranker receives it (``score_passages``): the chunk and what the store knows
    of where it sits."""
    chunk: Chunk  # id, doc_id, text, char_start, char_end, page_start, page_end
    metadata: Mapping[str, str] = field(default_factory=dict)  # its document's: doc_id, title, pages, own fields
    heading: str = ""  # the nearest heading above the chunk in its document ('' when none)

    @property
    def text(self) -> str:
        return self.chunk.text

    @property
    def doc_id(self) -> str:
        return self.chunk.doc_id

    @property
    def page_start(self) -> int:
        return self.chunk.page_start

    @property
    def page_end(self) -> int:
        return self.chunk.page_end


class BaseReranker(ABC):
    """A re-ranker: scores (query, passage) pairs. Subclasses implement ``score`` (texts) or
    ``score_passages`` (``RerankPassage`` records); one that loads a model overrides ``unavailable`` and
    ``name_used`` too (``CrossEncoderReranker``)."""

    model_name: str = ""  # what it was configured with; a plugin without a model: its registered name

    def __init__(self, config: ConfigFields | None = None) -> None:
        self.config = config  # its settings (those it declared at registration) are attributes of it

    @classmethod
    def from_config(cls, config: ConfigFields, cache: Any, store_dir: Path) -> "BaseReranker":
        """The re-ranker for `config`; `cache` is the store's score cache (``ScoreCache``, or None)
        and `store_dir` the store, for a re-ranker that keeps files there. Default: ``cls(config)``."""
        return cls(config)

    def score(self, query: str, texts: Sequence[str]) -> RerankScores:
        """One score per text of `texts` for `query`, in their order (higher = more relevant)."""
        raise NotImplementedError(f"{type(self).__name__} implements neither score(query, texts) nor "
                                  "score_passages(query, passages)")

    def score_passages(self, query: str, passages: Sequence[RerankPassage]) -> RerankScores:
        """One score per passage for `query`, in their order (higher = more relevant): what the pipeline
        calls. By default ``score(query, texts)`` of their texts."""
        return self.score(query, [passage.text for passage in passages])

    def unavailable(self) -> ModelLoadError | None:
        """None when it can run; else the error saying why not (it is then not used)."""
        return None

    @property
    def name_used(self) -> str:
        """The model it actually runs, as runs record it."""
        return self.model_name

    def describe(self) -> str:
        """How messages name it: ``re-ranker 'name'``."""
        return f"re-ranker {self.model_name!r}"

    @classmethod
    def score_threshold(cls, config: ConfigFields) -> float | None:
        """The score a re-ranked passage must reach to count as relevant for the no-answer rule;
        None: its scores have no calibrated scale (the retrievers' agreement decides instead)."""
        return None


def score_threshold(config: ConfigFields) -> float | None:
    """The configured re-ranker's ``score_threshold`` (None for a re-ranker that does not follow
    ``BaseReranker`` and declares none)."""
    from rag_core.retrieve.rerank import RERANKERS

    threshold = getattr(RERANKERS.load(config.reranker), "score_threshold", None)
    return threshold(config) if threshold is not None else None


_AVAILABILITY: dict[tuple, str | None] = {}  # component key -> why it cannot run (None: it can), per process


def rerank_unavailable(config: ConfigFields, store_dir: str | Path | None = None) -> str | None:
    """Why `config`'s re-ranker cannot run (``cross-encoder 'x' cannot be loaded (cause)``), or None:
    it can, or re-ranking is off (``rerank_depth`` 0). The sweeps' and searches' check before a point
    runs: the configured re-ranker is asked, through its ``unavailable()``."""
    if config.rerank_depth == 0:
        return None
    from rag_core.retrieve.rerank import RERANKERS

    component = RERANKERS.get(config.reranker)
    key = component.key(config)
    if key not in _AVAILABILITY:
        reranker = component.load().from_config(config, None, Path(store_dir) if store_dir else Path("."))
        error = reranker.unavailable()
        named = reranker.describe() if hasattr(reranker, "describe") else f"re-ranker {config.reranker!r}"
        _AVAILABILITY[key] = f"{named} cannot be loaded ({error.reason})" if error is not None else None
    return _AVAILABILITY[key]
