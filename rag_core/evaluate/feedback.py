"""A person's labels on a question's trace, turned into golden-set lines (``rag-pipeline feedback export``).

Labels are MLflow 3 assessments with fixed names (SPEC section 11), the same whether a person added
them in the MLflow UI's trace view or through the Python API:
- expectation ``expected_response``: the right answer (text);
- feedback ``answer_accepted`` (bool): was the trace's answer right?
- feedback ``passage_relevant`` (bool), metadata ``source`` and ``page``: is that passage of the trace
  relevant? (``passage_id`` in the metadata may pin one chunk id when a page holds several passages;
  ``rank`` N names the trace's N-th passage instead: a review queue's answer, ``rag_core.evaluate.queue_labels``.)
  The UI's form has no metadata: there the rationale names the passage, ``error-codes.pdf p2`` (or
  ``error-codes.pdf, page 2``), and is read when the metadata lacks ``source`` or ``page``.
This module works on plain records (``LabelledTrace``; reading them from MLflow is
``rag_core.workbench.tracking.labels``) and decides, per trace, oldest first:

    no label of these names          -> not counted (``unlabelled``)
    a label of the wrong type        -> skipped, "bad label" (also text that is not valid Unicode: a lone
                                        surrogate, which no UTF-8 file can hold)
    two labels that disagree         -> skipped, "conflicting labels" (answer_accepted true and false,
                                        two expected responses, a passage both relevant and not)
    a passage label the trace lacks  -> skipped, "passage not in the trace" (no passage of that
                                        source holds that page)
    no passage labelled relevant     -> skipped, "no relevant passage"
    its question already in the set  -> skipped, "duplicate query" (case and spacing ignored)
    evidence not in its document     -> skipped, "evidence not found" (``locate_evidence``, the same
                                        look-up evaluation uses), or "unknown document"
    otherwise                        -> one golden line: the query; ``answer`` = expected_response, else
                                        the trace's answer when accepted, else none; each relevant
                                        passage's text as evidence with the page it is found on; and
                                        ``provenance`` (trace id, experiment, who labelled, when).
Rejected answers (``answer_accepted`` false) with an ``expected_response`` also become judge labels
(``rag_core.evaluate.judge_labels``) with ``answer_correctness`` 1, and accepted answers whose
``expected_response`` differs from them, 5, so the file ``calibrate-judge`` reads holds both ends of
the scale. Labels are untrusted text: they reach prompts only through the judge's delimiters.
Left out: scores other than answer_correctness for judge labels (a rejection does not say which axis
failed), merging the labels of two traces of the same question (the older one wins).
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from rag_core.evaluate.relevance import EvidenceNotFound, locate_evidence
from rag_core.records import Document
from rag_core.writes import not_unicode

EXPECTED_RESPONSE, ANSWER_ACCEPTED, PASSAGE_RELEVANT = "expected_response", "answer_accepted", "passage_relevant"
LABEL_NAMES = (EXPECTED_RESPONSE, ANSWER_ACCEPTED, PASSAGE_RELEVANT)
ID_PREFIX = "fb-"
# reasons a labelled trace is skipped (the start of each message)
BAD_LABEL, CONFLICT, NOT_IN_TRACE = "bad label", "conflicting labels", "passage not in the trace"
NO_RELEVANT, DUPLICATE, NOT_FOUND, UNKNOWN_DOCUMENT = ("no relevant passage", "duplicate query", "evidence not found",
                                                       "unknown document")
REJECTED_SCORE, ACCEPTED_SCORE = 1, 5  # answer_correctness of a judge label
# "error-codes.pdf p2", "guides/faq.md, page 3": a document id (no spaces) and a page
RATIONALE_PASSAGE = re.compile(r"(?P<source>[^\s,]+\.[A-Za-z0-9]+),?\s+(?:p\.?|page)\s*(?P<page>\d+)", re.IGNORECASE)


@dataclass(frozen=True)
class TracePassage:
    id: str  # chunk id
    source: str  # document id
    page_start: int
    page_end: int
    text: str
    rank: int  # in the trace's final ranking
    given_to_answer: bool = False


@dataclass(frozen=True)
class Label:
    name: str
    value: Any
    metadata: Mapping[str, Any] = field(default_factory=dict)
    labelled_by: str = ""  # the assessment's source id (a user name, "default" from the API)
    labelled_at_ms: int = 0
    rationale: str = ""  # a passage label from the UI names its passage here: "error-codes.pdf p2"


@dataclass(frozen=True)
class LabelledTrace:
    trace_id: str
    query: str
    answer: str | None  # the trace's answer (None: none was generated)
    passages: tuple[TracePassage, ...]  # the final ranking the trace holds, best first
    labels: tuple[Label, ...]  # only LABEL_NAMES, valid ones (not overridden)
    requested_at_ms: int = 0


@dataclass(frozen=True)
class Skipped:
    trace_id: str
    query: str
    reason: str  # starts with one of the reasons above

    def as_json(self) -> dict[str, str]:
        return {"trace_id": self.trace_id, "query": self.query, "reason": self.reason}


@dataclass(frozen=True)
class FeedbackExport:
    golden: list[dict[str, Any]]  # golden-set lines to append
    judge_labels: list[dict[str, Any]]  # judge-label lines to append
    skipped: list[Skipped]
    unlabelled: int  # traces without any label of LABEL_NAMES
    judge_skipped: list[Skipped] = field(default_factory=list)  # rejected answers with no judge label, and why


class _Skip(Exception):
    pass


def normalised_query(query: str) -> str:
    return re.sub(r"\s+", " ", query).strip().casefold()


def export_feedback(traces: Iterable[LabelledTrace], documents: Mapping[str, Document], *, experiment: str,
                    existing_queries: Iterable[str] = (), existing_judge_ids: Iterable[str] = ()) -> FeedbackExport:
    """Golden-set and judge-label lines from labelled `traces` (see the module docstring for the rules);
    `documents` (doc id -> document) are where evidence must be found; questions in `existing_queries`
    and judge ids in `existing_judge_ids` are not written again."""
    seen = {normalised_query(query): "the golden set" for query in existing_queries}
    judge_ids = set(existing_judge_ids)
    golden, judge, skipped, judge_skipped, unlabelled = [], [], [], [], 0
    for trace in sorted(traces, key=lambda trace: (trace.requested_at_ms, trace.trace_id)):
        if not trace.labels:
            unlabelled += 1
            continue
        try:
            labels = _read_labels(trace)
        except _Skip as skip:
            skipped.append(Skipped(trace.trace_id, trace.query, str(skip)))
            continue
        accepted, expected, relevant = labels
        line_id = ID_PREFIX + trace.trace_id.removeprefix("tr-")[:16]
        provenance = _provenance(trace, experiment)
        judge_line = _judge_line(trace, line_id, accepted, expected, provenance, judge_skipped)
        if judge_line is not None and (problem := not_unicode(judge_line)):
            judge_skipped.append(Skipped(trace.trace_id, trace.query, f"{BAD_LABEL}: {problem}"))
            judge_line = None
        if judge_line is not None and judge_line["id"] not in judge_ids:
            judge_ids.add(judge_line["id"])
            judge.append(judge_line)
        try:
            if not relevant:
                raise _Skip(f"{NO_RELEVANT}: no passage labelled {PASSAGE_RELEVANT} true")
            key = normalised_query(trace.query)
            if key in seen:
                raise _Skip(f"{DUPLICATE}: the same question is in {seen[key]}")
            evidence = [_evidence(passage, documents) for passage in relevant]
            answer = expected if expected is not None else trace.answer if accepted else None
            line = {"id": line_id, "query": trace.query, **({"answer": answer} if answer else {}),
                    "evidence": evidence, "provenance": provenance}
            if problem := not_unicode(line):
                raise _Skip(f"{BAD_LABEL}: {problem}")
        except _Skip as skip:
            skipped.append(Skipped(trace.trace_id, trace.query, str(skip)))
            continue
        seen[key] = f"trace {trace.trace_id}, exported above"
        golden.append(line)
    return FeedbackExport(golden, judge, skipped, unlabelled, judge_skipped)


def _read_labels(trace: LabelledTrace) -> tuple[bool | None, str | None, list[TracePassage]]:
    """(answer accepted or None, expected response or None, relevant passages in rank order)."""
    accepted: dict[bool, str] = {}  # value -> who
    expected: dict[str, str] = {}
    passages: dict[str, dict[bool, str]] = {}  # passage id -> value -> who
    for label in trace.labels:
        who = label.labelled_by or "unknown"
        if label.name == EXPECTED_RESPONSE:
            if not isinstance(label.value, str) or not label.value.strip():
                raise _Skip(f"{BAD_LABEL}: {EXPECTED_RESPONSE} must be text, got {label.value!r}")
            expected.setdefault(label.value.strip(), who)
        elif label.name == ANSWER_ACCEPTED:
            accepted.setdefault(_boolean(label), who)
        elif label.name == PASSAGE_RELEVANT:
            passage = _labelled_passage(trace, label)
            passages.setdefault(passage.id, {}).setdefault(_boolean(label), who)
    if len(accepted) > 1:
        raise _Skip(f"{CONFLICT}: {ANSWER_ACCEPTED} true ({accepted[True]}) and false ({accepted[False]})")
    if len(expected) > 1:
        first, second = list(expected)[:2]
        raise _Skip(f"{CONFLICT}: two {EXPECTED_RESPONSE} values, {first!r} ({expected[first]}) and "
                    f"{second!r} ({expected[second]})")
    by_id = {passage.id: passage for passage in trace.passages}
    for passage_id, values in passages.items():
        if len(values) > 1:
            passage = by_id[passage_id]
            raise _Skip(f"{CONFLICT}: {PASSAGE_RELEVANT} true ({values[True]}) and false ({values[False]}) for "
                        f"{passage.source} p{passage.page_start}")
    relevant = sorted((by_id[pid] for pid, values in passages.items() if True in values), key=lambda p: p.rank)
    return (next(iter(accepted)) if accepted else None), (next(iter(expected)) if expected else None), relevant


def _boolean(label: Label) -> bool:
    """True/false, also as the text "true"/"false" (any case): what a form may send."""
    value = label.value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    if not isinstance(value, bool):
        raise _Skip(f"{BAD_LABEL}: {label.name} must be true or false, got {value!r}")
    return value


def _labelled_passage(trace: LabelledTrace, label: Label) -> TracePassage:
    """The trace's passage a passage_relevant label names: by ``rank`` (a review queue's choice), by
    ``passage_id``, else the best-ranked passage of ``source`` whose pages hold ``page`` (those given to the
    answer first)."""
    metadata = label.metadata or {}
    if isinstance(metadata.get("rank"), int) and not isinstance(metadata["rank"], bool):
        at_rank = [p for p in trace.passages if p.rank == metadata["rank"]]
        if not at_rank:
            raise _Skip(f"{NOT_IN_TRACE}: no passage {metadata['rank']}, the trace holds {len(trace.passages)}")
        return at_rank[0]
    source, page, passage_id = metadata.get("source"), metadata.get("page"), metadata.get("passage_id")
    named = RATIONALE_PASSAGE.search(label.rationale or "")
    if (source is None or page is None) and named:
        source, page = named["source"], named["page"]
    if isinstance(page, str) and page.strip().isdigit():
        page = int(page)
    if not isinstance(source, str) or not source or isinstance(page, bool) or not isinstance(page, int):
        raise _Skip(f"{BAD_LABEL}: {PASSAGE_RELEVANT} needs metadata 'source' (a document) and 'page' (a number), "
                    f"or a rationale like 'report.pdf p2'; got {dict(metadata)!r}")
    holding = [p for p in trace.passages if p.source == source and p.page_start <= page <= p.page_end
               and (passage_id is None or p.id == passage_id)]
    if not holding:
        raise _Skip(f"{NOT_IN_TRACE}: no passage of {source!r} holds page {page}"
                    f"{f' with id {passage_id!r}' if passage_id else ''}")
    return min(holding, key=lambda p: (not p.given_to_answer, p.rank))


def _evidence(passage: TracePassage, documents: Mapping[str, Document]) -> dict[str, Any]:
    """The passage as golden evidence, its page the one its located text starts on."""
    document = documents.get(passage.source)
    if document is None:
        raise _Skip(f"{UNKNOWN_DOCUMENT}: {passage.source!r} is not among the store's documents")
    try:
        start, _ = locate_evidence(document, passage.text, page=passage.page_start)
    except EvidenceNotFound as exc:
        raise _Skip(f"{NOT_FOUND}: {exc}") from None
    return {"source": passage.source, "page": document.page_at(start), "text": passage.text}


def _provenance(trace: LabelledTrace, experiment: str) -> dict[str, Any]:
    latest = max(label.labelled_at_ms for label in trace.labels)
    return {"trace_id": trace.trace_id, "experiment": experiment,
            "labelled_by": sorted({label.labelled_by or "unknown" for label in trace.labels}),
            "labelled_at": _dt.datetime.fromtimestamp(latest / 1000, _dt.timezone.utc).isoformat(timespec="seconds")}


def _judge_line(trace: LabelledTrace, line_id: str, accepted: bool | None, expected: str | None,
                provenance: dict[str, Any], judge_skipped: list[Skipped]) -> dict[str, Any] | None:
    """A judge label for a rejected answer (or an accepted one with a different expected response)."""
    if accepted is None or not trace.answer:
        return None
    if expected is None or (accepted and expected == trace.answer.strip()):
        if not accepted:
            judge_skipped.append(Skipped(trace.trace_id, trace.query, f"a rejected answer needs an "
                                         f"{EXPECTED_RESPONSE} to be scored for answer_correctness"))
        return None
    given = [p for p in trace.passages if p.given_to_answer] or list(trace.passages)
    if not given:
        judge_skipped.append(Skipped(trace.trace_id, trace.query, "the trace holds no passage"))
        return None
    return {"id": line_id, "query": trace.query, "answer": trace.answer, "reference": expected,
            "passages": [{"source": p.source, "page": p.page_start, "text": p.text} for p in given],
            "human": {"answer_correctness": ACCEPTED_SCORE if accepted else REJECTED_SCORE}, "provenance": provenance}
