"""Vector store servers that fail: one error type, with a message that names the server, what it
was doing, the cause in words (connection refused, no answer within the timeout, connection lost, an
HTTP error status) and what to do. ``server_calls`` wraps a client library call and translates the
transport errors chromadb and qdrant-client raise (httpx's, or qdrant's wrappers of them); any other
exception is left alone, since it is a bug whose traceback is wanted.
Left out: retries (running the command again picks up where it stopped).
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Iterator

from rag_core.errors import RunFailure


class VectorStoreError(RunFailure):
    """A vector store server cannot be reached, does not answer in time or failed (exit code 1)."""


INCOMPLETE_HINT = ("The dense index is incomplete and was not registered: run the same command again once the "
                   "server answers (it writes only the chunks the server lacks; embeddings are cached).")


@contextmanager
def server_calls(server: str, operation: str, timeout_s: float, hint: str) -> Iterator[None]:
    """Turn a client library's transport failure during `operation` into a ``VectorStoreError``."""
    try:
        yield
    except VectorStoreError:
        raise
    except Exception as exc:
        cause = transport_cause(exc, timeout_s)
        if cause is None:
            raise
        raise VectorStoreError(f"{server} failed while {operation}: {cause}. {hint}") from None


def transport_cause(exc: BaseException, timeout_s: float) -> str | None:
    """A readable cause when `exc` is a network failure (httpx's, as chromadb and qdrant-client raise
    it, qdrant's wrapper, or an HTTP error status); None for anything else (a bug: keep its traceback)."""
    import httpx

    source = getattr(exc, "source", None)  # qdrant's ResponseHandlingException wraps the httpx error
    if isinstance(source, BaseException):
        exc = source
    if isinstance(exc, httpx.TimeoutException):
        return f"no answer within {timeout_s:g} s (setting vector_store_timeout_s)"
    if isinstance(exc, httpx.ConnectError):
        return "connection refused" if "refused" in str(exc).lower() else f"cannot connect ({exc})"
    if isinstance(exc, httpx.TransportError):
        return f"the connection was lost ({exc or type(exc).__name__})"
    if isinstance(exc, httpx.HTTPStatusError):
        return f"the server answered HTTP {exc.response.status_code}"
    if "qdrant_client" in sys.modules:
        from qdrant_client.http.exceptions import UnexpectedResponse

        if isinstance(exc, UnexpectedResponse):
            return f"the server answered HTTP {exc.status_code} {exc.reason_phrase}".rstrip()
    if isinstance(exc, ValueError) and "could not connect to a chroma server" in str(exc).lower():
        return "cannot connect"
    return None
