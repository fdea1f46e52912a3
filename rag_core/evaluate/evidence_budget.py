"""Evidence metrics at a context budget: how much of the golden evidence the text an answer would
receive holds, whatever the chunking.

For each query the final ranking is read best first and passages are kept until ``B`` words (a budget
of ``context_budgets``; words are whitespace-separated, as ``chunk_size`` counts them by default); the
passage that crosses the budget is cut after its first words that fit. The kept text and the evidence
are compared as character positions in their documents (the evidence located the way relevance
locates it, ``rag_core.evaluate.relevance.locate_evidence``, never by comparing passage strings) and
measured in characters other than whitespace, so text kept twice by overlapping passages counts
once, and moving a chunk boundary without changing which text is kept changes nothing (not even the
spaces between passages). For each budget, as in Chroma's "Evaluating Chunking Strategies
for Retrieval" (2024), which scores chunkers at the token level:

- ``evidence/recall@B``: the share of the evidence's characters that are kept;
- ``evidence/precision@B``: the share of the kept characters that are evidence;
- ``evidence/iou@B``: kept and evidence, intersection over union.

Because every chunking gets the same budget, a large chunk is not rewarded for holding more text per
rank, and a small one is not rewarded for precision it only has because less is shown.

**The top K passages** (``evidence_top/*@K``, K of ``metrics_k``): the same three over the first K passages
whole, with no word budget, as Chroma's evaluation scores its retrieved chunks, so that a figure can be set
beside theirs. As in their code, precision and IoU divide by the passages' summed lengths, so text that
overlapping passages repeat counts again there (and a chunking with more or longer text per passage is
charged for it); recall counts the evidence found once. Chroma counts every character; here, as above,
characters other than whitespace.

A query whose evidence has no text (page-only lines, BEIR qrels) or cannot be located has no value
(left out of the averages, never 0); with no such query at all the metrics are not reported, and
``evidence/queries`` says how many queries were scored.

Left out: budgets in model tokens (words are stated instead; a tokenizer would tie the metric to a model).
"""

from __future__ import annotations

import functools
from typing import Iterable, Mapping, Sequence

import numpy as np

from rag_core.evaluate.golden import GoldenQuery
from rag_core.evaluate.metric_registry import BUDGET, CUTOFF, METRICS
from rag_core.evaluate.relevance import EvidenceNotFound, locate_evidence
from rag_core.records import Chunk, Document

for _name, _help in (("recall", "share of the evidence text among the ranking's first B words"),
                     ("precision", "share of the ranking's first B words that are evidence"),
                     ("iou", "the first B words and the evidence text: intersection over union")):
    METRICS.declare(_name, ("evidence",), _help, parameter=BUDGET, best=1.0)
EVIDENCE_METRICS = tuple(metric.name for metric in METRICS.at("evidence"))  # recall, precision, iou
for _name, _help in (("recall", "share of the evidence text in the top K passages (no word budget: Chroma's protocol)"),
                     ("precision", "share of the top K passages' text that is evidence (their summed lengths, "
                                   "overlaps counted again, as Chroma does)"),
                     ("iou", "the top K passages and the evidence text: intersection over union (Chroma's protocol)")):
    METRICS.declare(_name, ("evidence_top",), _help, parameter=CUTOFF, best=1.0)

Spans = dict[str, list[tuple[int, int]]]  # doc_id -> disjoint, sorted [start, end) character spans


def evidence_metric_names(budgets: Iterable[int], ks: Iterable[int] = ()) -> list[str]:
    return ([f"evidence/{metric}@{budget}" for budget in budgets for metric in EVIDENCE_METRICS]
            + [f"evidence_top/{metric}@{k}" for k in ks for metric in EVIDENCE_METRICS])


def merged(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted, disjoint spans covering the same characters (touching spans joined)."""
    result: list[tuple[int, int]] = []
    for start, end in sorted(span for span in spans if span[1] > span[0]):
        if result and start <= result[-1][1]:
            result[-1] = (result[-1][0], max(result[-1][1], end))
        else:
            result.append((start, end))
    return result


@functools.lru_cache(maxsize=1)
def _is_text() -> np.ndarray:
    """code point (U+3001 standing for every one above it) -> not whitespace (``str.isspace`` is false)."""
    return np.array([not chr(point).isspace() for point in range(0x3002)])


@functools.lru_cache(maxsize=64)
def _counts(document: Document) -> tuple[np.ndarray, np.ndarray]:
    """(characters, words): ``[i]`` is how many characters other than whitespace, and how many word
    starts, ``document.text[:i]`` holds."""
    points = np.frombuffer(document.text.encode("utf-32-le"), dtype=np.uint32)
    text = _is_text()[np.minimum(points, 0x3001)]
    starts = text & ~np.concatenate(([False], text[:-1]))
    chars, words = np.zeros(len(points) + 1, dtype=np.int64), np.zeros(len(points) + 1, dtype=np.int64)
    np.cumsum(text, out=chars[1:])
    np.cumsum(starts, out=words[1:])
    return chars, words


class TextCounts(dict):
    """doc_id -> (characters, words) counts of its document (``_counts``), computed on first use: hashing a
    ``Document`` for the process-wide cache costs more than a look-up here."""

    def __init__(self, documents: Mapping[str, Document]) -> None:
        super().__init__()
        self.documents = documents

    def __missing__(self, doc_id: str) -> tuple[np.ndarray, np.ndarray]:
        value = self[doc_id] = _counts(self.documents[doc_id])
        return value


def covered(spans: Spans, counts: TextCounts) -> int:
    """Characters other than whitespace in `spans`."""
    total = 0
    for doc_id, found in spans.items():
        before = counts[doc_id][0]
        total += sum(int(before[end] - before[start]) for start, end in found)
    return total


def intersection(first: Spans, second: Spans) -> Spans:
    """The spans in both (each a doc_id -> merged spans map)."""
    common: Spans = {}
    for doc_id, spans in first.items():
        others, j = second.get(doc_id, []), 0
        for start, end in spans:
            while j < len(others) and others[j][1] <= start:
                j += 1
            k = j
            while k < len(others) and others[k][0] < end:
                common.setdefault(doc_id, []).append((max(start, others[k][0]), min(end, others[k][1])))
                k += 1
    return common


def evidence_spans(query: GoldenQuery, documents: Mapping[str, Document]) -> Spans | None:
    """Where the query's evidence lies; None when a piece of evidence has no text or is not found."""
    found: dict[str, list[tuple[int, int]]] = {}
    for item in query.evidence:
        document = documents.get(item.source)
        if item.text is None or document is None:
            return None
        try:
            found.setdefault(document.doc_id, []).append(locate_evidence(document, item.text, page=item.page))
        except EvidenceNotFound:
            return None
    return {doc_id: merged(spans) for doc_id, spans in found.items()} or None


def kept_spans(ranking: Sequence[Chunk], budget_words: int, counts: TextCounts) -> Spans:
    """The text of the ranked passages, best first, up to `budget_words` words (the last one cut after
    the words that fit). Words are counted as ``str.split`` counts them, from the documents' counts."""
    kept: dict[str, list[tuple[int, int]]] = {}
    left = budget_words
    for chunk in ranking:
        if left <= 0:
            break
        chars, words = counts[chunk.doc_id]
        start, end = chunk.char_start, chunk.char_end
        mid_word = int(start > 0 and chars[start + 1] - chars[start - 1] == 2)  # starts inside a word
        count = int(words[end] - words[start]) + mid_word
        if count > left:  # cut before the start of word left + 1 of the passage, and the spaces before it
            end = int(np.searchsorted(words, words[start] + left + 1 - mid_word)) - 1
            while end > start and chars[end] == chars[end - 1]:  # whitespace
                end -= 1
        kept.setdefault(chunk.doc_id, []).append((start, end))
        left -= count
    return {doc_id: merged(spans) for doc_id, spans in kept.items()}


def budget_scores(kept: Spans, evidence: Spans, counts: TextCounts) -> dict[str, float]:
    both = covered(intersection(kept, evidence), counts)
    kept_chars, evidence_chars = covered(kept, counts), covered(evidence, counts)
    union = kept_chars + evidence_chars - both
    return {"recall": both / evidence_chars if evidence_chars else 0.0,
            "precision": both / kept_chars if kept_chars else 0.0,
            "iou": both / union if union else 0.0}


def top_scores(ranking: Sequence[Chunk], k: int, evidence: Spans, counts: TextCounts) -> dict[str, float]:
    """Recall, precision and IoU of the first `k` passages whole (Chroma's protocol): the evidence they hold,
    against the evidence and against their summed lengths (text two passages share counts twice)."""
    top = ranking[:k]
    kept = {doc_id: merged((chunk.char_start, chunk.char_end) for chunk in top if chunk.doc_id == doc_id)
            for doc_id in {chunk.doc_id for chunk in top}}
    both = covered(intersection(kept, evidence), counts)
    shown = sum(covered({chunk.doc_id: [(chunk.char_start, chunk.char_end)]}, counts) for chunk in top)
    evidence_chars = covered(evidence, counts)
    union = shown + evidence_chars - both
    return {"recall": both / evidence_chars if evidence_chars else 0.0,
            "precision": both / shown if shown else 0.0,
            "iou": both / union if union else 0.0}


def evidence_metrics(queries: Sequence[GoldenQuery], documents: Mapping[str, Document],
                     rankings: Mapping[str, Sequence[Chunk]], budgets: Sequence[int], ks: Sequence[int] = (),
                     ) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """(averages, query id -> values) of every evidence metric at every budget, and over the top K passages
    for each of `ks`; queries without located evidence text have no values, and with none at all both are
    empty but for the count."""
    per_query: dict[str, dict[str, float]] = {}
    counts = TextCounts(documents)
    for query in queries:
        evidence = evidence_spans(query, documents)
        if evidence is None:
            continue
        values = per_query[query.id] = {}
        for budget in budgets:
            scores = budget_scores(kept_spans(rankings.get(query.id, ()), budget, counts), evidence, counts)
            values.update({f"evidence/{metric}@{budget}": scores[metric] for metric in EVIDENCE_METRICS})
        for k in ks:
            scores = top_scores(rankings.get(query.id, ()), k, evidence, counts)
            values.update({f"evidence_top/{metric}@{k}": scores[metric] for metric in EVIDENCE_METRICS})
    averages = {"evidence/queries": float(len(per_query))}
    if per_query:
        averages.update({name: float(np.mean([values[name] for values in per_query.values()]))
                         for name in evidence_metric_names(budgets, ks)})
    return averages, per_query
