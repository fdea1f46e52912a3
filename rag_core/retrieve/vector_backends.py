"""Which vector store the ``vector_store`` setting names, and opening it.

The setting is a plain string, so configs, sweep grids and MLflow params stay strings::

    chroma                      ChromaDB embedded on disk under <store>/chroma (the default: no server)
    chroma+http://HOST:PORT     a Chroma server (``chroma run --path DIR --host HOST --port PORT``)
    qdrant:PATH                 qdrant-client's local mode in PATH (relative: under the store)
    qdrant+http://HOST:PORT     a Qdrant server (``docker run -p 6333:6333 qdrant/qdrant``)

The port may be left out (Chroma 8000, Qdrant 6333). ``manifest_key`` is what tells the index
manifests of two backends apart: None for the embedded default (so stores built before this
setting existed stay valid), the normalised setting otherwise. A process opens each store once
(``open_vector_store`` shares it while it is in use): Qdrant's local mode locks its folder.
Left out: TLS and API keys (a server on a private network or behind a tunnel is assumed).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:  # the config imports this module: it must not import numpy or a client library
    from rag_core.retrieve.vectorstore import VectorStore

DEFAULT_PORTS = {"chroma+http": 8000, "qdrant+http": 6333}
_OPEN: "weakref.WeakValueDictionary[tuple, object]" = weakref.WeakValueDictionary()


@dataclass(frozen=True)
class VectorStoreLocation:
    kind: str  # chroma | chroma+http | qdrant | qdrant+http
    host: str = ""
    port: int = 0
    path: str = ""  # qdrant local mode only, as given

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def __str__(self) -> str:
        if self.kind == "chroma":
            return "chroma"
        if self.kind == "qdrant":
            return f"qdrant:{self.path}"
        return f"{self.kind.split('+')[0]}+{self.url}"


def parse_vector_store(value: str) -> VectorStoreLocation:
    """The location `value` names; a ``ValueError`` listing the valid forms otherwise."""
    text = str(value).strip()
    if text == "chroma":
        return VectorStoreLocation("chroma")
    path = text[len("qdrant:"):].strip() if text.startswith("qdrant:") else ""
    if path and "://" not in path and not path.startswith("//"):
        return VectorStoreLocation("qdrant", path=path)
    kind, _, url = text.partition("+")
    if kind in ("chroma", "qdrant") and url:
        try:
            parts = urlsplit(url)
            port = parts.port or DEFAULT_PORTS[f"{kind}+http"]
        except ValueError:  # a port that is not a number or out of range
            parts, port = None, 0
        if (parts and parts.scheme == "http" and parts.hostname and parts.path in ("", "/")
                and not (parts.query or parts.fragment or parts.username or parts.password)):
            return VectorStoreLocation(f"{kind}+http", host=parts.hostname, port=port)
    raise ValueError(f"vector_store {value!r} is not a valid vector store: use {valid_forms()}")


def valid_forms() -> str:
    return ("chroma (embedded, under the store), chroma+http://HOST:PORT (a Chroma server), "
            "qdrant:PATH (Qdrant local mode; a relative PATH is under the store) or "
            "qdrant+http://HOST:PORT (a Qdrant server)")


def is_valid_vector_store(value: str) -> bool:
    try:
        parse_vector_store(value)
    except ValueError:
        return False
    return True


def manifest_key(value: str) -> str | None:
    """What index manifests are keyed by: None for the embedded default, else the normalised setting."""
    location = parse_vector_store(value)
    return None if location.kind == "chroma" else str(location)


def open_vector_store(value: str, store_dir: str | Path, timeout_s: float = 60.0) -> "VectorStore":
    """The store `value` names, for the index store at `store_dir`; the same object while one is in use."""
    location = parse_vector_store(value)
    local = Path(store_dir) / "chroma" if location.kind == "chroma" else Path(store_dir) / location.path
    key = (str(location), str(local.resolve()) if location.kind in ("chroma", "qdrant") else "", timeout_s)
    store = _OPEN.get(key)
    if store is None:
        store = _open(location, local, timeout_s)
        _OPEN[key] = store
    return store


def _open(location: VectorStoreLocation, local: Path, timeout_s: float) -> "VectorStore":
    if location.kind == "chroma":
        from rag_core.retrieve.vectorstore import ChromaVectorStore

        return ChromaVectorStore(local)
    if location.kind == "chroma+http":
        from rag_core.retrieve.chroma_server import ChromaServerStore

        return ChromaServerStore(location.host, location.port, timeout_s)
    from rag_core.retrieve.qdrant_store import QdrantVectorStore

    if location.kind == "qdrant":
        return QdrantVectorStore(path=local)
    return QdrantVectorStore(url=location.url, timeout_s=timeout_s)
