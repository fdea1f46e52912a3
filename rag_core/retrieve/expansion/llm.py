"""Query expansion by an LLM: ``multi_query`` (the LLM writes ``multi_query_n`` rephrasings; each is
retrieved and the lists are fused with RRF; Rackauckas, "RAG-Fusion", 2024) and ``hyde`` (the LLM
writes a hypothetical answer passage whose embedding is searched; Gao et al., "Precise Zero-Shot
Dense Retrieval without Relevance Labels", ACL 2023).

The prompts are ``rag_core/generate/prompts/multi_query.txt`` and ``hyde.txt``. The user's question
goes into the user message between ``<question-NONCE>`` tags, NONCE random per request and absent from
the question, so that the question cannot close its own delimiter. The call goes through the
project's LLM client with its retries; ``LLMExpander`` fails at construction with ``MissingAPIKey``
(exit 1 in the CLI) when no key is set. Each ``Expansion`` records the call's latency and tokens.
RM3 (offline) is ``rag_core.retrieve.expansion.rm3``. ``MultiQuery`` and ``HyDE`` are the registered
expansions (``rag_core.retrieve.expansion``).

Left out: several hypothetical passages per query, caching expansions across processes.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np

from rag_core.components.config_fields import ConfigFields
from rag_core.llm import LLMClient, MissingAPIKey, complete_with_retries, new_nonce
from rag_core.retrieve.expansion.base import Expanded, QueryExpansion
from rag_core.retrieve.retrievers import Query

LLM_EXPANSIONS = ("multi_query", "hyde")
TOKENS_PER_REPHRASING = 100  # multi_query's answer budget per rephrasing
HYDE_TOKENS = 300  # hyde's answer budget (a passage of about 100 words)
_LIST_MARKER = re.compile(r"^\s*(?:[-*•]|\d+[.)]|\(\d+\))\s*")


@dataclass(frozen=True)
class Expansion:
    method: str  # multi_query | hyde
    queries: tuple[str, ...]  # multi_query: the rephrasings (the original query not included)
    passage: str | None  # hyde: the hypothetical passage
    model: str
    input_tokens: int
    output_tokens: int
    latency_ms: float

    def as_info(self) -> dict[str, Any]:
        return {"method": self.method, "queries": list(self.queries), "passage": self.passage, "model": self.model,
                "input_tokens": self.input_tokens, "output_tokens": self.output_tokens}


def prompt_template(method: str) -> str:
    return resources.files("rag_core.generate.prompts").joinpath(f"{method}.txt").read_text(encoding="utf-8")


def build_expansion_prompt(method: str, query: str, n: int, nonce: str | None = None) -> tuple[str, str]:
    """(system, user) for `method`; the query sits between ``<question-NONCE>`` tags in `user`."""
    tag = "question-" + new_nonce([query], nonce)
    system = prompt_template(method).replace("{n}", str(n)).replace("{question_tag}", tag)
    user = f"<{tag}>\n{query}\n</{tag}>"
    return system, user


def parse_rephrasings(text: str, query: str, n: int) -> tuple[str, ...]:
    """At most `n` distinct rephrasings, one per line, list markers and quotes removed, the
    original query left out."""
    seen = {query.strip().casefold()}
    found: list[str] = []
    for line in text.splitlines():
        line = _LIST_MARKER.sub("", line).strip().strip('"').strip()
        if line and line.casefold() not in seen:
            seen.add(line.casefold())
            found.append(line)
    return tuple(found[:n])


class LLMExpander:
    """Expands queries with the configured LLM (provider, model, timeout and retries from the config)."""

    def __init__(self, config: ConfigFields, client: LLMClient | None = None) -> None:
        if config.query_expansion not in LLM_EXPANSIONS:
            raise ValueError(f"query_expansion {config.query_expansion!r} is not an LLM expansion")
        self.config = config
        self.client = client or LLMClient.from_config(config)  # MissingAPIKey without a key

    def expand(self, query: str) -> Expansion:
        method, n = self.config.query_expansion, self.config.multi_query_n
        system, user = build_expansion_prompt(method, query, n)
        started = time.perf_counter()
        max_tokens = TOKENS_PER_REPHRASING * n if method == "multi_query" else HYDE_TOKENS
        completion = complete_with_retries(self.client, system, user, max_tokens, retries=self.config.llm_max_retries)
        latency_ms = (time.perf_counter() - started) * 1000
        text = completion.text.strip()
        queries = parse_rephrasings(text, query, n) if method == "multi_query" else ()
        passage = text if method == "hyde" and text else None
        return Expansion(method, queries, passage, completion.model, completion.input_tokens,
                         completion.output_tokens, latency_ms)


class LLMExpansion(QueryExpansion):
    """An expansion that asks the configured LLM (made on first use: ``MissingAPIKey`` without a key)."""

    _expander: LLMExpander | None = None

    @property
    def expander(self) -> LLMExpander:
        if self._expander is None:
            try:
                self._expander = LLMExpander(self.config)
            except MissingAPIKey as exc:
                raise MissingAPIKey(f"query_expansion {self.config.query_expansion} needs an LLM: {exc} "
                                    "(or use query_expansion none or rm3, which work offline)") from None
        return self._expander


class MultiQuery(LLMExpansion):
    """``multi_query``: the query, then each rephrasing (each embedded on its own when searched)."""

    def expand(self, query: Query) -> Expanded:
        expanded = self.expander.expand(query.text)
        embed = self.embedder.embed_query if self.embedder is not None else None
        return Expanded([query, *(Query(text, embed) for text in expanded.queries)],
                        {"expansion": expanded.latency_ms}, expanded.as_info())


class HyDE(LLMExpansion):
    """``hyde``: the query, searched with the normalised mean of its embedding and the hypothetical
    passage's (keyword retrievers still search its text)."""

    def expand(self, query: Query) -> Expanded:
        expanded = self.expander.expand(query.text)
        latency = {"expansion": expanded.latency_ms}
        if not expanded.passage:
            return Expanded([query], latency, expanded.as_info())
        started = time.perf_counter()
        passage_vectors, _ = self.embedder.embed_documents([expanded.passage])
        vector, _ = query.vector()
        mean = vector + passage_vectors[0]
        latency["embed_query"] = (time.perf_counter() - started) * 1000
        searched = Query(query.text, vector=(mean / np.linalg.norm(mean)).astype(np.float32))
        return Expanded([searched], latency, expanded.as_info())
