"""The LLM client, below every layer that talks to a model (``retrieve`` for query expansion,
``generate`` for answers and golden questions, ``evaluate`` for the judge).

Modules: ``client`` (``LLMClient``, ``complete_with_retries``, keys and models), ``backends`` (one per
SDK, ``Completion``), ``errors`` (``LLMError`` and one subclass per thing a user can act on),
``sdk_errors`` (SDK exceptions -> ``LLMError``), ``delimiters`` (``new_nonce``: delimiters untrusted text
cannot close), ``replies`` (``json_objects_in``).
"""

from rag_core.llm.backends import Completion
from rag_core.llm.client import LLMClient, api_key_for, complete_with_retries, has_api_key, retry_delay
from rag_core.llm.delimiters import delimited, new_nonce
from rag_core.llm.errors import (TRANSIENT_ERRORS, ContextTooLong, InvalidAPIKey, LLMError, LLMRequestError, LLMTimeout,
                                 LLMUnavailable, MalformedResponse, MissingAPIKey, RateLimited)
from rag_core.llm.replies import json_objects_in

__all__ = [
    "TRANSIENT_ERRORS", "Completion", "ContextTooLong", "InvalidAPIKey", "LLMClient", "LLMError", "LLMRequestError",
    "LLMTimeout", "LLMUnavailable", "MalformedResponse", "MissingAPIKey", "RateLimited", "api_key_for",
    "complete_with_retries", "has_api_key", "json_objects_in", "delimited", "new_nonce", "retry_delay",
]
