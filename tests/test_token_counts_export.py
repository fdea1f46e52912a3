"""Counting tokens needs no torch (issue 44 item 4: the token-count cell of notebooks/01-explore.ipynb
imported torch and loaded the model, 8.6-16 s, to read its tokenizer): while the model is not loaded,
``Embedder.token_counts`` and ``max_seq_length`` read the store's ONNX export, whose fast tokenizer is
the model's. Checked against the model's own tokenizer, loaded afterwards."""

from __future__ import annotations

from rag_core.config import RagConfig
from rag_core.retrieve.embedding.onnx import open_exported
from rag_core.service import open_pipeline
from rag_core.workbench.reports.explore import token_counts


def test_token_counts_from_the_export_equal_the_models(sample_store):
    open_exported.cache_clear()  # opened once per process: the session's ingest looked before the export was made
    pipeline = open_pipeline(sample_store, RagConfig())
    embedder = pipeline.index.embedder
    counts, limit = token_counts(pipeline), embedder.max_seq_length
    assert embedder.startup["runtime"] == "onnxruntime + tokenizers (export in the store, no torch)"
    assert "load_ms" in embedder.startup and "first_call_ms" not in embedder.startup  # opened, nothing embedded

    tokenizer = embedder.loaded.model.tokenizer  # now the model itself (torch)
    expected = [len(tokenizer(chunk.text, add_special_tokens=True, truncation=False)["input_ids"])
                for chunk in pipeline.index.chunks]
    assert counts == expected and max(counts) > limit  # some chunks are longer than the window: untruncated
    assert limit == embedder.loaded.model.max_seq_length == 256
    assert embedder.token_counts(["a b"]) == [len(tokenizer("a b")["input_ids"])]  # the model's path now: the same
