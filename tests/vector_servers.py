"""A real Chroma server for tests (``chroma run``, the CLI chromadb installs next to Python), on a free
127.0.0.1 port, and addresses where nothing answers: a closed port and a socket that never replies."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import httpx

CHROMA_CLI = Path(sys.executable).parent / "chroma"


def free_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ChromaServer:
    """``chroma run --path DIR`` on 127.0.0.1; ``stop`` kills it, ``start`` runs it again on the same data."""

    def __init__(self, path: Path, port: int | None = None):
        assert CHROMA_CLI.exists(), f"chromadb's server CLI is missing: {CHROMA_CLI}"
        self.path, self.port = path, port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.setting = f"chroma+{self.url}"
        self.process: subprocess.Popen | None = None

    def start(self, timeout_s: float = 90.0) -> "ChromaServer":
        self.process = subprocess.Popen(
            [str(CHROMA_CLI), "run", "--path", str(self.path), "--host", "127.0.0.1", "--port", str(self.port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.process.poll() is None, f"chroma run exited with {self.process.returncode}"
            try:
                if httpx.get(f"{self.url}/api/v2/heartbeat", timeout=2).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        self.stop()
        raise AssertionError(f"the Chroma server on port {self.port} did not start within {timeout_s} s")

    def stop(self) -> None:
        """Kill the server (as a crash would: no clean shutdown) and wait until it is gone."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)
        self.process = None


@contextmanager
def chroma_server(path: Path) -> Iterator[ChromaServer]:
    server = ChromaServer(path).start()
    try:
        yield server
    finally:
        server.stop()


@contextmanager
def silent_server() -> Iterator[int]:
    """A port that accepts connections and never answers: every request times out."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield sock.getsockname()[1]
