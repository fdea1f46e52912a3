"""A corpus is a fixed set of documents with a fingerprint; the document store keeps what was ingested.

The store (``<store>/documents/``) holds every ingested document's extracted text, so queries never
re-read the PDFs. Ingesting merges: a new path is added, a changed file replaces its older version,
an unchanged one is left as it is. Every write goes to a temporary file first and is then renamed,
so a failed or interrupted ingest leaves the previous store intact.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

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
            digest.update(f"{doc.doc_id}\x00{doc.content_hash}\n".encode())
        return digest.hexdigest()[:16]

    @property
    def by_id(self) -> dict[str, Document]:
        return {doc.doc_id: doc for doc in self.documents}

    def __len__(self) -> int:
        return len(self.documents)


class DocumentStore:
    def __init__(self, store_dir: str | Path):
        self.root = Path(store_dir) / "documents"
        self._registry_path = self.root / "registry.json"

    def registry(self) -> dict[str, str]:
        """doc_id -> content hash of every stored document."""
        if not self._registry_path.exists():
            return {}
        return json.loads(self._registry_path.read_text())

    def add(self, documents: Iterable[Document]) -> list[str]:
        """Store new and changed documents; return the ids of those that were new or changed."""
        registry = self.registry()
        changed = []
        for doc in documents:
            if registry.get(doc.doc_id) == doc.content_hash:
                continue
            write_json_atomic(self._doc_path(doc.doc_id, doc.content_hash), {
                "doc_id": doc.doc_id, "text": doc.text, "page_starts": list(doc.page_starts),
                "content_hash": doc.content_hash,
            })
            registry[doc.doc_id] = doc.content_hash
            changed.append(doc.doc_id)
        if changed:
            write_json_atomic(self._registry_path, registry)
        return changed

    def corpus(self) -> Corpus:
        documents = []
        for doc_id, content_hash in self.registry().items():
            data = json.loads(self._doc_path(doc_id, content_hash).read_text())
            documents.append(Document(data["doc_id"], data["text"], tuple(data["page_starts"]), data["content_hash"]))
        return Corpus.of(documents)

    def _doc_path(self, doc_id: str, content_hash: str) -> Path:
        key = hashlib.sha1(f"{doc_id}\x00{content_hash}".encode()).hexdigest()
        return self.root / f"{key}.json"


def write_json_atomic(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(handle, "w") as out:
            json.dump(data, out)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
