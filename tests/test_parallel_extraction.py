"""PDF extraction in a process pool gives what a sequential read gives, in the same order: the sample
PDFs (and a few bad files among them, reported the same way), and the automatic choice of workers."""

from __future__ import annotations

import os
import shutil
from functools import partial
from pathlib import Path

import pytest

from rag_core.ingest import files
from rag_core.ingest.extraction import cache_path
from rag_core.ingest.files import extraction_workers, read_documents
from rag_core.paths import SAMPLE_DOCUMENTS_DIR


@pytest.fixture(scope="module")
def mixed_folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("mixed")
    for index, pdf in enumerate(sorted(SAMPLE_DOCUMENTS_DIR.rglob("*.pdf"))):
        shutil.copy(pdf, folder / f"{index:02d}-{pdf.name}")
    (folder / "05-broken.pdf").write_bytes(b"%PDF-1.4 not really")
    (folder / "06-empty.txt").write_bytes(b"")
    (folder / "07-notes.md").write_text("# Notes\n\nplain text between the PDFs\n")
    return folder


def test_parallel_extraction_equals_sequential(mixed_folder: Path, tmp_path: Path):
    sequential = read_documents(mixed_folder, workers=1)
    parallel = read_documents(mixed_folder, workers=2, cache_dir=tmp_path / "extracted")
    assert len(sequential.documents) >= 3 and len(sequential.skipped) == 2
    assert parallel.documents == sequential.documents  # every field: pages, headings, title, hash, order
    assert parallel.skipped == sequential.skipped
    assert [doc.doc_id for doc in parallel.documents] == sorted(doc.doc_id for doc in parallel.documents)
    cached = read_documents(mixed_folder, workers=2, cache_dir=tmp_path / "extracted")  # read back from the cache
    assert cached.documents == sequential.documents


def test_the_pool_is_used_only_for_enough_pdfs(monkeypatch):
    monkeypatch.setattr(files.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    pdfs = [Path(f"{index}.pdf") for index in range(40)]
    assert extraction_workers(pdfs[:7]) == 1  # below PARALLEL_MIN_PDFS
    assert extraction_workers(pdfs[:8]) == 2  # 8 // PDFS_PER_WORKER
    assert extraction_workers(pdfs) == 4  # capped by the 4 usable cores
    assert extraction_workers([Path(f"{index}.txt") for index in range(40)]) == 1  # text files are cheap
    assert extraction_workers(pdfs[:2], workers=3) == 3 and extraction_workers(pdfs, workers=0) == 1


def test_pdfs_whose_extraction_is_cached_are_read_without_a_pool(monkeypatch, tmp_path: Path):
    """A second read of the same PDFs (a sweep, an eval after an ingest) costs a hash and a JSON file
    each: starting a pool for that cost more than it saved (3.7 s for the sample corpus, 8 PDFs)."""
    monkeypatch.setattr(files.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    folder = tmp_path / "pdfs"
    folder.mkdir()
    for index, pdf in enumerate(sorted(SAMPLE_DOCUMENTS_DIR.rglob("*.pdf"))[:4]):
        for copy in range(2):  # 8 PDFs, 4 distinct contents
            shutil.copy(pdf, folder / f"{index}-{copy}.pdf")
    pools = []
    real_read_all = files._read_all
    monkeypatch.setattr(files, "_read_all", lambda read, items, workers: pools.append(workers) or real_read_all(read, items, workers))
    first = read_documents(folder, cache_dir=tmp_path / "extracted")
    second = read_documents(folder, cache_dir=tmp_path / "extracted")
    cache_path(tmp_path / "extracted", first.documents[0].content_hash, tables=False).unlink()
    third = read_documents(folder, cache_dir=tmp_path / "extracted")  # 2 files to extract again: too few
    assert pools == [2, 1, 1]
    assert first.documents == second.documents == third.documents


def _dies_in_a_worker(path: Path, doc_id: str, parent: int) -> str:
    """A reader whose worker process dies (as one killed by the kernel) on the file named "03"."""
    if path.name == "03" and os.getpid() != parent:
        os._exit(1)
    return f"{doc_id} read in {'the parent' if os.getpid() == parent else 'a worker'}"


def test_a_broken_pool_is_announced_and_the_rest_read_in_this_process(caplog):
    items = [(Path(f"{index:02d}"), f"doc-{index}") for index in range(8)]
    reader = partial(_dies_in_a_worker, parent=os.getpid())
    outcomes = list(files._read_all(reader, items, workers=2))
    assert [outcome.split()[0] for outcome in outcomes] == [doc_id for _, doc_id in items]  # every file, in order
    assert outcomes[3] == "doc-3 read in the parent"  # the file that killed its worker: read here
    warning = [message for message in caplog.messages if "parallel extraction stopped" in message]
    assert len(warning) == 1 and "in this process" in warning[0]
