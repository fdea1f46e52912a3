"""One small client over the Anthropic Messages API and the OpenAI Chat Completions API.

``LLMClient.complete(system, user, max_tokens)`` sends one request and returns a ``Completion``
(text, model that answered, token usage). Every SDK failure becomes one ``LLMError`` subclass with
a message a user can act on (``rag_core.llm.sdk_errors``); no message ever holds an API key.

Retry policy (chosen here, in one place): the SDKs' own retries are switched off (``max_retries=0``),
so one ``complete`` call is one HTTP request, which waits at most ``timeout_s`` (the setting
``llm_timeout_s``). Callers retry transient failures (``RateLimited``, ``LLMUnavailable`` including
``LLMTimeout``, and ``MalformedResponse``: an HTTP 200 whose body is not the API's JSON) through
``complete_with_retries``, ``retries`` times (the setting ``llm_max_retries``): exponential backoff
from ``backoff_s``, honouring the server's ``retry-after`` but never waiting longer than
``max_delay_s`` (tests pass tiny values). The error raised once retries are spent says how many
tries were made and which setting bounds them. The judge has its own loop, because it also retries
malformed replies.

Keys come from ``ANTHROPIC_API_KEY`` / ``OPENAI_API_KEY``; base URLs from the SDKs' own variables
(``ANTHROPIC_BASE_URL``, ``OPENAI_BASE_URL``), which is how tests point at a local server.
Left out: streaming, tools, images, multi-turn conversations, async.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from rag_core.api_keys import KEY_ENV
from rag_core.api_keys import register as register_secret
from rag_core.components.config_fields import ConfigFields
from rag_core.llm.backends import BACKENDS, Completion, check_provider
from rag_core.llm.errors import TRANSIENT_ERRORS, ContextTooLong, LLMError, MissingAPIKey
from rag_core.llm.sdk_errors import map_sdk_error

log = logging.getLogger(__name__)

DEFAULT_LLM_MODEL = "claude-sonnet-5-5"  # the setting llm_model's default (rag_core.config declares it)
# provider -> model used when the configured model is the other provider's default
DEFAULT_MODELS = {"anthropic": DEFAULT_LLM_MODEL, "openai": "gpt-5.4-mini"}
# provider -> upper bound for the pre-send length check (tokens): the largest context window of the
# provider's current models. It only catches absurd prompts cheaply; the server's own 400 for the
# model actually used is mapped to ContextTooLong too. Pass max_context_tokens to be stricter.
CONTEXT_TOKENS = {"anthropic": 1_000_000, "openai": 1_000_000}
CHARS_PER_TOKEN = 4  # rough estimate for English prose; the server's own 400 is mapped too


def api_key_for(provider: str) -> str | None:
    """The key for ``provider`` from its environment variable, or None when unset or empty."""
    return os.environ.get(KEY_ENV[check_provider(provider)]) or None


def has_api_key(provider: str) -> bool:
    return api_key_for(provider) is not None


def estimate_tokens(text: str) -> int:
    return len(text) // CHARS_PER_TOKEN + 1


class LLMClient:
    """One provider, one model, one key. Construction fails with ``MissingAPIKey`` without a key."""

    def __init__(
        self,
        provider: str = "anthropic",
        model: str | None = None,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout_s: float = 120.0,
        max_context_tokens: int | None = None,
    ) -> None:
        self.provider = check_provider(provider)
        self.model = resolve_model(self.provider, model)
        key = api_key or api_key_for(self.provider)
        if not key:
            raise MissingAPIKey(
                f"no API key for {self.provider}: set the environment variable {KEY_ENV[self.provider]}"
            )
        register_secret(key)
        self.timeout_s = timeout_s
        self.max_context_tokens = max_context_tokens or CONTEXT_TOKENS[self.provider]
        self._send, self._sdk_errors = BACKENDS[self.provider](key, base_url, timeout_s)

    @classmethod
    def from_config(cls, config: ConfigFields, **kwargs: Any) -> "LLMClient":
        return cls(config.llm_provider, config.llm_model, **{"timeout_s": config.llm_timeout_s, **kwargs})

    def __repr__(self) -> str:  # never shows the key
        return f"LLMClient(provider={self.provider!r}, model={self.model!r})"

    def complete(self, system: str, user: str, max_tokens: int) -> Completion:
        """One request, no retries. Raises an ``LLMError`` subclass on any failure."""
        estimate = estimate_tokens(system) + estimate_tokens(user) + max_tokens
        if estimate > self.max_context_tokens:
            raise ContextTooLong(
                f"prompt too long for {self.model}: about {estimate} tokens (prompt + max_tokens) "
                f"> {self.max_context_tokens}; lower k or chunk_size, or max_answer_tokens"
            )
        try:
            return self._send(self.model, system, user, max_tokens)
        except self._sdk_errors as exc:
            error = map_sdk_error(exc, self.provider, self.model, timeout_s=self.timeout_s)
        # Raised outside the `except` block so the SDK exception (whose text may quote a key from
        # the response body) is not chained into tracebacks.
        raise error


def resolve_model(provider: str, model: str | None) -> str:
    """The configured model, except the Claude default under OpenAI, which becomes OpenAI's default."""
    if not model or (provider != "anthropic" and model == DEFAULT_LLM_MODEL):
        return DEFAULT_MODELS[provider]
    return model


def complete_with_retries(
    client: LLMClient,
    system: str,
    user: str,
    max_tokens: int,
    *,
    retries: int = 2,
    backoff_s: float = 1.0,
    max_delay_s: float = 30.0,
) -> Completion:
    """``client.complete`` retried on ``TRANSIENT_ERRORS``; other errors raise at once. Once the
    retries are spent, the last error is raised again, saying how many tries were made."""
    for attempt in range(retries + 1):
        try:
            return client.complete(system, user, max_tokens)
        except TRANSIENT_ERRORS as exc:
            last = exc
            if attempt == retries:
                break
            delay = retry_delay(attempt, exc, backoff_s, max_delay_s)
            log.warning("%s; retry %d/%d in %.2fs", exc, attempt + 1, retries, delay)
            time.sleep(delay)
    # Raised outside the `except` block, so nothing is chained (see LLMClient.complete).
    raise _gave_up(last, tries=retries + 1)


def _gave_up(error: LLMError, tries: int) -> LLMError:
    """The same kind of error, its message ending with the tries made and the setting that bounds them."""
    note = f"gave up after {tries} {'try' if tries == 1 else 'tries'} (llm_max_retries={tries - 1})"
    again = type(error)(f"{error}; {note}")
    again.retry_after_s = getattr(error, "retry_after_s", None)
    return again


def retry_delay(attempt: int, error: Exception, backoff_s: float, max_delay_s: float) -> float:
    """``backoff_s * 2**attempt``, or the server's ``retry-after`` when longer; at most ``max_delay_s``."""
    hint = getattr(error, "retry_after_s", None) or 0.0
    return min(max_delay_s, max(backoff_s * 2**attempt, hint))
