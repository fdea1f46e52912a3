"""One small client over the Anthropic Messages API and the OpenAI Chat Completions API.

``LLMClient.complete(system, user, max_tokens)`` sends one request and returns a ``Completion``
(text, model that answered, token usage). Every SDK failure becomes one ``LLMError`` subclass with
a message a user can act on; no message ever holds an API key (``redact``).

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

import json
import logging
import os
import re
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from rag_core.api_keys import KEY_ENV, redact
from rag_core.api_keys import register as register_secret
from rag_core.config import DEFAULT_LLM_MODEL, RagConfig

log = logging.getLogger(__name__)

# provider -> model used when the configured model is the other provider's default
DEFAULT_MODELS = {"anthropic": DEFAULT_LLM_MODEL, "openai": "gpt-5.4-mini"}
# provider -> upper bound for the pre-send length check (tokens): the largest context window of the
# provider's current models. It only catches absurd prompts cheaply; the server's own 400 for the
# model actually used is mapped to ContextTooLong too. Pass max_context_tokens to be stricter.
CONTEXT_TOKENS = {"anthropic": 1_000_000, "openai": 1_000_000}
CHARS_PER_TOKEN = 4  # rough estimate for English prose; the server's own 400 is mapped too


# --- errors -------------------------------------------------------------------------------------
class LLMError(RuntimeError):
    """Any failure to get a completion. ``str(error)`` is safe to print: keys are redacted."""

    def __init__(self, message: str) -> None:
        super().__init__(redact(message))


class MissingAPIKey(LLMError):
    """No key in the environment: the message names the variable to set."""


class InvalidAPIKey(LLMError):
    """The server refused the key (401/403)."""


class RateLimited(LLMError):
    """HTTP 429. ``retry_after_s`` is the server's hint, when it gave one."""

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class LLMUnavailable(LLMError):
    """Connection failure, timeout, or a 5xx / overloaded answer."""


class LLMTimeout(LLMUnavailable):
    """No answer within ``llm_timeout_s``."""


class MalformedResponse(LLMError):
    """A success status whose body is not the API's JSON or lacks its fields; retried like a 5xx."""


class ContextTooLong(LLMError):
    """The prompt does not fit the model's context window (estimated before sending, or a 400)."""


class LLMRequestError(LLMError):
    """Any other refusal (unknown model, malformed request)."""


TRANSIENT_ERRORS: tuple[type[LLMError], ...] = (RateLimited, LLMUnavailable, MalformedResponse)


# --- client -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Completion:
    text: str
    model: str  # the model that answered, as the API reports it
    input_tokens: int
    output_tokens: int


def json_objects_in(text: str) -> Iterator[dict[str, Any]]:
    """Every JSON object in a model's reply, in order, wherever it starts (prose around it is skipped)."""
    decoder = json.JSONDecoder()
    for start, char in enumerate(text):
        if char != "{":
            continue
        try:
            value, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            yield value


def api_key_for(provider: str) -> str | None:
    """The key for ``provider`` from its environment variable, or None when unset or empty."""
    return os.environ.get(KEY_ENV[_check_provider(provider)]) or None


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
        self.provider = _check_provider(provider)
        self.model = resolve_model(self.provider, model)
        key = api_key or api_key_for(self.provider)
        if not key:
            raise MissingAPIKey(
                f"no API key for {self.provider}: set the environment variable {KEY_ENV[self.provider]}"
            )
        register_secret(key)
        self.timeout_s = timeout_s
        self.max_context_tokens = max_context_tokens or CONTEXT_TOKENS[self.provider]
        self._send, self._sdk_errors = _BACKENDS[self.provider](key, base_url, timeout_s)

    @classmethod
    def from_config(cls, config: RagConfig, **kwargs: Any) -> "LLMClient":
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


# --- SDK error mapping --------------------------------------------------------------------------
_TOO_LONG = re.compile(r"prompt is too long|context[_ ]length|maximum context length|too many tokens", re.I)


def map_sdk_error(exc: Exception, provider: str, model: str, *, timeout_s: float | None = None) -> LLMError:
    """Turn an ``anthropic`` / ``openai`` exception into an ``LLMError`` with an actionable message."""
    status = getattr(exc, "status_code", None)
    detail = _api_message(exc)
    where = f"{provider} ({model})"
    if "APITimeoutError" in {cls.__name__ for cls in type(exc).__mro__}:
        waited = f" within llm_timeout_s={timeout_s:g} s" if timeout_s is not None else ""
        return LLMTimeout(
            f"{where} did not answer{waited} (request timed out); raise RAG_LLM_TIMEOUT_S / --llm-timeout-s "
            "for long answers, or try again later"
        )
    if status in (401, 403):
        return InvalidAPIKey(
            f"{where} rejected the API key (HTTP {status}): check {KEY_ENV[provider]}. {detail}".strip()
        )
    if status == 429:
        return RateLimited(
            f"{where} rate limit reached (HTTP 429): wait and retry, or lower the request rate. {detail}".strip(),
            retry_after_s=_retry_after(exc),
        )
    if status == 413 or (status == 400 and _TOO_LONG.search(f"{detail} {getattr(exc, 'code', '')}")):
        return ContextTooLong(
            f"{where}: the prompt is too long for the model's context window (HTTP {status}); "
            f"lower k, chunk_size or max_answer_tokens. {detail}".strip()
        )
    if status is not None and (status >= 500 or status == 408):
        return LLMUnavailable(f"{where} is unavailable (HTTP {status}); try again later. {detail}".strip())
    if status == 404:
        return LLMRequestError(
            f"{where}: model or endpoint not found (HTTP 404): check RAG_LLM_MODEL. {detail}".strip()
        )
    if status is not None:
        return LLMRequestError(f"{where} refused the request (HTTP {status}). {detail}".strip())
    if _is_connection_error(exc):
        return LLMUnavailable(
            f"cannot reach {where}: {type(exc).__name__}: {str(exc).rstrip('.')}. Check the network "
            f"(and {provider.upper()}_BASE_URL if set)"
        )
    return LLMRequestError(f"{where} call failed: {type(exc).__name__}: {exc}")


def _api_message(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return error["message"]
    return getattr(exc, "message", "") or ""


def _retry_after(exc: Exception) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or {}
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            return float(headers.get(name)) * scale
        except (TypeError, ValueError):
            continue
    return None


def _is_connection_error(exc: Exception) -> bool:
    names = {cls.__name__ for cls in type(exc).__mro__}
    return bool(names & {"APIConnectionError", "APITimeoutError", "ConnectionError", "TimeoutError"})


@contextmanager
def _malformed_as_error(provider: str, model: str, status: int) -> Iterator[None]:
    """Reading a success response: a body that is not JSON, or lacks the API's fields, is a ``MalformedResponse``."""
    try:
        yield
        return
    except (ValueError, TypeError, AttributeError, KeyError, IndexError) as exc:  # JSONDecodeError is a ValueError
        error = MalformedResponse(
            f"malformed response from {provider} ({model}) (HTTP {status}): {type(exc).__name__}: "
            f"{str(exc)[:200]}; try again later"
        )
    raise error from None


def checked_completion(text: Any, model: Any, input_tokens: Any, output_tokens: Any) -> Completion:
    """A ``Completion`` whose fields have the types the API documents (TypeError otherwise)."""
    if not isinstance(text, str) or not isinstance(model, str):
        raise TypeError(f"expected text and model as strings, got {type(text).__name__} and {type(model).__name__}")
    if not all(isinstance(n, int) for n in (input_tokens, output_tokens)):
        raise TypeError("expected integer token counts in 'usage'")
    return Completion(text, model, input_tokens, output_tokens)


# --- backends: provider -> factory(key, base_url, timeout_s) -> (send, the SDK's base error class)
Send = Callable[[str, str, str, int], Completion]  # send(model, system, user, max_tokens)
Backend = tuple[Send, type[Exception]]


def _anthropic_backend(key: str, base_url: str | None, timeout_s: float) -> Backend:
    try:
        import anthropic
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise ImportError("LLM_PROVIDER=anthropic needs the anthropic SDK: pip install anthropic") from exc
    sdk = anthropic.Anthropic(api_key=key, base_url=base_url, max_retries=0, timeout=timeout_s)

    def send(model: str, system: str, user: str, max_tokens: int) -> Completion:
        raw = sdk.messages.with_raw_response.create(
            model=model, system=system, max_tokens=max_tokens, messages=[{"role": "user", "content": user}]
        )
        with _malformed_as_error("anthropic", model, raw.status_code):
            message = raw.parse()
            text = "".join(block.text for block in message.content if getattr(block, "type", "") == "text")
            return checked_completion(text, message.model, message.usage.input_tokens, message.usage.output_tokens)

    return send, anthropic.AnthropicError


def _openai_backend(key: str, base_url: str | None, timeout_s: float) -> Backend:
    try:
        import openai
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise ImportError("LLM_PROVIDER=openai needs the openai SDK: pip install openai") from exc
    sdk = openai.OpenAI(api_key=key, base_url=base_url, max_retries=0, timeout=timeout_s)

    def send(model: str, system: str, user: str, max_tokens: int) -> Completion:
        raw = sdk.chat.completions.with_raw_response.create(
            model=model,
            max_completion_tokens=max_tokens,
            messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
        )
        with _malformed_as_error("openai", model, raw.status_code):
            response = raw.parse()
            text = response.choices[0].message.content or ""
            usage = response.usage
            return checked_completion(
                text, response.model, usage.prompt_tokens if usage else 0, usage.completion_tokens if usage else 0
            )

    return send, openai.OpenAIError


_BACKENDS: dict[str, Callable[[str, str | None, float], Backend]] = {
    "anthropic": _anthropic_backend,
    "openai": _openai_backend,
}


def _check_provider(provider: str) -> str:
    if provider not in _BACKENDS:
        raise ValueError(f"unknown LLM provider {provider!r}; valid providers: {', '.join(_BACKENDS)}")
    return provider
