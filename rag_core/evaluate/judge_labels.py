"""Human scores for judge calibration, read from a JSONL file (``rag-pipeline calibrate-judge``).

One answer per line, scored by a person on the judge's own axes (``rag_core.evaluate.judge.METRICS``),
each an integer from 1 to 5, with what the judge needs to score it too::

    {"id": "j03", "query": "What is the default visibility timeout?", "answer": "60 seconds.",
     "reference": "30 seconds", "passages": [{"source": "api-reference.pdf", "page": 4,
     "text": "The visibility timeout defaults to 30 seconds."}],
     "human": {"faithfulness": 1, "answer_relevance": 5, "coverage": 2, "answer_correctness": 1}}

``passages`` are the passages the answer was written from (what the judge's faithfulness and
coverage rubrics read); ``reference`` is needed to score ``answer_correctness``; ``human`` may
leave axes out. Other keys (``note``, ...) are ignored. Errors are ``LabelsError`` naming file,
line and id.
Left out: several raters per answer (one score per axis and line), scales other than 1-5.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_core.evaluate.golden import GoldenSetError
from rag_core.evaluate.judge import METRICS, JudgeItem
from rag_core.jsonl import read_jsonl
from rag_core.records import Chunk, Hit


class LabelsError(GoldenSetError):
    """The labels file is missing or malformed."""


@dataclass(frozen=True)
class LabelledAnswer:
    id: str
    query: str
    answer: str
    reference: str | None
    passages: tuple[Chunk, ...]  # each one page of its document (doc_id: the labels' "source")
    human: dict[str, int]  # axis -> score 1-5, only the axes a person scored

    def judge_item(self) -> JudgeItem:
        """What the judge is given: the passages as hits."""
        return JudgeItem(self.query, self.answer, [Hit(chunk, 1.0, {}) for chunk in self.passages], self.reference,
                         self.id)


def load_labels(path: str | Path) -> list[LabelledAnswer]:
    path = Path(path)
    if not path.is_file():
        raise LabelsError(f"labels file not found: {path}")
    labels: list[LabelledAnswer] = []
    seen: dict[str, int] = {}
    for line_number, where, record in read_jsonl(path, LabelsError):
        label = _parse(record, where, line_number)
        if label.id in seen:
            raise LabelsError(f"{where} (id {label.id}): duplicate id, first used on line {seen[label.id]}")
        seen[label.id] = line_number
        labels.append(label)
    if not labels:
        raise LabelsError(f"{path}: no labelled answers (expected one JSON object per line)")
    return labels


def _parse(record: dict[str, Any], line: str, line_number: int) -> LabelledAnswer:
    label_id = str(record["id"]) if record.get("id") not in (None, "") else f"l{line_number}"
    where = f"{line} (id {label_id})"
    texts = {}
    for key in ("query", "answer"):
        if not isinstance(record.get(key), str) or not record[key].strip():
            raise LabelsError(f"{where}: missing {key!r} (a non-empty string)")
        texts[key] = record[key]
    reference = record.get("reference")
    if reference is not None and (not isinstance(reference, str) or not reference.strip()):
        raise LabelsError(f"{where}: 'reference' must be a non-empty string when given")
    raw_passages = record.get("passages")
    if not isinstance(raw_passages, list) or not raw_passages:
        raise LabelsError(f"{where}: 'passages' must be a non-empty list of {{source, page, text}}")
    passages = tuple(_passage(item, f"{where}, passage {n}") for n, item in enumerate(raw_passages, start=1))
    human = record.get("human")
    if not isinstance(human, dict) or not human:
        raise LabelsError(f"{where}: 'human' must map judge axes ({', '.join(METRICS)}) to scores 1-5")
    for axis, score in human.items():
        if axis not in METRICS:
            raise LabelsError(f"{where}: unknown axis {axis!r}; judge axes: {', '.join(METRICS)}")
        if isinstance(score, bool) or not isinstance(score, int) or not 1 <= score <= 5:
            raise LabelsError(f"{where}: {axis} score must be an integer from 1 to 5, got {score!r}")
    if "answer_correctness" in human and reference is None:
        raise LabelsError(f"{where}: answer_correctness needs a 'reference' answer (the judge compares with it)")
    return LabelledAnswer(label_id, texts["query"], texts["answer"], reference, passages, dict(human))


def _passage(item: Any, where: str) -> Chunk:
    if not isinstance(item, dict):
        raise LabelsError(f"{where}: expected an object {{source, page, text}}")
    source, page, text = item.get("source"), item.get("page", 1), item.get("text")
    if not isinstance(source, str) or not source.strip():
        raise LabelsError(f"{where}: missing 'source' (the document name)")
    if isinstance(page, bool) or not isinstance(page, int) or page < 1:
        raise LabelsError(f"{where}: 'page' must be a page number >= 1, got {page!r}")
    if not isinstance(text, str) or not text.strip():
        raise LabelsError(f"{where}: missing 'text' (the passage the answer was written from)")
    return Chunk(Chunk.make_id(source, 0, len(text), text), source, text, 0, len(text), page, page)
