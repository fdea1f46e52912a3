"""The pairwise judge: which of two configurations' answers to one question is better, asked twice with the
answers in swapped order, so that a judge that prefers a position cannot decide.

LLM judges prefer the answer shown first (or second) more often than chance: the position bias of Zheng et al.,
"Judging LLM-as-a-Judge with MT-Bench and Chatbot Arena" (NeurIPS 2023), who also give the remedy used here.
Each pair is judged with the baseline's answer first, then with the candidate's first (prompt:
``prompts/pairwise_judge.yaml``; every text inside a delimiter with a random code). A verdict stands only when
both orders name the same answer; otherwise (the verdict flips with the order, either order says "tie", or
either reply failed after its retries) the pair is a **tie**. Flips and failures are counted
(``judge/pairwise_flips``, ``judge/failures``), never dropped: a judge that mostly flips shows as mostly ties.

Per query the candidate scores ``judge/pairwise_win``: 1 when it is better, 0 when the baseline is, 0.5 for
a tie; the baseline scores 1 minus that, so the gate's paired test (``rag-pipeline gate --judge``) reads the
two like any other metric.
Left out: more than two configurations (a tournament), ties broken by a third call.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, Mapping, Sequence

import yaml

from rag_core.evaluate.golden import GoldenQuery
from rag_core.evaluate.judge import MalformedJudgeReply, ask_with_retries
from rag_core.evaluate.metric_registry import METRICS
from rag_core.llm import InvalidAPIKey, LLMClient, MissingAPIKey, delimited, json_objects_in, new_nonce

PAIRWISE_WIN = "judge/pairwise_win"
METRICS.declare("pairwise_win", ("judge",), "the candidate's answer against the baseline's, judged in both orders: "
                "1 better, 0 worse, 0.5 a tie (a verdict that flips with the order is a tie)", best=1.0)
METRICS.declare("pairwise_flips", ("judge",), "pairs whose verdict flipped when the answers swapped places (ties)",
                higher_is_better=False, per_query=False)
BASELINE, CANDIDATE, TIE = "baseline", "candidate", "tie"
_FIRST_SECOND = ("first", "second", "tie")


@dataclass(frozen=True)
class PairItem:
    query: str
    baseline: str  # the baseline's answer text
    candidate: str  # the candidate's
    reference: str | None = None  # the golden answer
    query_id: str | None = None


@dataclass(frozen=True)
class PairVerdict:
    """The two readings of one pair: with the baseline's answer first, then the candidate's (None: failed)."""
    query_id: str | None
    baseline_first: str | None  # BASELINE | CANDIDATE | TIE
    candidate_first: str | None
    errors: tuple[str, ...] = ()

    @property
    def verdict(self) -> str:
        """The answer both orders prefer, else a tie."""
        return self.baseline_first if self.baseline_first == self.candidate_first and self.baseline_first else TIE

    @property
    def flipped(self) -> bool:
        """Both orders chose an answer, and not the same one: the judge followed the position."""
        chosen = {self.baseline_first, self.candidate_first}
        return None not in chosen and TIE not in chosen and len(chosen) == 2

    @property
    def candidate_score(self) -> float:
        return {CANDIDATE: 1.0, BASELINE: 0.0}.get(self.verdict, 0.5)

    def as_row(self) -> dict[str, Any]:
        return {"query_id": self.query_id, PAIRWISE_WIN: self.candidate_score, "judge/verdict": self.verdict,
                "judge/baseline_first": self.baseline_first, "judge/candidate_first": self.candidate_first,
                "judge/flipped": self.flipped, "judge/failures": len(self.errors)}


@lru_cache(maxsize=1)
def _prompt() -> dict[str, str]:
    return yaml.safe_load(resources.files("rag_core.generate.prompts").joinpath("pairwise_judge.yaml")
                          .read_text(encoding="utf-8"))


def pairwise_prompt(query: str, first: str, second: str, reference: str | None = None) -> tuple[str, str]:
    """(system, user) asking which of `first` and `second` answers `query` better."""
    code = new_nonce([query, first, second, reference or ""])
    tags = {name: f"{name.split('_')[0]}-{code}" for name in ("question_tag", "first_tag", "second_tag", "reference_tag")}
    system = _prompt()["system"]
    for name, tag in tags.items():
        system = system.replace("{" + name + "}", tag)
    parts = [f"Question:\n{delimited(tags['question_tag'], query)}"]
    if reference:
        parts.append(f"Reference answer:\n{delimited(tags['reference_tag'], reference)}")
    parts += [f"First answer:\n{delimited(tags['first_tag'], first)}",
              f"Second answer:\n{delimited(tags['second_tag'], second)}",
              "Which answer is better? Reply with the JSON object only."]
    return f"{system}\n{_prompt()['output_format']}", "\n\n".join(parts)


def parse_pair_reply(text: str) -> str:
    """``first``, ``second`` or ``tie`` from the first JSON object with a "better" key."""
    for value in json_objects_in(text):
        if "better" in value:
            better = str(value["better"]).strip().lower()
            if better in _FIRST_SECOND:
                return better
            raise MalformedJudgeReply(f"pairwise verdict {value['better']!r} is not first, second or tie")
    raise MalformedJudgeReply(f"no JSON object with a verdict in the judge's reply: {text[:200]!r}")


def judge_pair(item: PairItem, client: LLMClient, *, retries: int = 3, backoff_s: float = 2.0,
               max_delay_s: float = 60.0) -> PairVerdict:
    """Both readings of one pair; a failed one is None with its error (never raised)."""
    readings, errors = [], []
    for first, second, names in ((item.baseline, item.candidate, (BASELINE, CANDIDATE)),
                                 (item.candidate, item.baseline, (CANDIDATE, BASELINE))):
        system, user = pairwise_prompt(item.query, first, second, item.reference)
        outcome = ask_with_retries(client, system, user, parse_pair_reply, retries, backoff_s, max_delay_s)
        if isinstance(outcome, Exception):
            readings.append(None)
            errors.append(f"{type(outcome).__name__}: {outcome}")
            if isinstance(outcome, (MissingAPIKey, InvalidAPIKey)):
                raise outcome  # no pair can be judged: the caller reports the key
            continue
        readings.append({"first": names[0], "second": names[1], "tie": TIE}[outcome])
    return PairVerdict(item.query_id, readings[0], readings[1], tuple(errors))


def pair_items(queries: Sequence[GoldenQuery], baseline_rows: Sequence[Mapping[str, Any]],
               candidate_rows: Sequence[Mapping[str, Any]]) -> list[PairItem]:
    """One pair per query from two evaluations' per-query rows (their ``answer`` column), with the golden answer."""
    baseline = {str(row["query_id"]): str(row.get("answer") or "") for row in baseline_rows}
    candidate = {str(row["query_id"]): str(row.get("answer") or "") for row in candidate_rows}
    return [PairItem(query.query, baseline.get(query.id, ""), candidate.get(query.id, ""), query.answer, query.id)
            for query in queries]


def judge_pairs(items: Sequence[PairItem], client: LLMClient, **retry: Any) -> tuple[list[PairVerdict], dict[str, float]]:
    """(one verdict per pair, counts): ``judge/pairwise_win`` (the candidate's mean), wins, losses, ties, flips
    and failures (replies that failed after retries)."""
    verdicts = [judge_pair(item, client, **retry) for item in items]
    count = lambda verdict: float(sum(v.verdict == verdict for v in verdicts))  # noqa: E731
    summary = {PAIRWISE_WIN: sum(v.candidate_score for v in verdicts) / len(verdicts) if verdicts else 0.5,
               "judge/pairwise_candidate_wins": count(CANDIDATE), "judge/pairwise_baseline_wins": count(BASELINE),
               "judge/pairwise_ties": count(TIE), "judge/pairwise_flips": float(sum(v.flipped for v in verdicts)),
               "judge/failures": float(sum(len(v.errors) for v in verdicts))}
    return verdicts, summary


__all__ = ["BASELINE", "CANDIDATE", "PAIRWISE_WIN", "TIE", "PairItem", "PairVerdict", "judge_pair", "judge_pairs",
           "pair_items", "pairwise_prompt", "parse_pair_reply"]
