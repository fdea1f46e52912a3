"""A corpus is a fixed set of documents with a fingerprint; the document store keeps what was ingested.

The store (``<store>/documents/``) holds every ingested document's extracted text, so queries never
re-read the PDFs. Ingesting merges: a new path is added, a changed file replaces its older version,
an unchanged one is left as it is. Every write goes to a temporary file first and is then renamed,
so a failed or interrupted ingest leaves the previous store intact.

Adding is two steps, so that a document counts as ingested only once its indexes exist: ``stage``
writes the documents' text (files named by id and content hash, so a staged file never replaces
anything) and returns the corpus the store *will* hold; the caller builds its indexes; ``commit``
then records the documents in ``registry.json``. Every read-modify-write of the registry holds an
exclusive lock (``fcntl.flock`` on ``documents/.lock``), so two processes adding at once both land.
Files get the permissions the umask gives (not tempfile's 0600), so a team can share a store.
Left out: removing documents; locks on file systems without ``flock`` (some network mounts).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

from rag_core.errors import EmptyStore
from rag_core.records import Document


@dataclass(frozen=True)
class Corpus:
    documents: tuple[Document, ...]  # sorted by doc_id

    @classmethod
    def of(cls, documents: Iterable[Document]) -> "Corpus":
        return cls(tuple(sorted(documents, key=lambda doc: doc.doc_id)))

    @property
    def fingerprint(self) -> str:
        digest = hashlib.sha256()
        for doc in self.documents:
            digest.update(f"{doc.doc_id}\x00{stored_version(doc)}\n".encode())
        return digest.hexdigest()[:16]

    @property
    def by_id(self) -> dict[str, Document]:
        return {doc.doc_id: doc for doc in self.documents}

    def __len__(self) -> int:
        return len(self.documents)


def stored_version(doc: Document) -> str:
    """The file hash, plus the extraction settings and metadata when the document has any: what the
    store registers and the corpus fingerprint hashes (so tables or metadata never share an index)."""
    if not doc.extraction and not doc.metadata:
        return doc.content_hash
    extra = json.dumps([doc.extraction, doc.metadata], sort_keys=True)
    return f"{doc.content_hash}+{hashlib.sha1(extra.encode()).hexdigest()[:12]}"


class DocumentStore:
    def __init__(self, store_dir: str | Path):
        self.root = Path(store_dir) / "documents"
        self._registry_path = self.root / "registry.json"

    def registry(self) -> dict[str, str]:
        """doc_id -> stored version (``stored_version``: the content hash, maybe + settings) of every stored document."""
        if not self._registry_path.exists():
            return {}
        return json.loads(self._registry_path.read_text())

    def add(self, documents: Iterable[Document]) -> list[str]:
        """Store new and changed documents at once (``stage`` then ``commit``); return the ids of
        those that were new or changed."""
        documents = list(documents)
        self.stage(documents)
        return self.commit(documents)

    def stage(self, documents: Iterable[Document]) -> Corpus:
        """Write the text of new and changed documents without registering them; return the corpus
        the store holds once they are committed."""
        registry = self.registry()
        for doc in documents:
            if registry.get(doc.doc_id) != stored_version(doc):
                write_json_atomic(self._doc_path(doc.doc_id, stored_version(doc)), {
                    "doc_id": doc.doc_id, "text": doc.text, "page_starts": list(doc.page_starts),
                    "content_hash": doc.content_hash, "title": doc.title, "headings": list(doc.headings),
                    "metadata": list(doc.metadata), "extraction": doc.extraction, "source": doc.source,
                })
                registry[doc.doc_id] = stored_version(doc)
        return self._corpus_of(registry)

    def commit(self, documents: Iterable[Document]) -> list[str]:
        """Record staged documents in the registry (under the lock); return the ids that changed."""
        with self.locked():
            registry = self.registry()
            changed = [doc.doc_id for doc in documents if registry.get(doc.doc_id) != stored_version(doc)]
            registry.update({doc.doc_id: stored_version(doc) for doc in documents})
            if changed:
                write_json_atomic(self._registry_path, registry)
        return changed

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the store's metadata lock: one read-modify-write of the registry at a time."""
        self.root.mkdir(parents=True, exist_ok=True)
        with exclusive_lock(self.root / ".lock"):
            yield

    def corpus(self) -> Corpus:
        return self._corpus_of(self.registry())

    def _corpus_of(self, registry: dict[str, str]) -> Corpus:
        documents = []
        for doc_id, content_hash in registry.items():
            data = json.loads(self._doc_path(doc_id, content_hash).read_text())
            documents.append(Document(
                data["doc_id"], data["text"], tuple(data["page_starts"]), data["content_hash"],
                title=data.get("title", ""), headings=tuple(map(tuple, data.get("headings", ()))),
                metadata=tuple(map(tuple, data.get("metadata", ()))), extraction=data.get("extraction", ""),
                source=data.get("source", "")))
        return Corpus.of(documents)

    def _doc_path(self, doc_id: str, content_hash: str) -> Path:
        key = hashlib.sha1(f"{doc_id}\x00{content_hash}".encode()).hexdigest()
        return self.root / f"{key}.json"


def store_corpus(store_dir: str | Path) -> Corpus:
    """The corpus registered in the store at `store_dir`; ``EmptyStore`` (bad input) when it holds none."""
    corpus = DocumentStore(store_dir).corpus()
    if not len(corpus):
        raise EmptyStore(
            f"no documents in the store {store_dir}. Ingest some first: "
            f"rag-pipeline ingest --input ./documents" + (f" --store {store_dir}" if str(store_dir) != ".rag_store" else "")
        )
    return corpus


@contextmanager
def exclusive_lock(path: Path, on_wait: str | None = None) -> Iterator[None]:
    """Hold an exclusive ``flock`` on `path` (created if missing) for the block; released when the
    block ends or the process dies. `on_wait` is printed to stderr when another holder makes us wait."""
    with open(path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if on_wait:
                print(on_wait, file=sys.stderr, flush=True)
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def umask_mode(requested: int = 0o666) -> int:
    """`requested` less the umask: what ``open()`` (0o666) or ``mkdir()`` (0o777) gives a new file or
    folder. (Reading the umask means setting it.)"""
    mask = os.umask(0o022)
    os.umask(mask)
    return requested & ~mask


def write_json_atomic(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
    try:
        os.fchmod(handle, umask_mode())  # mkstemp makes 0600 files; the store is meant to be shareable
        with os.fdopen(handle, "w") as out:
            json.dump(data, out)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
