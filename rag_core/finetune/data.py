"""Training data for fine-tuning: golden-set (or BEIR) queries with their relevant passages and the
first-stage candidates that hard negatives are mined from.

A query's positives are the chunks the evaluator counts as relevant (``rag_core.evaluate.relevance``
over the configured chunking), so training sees exactly what ``eval`` scores. Its candidates are what
the workbench's own first stage returns for it (``Pipeline.candidates`` with ``mode`` set to the
negatives' source: ``bm25``, ``dense`` or ``hybrid``, and ``retrieve_depth`` to their depth), best
first: hard negatives are drawn from them (``rag_core.finetune.mining``), and validation re-ranks them.
The validation queries are held out from the training queries by a seeded hash of their normalised texts
(``split_by_text``, over ``rag_core.workbench.statistics.holdout.split_queries``), so adding queries moves few of
the old ones and queries with the same text stay on one side.

Shapes: ``TrainingQuery(id, text, positives=(chunk ids), candidates=(chunk ids, best first))`` and
``passages``: chunk id -> the text the model reads (the chunk's text for a re-ranker, what the index
embeds, ``chunk_context`` included, for an embedder).
Left out: graded relevance (positives are binary, like the evaluator's), queries with a metadata
filter are mined without it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence, TypeVar

from rag_core.config import ConfigError, RagConfig
from rag_core.evaluate.golden import GoldenQuery
from rag_core.evaluate.relevance import build_qrels
from rag_core.finetune.fingerprints import query_fingerprint
from rag_core.finetune.settings import NEGATIVE_SOURCES
from rag_core.ingest.corpus import Corpus
from rag_core.progress import progress
from rag_core.retrieve.pipeline import Pipeline
from rag_core.workbench.statistics.holdout import split_queries

Q = TypeVar("Q")
PASSAGE_KINDS = ("text", "indexed")  # what a model reads: the chunk's text (re-ranker) or its indexed text (embedder)


class TrainTestOverlap(ConfigError):
    """Training queries include queries that an evaluation of the same command reports on."""


@dataclass(frozen=True)
class TrainingQuery:
    id: str
    text: str
    positives: tuple[str, ...]  # relevant chunk ids
    candidates: tuple[str, ...]  # the first stage's chunk ids, best first


@dataclass(frozen=True)
class TrainingSet:
    train: tuple[TrainingQuery, ...]
    validation: tuple[TrainingQuery, ...]
    passages: Mapping[str, str]  # chunk id -> text the model reads
    negatives_from: str  # the retrieval mode the candidates came from
    depth: int  # candidates per query

    def all_queries(self) -> tuple[TrainingQuery, ...]:
        return self.train + self.validation


def ensure_disjoint(training: Sequence[GoldenQuery], test: Sequence[GoldenQuery], test_name: str) -> None:
    """Raise ``TrainTestOverlap`` when a training query (same id or same normalised text) is also a test query."""
    test_ids = {query.id for query in test}
    test_texts = {query_fingerprint(query.query) for query in test}
    shared = [query.id for query in training if query.id in test_ids or query_fingerprint(query.query) in test_texts]
    if shared:
        shown = ", ".join(shared[:5]) + (", ..." if len(shared) > 5 else "")
        raise TrainTestOverlap(f"refusing to train on {len(shared)} queries that {test_name} reports on ({shown}): "
                               "train on other queries (another golden set, or another BEIR split)")


def split_by_text(queries: Sequence[Q], share: float, seed: int, text: Callable[[Q], str]) -> tuple[list[Q], list[Q]]:
    """(kept, held out): `share` of the distinct normalised query texts held out by ``split_queries`` (a seeded
    hash), so that queries with the same text (SciFact's train split has two such pairs under different ids)
    fall on the same side and never trip ``ensure_disjoint``."""
    keys = [query_fingerprint(text(query)) for query in queries]
    held_out = set(split_queries(keys, share, seed).held_out)
    return ([query for query, key in zip(queries, keys) if key not in held_out],
            [query for query, key in zip(queries, keys) if key in held_out])


def build_training_set(queries: Sequence[GoldenQuery], corpus: Corpus, store_dir: str | Path, config: RagConfig, *,
                       negatives_from: str = "bm25", depth: int = 30, validation_share: float = 0.15,
                       seed: int = 0, passage_kind: str = "text", show_progress: bool = False) -> TrainingSet:
    """Positives and first-stage candidates of every query, split into training and validation queries.
    Queries without a relevant chunk in this chunking are left out (nothing to learn from)."""
    pipeline = mining_pipeline(corpus, store_dir, config, negatives_from, depth, passage_kind, show_progress)
    chunks = pipeline.index.chunks
    relevant = build_qrels(queries, pipeline.corpus.by_id, chunks)["chunk"]  # query id -> chunk id -> 1
    found = []
    for query in progress(list(queries), show_progress and len(queries) > 20, "Mining candidates", unit="query"):
        positives = tuple(relevant.get(query.id, {}))
        if positives:
            candidates = pipeline.candidates(query.query)[0].ranked["fused"]
            found.append(TrainingQuery(query.id, query.query, positives, tuple(hit.id for hit in candidates)))
    if len(found) < 2:
        raise ConfigError(f"fine-tuning needs at least 2 queries with a relevant chunk, found {len(found)} "
                          f"(of {len(queries)} queries)")
    train, validation = split_by_text(found, validation_share, seed, lambda query: query.text)
    return TrainingSet(tuple(train), tuple(validation), chunk_passages(pipeline, passage_kind), negatives_from, depth)


def mining_pipeline(corpus: Corpus, store_dir: str | Path, config: RagConfig, negatives_from: str, depth: int,
                    passage_kind: str, show_progress: bool = False) -> Pipeline:
    """The first stage that candidates are mined with: `negatives_from` (a retrieval mode) to `depth`,
    without re-ranking, expansion, routing or child chunks; the arguments checked."""
    if negatives_from not in NEGATIVE_SOURCES:
        raise ConfigError(f"negatives_from must be one of {', '.join(NEGATIVE_SOURCES)}, got {negatives_from!r}")
    if passage_kind not in PASSAGE_KINDS:
        raise ValueError(f"passage_kind must be one of {', '.join(PASSAGE_KINDS)}, got {passage_kind!r}")
    if depth < 1:
        raise ConfigError(f"the negatives' depth must be at least 1, got {depth}")
    mining = config.replace(mode=negatives_from, retrieve_depth=depth, rerank_depth=0, query_expansion="none",
                            route_docs=0, child_size=0)
    return Pipeline(mining, corpus, Path(store_dir), progress=show_progress)


def chunk_passages(pipeline: Pipeline, passage_kind: str) -> dict[str, str]:
    """chunk id -> what the model reads: the chunk's text, or its indexed text (``chunk_context`` included)."""
    chunks = pipeline.index.chunks
    texts = pipeline.index.indexed_texts() if passage_kind == "indexed" else [chunk.text for chunk in chunks]
    return dict(zip((chunk.id for chunk in chunks), texts))
