"""Plugins that break their contract, end to end (issue 33): each ends in one ``error:`` line naming
the plugin and exit 1, never a traceback, a passage shown twice or ``NaN`` where ``query --json``
promises JSON. The checks themselves: tests/unit/test_faults.py."""

from __future__ import annotations

import json

import pytest

from rag_core.cli import main as cli_main
from rag_core.config import RagConfig
from rag_core.service import ingest_directory

BM25 = ["--rerank-depth", "0", "--chunk-size", "64", "--overlap", "8"]
PLUGIN = '''
from rag_core.ingest.chunkers import CHUNKERS, Chunker, span_chunk
from rag_core.records import ScoredId
from rag_core.retrieve.expansion import QUERY_EXPANSIONS, QueryExpansion
from rag_core.retrieve.fusion import FUSIONS
from rag_core.retrieve.rerank import RERANKERS
from rag_core.retrieve.retrievers import RETRIEVERS, Ranked, Retriever


class Faulty(Retriever):
    def build(self, chunks):
        self.ids = list(chunks.ids)

    def search(self, query, depth, allowed_doc_ids=None):
        return Ranked(self.hits())


RETRIEVERS.register("unknown_ids", type("UnknownIds", (Faulty,), {
    "hits": lambda self: [ScoredId("no-such-chunk", 1.0), *(ScoredId(i, 0.5) for i in self.ids)]}))
RETRIEVERS.register("nan_scores", type("NanScores", (Faulty,), {
    "hits": lambda self: [ScoredId(i, float("nan")) for i in self.ids]}))
RETRIEVERS.register("thrice", type("Thrice", (Faulty,), {"hits": lambda self: [ScoredId(self.ids[0], 1.0)] * 3}))


def explode(*args):
    raise RuntimeError("index exploded")


RETRIEVERS.register("raises", type("Raises", (Faulty,), {"hits": explode}))
RETRIEVERS.register("build_raises", type("BuildRaises", (Faulty,), {"build": explode}))
class NanReranker:
    model_name = name_used = "nan-reranker"

    @classmethod
    def from_config(cls, config, cache, store_dir):
        return cls()

    def unavailable(self):
        return None

    def score(self, query, texts):
        from rag_core.retrieve.rerank.cross_encoder import RerankScores
        return RerankScores([float("nan")] * len(texts), 0.0, 0.0, len(texts), 0)


RERANKERS.register("nan_reranker", NanReranker)
RETRIEVERS.register("echo", type("E", (Faulty,), {"hits": lambda self: [ScoredId(i, 1.0) for i in self.ids]}))


class InventingFusion:
    def __init__(self, name, config):
        pass

    def fuse(self, ranked, weights):
        return [ScoredId("invented", 1.0), *ranked[0]]


FUSIONS.register("inventing", InventingFusion)


class Exploding(QueryExpansion):
    def expand(self, query):
        raise ValueError("no synonyms today")


QUERY_EXPANSIONS.register("exploding", Exploding)
CHUNKERS.register("duplicate_spans", type("DuplicateSpans", (Chunker,), {
    "chunk": lambda self, document: [span_chunk(document, 0, len(document.text))] * 2}))
CHUNKERS.register("out_of_range", type("OutOfRange", (Chunker,), {
    "chunk": lambda self, document: [span_chunk(document, 0, len(document.text) + 50)]}))
'''


@pytest.fixture(scope="module")
def bm25_store(tmp_path_factory):
    root = tmp_path_factory.mktemp("faults")
    (root / "docs").mkdir()
    (root / "docs" / "alpha.txt").write_text("Alpha: the zorblat reactor runs on flux crystals.")
    (root / "docs" / "bravo.txt").write_text("Bravo: the quintessence drive needs warp coils.")
    ingest_directory(root / "docs", root / "store", RagConfig(mode="bm25", rerank_depth=0, chunk_size=64, overlap=8))
    (root / "faulty_plugins.py").write_text(PLUGIN)
    return root


def run(capsys, root, *args):
    code = cli_main([*args, "--plugins", str(root / "faulty_plugins.py"), *BM25])
    out, err = capsys.readouterr()
    return code, out, err.strip().splitlines()


@pytest.mark.parametrize("mode, problem", [
    ("unknown_ids", "search() returned chunk id 'no-such-chunk', which is not in the index"),
    ("nan_scores", "search() returned the score nan for chunk "),
    ("thrice", "search() returned chunk id '{first}' more than once"),
    ("raises", "failed in search(): RuntimeError: index exploded"),
    ("build_raises", "failed in build(): RuntimeError: index exploded"),
])
def test_a_retriever_plugin_that_breaks_its_contract_is_one_line_and_exit_1(bm25_store, capsys, isolated_components,
                                                                            mode, problem):
    store = str(bm25_store / "store")
    assert cli_main(["query", "zorblat reactor", "--json", "--no-llm", "--store", store, "--mode", "bm25", *BM25]) == 0
    first = json.loads(capsys.readouterr().out)["passages"][0]["id"]
    code, out, err = run(capsys, bm25_store, "query", "zorblat reactor", "--json", "--no-llm", "--store", store,
                         "--mode", mode)
    assert code == 1 and out == "", out  # no half-printed JSON, no bare NaN
    assert len(err) == 1 and err[0].startswith(f"error: retriever {mode!r} (module faulty_plugins.py ("), err
    assert problem.format(first=first) in err[0]


def test_a_reranker_plugin_returning_nan_is_one_line_and_exit_1(bm25_store, capsys, isolated_components):
    code = cli_main(["query", "zorblat reactor", "--json", "--no-llm", "--store", str(bm25_store / "store"),
                     "--plugins", str(bm25_store / "faulty_plugins.py"), *BM25, "--mode", "bm25",
                     "--reranker", "nan_reranker", "--rerank-depth", "5"])  # the last --rerank-depth counts
    out, err = capsys.readouterr()
    assert code == 1 and out == ""
    assert err.strip().splitlines() == ["error: reranker 'nan_reranker' (module faulty_plugins.py "
                   f"({bm25_store / 'faulty_plugins.py'})) score() returned the score nan for passage 1"]


def test_a_fusion_plugin_returning_an_unknown_id_is_one_line_and_exit_1(bm25_store, capsys, isolated_components):
    code, out, err = run(capsys, bm25_store, "query", "zorblat reactor", "--json", "--no-llm", "--store",
                         str(bm25_store / "store"), "--mode", "bm25,echo", "--fusion", "inventing")
    assert code == 1 and out == ""
    assert err == ["error: fusion 'inventing' (module faulty_plugins.py "
                   f"({bm25_store / 'faulty_plugins.py'})) fuse() returned chunk id 'invented', which is not in the "
                   "index (the contract: ids of the index's chunks, each once, with finite scores)"]


def test_a_query_expansion_plugin_that_raises_is_one_line_and_exit_1(bm25_store, capsys, isolated_components):
    code, out, err = run(capsys, bm25_store, "query", "zorblat reactor", "--no-llm", "--store",
                         str(bm25_store / "store"), "--mode", "bm25", "--query-expansion", "exploding")
    assert code == 1 and out == ""
    assert err == ["error: query_expansion 'exploding' (module faulty_plugins.py "
                   f"({bm25_store / 'faulty_plugins.py'})) failed in expand(): ValueError: no synonyms today"]


@pytest.mark.parametrize("chunker, problem", [
    ("duplicate_spans", "chunk() returned the chunk [0:49] (id "),
    ("out_of_range", "chunk() returned the span [0:99], empty or outside the text's 49 characters, for 'alpha.txt'"),
])
def test_a_chunker_plugin_with_bad_spans_is_one_line_and_the_store_is_kept(bm25_store, tmp_path, capsys,
                                                                           isolated_components, chunker, problem):
    store = tmp_path / "store"
    code, _, err = run(capsys, bm25_store, "ingest", "--input", str(bm25_store / "docs"), "--store", str(store),
                       "--mode", "bm25", "--chunker", chunker)
    assert code == 1 and not any("Traceback" in line for line in err)
    assert err[-1].startswith(f"error: chunker {chunker!r} (module faulty_plugins.py ("), err  # after the progress bar
    assert problem in err[-1]
    assert not (store / "documents" / "registry.json").exists()  # nothing registered without its indexes
