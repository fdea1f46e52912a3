"""The error types that cross layers, and what each means to a user.

Two families decide the exit code of ``rag-pipeline`` (``rag_core.cli``), whichever layer raises them:
- ``BadInput`` (exit 2): the user's input is wrong (a setting, a path, a golden set, an empty store);
  the message says what to do. ``ConfigError`` (settings), ``EmptyStore``, and the input errors of
  the layers above (``GoldenSetError``, ``MetadataError``, ``ExtractionError``) are ``BadInput``.
- ``RunFailure`` (exit 1): something failed while running that the user can act on (a store that
  cannot be written, the LLM API, a Ray cluster that cannot be joined); ``LLMError`` is one.
Both print as one line, ``error: <message>``, never a traceback.

``IngestError`` is neither: one input file that cannot be read is skipped and listed, and the
ingest goes on.
Left out: the error types of one layer that no other layer raises (they stay beside their code).
"""

from __future__ import annotations


class BadInput(Exception):
    """The user's input is wrong; the message says what to do (exit code 2)."""


class EmptyStore(BadInput):
    """No documents have been ingested into the store yet."""


class ConfigError(BadInput, ValueError):
    """A setting is unknown or has a value it cannot take."""


class RunFailure(Exception):
    """A failure while running that the user can act on; the message says which and why (exit code 1)."""


class StoreError(RunFailure):
    """The store cannot be read or written (permissions, read-only or full disk)."""


class DamagedStore(StoreError):
    """A file the store keeps its documents in is truncated, empty, of the wrong type or foreign; the
    message names the file and the repair (an ingest of the documents rebuilds it)."""


class IngestError(Exception):
    """One file could not be read; the message says why (the file is skipped and listed)."""


__all__ = ["BadInput", "ConfigError", "DamagedStore", "EmptyStore", "IngestError", "RunFailure", "StoreError"]
