"""The errors of an LLM request: one ``LLMError`` subclass per thing a user can act on.

``str(error)`` is safe to print: keys are redacted (``rag_core.api_keys``). Every ``LLMError`` is a
``rag_core.errors.RunFailure`` (exit code 1). ``TRANSIENT_ERRORS`` are the ones worth retrying.
Left out: turning SDK exceptions into these (``sdk_errors``).
"""

from __future__ import annotations

from rag_core.api_keys import redact
from rag_core.errors import RunFailure


class LLMError(RunFailure, RuntimeError):
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
