"""Every failure gives a clear LLMError, and the key never appears in a message, log or traceback."""

from __future__ import annotations

import logging
import socket
import time
import traceback

import pytest

from llm_fixtures import (  # noqa: F401
    FAST,
    PLANTED_KEY,
    PLANTED_OPENAI_KEY,
    anthropic_env,
    clean_llm_env,
    llm_server,
    openai_env,
)
from llm_server import hanging, malformed, prompt_too_long, rate_limited, reply
from rag_core.config import RagConfig
from rag_core.llm import (
    ContextTooLong,
    InvalidAPIKey,
    LLMClient,
    LLMError,
    LLMTimeout,
    LLMUnavailable,
    MalformedResponse,
    MissingAPIKey,
    RateLimited,
    complete_with_retries,
)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def assert_no_key(error: BaseException, *keys: str) -> None:
    rendered = "".join(traceback.format_exception(error)) + repr(error) + repr(error.args)
    for key in keys or (PLANTED_KEY, PLANTED_OPENAI_KEY):
        assert key not in rendered
    assert error.__cause__ is None and error.__context__ is None  # the SDK error is not chained


# --- missing key --------------------------------------------------------------------------------
@pytest.mark.parametrize(("provider", "variable"), [("anthropic", "ANTHROPIC_API_KEY"), ("openai", "OPENAI_API_KEY")])
def test_missing_key_names_the_variable(clean_llm_env, provider, variable):
    with pytest.raises(MissingAPIKey, match=variable):
        LLMClient(provider)


def test_unknown_provider_lists_the_valid_ones():
    with pytest.raises(ValueError, match="anthropic, openai"):
        LLMClient("mistral", api_key="x")


# --- mapped HTTP errors -------------------------------------------------------------------------
def test_invalid_key(anthropic_env):
    anthropic_env.script(reply("", status=401))  # the fake server echoes the key in its error body
    with pytest.raises(InvalidAPIKey, match="rejected the API key.*ANTHROPIC_API_KEY") as caught:
        LLMClient().complete("system", "user", 10)
    assert_no_key(caught.value)
    assert "invalid x-api-key" in str(caught.value)  # the server's message is kept, redacted


def test_invalid_key_openai(openai_env):
    openai_env.script(reply("", status=401))
    with pytest.raises(InvalidAPIKey, match="OPENAI_API_KEY") as caught:
        LLMClient("openai").complete("system", "user", 10)
    assert_no_key(caught.value)


def test_rate_limit_is_one_request_with_sdk_retries_off(anthropic_env):
    anthropic_env.script(rate_limited(retry_after="7"))
    with pytest.raises(RateLimited, match="rate limit") as caught:
        LLMClient().complete("system", "user", 10)
    assert caught.value.retry_after_s == 7.0
    assert len(anthropic_env.requests) == 1


def test_rate_limit_retries_then_gives_up(anthropic_env):
    anthropic_env.script(rate_limited("30"), rate_limited("30"), rate_limited("30"))
    with pytest.raises(RateLimited):
        complete_with_retries(LLMClient(), "system", "user", 10, retries=2, **FAST)  # retry-after capped
    assert len(anthropic_env.requests) == 3


@pytest.mark.parametrize("status", [500, 529])
def test_server_errors_are_unavailable(anthropic_env, status):
    anthropic_env.script(reply("", status=status))
    with pytest.raises(LLMUnavailable, match=f"HTTP {status}"):
        LLMClient().complete("system", "user", 10)


def test_network_failure(clean_llm_env):
    clean_llm_env.setenv("ANTHROPIC_API_KEY", PLANTED_KEY)
    clean_llm_env.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{closed_port()}")
    with pytest.raises(LLMUnavailable, match="cannot reach anthropic") as caught:
        LLMClient(timeout_s=5).complete("system", "user", 10)
    assert_no_key(caught.value)


@pytest.mark.parametrize("env", ["anthropic_env", "openai_env"])
def test_context_too_long_from_the_server(env, request):
    server = request.getfixturevalue(env)
    server.script(prompt_too_long())
    provider = "openai" if env == "openai_env" else "anthropic"
    with pytest.raises(ContextTooLong, match="too long.*lower k"):
        LLMClient(provider).complete("system", "user", 10)


def test_context_too_long_detected_before_sending(anthropic_env):
    with pytest.raises(ContextTooLong, match="about \\d+ tokens"):
        LLMClient(max_context_tokens=1000).complete("system", "word " * 5000, 100)
    assert anthropic_env.requests == []


# --- the key stays secret -----------------------------------------------------------------------
def test_key_never_in_logs_or_messages(anthropic_env, caplog):
    caplog.set_level(logging.DEBUG)  # SDK and HTTP-client debug logs included
    anthropic_env.script(rate_limited(), reply("", status=401), reply("fine"))
    client = LLMClient()
    with pytest.raises(LLMError) as caught:
        complete_with_retries(client, "system", "user", 10, retries=3, **FAST)
    assert_no_key(caught.value)
    assert client.complete("system", "user", 10).text == "fine"
    assert PLANTED_KEY not in repr(client) and PLANTED_KEY not in str(vars(client))
    assert caplog.records, "expected SDK debug logging to be captured"
    for record in caplog.records:
        assert PLANTED_KEY not in record.getMessage()
        assert PLANTED_KEY not in str(record.args)
    # ...and never reaches the config that becomes MLflow params.
    assert PLANTED_KEY not in str(RagConfig().as_params())



# --- malformed replies and hanging servers -----------------------------------------------------
@pytest.mark.parametrize("env", ["anthropic_env", "openai_env"])
@pytest.mark.parametrize("body", ["not json {", "[]", '{"unexpected": 1}', '{"content": "x", "model": 3}'])
def test_malformed_success_reply_is_a_clear_error(env, body, request):
    server = request.getfixturevalue(env)
    provider = "openai" if env == "openai_env" else "anthropic"
    server.script(malformed(body))
    with pytest.raises(MalformedResponse, match=f"malformed response from {provider}.*HTTP 200"):
        LLMClient(provider).complete("system", "user", 10)


def test_malformed_reply_is_retried_like_a_server_error(anthropic_env):
    anthropic_env.script(malformed("<html>proxy error</html>"), reply("fine"))
    assert complete_with_retries(LLMClient(), "system", "user", 10, retries=1, **FAST).text == "fine"
    assert len(anthropic_env.requests) == 2


def test_hanging_server_times_out_and_says_which_limit_it_hit(anthropic_env):
    anthropic_env.script(hanging(5), hanging(5))
    started = time.perf_counter()
    with pytest.raises(LLMTimeout) as caught:
        complete_with_retries(LLMClient(timeout_s=0.3), "system", "user", 10, retries=1, **FAST)
    assert time.perf_counter() - started < 3  # two tries of 0.3 s, not 2 x 120 s
    assert "llm_timeout_s=0.3" in str(caught.value)
    assert "gave up after 2 tries (llm_max_retries=1)" in str(caught.value)
    assert_no_key(caught.value)


def test_client_from_config_takes_the_timeout():
    config = RagConfig(llm_timeout_s=7.5)
    assert LLMClient.from_config(config, api_key="sk-test-abcdefgh").timeout_s == 7.5
