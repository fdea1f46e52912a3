"""The ``vector_store`` setting: its forms, the same top passages from every backend, and servers that
refuse, time out or die mid-ingest (a clear error, exit 1, no manifest; the next run completes)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from conftest import run_cli
from rag_core.config import ConfigError, RagConfig
from rag_core.retrieve.index import Index
from rag_core.retrieve.retrievers import Query
from rag_core.retrieve.vector_stores import manifest_key, open_vector_store, parse_vector_store
from rag_core.retrieve.vector_stores.errors import VectorStoreError
from rag_core.cli.common import known_failure
from rag_core.ingest.corpus import store_corpus
from servers import ChromaServer, chroma_server, free_port, silent_server

# one vector per chunk (dense_pooling first), so that counts and exact cosine search are of chunks
DENSE = RagConfig(mode="dense", rerank_depth=0, k=10, retrieve_depth=10, dense_pooling="first")
QUESTIONS = ["What is the rate limit of the API?", "How do I rotate credentials?",
             "What does error QS-4021 mean?", "How long are backups kept?"]


@pytest.mark.parametrize("value, normalised", [
    ("chroma", "chroma"), (" chroma ", "chroma"), ("chroma+http://127.0.0.1:8001", "chroma+http://127.0.0.1:8001"),
    ("chroma+http://LocalHost", "chroma+http://localhost:8000"), ("qdrant:vectors", "qdrant:vectors"),
    ("qdrant:/srv/qdrant", "qdrant:/srv/qdrant"), ("qdrant+http://10.0.0.5:6333/", "qdrant+http://10.0.0.5:6333"),
    ("qdrant+http://qdrant", "qdrant+http://qdrant:6333"),
])
def test_valid_forms_are_normalised(value, normalised):
    assert str(parse_vector_store(value)) == normalised
    assert manifest_key(value) == (None if normalised == "chroma" else normalised)
    assert RagConfig(vector_store=value).vector_store == value


@pytest.mark.parametrize("value", ["", "qdrant", "qdrant:", "chroma:db", "qdrant://h:6333", "chroma+https://h:8000",
                                   "chroma+http://h:99999", "qdrant+http://h:port", "chroma+http://h:8000/api",
                                   "qdrant:http://h:6333", "milvus+http://h:19530", "chroma+http://user:pw@h:1"])
def test_invalid_forms_list_the_valid_ones(value):
    with pytest.raises(ValueError, match=r"chroma\+http://HOST:PORT .*qdrant:PATH .*qdrant\+http://HOST:PORT"):
        parse_vector_store(value)
    with pytest.raises(ConfigError, match="^vector_store must be one of: chroma"):
        RagConfig(vector_store=value)


def test_a_bad_vector_store_flag_is_exit_2(tmp_path):
    result = run_cli("query", "anything", "--vector-store", "redis://localhost", store=tmp_path / "store")
    assert result.returncode == 2, result.stderr
    assert "vector_store must be one of" in result.stderr and "qdrant:PATH" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("kind, hint", [("chroma", "chroma run --path DIR --host 127.0.0.1 --port {port}"),
                                        ("qdrant", "docker run -p {port}:6333 qdrant/qdrant")])
def test_a_closed_port_is_a_clear_environment_failure(tmp_path, kind, hint):
    port = free_port()
    with pytest.raises(VectorStoreError) as caught:
        open_vector_store(f"{kind}+http://127.0.0.1:{port}", tmp_path).count("dense-x")
    message = str(caught.value)
    assert f"127.0.0.1:{port}" in message and "connection refused" in message and hint.format(port=port) in message
    assert f"(or use `vector_store` {kind}" in message  # the library names the setting; the CLI shows its flag
    assert known_failure(caught.value) == (message.replace("`vector_store`", "--vector-store"), 1)


@pytest.mark.parametrize("kind", ["chroma", "qdrant"])
def test_a_server_that_never_answers_times_out(tmp_path, kind):
    with silent_server() as port, pytest.raises(VectorStoreError, match=r"no answer within 1 s"):
        open_vector_store(f"{kind}+http://127.0.0.1:{port}", tmp_path, timeout_s=1).count("dense-x")


def test_qdrant_local_mode_held_by_another_process_is_a_clear_error(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys
        from qdrant_client import QdrantClient
        client = QdrantClient(path={str(tmp_path / 'qdrant')!r})
        print('open', flush=True)
        sys.stdin.read()
    """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        with pytest.raises(VectorStoreError, match="one process at a time"):
            open_vector_store("qdrant:qdrant", tmp_path)
    finally:
        holder.communicate("", timeout=60)


# --- with the packaged MiniLM and a real Chroma server --------------------------------------------
@pytest.mark.slow
def test_every_backend_gives_the_same_top_passages(copy_of_sample_store, tmp_path):
    """Same corpus, chunking and model in one store: each backend gets its own manifest and collection
    (none trusts another's), and all rank like exact cosine search in numpy."""
    store, corpus = copy_of_sample_store, store_corpus(copy_of_sample_store)
    with chroma_server(tmp_path / "server") as server:
        indexes = {name: Index(store, corpus, DENSE.replace(vector_store=name))
                   for name in ("chroma", server.setting, "qdrant:qdrant")}
        for index in indexes.values():
            index.retriever("dense")
            assert index.vector_store.count(index.retriever("dense").collection) == len(index.chunks)
        reference = indexes["chroma"]
        vectors, _ = reference.embedder.embed_documents([chunk.text for chunk in reference.chunks])
        for question in QUESTIONS:
            exact = vectors @ reference.embedder.embed_query(question)
            expected = [reference.chunks[i].id for i in np.argsort(-exact)[:10]]
            for name, index in indexes.items():
                hits = index.retriever("dense").search(Query(question, index.embedder.embed_query), 10).hits
                assert [hit.id for hit in hits] == expected, (name, question)
                assert np.allclose([hit.score for hit in hits], np.sort(exact)[::-1][:10], atol=1e-5), name
    manifests = sorted(path.name for path in reference.dir.glob("dense-*.json"))
    # one per backend: each describes the collection it was written to; and the sample store's own (windows)
    assert len(manifests) == 4


@pytest.mark.slow
def test_a_server_that_dies_mid_ingest_leaves_no_manifest_and_a_rerun_completes(copy_of_sample_store, tmp_path):
    store, corpus = copy_of_sample_store, store_corpus(copy_of_sample_store)
    server = ChromaServer(tmp_path / "server").start()
    config = DENSE.replace(vector_store=server.setting)
    try:
        index = Index(store, corpus, config, vector_store=DiesMidUpsert(open_vector_store(server.setting, store), server))
        with pytest.raises(VectorStoreError, match=r"the Chroma server at .* failed while upserting: .*run the same command again"):
            index.retriever("dense")
        assert _manifests_of(index) == ["chroma"]  # the sample store's embedded one only: none for the server
        server.start()  # the same data and port
        collection = _collection(index)  # every backend names the collection alike: (chunking, model)
        assert open_vector_store(server.setting, store).count(collection) == len(index.chunks) // 2
        rerun = Index(store, corpus, config)
        rerun.retriever("dense")
        assert rerun.vector_store.count(rerun.retriever("dense").collection) == len(rerun.chunks)
        assert rerun.stats.upserted == len(rerun.chunks) - len(rerun.chunks) // 2  # only what was missing
        assert rerun.stats.embedded == 0 and _manifests_of(rerun).count(server.setting) == 1
        hits = rerun.retriever("dense").search(Query(QUESTIONS[0], rerun.embedder.embed_query), 10).hits
        assert [hit.id for hit in hits] == [hit.id for hit in _dense_search(Index(store, corpus, DENSE), QUESTIONS[0])]
    finally:
        server.stop()


@pytest.mark.slow
def test_ingest_into_a_closed_port_is_exit_1_and_completes_once_the_server_runs(tmp_path, sample_documents_dir,
                                                                                  sample_store):
    store, server = tmp_path / "store", ChromaServer(tmp_path / "server")
    store.mkdir()
    with sqlite3.connect(sample_store / "cache.sqlite") as source, sqlite3.connect(store / "cache.sqlite") as target:
        source.backup(target)  # the sample corpus's embeddings: this test is about the server, not the model
    args = ("ingest", "--input", str(sample_documents_dir), "--mode", "dense", "--vector-store", server.setting)
    failed = run_cli(*args, store=store)
    assert failed.returncode == 1, failed.stderr
    assert f"error: the Chroma server at {server.url} failed while connecting: connection refused" in failed.stderr
    assert "Traceback" not in failed.stderr
    assert not list(store.glob("chunks/*/dense-*.json")) and not (store / "active.json").exists()
    server.start()
    try:
        done = run_cli(*args, store=store)
        assert done.returncode == 0, done.stderr
        assert len(list(store.glob("chunks/*/dense-*.json"))) == 1
        answer = run_cli("query", "What is the rate limit?", "--mode", "dense", "--rerank-depth", "0", "--no-llm",
                         "--vector-store", server.setting, "--json", store=store)
        assert answer.returncode == 0 and '"passages"' in answer.stdout, answer.stderr
    finally:
        server.stop()


class DiesMidUpsert:
    """The real Chroma server store; the server is killed after half the chunks are written."""

    def __init__(self, store, server: ChromaServer):
        self.store, self.server = store, server

    def count(self, collection):
        return self.store.count(collection)

    def search(self, collection, vector, k, where=None):
        return self.store.search(collection, vector, k, where)

    def missing(self, collection, ids):
        return self.store.missing(collection, ids)

    def upsert(self, collection, ids, vectors, metadatas, texts):
        half = len(ids) // 2
        self.store.upsert(collection, ids[:half], vectors[:half], metadatas[:half], texts[:half])
        self.server.stop()
        self.store.upsert(collection, ids, vectors, metadatas, texts)


def _manifests_of(index: Index) -> list[str]:
    import json

    return sorted(json.loads(path.read_text()).get("vector_store", "chroma") for path in index.dir.glob("dense-*.json"))


def _dense_search(index: Index, question: str) -> list:
    return index.retriever("dense").search(Query(question, index.embedder.embed_query), 10).hits


def _collection(index: Index) -> str:
    """The dense collection `index`'s settings name (a store may hold others: the sample store's is windowed)."""
    from rag_core.retrieve.retrievers import RETRIEVERS

    return RETRIEVERS.load("dense")("dense", index.config, index.resources).collection_name(index.chunk_set)
