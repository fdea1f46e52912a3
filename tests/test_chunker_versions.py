"""Issue 51, the first trap: a plugin chunker's code is part of its chunking's key. Editing it (a window of
400 characters made 900) and ingesting again chunks again and says why; ingesting with the code unchanged
reuses the chunks. Run as a user runs it: ``rag-pipeline ingest --plugins window.py --chunker window``,
BM25 only (no model), one process per ingest."""

from __future__ import annotations

import json

import pytest
from conftest import run_cli
from sweep_fixtures import tiny_corpus  # noqa: F401

pytestmark = pytest.mark.slow

PLUGIN = '''
from rag_core.ingest.chunkers import CHUNKERS, Chunker, span_chunk

WINDOW = {window}


@CHUNKERS.register("window", reads=("per_page",), help="windows of WINDOW characters")
class WindowChunker(Chunker):
    def chunk(self, document):
        text = document.text
        return [span_chunk(document, start, min(start + WINDOW, len(text))) for start in range(0, len(text), WINDOW)]
'''


def ingest(plugin, documents, store):
    result = run_cli("ingest", "--input", str(documents), "--plugins", str(plugin), "--chunker", "window",
                     "--mode", "bm25", "--json", store=store)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout), result.stderr


def test_an_edited_chunker_chunks_again_and_an_unchanged_one_reuses(tiny_corpus, tmp_path):  # noqa: F811
    plugin, store = tmp_path / "window.py", tmp_path / "store"
    plugin.write_text(PLUGIN.format(window=400))
    first, _ = ingest(plugin, tiny_corpus.documents, store)
    assert first["chunks"] == first["added"] > 3  # 3 documents, windows of 400 characters
    again, said = ingest(plugin, tiny_corpus.documents, store)
    assert (again["chunks"], again["added"], again["seconds"]["chunking"]) == (first["chunks"], 0, 0)
    assert "chunking again" not in said

    plugin.write_text(PLUGIN.format(window=900))  # the trap: the store kept the 400-character chunks
    edited, said = ingest(plugin, tiny_corpus.documents, store)
    windows = lambda size: sum(-(-len(path.read_text()) // size) for path in tiny_corpus.documents.iterdir())  # noqa: E731
    assert (first["chunks"], edited["chunks"]) == (windows(400), windows(900)) and windows(900) < windows(400)
    assert edited["added"] >= 1  # a document longer than 400 characters has a new chunk (the others' are the same spans)
    said = " ".join(said.split())  # as one line, however the terminal wrapped it
    old, new = sorted((store / "chunks").glob("*/chunks.jsonl"), key=lambda path: path.stat().st_mtime)
    assert "chunking again: chunker 'window': code version " in said  # the old chunks stay, under their own name
    assert f"the earlier code's chunks stay in chunks/{old.parent.name}" in said and new.parent.name not in said
