"""Fixtures for the LLM tests: the fake API server, the environment pointing the SDKs at it, and Hits.

Import the fixtures you use into a test module (``from llm_fixtures import llm_server, ...``); the
lead owns ``tests/conftest.py``. The planted key must never appear in a message, log or artifact.
"""

from __future__ import annotations

from typing import Iterator

import pytest

from llm_server import FakeLLMServer
from rag_core.records import Chunk, Hit, StageScore

PLANTED_KEY = "sk-ant-test-PLANTED-SECRET-123"
PLANTED_OPENAI_KEY = "sk-proj-test-PLANTED-SECRET-456"
FAST = {"backoff_s": 0.001, "max_delay_s": 0.01}  # retry timing for tests

# Environment variables that could point the SDKs elsewhere or supply other credentials.
_SDK_ENV = [
    "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "ANTHROPIC_PROFILE",
    "ANTHROPIC_CONFIG_DIR", "ANTHROPIC_CUSTOM_HEADERS", "OPENAI_API_KEY", "OPENAI_BASE_URL",
    "OPENAI_ORG_ID", "OPENAI_PROJECT_ID", "OPENAI_CUSTOM_HEADERS", "LLM_PROVIDER", "RAG_LLM_MODEL",
]


def make_hit(
    doc_id: str,
    text: str,
    page: int = 1,
    page_end: int | None = None,
    *,
    stages: dict[str, tuple[int, float]] | None = None,
) -> Hit:
    """A hand-built hit; ``stages`` maps a stage name to (rank, score). Default: found by both retrievers."""
    stages = stages if stages is not None else {"dense": (1, 0.8), "bm25": (1, 7.5), "fused": (1, 0.03)}
    end = page_end if page_end is not None else page
    chunk = Chunk(Chunk.make_id(doc_id, 0, len(text), text), doc_id, text, 0, len(text), page, end)
    scores = {name: StageScore(rank, score) for name, (rank, score) in stages.items()}
    last = list(scores.values())[-1].score if scores else 0.0
    return Hit(chunk, last, scores)


@pytest.fixture
def llm_server() -> Iterator[FakeLLMServer]:
    server = FakeLLMServer().start()
    yield server
    server.stop()


@pytest.fixture
def clean_llm_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No key, no base URL, no provider: the SDKs can reach nothing real."""
    for name in _SDK_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")  # discard port: never the real API
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    return monkeypatch


@pytest.fixture
def anthropic_env(clean_llm_env: pytest.MonkeyPatch, llm_server: FakeLLMServer) -> FakeLLMServer:
    clean_llm_env.setenv("ANTHROPIC_API_KEY", PLANTED_KEY)
    clean_llm_env.setenv("ANTHROPIC_BASE_URL", llm_server.anthropic_base_url)
    return llm_server


@pytest.fixture
def openai_env(clean_llm_env: pytest.MonkeyPatch, llm_server: FakeLLMServer) -> FakeLLMServer:
    clean_llm_env.setenv("LLM_PROVIDER", "openai")
    clean_llm_env.setenv("OPENAI_API_KEY", PLANTED_OPENAI_KEY)
    clean_llm_env.setenv("OPENAI_BASE_URL", llm_server.openai_base_url)
    return llm_server
