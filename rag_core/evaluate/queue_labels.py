"""The review queue's questions as plain data, which traces go into a queue, and a queue's answers read
as the labels ``rag_core.evaluate.feedback`` knows (``rag-pipeline feedback queue``).

MLflow's review queues (``mlflow.genai.review_queues``) ask fixed questions, its label schemas
(``mlflow.genai.label_schemas``), scoped to an experiment. The workbench's three are the labels that
``feedback export`` reads, under the same names, so an answer given in the queue is an assessment like
one added in the trace view or with ``mlflow.log_feedback``:

    answer_accepted    feedback, pass/fail ("Accepted" / "Rejected")      -> True / False
    expected_response  expectation, free text                              -> the text
    passage_relevant   feedback, multi-select of "passage 1" .. "passage N" -> one passage_relevant
                       label per choice, value True, metadata {"rank": N}: the trace's N-th passage

A schema's choices are fixed for the whole experiment and MLflow allows at most 10 of at most 64
characters, so a choice cannot name a passage of one trace (its document and page): it names a rank
of the trace's final ranking (the ``rerank`` span's documents, else ``fusion``'s, as the trace view
lists them), and the export takes that passage's source, pages and text from the trace. A choice
beyond the passages the trace holds ("passage 7" of a trace with 5) is skipped with the reason
"passage not in the trace"; any other value is a bad label.
Left out: per-passage yes/no questions (a schema's answer is one per trace, so passages not chosen are
not labelled irrelevant), scores other than these three labels.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, replace
from typing import Iterable, Sequence

from rag_core.evaluate.feedback import (ANSWER_ACCEPTED, EXPECTED_RESPONSE, LABEL_NAMES, PASSAGE_RELEVANT, Label,
                                        LabelledTrace)

MAX_CHOICES = 10  # MLflow's limit on a categorical schema's options
CHOICE_PREFIX = "passage "
CHOICE = re.compile(r"^\s*passage\s+(?P<rank>\d+)\s*$", re.IGNORECASE)
ACCEPTED, REJECTED = "Accepted", "Rejected"  # the pass/fail buttons of answer_accepted


@dataclass(frozen=True)
class QueueQuestion:
    """One label schema: its name (the assessment's), kind, input and the instruction reviewers see."""

    name: str
    kind: str  # "feedback" or "expectation"
    input: str  # "pass_fail", "text" or "choices"
    instruction: str


QUESTIONS = (
    QueueQuestion(ANSWER_ACCEPTED, "feedback", "pass_fail",
                  "Is the answer right and supported by the passages it cites?"),
    QueueQuestion(EXPECTED_RESPONSE, "expectation", "text",
                  "The right answer, in a sentence, if the answer given is wrong or incomplete (optional)."),
    QueueQuestion(PASSAGE_RELEVANT, "feedback", "choices",
                  "Which passages hold the answer? Passage N is the N-th document of the trace's final ranking "
                  "(its 'rerank' span, else 'fusion'), as the trace view lists them."),
)


def passage_choice(rank: int) -> str:
    return f"{CHOICE_PREFIX}{rank}"


def passage_choices(traces: Iterable[LabelledTrace], at_least: int = 1) -> list[str]:
    """"passage 1" .. "passage N", N the most passages a trace holds (at most ``MAX_CHOICES``)."""
    most = max((len(trace.passages) for trace in traces), default=0)
    return [passage_choice(rank) for rank in range(1, min(MAX_CHOICES, max(most, at_least)) + 1)]


def choice_labels(label: Label) -> list[Label]:
    """A queue's ``passage_relevant`` answer (a choice, or a list of them) as one label per chosen passage,
    value True, metadata ``{"rank": N}``; any other label unchanged. A value that is no choice stays as it
    is, so that the export skips it as a bad label."""
    value = label.value
    if label.name != PASSAGE_RELEVANT or isinstance(value, bool):
        return [label]
    chosen = value if isinstance(value, list) else [value]
    ranks = [CHOICE.match(item) if isinstance(item, str) else None for item in chosen]
    if not chosen or not all(ranks):
        return [label]
    return [replace(label, value=True, metadata={**dict(label.metadata or {}), "rank": int(match["rank"])})
            for match in ranks if match]


def is_labelled(trace: LabelledTrace) -> bool:
    return any(label.name in LABEL_NAMES for label in trace.labels)


def select_traces(traces: Sequence[LabelledTrace], *, since_ms: int | None = None, unlabelled_only: bool = False,
                  sample: int | None = None, seed: int = 0) -> list[LabelledTrace]:
    """The traces a queue gets, oldest first: asked at or after `since_ms`, without labels when
    `unlabelled_only`, and of those `sample` drawn at random (seeded: the same call, the same draw)."""
    chosen = [trace for trace in traces if (since_ms is None or trace.requested_at_ms >= since_ms)
              and not (unlabelled_only and is_labelled(trace)) and trace.query]
    chosen.sort(key=lambda trace: (trace.requested_at_ms, trace.trace_id))
    if sample is not None and sample < len(chosen):
        drawn = set(random.Random(seed).sample(range(len(chosen)), sample))
        chosen = [trace for index, trace in enumerate(chosen) if index in drawn]
    return chosen
