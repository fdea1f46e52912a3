"""Servers for the vector store tests: a real Chroma server (``rag_core.retrieve.chroma_process``) and
an address that accepts connections but never answers."""

from __future__ import annotations

import socket
from contextlib import contextmanager
from typing import Iterator

from rag_core.retrieve.chroma_process import ChromaServer, chroma_server, free_port

__all__ = ["ChromaServer", "chroma_server", "free_port", "silent_server"]


@contextmanager
def silent_server() -> Iterator[int]:
    """A port that accepts connections and never answers: every request times out."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield sock.getsockname()[1]
