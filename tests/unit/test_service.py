"""The CLI's functions: registering documents only once their indexes exist, store errors, empty questions."""

from __future__ import annotations

import errno
import logging
import tempfile

import pytest

import rag_core.writes as writes
import rag_core.service as service
from rag_core.config import RagConfig
from rag_core.ingest.corpus import DocumentStore
from rag_core.errors import BadInput, StoreError
from rag_core.service import answer_query, ingest_directory, open_pipeline

BM25 = RagConfig(mode="bm25", rerank_depth=0, chunk_size=64, overlap=8)


@pytest.fixture
def store_with_one_document(tmp_path):
    folder = tmp_path / "input"
    folder.mkdir()
    (folder / "first.txt").write_text("The flux capacitor needs 1.21 gigawatts of power.")
    store = tmp_path / "store"
    ingest_directory(folder, store, BM25)
    return folder, store


def test_a_killed_ingest_registers_nothing_and_queries_build_nothing(store_with_one_document, monkeypatch, caplog):
    folder, store = store_with_one_document
    (folder / "second.txt").write_text("The DeLorean reaches 88 miles per hour.")

    def killed(self, *args, **kwargs):
        raise KeyboardInterrupt  # what a kill while chunking or embedding looks like to the store

    with monkeypatch.context() as patch:
        patch.setattr(service.Pipeline, "build", killed)
        with pytest.raises(KeyboardInterrupt):
            ingest_directory(folder, store, BM25)
    assert list(DocumentStore(store).registry()) == ["first.txt"]

    caplog.set_level(logging.WARNING, logger="rag_core.service")
    pipeline = open_pipeline(store, BM25, progress=False)
    assert [doc.doc_id for doc in pipeline.corpus.documents] == ["first.txt"]
    assert "building it now" not in caplog.text  # its indexes exist: nothing to build

    report = ingest_directory(folder, store, BM25)  # the rerun registers both
    assert report["documents"] == 2 and sorted(DocumentStore(store).registry()) == ["first.txt", "second.txt"]


def test_a_query_says_when_it_builds_an_index(store_with_one_document, caplog):
    _, store = store_with_one_document
    caplog.set_level(logging.WARNING, logger="rag_core.service")
    open_pipeline(store, BM25.replace(chunk_size=32, overlap=0), progress=False)
    assert "building it now" in caplog.text


def test_a_store_that_is_a_file_is_bad_input(tmp_path):
    (tmp_path / "input").mkdir()
    (tmp_path / "input" / "a.txt").write_text("text")
    not_a_folder = tmp_path / "store.txt"
    not_a_folder.write_text("I am a file")
    with pytest.raises(BadInput, match="store.txt is a file, not a folder"):
        ingest_directory(tmp_path / "input", not_a_folder, BM25)
    with pytest.raises(BadInput, match="is a file, not a folder"):
        answer_query("question?", not_a_folder, BM25)
    assert not_a_folder.read_text() == "I am a file"


def test_a_store_that_cannot_be_written_names_the_path(store_with_one_document, monkeypatch):
    folder, store = store_with_one_document
    (folder / "second.txt").write_text("The DeLorean reaches 88 miles per hour.")

    def read_only(*args, dir=None, **kwargs):  # root ignores chmod: fail the way a read-only mount does
        raise OSError(errno.EROFS, "Read-only file system", str(dir))

    monkeypatch.setattr(writes.tempfile, "mkstemp", read_only)
    with pytest.raises(StoreError, match=f"{store}.*Read-only file system"):
        ingest_directory(folder, store, BM25)
    monkeypatch.setattr(writes.tempfile, "mkstemp", tempfile.mkstemp)
    assert list(DocumentStore(store).registry()) == ["first.txt"]


@pytest.mark.parametrize("question", ["", "   \n\t"])
def test_an_empty_question_is_bad_input(store_with_one_document, question):
    with pytest.raises(BadInput, match="the question is empty"):
        answer_query(question, store_with_one_document[1], BM25)
