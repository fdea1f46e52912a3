"""Turning an ``anthropic`` / ``openai`` SDK exception, or a success response whose body is not the
API's JSON, into the ``LLMError`` a user can act on (``rag_core.llm.errors``).

Each message names the provider and model, the HTTP status and what to do (the variable to check,
the setting to raise); none holds an API key.
Left out: the SDKs' own retries (switched off: ``rag_core.llm.client`` retries).
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from typing import Iterator

from rag_core.api_keys import KEY_ENV
from rag_core.llm.errors import (ContextTooLong, InvalidAPIKey, LLMError, LLMRequestError, LLMTimeout, LLMUnavailable,
                                 MalformedResponse, RateLimited)

_TOO_LONG = re.compile(r"prompt is too long|context[_ ]length|maximum context length|too many tokens", re.I)


def map_sdk_error(exc: Exception, provider: str, model: str, *, timeout_s: float | None = None) -> LLMError:
    """Turn an ``anthropic`` / ``openai`` exception into an ``LLMError`` with an actionable message."""
    status = getattr(exc, "status_code", None)
    detail = _api_message(exc)
    where = f"{provider} ({model})"
    if "APITimeoutError" in {cls.__name__ for cls in type(exc).__mro__}:
        waited = f" within llm_timeout_s={timeout_s:g} s" if timeout_s is not None else ""
        return LLMTimeout(
            f"{where} did not answer{waited} (request timed out); raise RAG_LLM_TIMEOUT_S / `llm_timeout_s` "
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
def malformed_as_error(provider: str, model: str, status: int) -> Iterator[None]:
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
