"""ChromaDB's own server as a child process on 127.0.0.1, for trying the client/server mode, tests and
benchmarks: ``chroma run --path DIR --host 127.0.0.1 --port N`` (the CLI chromadb installs next to
Python), started, waited for (its heartbeat) and stopped.

A team runs the same command as a service on a machine of its own (``--host 0.0.0.0``), and sets
``vector_store: chroma+http://THAT-HOST:PORT``.
Left out: supervising a long-lived server (restarts, logs): that is the job of systemd, Docker or Kubernetes.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

CHROMA_CLI = Path(sys.executable).parent / "chroma"


def free_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ChromaServer:
    """``chroma run --path DIR`` on 127.0.0.1; ``stop`` kills it, ``start`` runs it again on the same data."""

    def __init__(self, path: str | Path, port: int | None = None):
        if not CHROMA_CLI.exists():
            raise FileNotFoundError(f"chromadb's server CLI is missing: {CHROMA_CLI} (pip install chromadb)")
        self.path, self.port = Path(path), port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.setting = f"chroma+{self.url}"  # the vector_store value that uses it
        self.process: subprocess.Popen | None = None

    def start(self, timeout_s: float = 90.0) -> "ChromaServer":
        import httpx

        self.process = subprocess.Popen(
            [str(CHROMA_CLI), "run", "--path", str(self.path), "--host", "127.0.0.1", "--port", str(self.port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"chroma run exited with {self.process.returncode} (port {self.port} in use?)")
            try:
                if httpx.get(f"{self.url}/api/v2/heartbeat", timeout=2).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"the Chroma server on port {self.port} did not start within {timeout_s:g} s")

    def stop(self) -> None:
        """Kill the server (as a crash would: no clean shutdown) and wait until it is gone."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)
        self.process = None


@contextmanager
def chroma_server(path: str | Path) -> Iterator[ChromaServer]:
    """A running server on a free port, always stopped afterwards."""
    server = ChromaServer(path).start()
    try:
        yield server
    finally:
        server.stop()
