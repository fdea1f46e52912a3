"""A golden set written by an LLM from the user's own documents (``rag-pipeline make-golden``).

For each sampled passage (``rag_core.evaluate.passage_sampling``: spread over documents and over
the beginning, middle and end of each) the LLM writes a question, a short answer and the
sentence(s) of the passage that support it (``rag_core.generate.question_writer``). A question is
kept only if
- every evidence quote is found in its document by ``locate_evidence``, the very alignment the
  evaluator uses (so ``eval`` will find it too); otherwise it is dropped as *unlocatable*;
- it is not a near-duplicate of a question already kept (``rag_core.evaluate.near_duplicates``,
  at ``duplicate_threshold``); otherwise it is dropped as a *duplicate*.
Passages are taken in the stratified order, except that the next one always comes from a
document with the fewest questions kept so far: a dropped question is replaced from the same
document when it has passages left. This goes on until ``n`` are kept, the passages run out, or
``max_requests`` (default ``3 * n``) requests have been sent. Question types are mixed by
giving each passage the requested type kept least so far among those the passage can support
(``numeric`` needs a digit, ``multi_sentence`` two sentences).

Every evidence record is ``{source, page, text}`` with the page the quote was found on. Records
also carry ``type`` and ``position``, which the golden-set loader ignores.
Left out: checking that the answer is right (a person reviews the file: see docs/evaluation.md), answers
spanning several documents, unanswerable questions.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from rag_core.evaluate.golden import GoldenSetError
from rag_core.evaluate.near_duplicates import near_duplicate
from rag_core.evaluate.passage_sampling import candidate_passages, stratified_order
from rag_core.evaluate.relevance import EvidenceNotFound, locate_evidence
from rag_core.generate.cost import TokenUsage
from rag_core.llm import TRANSIENT_ERRORS, LLMClient, complete_with_retries
from rag_core.generate.question_writer import (QUESTION_MAX_TOKENS, MalformedQuestionReply, WrittenQuestion,
                                               parse_question_reply, question_prompt, question_types)
from rag_core.progress import progress as progress_bar
from rag_core.records import Document, Passage
from rag_core.writes import check_output_file, jsonl_text, valid_text, write_atomic

log = logging.getLogger(__name__)

DEFAULT_DUPLICATE_THRESHOLD = 90.0
_FITS = {"numeric": lambda p: p.has_number, "multi_sentence": lambda p: p.sentences >= 2}  # type -> test


@dataclass(frozen=True)
class GoldenGeneration:
    records: tuple[dict[str, Any], ...]  # the golden-set lines, in order
    dropped: tuple[dict[str, Any], ...]  # {"reason", "source", "page", "question"?, ...} for review
    requested: int  # LLM requests sent (one per passage)
    usage: TokenUsage
    model: str
    counts: dict[str, int] = field(default_factory=dict)  # reason -> questions dropped for it


def generate_golden(
    documents: Sequence[Document],
    client: LLMClient,
    n: int,
    *,
    types: Sequence[str] = ("factoid",),
    seed: int = 0,
    duplicate_threshold: float = DEFAULT_DUPLICATE_THRESHOLD,
    max_requests: int | None = None,
    retries: int = 2,
    backoff_s: float = 1.0,
    max_delay_s: float = 30.0,
    progress: bool = False,
) -> GoldenGeneration:
    """Up to `n` checked questions over `documents`; raises GoldenSetError on bad arguments."""
    unknown = [t for t in types if t not in question_types()]
    if n < 1 or not types or unknown:
        raise GoldenSetError(f"need n >= 1 and question types among {', '.join(question_types())}; "
                             f"got n={n}, types={','.join(types)}")
    order = stratified_order(candidate_passages(documents), seed)
    if not order:
        raise GoldenSetError("no passage of 25 words or more in the documents: nothing to write questions from")
    by_id = {document.doc_id: document for document in documents}
    budget = max_requests if max_requests is not None else 3 * n

    records: list[dict[str, Any]] = []
    dropped: list[dict[str, Any]] = []
    usage, remaining, requested, round_number = TokenUsage(), list(order), 0, 0
    while len(records) < n and remaining and requested < budget:
        round_number += 1
        label = "make-golden" if round_number == 1 else f"make-golden (replacing dropped, round {round_number})"
        for _ in progress_bar(range(min(n - len(records), budget - requested)), progress, label, unit="question"):
            if not remaining:
                break
            passage = remaining.pop(next_passage(remaining, records))
            question_type = _type_for(passage, types, records)
            if question_type is None:
                dropped.append(_drop("no requested type fits the passage", passage))
                continue
            requested += 1
            system, user = question_prompt(passage, question_type)
            try:
                completion = complete_with_retries(client, system, user, QUESTION_MAX_TOKENS, retries=retries,
                                                   backoff_s=backoff_s, max_delay_s=max_delay_s)
            except TRANSIENT_ERRORS as exc:
                log.warning("no question for %s page %d: %s", passage.doc_id, passage.page, exc)
                dropped.append(_drop("LLM request failed", passage, error=str(exc)))
                continue
            usage = usage.plus(completion)
            outcome = _check(completion.text, passage, by_id[passage.doc_id], records, duplicate_threshold)
            if isinstance(outcome, dict):
                outcome["type"] = question_type
                dropped.append(outcome)
            else:
                records.append(_record(len(records) + 1, n, question_type, passage, *outcome))
    counts: dict[str, int] = {}
    for item in dropped:
        counts[item["reason"]] = counts.get(item["reason"], 0) + 1
    return GoldenGeneration(tuple(records), tuple(dropped), requested, usage, client.model, counts)


def next_passage(remaining: Sequence[Passage], records: Sequence[dict[str, Any]]) -> int:
    """Index of the first remaining passage from a document with the fewest questions kept so far,
    so a document whose question was dropped is asked again before the others get a second one."""
    kept: dict[str, int] = {}
    for record in records:
        kept[record["evidence"][0]["source"]] = kept.get(record["evidence"][0]["source"], 0) + 1
    fewest = min(kept.get(passage.doc_id, 0) for passage in remaining)
    return next(i for i, passage in enumerate(remaining) if kept.get(passage.doc_id, 0) == fewest)


def _type_for(passage: Passage, types: Sequence[str], records: Sequence[dict[str, Any]]) -> str | None:
    """The requested type kept least so far (first listed on a tie) that `passage` can support."""
    fitting = [t for t in types if _FITS.get(t, lambda p: True)(passage)]
    kept = [record["type"] for record in records]
    return min(fitting, key=lambda t: (kept.count(t), types.index(t))) if fitting else None


def _check(reply: str, passage: Passage, document: Document, records: Sequence[dict[str, Any]],
           threshold: float) -> tuple[WrittenQuestion, list[dict[str, Any]]] | dict[str, Any]:
    """(question, evidence records) to keep, or the drop record saying why not."""
    try:
        written = parse_question_reply(reply)
    except MalformedQuestionReply as exc:
        return _drop("malformed reply", passage, error=str(exc))
    if isinstance(written, str):
        return _drop("passage skipped by the LLM", passage, error=written)
    evidence = []
    for quote in written.evidence:
        try:
            start, _ = locate_evidence(document, quote, page=passage.page)
        except EvidenceNotFound as exc:
            return _drop("evidence not found in the document", passage, question=written.question, error=str(exc))
        evidence.append({"source": document.doc_id, "page": document.page_at(start), "text": quote})
    twin = near_duplicate(written.question, [record["query"] for record in records], threshold)
    if twin is not None:
        return _drop("near-duplicate question", passage, question=written.question, duplicate_of=twin)
    return written, evidence


def _drop(reason: str, passage: Passage, **details: str) -> dict[str, Any]:
    return {"reason": reason, "source": passage.doc_id, "page": passage.page, **details}


def _record(number: int, n: int, question_type: str, passage: Passage, written: WrittenQuestion,
            evidence: list[dict[str, Any]]) -> dict[str, Any]:
    return {"id": f"g{number:0{max(3, len(str(n)))}d}", "type": question_type, "position": passage.position,
            "query": written.question, "answer": written.answer, "evidence": evidence}


def write_golden(records: Sequence[dict[str, Any]], path: str | Path, *, overwrite: bool = False) -> Path:
    """Write one JSON object per line, atomically (``rag_core.writes``: the whole file beside, then renamed);
    an existing file is replaced only with `overwrite`; a lone surrogate in the text becomes U+FFFD."""
    path = check_output_file(path, "--out")
    if path.exists() and not overwrite:
        raise GoldenSetError(f"{path} already exists: choose another --out, or pass --force to replace it")
    return write_atomic(path, valid_text(jsonl_text(records)))  # an LLM's "\ud800" cannot go in a UTF-8 file
