"""Replies computed from the prompt, for the local LLM server (``FakeLLMServer.responder``).

- ``GoldenWriter``: answers make-golden's requests with a question, an answer and the first
  sentence(s) of the passage it was sent, quoted; every ``bad_every``-th request quotes a sentence
  that is in no document, every ``duplicate_every``-th repeats the previous question.
- ``heuristic_judge``: answers judge requests with ``1 + round(4 * share)``, the share of the
  answer's words (of 4+ letters) found in what the rubric compares it with (passages, question or
  reference answer): deterministic, roughly sensible, never a claim about a real judge's quality.
- ``table_judge``: scores looked up by (answer text, axis), for hand-computed expectations.
- ``position_biased_judge`` / ``preferring_judge``: pairwise verdicts (``rag_core.evaluate.pairwise_judge``)
  that always name one position, or the answer holding a word wherever it is shown.
- ``dispatcher``: either of the first two, by the system prompt. ``python tests/llm_responders.py``
  serves it on 127.0.0.1 and prints the variables that point ``rag-pipeline`` at it.
Left out: anything a test does not use.
"""

from __future__ import annotations

import json
import re
import sys
import threading
from typing import Callable, Mapping

from llm_server import FakeLLMServer, RecordedRequest

NOT_IN_ANY_DOCUMENT = "The lighthouse keeper counts exactly 4,711 seagulls every Tuesday morning."
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
AXIS_TITLES = {"Faithfulness": "faithfulness", "Answer relevance": "answer_relevance", "Coverage": "coverage",
               "Answer correctness": "answer_correctness"}


def element(text: str, prefix: str) -> list[str]:
    """Contents of every ``<prefix-NONCE ...>`` element of `text`."""
    return [m.group(2).strip() for m in re.finditer(rf"<({prefix}-[0-9a-f]+)[^>\n]*>\n(.*?)\n</\1>", text, re.S)]


def sentences(text: str) -> list[str]:
    return [" ".join(s.split()) for s in _SENTENCE.split(text) if len(s.split()) >= 5]


class GoldenWriter:
    def __init__(self, bad_every: int = 0, duplicate_every: int = 0) -> None:
        self.bad_every, self.duplicate_every = bad_every, duplicate_every
        self.calls, self.previous = 0, ""
        self._lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> str:
        with self._lock:
            self.calls += 1
            passage = element(request.user, "passage")[0]
            kind = re.search(r"Question type: (\w+)", request.user).group(1)
            found = sentences(passage) or [" ".join(passage.split())]
            numeric = [s for s in found if re.search(r"\d", s)]
            quotes = found[:2] if kind == "multi_sentence" else (numeric or found)[:1]
            question = f"What is stated about {' '.join(quotes[0].split()[:8]).rstrip('.,;:')}?"
            if self.bad_every and self.calls % self.bad_every == 0:
                quotes = [NOT_IN_ANY_DOCUMENT]
            elif self.duplicate_every and self.calls % self.duplicate_every == 0 and self.previous:
                question = self.previous
            self.previous = question
            return json.dumps({"question": question, "answer": quotes[0].split(",")[0], "evidence": quotes})


def judged(request: RecordedRequest) -> tuple[str, str, str]:
    """(axis, answer, what the rubric compares the answer with) of a judge request."""
    axis = AXIS_TITLES[re.search(r"Rubric: ([^.]+)\.", request.system).group(1)]
    answer = element(request.user, "answer")[0]
    question = element(request.user, "question")[0]
    basis = {"answer_relevance": question, "answer_correctness": " ".join(element(request.user, "reference"))}
    return axis, answer, basis.get(axis, " ".join(element(request.user, "passage")))


def heuristic_score(answer: str, basis: str) -> int:
    words = [w for w in re.findall(r"\w+", answer.lower()) if len(w) >= 4 or w.isdigit()]
    known = set(re.findall(r"\w+", basis.lower()))
    share = sum(w in known for w in words) / len(words) if words else 0.0
    return 1 + round(4 * share)


def heuristic_judge(request: RecordedRequest) -> str:
    axis, answer, basis = judged(request)
    return json.dumps({"score": heuristic_score(answer, basis), "reason": f"{axis}: word overlap"})


def table_judge(table: Mapping[tuple[str, str], int]) -> Callable[[RecordedRequest], str]:
    def respond(request: RecordedRequest) -> str:
        axis, answer, _ = judged(request)
        return json.dumps({"score": table[(answer, axis)], "reason": "from the test's table"})

    return respond


def is_pairwise(request: RecordedRequest) -> bool:
    return "comparing two answers" in request.system


def position_biased_judge(position: str = "first") -> Callable[[RecordedRequest], str]:
    """A judge that prefers whichever answer is shown in `position`, whatever it says."""
    return lambda request: json.dumps({"better": position, "reason": "the answer in that place reads better"})


def preferring_judge(word: str) -> Callable[[RecordedRequest], str]:
    """A judge that prefers the answer holding `word`, in either order (a tie when both or neither do)."""
    def respond(request: RecordedRequest) -> str:
        first, second = (word in " ".join(element(request.user, name)) for name in ("first", "second"))
        return json.dumps({"better": "first" if first and not second else "second" if second and not first else "tie",
                           "reason": f"mentions {word}"})

    return respond


def dispatcher(writer: GoldenWriter) -> Callable[[RecordedRequest], str]:
    """Judge requests to ``heuristic_judge``, every other request to `writer`."""
    return lambda request: heuristic_judge(request) if "Rubric:" in request.system else writer(request)


def main(argv: list[str] | None = None) -> None:  # pragma: no cover - a manual tool
    import argparse

    parser = argparse.ArgumentParser(description="Serve the local LLM stand-in until Ctrl-C.")
    parser.add_argument("--bad-every", type=int, default=0, help="every Nth question quotes text in no document")
    parser.add_argument("--duplicate-every", type=int, default=0, help="every Nth question repeats the previous one")
    args = parser.parse_args(argv)
    server = FakeLLMServer().start()
    server.responder = dispatcher(GoldenWriter(args.bad_every, args.duplicate_every))
    print(f"export ANTHROPIC_BASE_URL={server.anthropic_base_url} ANTHROPIC_API_KEY=sk-ant-local-stand-in",
          flush=True)
    print("local LLM stand-in running; Ctrl-C stops it", file=sys.stderr)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    main()
