"""Components held to their contracts (issue 33): what a plugin retriever or chunker returns that its
contract forbids, or what it raises, is one ``ComponentFault`` naming it; a built-in's bug keeps its
traceback."""

from __future__ import annotations

import math

import pytest

from rag_core.components.faults import ComponentFault, calling, checked_scores
from rag_core.components.registry import Component
from rag_core.errors import BadInput, RunFailure
from rag_core.ingest.chunkers import CHUNKERS, Chunker, span_chunk
from rag_core.records import Chunk, Document, ScoredId
from rag_core.retrieve.retrievers import RETRIEVERS, Ranked, Retriever, checked_hits, checked_ranked

PLUGIN = Component("retriever", "mine", None, origin="module mine.py (/x/mine.py)")
BUILT_IN = Component("retriever", "bm25", None)
DOC_OF = {"c1": "a.txt", "c2": "a.txt", "c3": "b.txt"}  # chunk id -> document id


@pytest.fixture
def mine(isolated_components):
    @RETRIEVERS.register("mine")
    class Mine(Retriever):  # never called: checked_ranked only looks its registration up
        def build(self, chunks): ...

        def search(self, query, depth, allowed_doc_ids=None): ...

    return "mine"


def test_a_plugin_exception_becomes_one_line_naming_it():
    with pytest.raises(ComponentFault) as raised, calling(PLUGIN, "search"):
        raise RuntimeError("index exploded\nsecond line")
    assert str(raised.value) == "retriever 'mine' (module mine.py (/x/mine.py)) failed in search(): RuntimeError: index exploded"
    assert isinstance(raised.value, RunFailure)  # exit 1


@pytest.mark.parametrize("error", [BadInput("bad setting"), RunFailure("model unavailable")])
def test_errors_that_say_what_to_do_pass_through(error):
    with pytest.raises(type(error)) as raised, calling(PLUGIN, "search"):
        raise error
    assert raised.value is error


def test_a_built_in_bug_keeps_its_traceback():
    with pytest.raises(KeyError), calling(BUILT_IN, "search"):
        raise KeyError("ours")


def test_hits_that_keep_the_contract_come_back_unchanged(mine):
    found = Ranked([ScoredId("c2", 0.9), ScoredId("c1", -3.0), ScoredId("c3", 0)])
    assert checked_ranked(mine, found, DOC_OF, None) is found
    assert checked_ranked(mine, Ranked([ScoredId("c3", 1.0)]), DOC_OF, ["b.txt"]).hits == [("c3", 1.0)]


@pytest.mark.parametrize("hits, problem", [
    ([ScoredId("c1", 1.0), ScoredId("c9", 0.5)], "search() returned chunk id 'c9', which is not in the index"),
    ([ScoredId("c1", 1.0)] * 3, "search() returned chunk id 'c1' more than once"),
    ([ScoredId("c1", math.nan)], "search() returned the score nan for chunk 'c1'"),
    ([ScoredId("c1", -math.inf)], "search() returned the score -inf for chunk 'c1'"),
    ([ScoredId("c1", "high")], "search() returned the score 'high' (not a number) for chunk 'c1'"),
    ([("c1",)], "search() returned a hit \"('c1',)\" that is not a ScoredId(id, score)"),
    ([ScoredId("c3", 1.0)], "search() returned chunk 'c3' of document 'b.txt', outside the allowed documents"),
])
def test_hits_that_break_the_contract_are_one_line_naming_the_retriever(mine, hits, problem):
    with pytest.raises(ComponentFault) as raised:
        checked_ranked(mine, Ranked(hits), DOC_OF, ["a.txt"])
    assert str(raised.value).startswith(f"retriever 'mine' (module {__name__}) {problem} (the contract: ")


def test_a_fusion_is_held_to_the_same_contract():
    fusion = Component("fusion", "mine", None, origin="module mine.py (/x/mine.py)")
    fused = [ScoredId("c3", 0.2), ScoredId("c1", 0.1)]
    assert checked_hits(fusion, "fuse", fused, DOC_OF) is fused
    with pytest.raises(ComponentFault, match=r"^fusion 'mine' \(module mine.py \(/x/mine.py\)\) fuse\(\) returned "
                                             r"chunk id 'c3' more than once \(the contract: "):
        checked_hits(fusion, "fuse", [*fused, ScoredId("c3", 0.0)], DOC_OF)


def test_a_search_that_returns_a_list_is_named(mine):
    with pytest.raises(ComponentFault, match=r"^retriever 'mine' .*search\(\) returned a list, not a Ranked$"):
        checked_ranked(mine, [ScoredId("c1", 1.0)], DOC_OF, None)


# --- chunkers -----------------------------------------------------------------------------------
DOCUMENT = Document.from_pages("a.txt", ["Alpha beta gamma. Delta epsilon."], "hash")  # 32 characters


def chunker(spans):
    """A chunker plugin that returns `spans` of every document (span_chunk), or what `spans` gives."""
    class Spans(Chunker):
        def chunk(self, document):
            return spans(document) if callable(spans) else [span_chunk(document, *span) for span in spans]

    CHUNKERS.register("spans", Spans)
    return Spans("spans", None)


def test_distinct_spans_pass(isolated_components):
    chunks = chunker([(0, 17), (18, 32)]).chunk_corpus([DOCUMENT])
    assert [chunk.text for chunk in chunks] == ["Alpha beta gamma.", "Delta epsilon."]


@pytest.mark.parametrize("spans, problem", [
    ([(0, 17), (0, 17)], "chunk() returned the chunk [0:17] (id '{id}') twice for 'a.txt'"),
    ([(0, 82)], "chunk() returned the span [0:82], empty or outside the text's 32 characters, for 'a.txt'"),
    ([(5, 5)], "chunk() returned the span [5:5], empty or outside the text's 32 characters, for 'a.txt'"),
    (lambda doc: [Chunk("x", "a.txt", "Alpha", 1, 6, 1, 1)], "chunk() returned a chunk whose text is not the span [1:6]"),
    (lambda doc: [Chunk("x", "b.txt", "Alpha", 0, 5, 1, 1)], "chunk() returned a chunk of 'b.txt' for 'a.txt'"),
    (lambda doc: ["Alpha"], "chunk() returned a str, not a Chunk, for 'a.txt'"),
])
def test_bad_spans_are_one_line_naming_the_chunker(isolated_components, spans, problem):
    with pytest.raises(ComponentFault) as raised:
        chunker(spans).chunk_corpus([DOCUMENT])
    expected = problem.format(id=span_chunk(DOCUMENT, 0, 17).id)
    assert str(raised.value).startswith(f"chunker 'spans' (module {__name__}) {expected}"), str(raised.value)


def test_a_chunker_that_raises_is_named(isolated_components):
    def explode(document):
        raise IndexError("list index out of range")

    with pytest.raises(ComponentFault, match=r"^chunker 'spans' \(module .*\) failed in chunk\(\): IndexError: list "):
        chunker(explode).chunk_corpus([DOCUMENT])


# --- re-rankers ---------------------------------------------------------------------------------
RERANKER = Component("reranker", "mine", None, origin="module mine.py (/x/mine.py)")


def test_finite_scores_one_per_passage_pass():
    assert checked_scores(RERANKER, "score", (0.5, -2, 3.25), 3) == [0.5, -2.0, 3.25]


@pytest.mark.parametrize("scores, problem", [
    ([0.5, math.nan, 1.0], "score() returned the score nan for passage 2"),
    ([math.inf], "score() returned the score inf for passage 1"),
    ([1.0, 2.0], "score() returned 2 scores for 3 passages"),
    (["high", 1.0, 2.0], "score() returned scores that are not numbers"),
    (None, "score() returned scores that are not numbers"),
])
def test_scores_that_break_the_contract_are_one_line_naming_the_reranker(scores, problem):
    with pytest.raises(ComponentFault) as raised:
        checked_scores(RERANKER, "score", scores, 3 if scores != [math.inf] else 1)
    assert str(raised.value) == f"reranker 'mine' (module mine.py (/x/mine.py)) {problem}"
