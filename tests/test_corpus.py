"""The document store: merging, the registry lock (two real processes), and shareable file modes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

from conftest import ROOT
from rag_core.ingest.corpus import DocumentStore, write_json_atomic
from rag_core.records import Document

ADDER = textwrap.dedent("""
    import sys, time
    from rag_core.ingest.corpus import DocumentStore
    from rag_core.records import Document
    store, name, start_at = sys.argv[1], sys.argv[2], float(sys.argv[3])
    while time.time() < start_at:  # both processes start adding at the same moment
        time.sleep(0.001)
    for number in range(40):
        text = f"{name} document {number}"
        DocumentStore(store).add([Document.from_pages(f"{name}/{number}.txt", [text], f"{name}-{number}")])
""")


def doc(doc_id: str, text: str) -> Document:
    return Document.from_pages(doc_id, [text], f"hash-of-{text}")


def test_add_merges_new_and_changed_documents(tmp_path):
    store = DocumentStore(tmp_path)
    assert store.add([doc("a.txt", "one"), doc("b.txt", "two")]) == ["a.txt", "b.txt"]
    assert store.add([doc("a.txt", "one"), doc("b.txt", "changed")]) == ["b.txt"]
    assert {d.doc_id: d.text for d in store.corpus().documents} == {"a.txt": "one", "b.txt": "changed"}


def test_staged_documents_count_only_once_committed(tmp_path):
    store = DocumentStore(tmp_path)
    store.add([doc("a.txt", "one")])
    staged = store.stage([doc("b.txt", "two")])
    assert [d.doc_id for d in staged.documents] == ["a.txt", "b.txt"]
    assert list(store.registry()) == ["a.txt"]  # an ingest killed now leaves the store as it was
    assert store.commit([doc("b.txt", "two")]) == ["b.txt"]
    assert sorted(store.registry()) == ["a.txt", "b.txt"]


def test_two_processes_adding_at_once_lose_nothing(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    start_at = time.time() + 3  # after both interpreters have started
    adders = [subprocess.Popen([sys.executable, "-c", ADDER, str(tmp_path), name, str(start_at)], env=env)
              for name in ("left", "right")]
    assert [adder.wait(timeout=120) for adder in adders] == [0, 0]
    registry = DocumentStore(tmp_path).registry()
    assert len(registry) == 80, f"lost {80 - len(registry)} documents"


def test_store_files_get_the_umask_permissions(tmp_path):
    old = os.umask(0o002)  # a team's shared store
    try:
        write_json_atomic(tmp_path / "registry.json", {})
    finally:
        os.umask(old)
    assert (tmp_path / "registry.json").stat().st_mode & 0o777 == 0o664
