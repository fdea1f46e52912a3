"""Vector stores: the registry (``VECTOR_STORES``, by kind), which store the ``vector_store`` setting
names, and opening it.

The setting is a plain string, so configs, sweep grids and MLflow params stay strings::

    chroma                      ChromaDB embedded on disk under <store>/chroma (the default: no server)
    chroma+http://HOST:PORT     a Chroma server (``chroma run --path DIR --host HOST --port PORT``)
    qdrant:PATH                 qdrant-client's local mode in PATH (relative: under the store)
    qdrant+http://HOST:PORT     a Qdrant server (``docker run -p 6333:6333 qdrant/qdrant``)
    NAME or NAME:ARGUMENT       a store a plugin registered as NAME (its ``from_location`` reads the argument)

The port may be left out (Chroma 8000, Qdrant 6333). ``manifest_key`` is what tells the index
manifests of two backends apart: None for the embedded default (so stores built before this
setting existed stay valid), the normalised setting otherwise. A process opens each store once
(``open_vector_store`` shares it while it is in use): Qdrant's local mode locks its folder.
A store class is registered with a ``from_location(location, store_dir, timeout_s)`` class method
(``base.VectorStore`` is the contract).
Left out: TLS and API keys (a server on a private network or behind a tunnel is assumed).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from rag_core.components import SETTINGS, Registry, Setting

__all__ = ["VECTOR_STORES", "VectorStoreLocation", "manifest_key", "open_vector_store", "parse_vector_store",
           "valid_forms"]

DEFAULT_PORTS = {"chroma+http": 8000, "qdrant+http": 6333}
_OPEN: "weakref.WeakValueDictionary[tuple, object]" = weakref.WeakValueDictionary()

VECTOR_STORES = Registry("vector_store", setting="vector_store")
VECTOR_STORES.register("chroma", "rag_core.retrieve.vector_stores.chroma:ChromaVectorStore",
                       help="ChromaDB embedded on disk under <store>/chroma", form="chroma")
VECTOR_STORES.register("chroma+http", "rag_core.retrieve.vector_stores.chroma_server:ChromaServerStore",
                       help="a Chroma server", form="chroma+http://HOST:PORT")
VECTOR_STORES.register("qdrant", "rag_core.retrieve.vector_stores.qdrant:QdrantVectorStore",
                       help="Qdrant's local mode in PATH (relative: under the store)", form="qdrant:PATH")
VECTOR_STORES.register("qdrant+http", "rag_core.retrieve.vector_stores.qdrant:QdrantVectorStore",
                       help="a Qdrant server", form="qdrant+http://HOST:PORT")
BUILT_IN = ("chroma", "chroma+http", "qdrant", "qdrant+http")


@dataclass(frozen=True)
class VectorStoreLocation:
    kind: str  # chroma | chroma+http | qdrant | qdrant+http | a plugin's store name
    host: str = ""
    port: int = 0
    path: str = ""  # qdrant local mode (as given), or a plugin store's argument

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def __str__(self) -> str:
        if self.kind == "chroma":
            return "chroma"
        if self.kind in ("chroma+http", "qdrant+http"):
            return f"{self.kind.split('+')[0]}+{self.url}"
        return f"{self.kind}:{self.path}" if self.path or self.kind == "qdrant" else self.kind


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
    name, _, argument = text.partition(":")
    if name and name not in BUILT_IN and name in VECTOR_STORES:
        return VectorStoreLocation(name, path=argument)
    raise ValueError(f"vector_store {value!r} is not a valid vector store: use {valid_forms()}")


def valid_forms() -> str:
    plugins = [f"{name}[:ARGUMENT] ({VECTOR_STORES.get(name).help or 'a plugin store'})"
               for name in VECTOR_STORES if name not in BUILT_IN]
    return ("chroma (embedded, under the store), chroma+http://HOST:PORT (a Chroma server), "
            "qdrant:PATH (Qdrant local mode; a relative PATH is under the store) or "
            "qdrant+http://HOST:PORT (a Qdrant server)") + "".join(f", {form}" for form in plugins)


def _problem(value: str) -> str | None:
    try:
        parse_vector_store(value)
    except ValueError:
        return f"must be one of: {valid_forms()}"
    return None


def manifest_key(value: str) -> str | None:
    """What index manifests are keyed by: None for the embedded default, else the normalised setting."""
    location = parse_vector_store(value)
    return None if location.kind == "chroma" else str(location)


def open_vector_store(value: str, store_dir: str | Path, timeout_s: float = 60.0) -> Any:
    """The store `value` names, for the index store at `store_dir`; the same object while one is in use."""
    location = parse_vector_store(value)
    key = (str(location), str(Path(store_dir).resolve()), timeout_s)
    store = _OPEN.get(key)
    if store is None:
        store = VECTOR_STORES.load(location.kind).from_location(location, Path(store_dir), timeout_s)
        _OPEN[key] = store
    return store


SETTINGS.declare(
    Setting("vector_store", str, "chroma", "where dense vectors live: chroma (embedded) | chroma+http://HOST:PORT | "
            "qdrant:PATH | qdrant+http://HOST:PORT", rule=_problem, group="vector_store", stage="index"),
    Setting("vector_store_timeout_s", float, 60.0, "seconds to wait for one request to a vector store server",
            above=0, group="vector_store", stage="evaluation"),
    owner="vector_store")
