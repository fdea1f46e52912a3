"""Grounded answers: the prompt, the no-answer decision, the LLM call and the extractive fallback.

``answer_question`` decides in this order:
1. **No answer** (no LLM call) when no passage clears the relevance threshold (``passage_clears``).
2. **Extractive** when no API key is configured (or ``use_llm=False``): the top passages with their
   citations, under a label that says so.
3. **LLM**: the grounding system prompt (``prompts/system_prompt.txt``) and the numbered passages.

Passage text is untrusted. Each passage sits inside ``<passage-NONCE ...>`` ... ``</passage-NONCE>``
where NONCE is random per request and chosen so that it occurs in no passage and not in the
question: a document cannot close its own element, so text inside it stays data. The text itself is
passed unchanged (the model may quote it). The document id, printed in the header line before each
passage, has its control characters escaped (``rag_core.doc_ids``), so no file name can add a line.

Relevance threshold (``passage_clears``), per passage:
- re-ranked (a ``"rerank"`` stage): cross-encoder score >= ``config.min_rerank_score``;
- otherwise retriever agreement: the passage must be found by ``min_retriever_agreement`` of the
  retrievers that ran, capped at their number (hybrid: 2, dense or bm25: 1). A retriever "found" a
  passage when it ranked it, and for BM25 with a score > 0 (at least one query term matched; BM25
  back-ends may pad results with score-0 chunks). So BM25-only mode says "no answer" when no query
  term occurs in any passage; dense-only mode without a re-ranker has no calibrated signal and always
  answers: use a re-ranker to get a meaningful no-answer there.
All passages (top ``config.k``) go to the model once one clears the threshold. Left out: streaming,
conversation history, answer caching.
"""

from __future__ import annotations

import html
import secrets
from dataclasses import dataclass
from importlib import resources
from typing import Any, Sequence

from rag_core.generate.citations import CitationCheck, check_citations
from rag_core.config import RagConfig
from rag_core.doc_ids import escape_controls
from rag_core.api_keys import KEY_ENV
from rag_core.generate.llm import LLMClient, LLMError, complete_with_retries, has_api_key
from rag_core.records import Hit
from rag_core.retrieve.retrievers import retriever_choices

NO_ANSWER_TEXT = "The documents do not contain the answer to this question."
# {reason}: "no LLM configured" (no API key), "LLM not used", "LLM call failed"
EXTRACTIVE_LABEL = (
    "Extractive answer ({reason}): the passages below are quoted from the documents; no answer was generated."
)
MODES = ("llm", "extractive", "no_answer")


def retriever_names(config: RagConfig) -> tuple[str, ...]:
    """The retrievers the config runs (``mode``), whose agreement the no-answer rule counts."""
    return tuple(choice.name for choice in retriever_choices(config))


@dataclass(frozen=True)
class Answer:
    text: str
    mode: str  # "llm" | "extractive" | "no_answer"
    model: str | None  # the model that answered (llm mode only)
    sources: tuple[str, ...]  # citation strings of the passages given, in rank order, deduplicated
    passages: tuple[Hit, ...]  # the hits given to the model / quoted; empty for no_answer
    usage: dict[str, int] | None  # {"input_tokens": n, "output_tokens": m} (llm mode only)
    citation_check: CitationCheck | None  # llm mode only
    warning: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: what ``rag-pipeline query --json`` prints."""
        return {
            "answer": self.text,
            "mode": self.mode,
            "model": self.model,
            "sources": list(self.sources),
            "usage": self.usage,
            "warning": self.warning,
            "citation_check": None if self.citation_check is None else {
                "n_citations": self.citation_check.n_citations,
                "n_valid": self.citation_check.n_valid,
                "invalid": list(self.citation_check.invalid),
                "cited_sentence_share": self.citation_check.cited_sentence_share,
                "all_valid": self.citation_check.all_valid,
            },
            "passages": [passage_dict(hit) for hit in self.passages],
        }


def passage_dict(hit: Hit) -> dict[str, Any]:
    chunk = hit.chunk
    return {
        "id": chunk.id,
        "source": chunk.doc_id,
        "page_start": chunk.page_start,
        "page_end": chunk.page_end,
        "text": chunk.text,
        "scores": {stage: {"rank": s.rank, "score": s.score} for stage, s in hit.stages.items()},
    }


# --- prompt -------------------------------------------------------------------------------------
def system_prompt(passage_tag: str = "passage-NONCE") -> str:
    template = resources.files("rag_core.generate.prompts").joinpath("system_prompt.txt").read_text(encoding="utf-8")
    return template.replace("{passage_tag}", passage_tag)


def new_nonce(texts: Sequence[str], nonce: str | None = None) -> str:
    """A code that occurs in none of ``texts`` (random unless given; a given one that occurs raises)."""
    if nonce is not None:
        if any(nonce in text for text in texts):
            raise ValueError(f"nonce {nonce!r} occurs in the text it should delimit")
        return nonce
    while True:
        candidate = secrets.token_hex(8)
        if not any(candidate in text for text in texts):
            return candidate


def format_passages(hits: Sequence[Hit], tag: str) -> str:
    """``[i] document, page N`` then the text inside ``<tag ...>`` ... ``</tag>``, one per hit."""
    blocks = []
    for number, hit in enumerate(hits, start=1):
        chunk = hit.chunk
        pages = str(chunk.page_start) if chunk.page_start == chunk.page_end else f"{chunk.page_start}-{chunk.page_end}"
        where = f"page {pages}" if chunk.page_start == chunk.page_end else f"pages {pages}"
        attrs = (
            f'id="{number}" source="{html.escape(chunk.doc_id)}" pages="{pages}" '
            f'cite="{html.escape(chunk.citation())}"'
        )
        # The header and the opening tag are one line each, whatever the id holds (rag_core.doc_ids).
        header = escape_controls(f"[{number}] {chunk.doc_id}, {where}; cite as {chunk.citation()}")
        blocks.append(f"{header}\n{escape_controls(f'<{tag} {attrs}>')}\n{chunk.text}\n</{tag}>")
    return "\n\n".join(blocks)


def build_prompt(query: str, hits: Sequence[Hit], *, nonce: str | None = None) -> tuple[str, str]:
    """(system, user): the grounding rules, then the numbered, delimited passages and the question."""
    tag = "passage-" + new_nonce([query, *(hit.chunk.text for hit in hits), *(hit.chunk.doc_id for hit in hits)], nonce)
    user = (
        f"Passages ({len(hits)}), each between <{tag} ...> and </{tag}>:\n\n"
        f"{format_passages(hits, tag)}\n\n"
        f"Question: {query}\n\n"
        "Answer the question using only the passages above, citing each claim as "
        "[Source: <document>, page N]. If the passages do not contain the answer, say so."
    )
    return system_prompt(tag), user


# --- no-answer decision -------------------------------------------------------------------------
def passage_clears(hit: Hit, config: RagConfig) -> bool:
    """Does this passage clear the relevance threshold? (See the module docstring.)"""
    if "rerank" in hit.stages:
        return hit.stages["rerank"].score >= config.min_rerank_score
    retrievers = retriever_names(config)
    found = sum(1 for name in retrievers if name in hit.stages and (name != "bm25" or hit.stages[name].score > 0))
    return found >= max(1, min(config.min_retriever_agreement, len(retrievers)))


def threshold_description(config: RagConfig, reranked: bool) -> str:
    if reranked:
        return f"re-rank score >= {config.min_rerank_score}"
    needed = max(1, min(config.min_retriever_agreement, len(retriever_names(config))))
    return f"found by {needed} of the {config.mode} retriever(s)"


# --- answering ----------------------------------------------------------------------------------
def answer_question(
    query: str,
    hits: Sequence[Hit],
    config: RagConfig,
    client: LLMClient | None = None,
    *,
    use_llm: bool = True,
    fallback_to_extractive: bool = False,
    retries: int | None = None,
    backoff_s: float = 1.0,
    max_delay_s: float = 30.0,
) -> Answer:
    """Answer ``query`` from ``hits`` (best first).

    ``use_llm=False`` gives the extractive answer without calling the LLM. LLM failures raise an
    ``LLMError`` subclass, unless ``fallback_to_extractive``: then the extractive answer, with a warning.
    ``retries`` (default: ``config.llm_max_retries``) / ``backoff_s`` / ``max_delay_s``: see
    ``rag_core.generate.llm.complete_with_retries``.
    """
    passages = tuple(hits[: config.k])
    if not any(passage_clears(hit, config) for hit in passages):
        reranked = any("rerank" in hit.stages for hit in passages)
        warning = f"no retrieved passage cleared the relevance threshold ({threshold_description(config, reranked)})"
        return Answer(NO_ANSWER_TEXT, "no_answer", None, (), (), None, None, warning=warning)
    if not use_llm:
        return extractive_answer(passages, "LLM not used: extractive answer", reason="LLM not used")
    if client is None:
        if not has_api_key(config.llm_provider):
            warning = f"no API key ({KEY_ENV[config.llm_provider]} is not set): extractive answer"
            return extractive_answer(passages, warning)
        client = LLMClient.from_config(config)
    system, user = build_prompt(query, passages)
    try:
        completion = complete_with_retries(
            client, system, user, config.max_answer_tokens,
            retries=config.llm_max_retries if retries is None else retries, backoff_s=backoff_s, max_delay_s=max_delay_s,
        )
    except LLMError as exc:
        if not fallback_to_extractive:
            raise
        warning = f"LLM call failed ({type(exc).__name__}: {exc}): extractive answer"
        return extractive_answer(passages, warning, reason="LLM call failed")
    return Answer(
        text=completion.text,
        mode="llm",
        model=completion.model,
        sources=_sources(passages),
        passages=passages,
        usage={"input_tokens": completion.input_tokens, "output_tokens": completion.output_tokens},
        citation_check=check_citations(completion.text, passages),
    )


def extractive_answer(passages: Sequence[Hit], warning: str, reason: str = "no LLM configured") -> Answer:
    """The passages themselves, each under its citation, after a label saying so."""
    quoted = [f"[{n}] {escape_controls(hit.chunk.citation())}\n{hit.chunk.text.strip()}"
              for n, hit in enumerate(passages, start=1)]
    text = "\n\n".join([EXTRACTIVE_LABEL.format(reason=reason), *quoted])
    return Answer(text, "extractive", None, _sources(passages), tuple(passages), None, None, warning=warning)


def _sources(passages: Sequence[Hit]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(escape_controls(hit.chunk.citation()) for hit in passages))
