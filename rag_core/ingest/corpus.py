"""A corpus is a fixed set of documents with a fingerprint; the document store keeps what was ingested.

The store (``<store>/documents/``) holds every ingested document's extracted text, so queries never
re-read the PDFs. Ingesting merges: a new path is added, a changed file replaces its older version,
an unchanged one is left as it is. Every write goes to a temporary file first and is then renamed,
so a failed or interrupted ingest leaves the previous store intact.

Adding is two steps, so that a document counts as ingested only once its indexes exist: ``stage``
writes the documents' text (files named by id and content hash, so a staged file never replaces
anything) and returns the corpus the store *will* hold; the caller builds its indexes; ``commit``
then records the documents in ``registry.json``. Every read-modify-write of the registry holds an
exclusive lock (``rag_core.writes.exclusive_lock`` on ``documents/.lock``), so two processes adding at once both land.
Files get the permissions the umask gives (not tempfile's 0600), so a team can share a store.
Removing is part of the same two steps: ``stage(..., removed=ids)`` returns the corpus without them
and ``commit(..., removed=ids)`` drops them from the registry (an ingest removes the documents whose
file is gone: ``rag_core.service``). ``clean_staged`` deletes what an interrupted ingest staged and
never registered (document files no registry entry names, temporary files); only an ingest, which
holds the store's ingest lock, calls it.
A damaged registry or document file (truncated, empty, wrong JSON type, foreign) is a
``DamagedStore`` naming the file and the repair; ``repair`` (run by every ingest, under its lock)
rebuilds a damaged registry from the intact document files and drops entries whose file is damaged,
so the ingest that follows writes again what its folder still holds and nothing intact is lost.
Left out: locks on file systems without ``flock`` (some network mounts).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Collection, Iterable, Iterator

from rag_core.errors import DamagedStore, EmptyStore
from rag_core.records import Document
from rag_core.writes import exclusive_lock, umask_mode, write_json_atomic  # noqa: F401 - also imported from here

log = logging.getLogger(__name__)


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
        """doc_id -> stored version (``stored_version``: the content hash, maybe + settings) of every stored
        document; ``DamagedStore`` when the file is not such a mapping."""
        if not self._registry_path.exists():
            return {}
        data = read_store_json(self._registry_path, self.root.parent)
        if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
            raise damaged(self._registry_path, self.root.parent, "not a mapping of document id to version")
        return data

    def repair(self) -> dict[str, Any]:
        """Make the registry readable and every entry's file loadable: a damaged registry is moved aside
        (``registry.json.damaged``) and rebuilt from the intact document files (the newest version of
        each id); entries whose document file is damaged or missing are dropped. Returns what was done."""
        done: dict[str, Any] = {"registry_rebuilt": False, "dropped_damaged": []}
        if not self.root.is_dir():
            return done
        with self.locked():
            try:
                registry = self.registry()
            except DamagedStore:
                os.replace(self._registry_path, self._registry_path.with_name("registry.json.damaged"))
                registry, done["registry_rebuilt"] = self._rebuilt_registry(), True
            intact = {}
            for doc_id, version in registry.items():
                try:
                    self._load(doc_id, version)
                    intact[doc_id] = version
                except DamagedStore:
                    done["dropped_damaged"].append(doc_id)
            if done["registry_rebuilt"] or done["dropped_damaged"]:
                write_json_atomic(self._registry_path, intact)
        return done

    def _rebuilt_registry(self) -> dict[str, str]:
        newest: dict[str, tuple[float, str]] = {}
        for path in self.root.glob("*.json"):
            if path.name == self._registry_path.name or path.name.startswith(".tmp-"):
                continue
            try:
                document = _document(read_store_json(path, self.root.parent), path, self.root.parent)
            except DamagedStore:
                continue
            version = stored_version(document)
            if self._doc_path(document.doc_id, version) == path:
                mtime = path.stat().st_mtime
                if document.doc_id not in newest or newest[document.doc_id][0] < mtime:
                    newest[document.doc_id] = (mtime, version)
        return {doc_id: version for doc_id, (_, version) in sorted(newest.items())}

    def add(self, documents: Iterable[Document]) -> list[str]:
        """Store new and changed documents at once (``stage`` then ``commit``); return the ids of
        those that were new or changed."""
        documents = list(documents)
        self.stage(documents)
        return self.commit(documents)

    def stage(self, documents: Iterable[Document], removed: Collection[str] = ()) -> Corpus:
        """Write the text of new and changed documents without registering them; return the corpus
        the store holds once they are committed (without the `removed` ids)."""
        registry = {doc_id: version for doc_id, version in self.registry().items() if doc_id not in removed}
        for doc in documents:
            if registry.get(doc.doc_id) != stored_version(doc):
                write_json_atomic(self._doc_path(doc.doc_id, stored_version(doc)), {
                    "doc_id": doc.doc_id, "text": doc.text, "page_starts": list(doc.page_starts),
                    "content_hash": doc.content_hash, "title": doc.title, "headings": list(doc.headings),
                    "metadata": list(doc.metadata), "extraction": doc.extraction, "source": doc.source,
                })
                registry[doc.doc_id] = stored_version(doc)
        return self._corpus_of(registry)

    def commit(self, documents: Iterable[Document], removed: Collection[str] = ()) -> list[str]:
        """Record staged documents in the registry and drop the `removed` ids (under the lock); return
        the ids that changed (removed ones included)."""
        with self.locked():
            registry = self.registry()
            changed = [doc.doc_id for doc in documents if registry.get(doc.doc_id) != stored_version(doc)]
            changed += [doc_id for doc_id in removed if registry.pop(doc_id, None) is not None]
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

    def clean_staged(self) -> int:
        """Delete document files no registry entry names and temporary files left by an interrupted
        write; return how many bytes were freed. Call it only while holding the ingest lock."""
        if not self.root.is_dir():
            return 0
        freed = 0
        with self.locked():
            kept = {self._doc_path(doc_id, version).name for doc_id, version in self.registry().items()}
            kept.add(self._registry_path.name)
            for path in self.root.iterdir():
                if path.is_file() and path.suffix == ".json" and path.name not in kept:
                    freed += path.stat().st_size
                    path.unlink(missing_ok=True)
        return freed

    def _corpus_of(self, registry: dict[str, str]) -> Corpus:
        return Corpus.of(self._load(doc_id, version) for doc_id, version in registry.items())

    def _load(self, doc_id: str, version: str) -> Document:
        path = self._doc_path(doc_id, version)
        if not path.exists():
            raise damaged(path, self.root.parent, f"missing: the registry names document {doc_id!r}")
        document = _document(read_store_json(path, self.root.parent), path, self.root.parent)
        if document.doc_id != doc_id:
            raise damaged(path, self.root.parent, f"holds document {document.doc_id!r}, not {doc_id!r}")
        return document

    def _doc_path(self, doc_id: str, content_hash: str) -> Path:
        key = hashlib.sha1(f"{doc_id}\x00{content_hash}".encode()).hexdigest()
        return self.root / f"{key}.json"


def _document(data: Any, path: Path, store_dir: Path) -> Document:
    """A stored document file's record as a Document; ``DamagedStore`` when it is not one."""
    try:
        if not isinstance(data, dict):
            raise TypeError(f"a JSON {type(data).__name__}, not an object")
        document = Document(
            data["doc_id"], data["text"], tuple(data["page_starts"]), data["content_hash"],
            title=data.get("title", ""), headings=tuple(map(tuple, data.get("headings", ()))),
            metadata=tuple(map(tuple, data.get("metadata", ()))), extraction=data.get("extraction", ""),
            source=data.get("source", ""))
        if not (isinstance(document.doc_id, str) and isinstance(document.text, str)
                and all(isinstance(start, int) for start in document.page_starts)):
            raise TypeError("fields of the wrong type")
        return document
    except (KeyError, TypeError, ValueError) as exc:
        reason = f"no field {exc}" if isinstance(exc, KeyError) else str(exc)
        raise damaged(path, store_dir, f"not a stored document ({reason})") from None


def read_store_json(path: Path, store_dir: Path, repair: str | None = None) -> Any:
    """The JSON in one of the store's files; ``DamagedStore`` naming it (and `repair`, see ``damaged``)
    when it cannot be parsed."""
    try:
        return json.loads(path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        reason = "empty" if not path.stat().st_size else f"not JSON: {getattr(exc, 'msg', None) or type(exc).__name__}"
        raise damaged(path, store_dir, reason, repair) from None


def damaged(path: Path, store_dir: Path, reason: str, repair: str | None = None) -> DamagedStore:
    """The error for a damaged store file: `path`, `reason` and the `repair` (default: an ingest of the
    documents, for the files only the documents can rebuild)."""
    repair = repair or (f"rag-pipeline ingest --input <your documents folder> --store {store_dir} rebuilds it from "
                        "the documents and keeps what is intact")
    return DamagedStore(f"the store's file {path} is damaged ({reason}); repair: {repair}")


def derived_repair(store_dir: Path) -> str:
    """The repair of a file derived from the chunks (a dense collection, its manifest, an ONNX export)."""
    return (f"rag-pipeline repair --store {store_dir} (or an ingest) rebuilds it from the store's chunks, "
            "embedding cache and model and keeps what is intact")


def derived_damage(path: Path, store_dir: Path, reason: str) -> DamagedStore:
    return damaged(path, store_dir, reason, repair=derived_repair(store_dir))


def store_corpus(store_dir: str | Path) -> Corpus:
    """The corpus registered in the store at `store_dir`; ``EmptyStore`` (bad input) when it holds none."""
    corpus = DocumentStore(store_dir).corpus()
    if not len(corpus):
        raise EmptyStore(
            f"no documents in the store {store_dir}. Ingest some first: "
            f"rag-pipeline ingest --input ./documents" + (f" --store {store_dir}" if str(store_dir) != ".rag_store" else "")
        )
    return corpus
