"""BM25 backends against hand-written reference formulas, and the index's save/load contract."""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest

from rag_core.retrieve.bm25 import BM25_BACKENDS, BM25Index, BM25LoadError, BM25Settings

# Tiny corpus, tokenized by whitespace so tokens are exactly what we write here.
# No term is in more than half of the 6 documents, so every idf is positive in both variants.
CORPUS = {
    "d1": "rate limit 600 requests per minute",
    "d2": "the rate limit resets every minute minute",
    "d3": "error QM-4021 means the batch queue is full",
    "d4": "raise max_inflight_batches to drain the batch queue",
    "d5": "embeddings are normalised before cosine search",
    "d6": "cosine search over normalised embeddings of every chunk chunk chunk",
}
QUERIES = ["rate minute", "batch queue", "cosine embeddings chunk", "minute", "QM-4021", "every"]
# One-term queries: both backends must give the same order (see rag_core/bm25.py).
ONE_TERM_QUERIES = ["minute", "chunk", "batch", "every", "limit", "search"]


@pytest.fixture
def corpus_tokens() -> list[list[str]]:
    return [text.split() for text in CORPUS.values()]


@pytest.fixture(params=list(BM25_BACKENDS))
def backend(request) -> str:
    return request.param


@pytest.fixture
def whitespace_index(backend) -> BM25Index:
    index = BM25Index(backend=backend, tokenizer="whitespace")
    index.index(list(CORPUS), list(CORPUS.values()))
    return index


def lucene_reference(docs: list[list[str]], query: list[str], k1: float = 1.5, b: float = 0.75) -> list[float]:
    """Lucene BM25 written out: idf = ln(1 + (N - n + .5)/(n + .5)), tf part without (k1 + 1)."""
    n_docs, avgdl = len(docs), sum(map(len, docs)) / len(docs)
    scores = []
    for doc in docs:
        tf, score = Counter(doc), 0.0
        for term in query:
            df = sum(term in other for other in docs)
            if df and tf[term]:
                idf = math.log(1 + (n_docs - df + 0.5) / (df + 0.5))
                score += idf * tf[term] / (tf[term] + k1 * (1 - b + b * len(doc) / avgdl))
        scores.append(score)
    return scores


def okapi_reference(
    docs: list[list[str]], query: list[str], k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25
) -> list[float]:
    """rank-bm25's BM25Okapi written out: ln((N - n + .5)/(n + .5)), negatives -> epsilon * mean idf."""
    n_docs, avgdl = len(docs), sum(map(len, docs)) / len(docs)
    vocabulary = {term for doc in docs for term in doc}
    doc_freq = {term: sum(term in doc for doc in docs) for term in vocabulary}
    raw_idf = {term: math.log((n_docs - df + 0.5) / (df + 0.5)) for term, df in doc_freq.items()}
    floor = epsilon * sum(raw_idf.values()) / len(raw_idf)
    idf = {t: (value if value >= 0 else floor) for t, value in raw_idf.items()}
    scores = []
    for doc in docs:
        tf = Counter(doc)
        scores.append(
            sum(
                idf.get(term, 0.0) * tf[term] * (k1 + 1) / (tf[term] + k1 * (1 - b + b * len(doc) / avgdl))
                for term in query
            )
        )
    return scores


REFERENCES = {"bm25s": lucene_reference, "rank_bm25": okapi_reference}


def expected_hits(scores: list[float], k: int) -> list[tuple[str, float]]:
    ranked = sorted(((-s, i) for i, s in enumerate(scores) if s > 0))[:k]
    return [(list(CORPUS)[i], -negative) for negative, i in ranked]


# --- scores against the reference formulas ---------------------------------------------------------
@pytest.mark.parametrize("query", QUERIES)
def test_scores_match_reference_formula(whitespace_index, backend, corpus_tokens, query):
    reference = REFERENCES[backend](corpus_tokens, query.split())
    hits = whitespace_index.retrieve(query, k=10)
    want = expected_hits(reference, 10)
    assert [hit.id for hit in hits] == [item_id for item_id, _ in want]
    assert [hit.score for hit in hits] == pytest.approx([score for _, score in want], rel=1e-5)


def test_one_handcomputed_lucene_score():
    # "minute" in d2: tf 2, dl 7, avgdl 44/6 (dl: 6, 7, 8, 7, 6, 10), N 6, n 2.
    index = BM25Index(tokenizer="whitespace")
    index.index(list(CORPUS), list(CORPUS.values()))
    idf = math.log(1 + (6 - 2 + 0.5) / (2 + 0.5))
    expected = idf * 2 / (2 + 1.5 * (0.25 + 0.75 * 7 / (44 / 6)))
    assert dict(index.retrieve("minute", k=2))["d2"] == pytest.approx(expected, rel=1e-6)


def test_okapi_epsilon_floor_for_frequent_terms():
    # "x" is in 3 of 4 documents: raw idf ln(1.5/3.5) < 0, so rank-bm25 uses 0.25 * mean idf.
    texts = ["x a", "x b", "x c", "d e"]
    docs = [text.split() for text in texts]
    index = BM25Index(backend="rank_bm25", tokenizer="whitespace")
    index.index(["t1", "t2", "t3", "t4"], texts)
    reference = okapi_reference(docs, ["x"])
    assert reference[0] > 0  # the floor is positive here (mean idf > 0)
    assert [hit.score for hit in index.retrieve("x", k=4)] == pytest.approx(reference[:3])


@pytest.fixture
def both_backends() -> dict[str, BM25Index]:
    indexes = {name: BM25Index(backend=name, tokenizer="whitespace") for name in BM25_BACKENDS}
    for index in indexes.values():
        index.index(list(CORPUS), list(CORPUS.values()))
    return indexes


@pytest.mark.parametrize("query", QUERIES + ONE_TERM_QUERIES)
def test_backends_rank_alike_without_negative_idfs(both_backends, query):
    # Guaranteed for one-term queries; for this corpus's multi-term queries it holds too.
    rankings = {name: [hit.id for hit in index.retrieve(query, k=6)] for name, index in both_backends.items()}
    assert rankings["bm25s"] == rankings["rank_bm25"] != []


@pytest.mark.parametrize("query", ONE_TERM_QUERIES)
def test_one_term_score_ratio_is_constant(both_backends, query):
    # Same term-frequency curve: rank_bm25 / bm25s = (k1 + 1) * idf_okapi / idf_lucene for every document.
    bm25s_scores = dict(both_backends["bm25s"].retrieve(query, k=6))
    ratios = [score / bm25s_scores[item] for item, score in both_backends["rank_bm25"].retrieve(query, k=6)]
    assert ratios == pytest.approx([ratios[0]] * len(ratios), rel=1e-5)


def test_backends_agree_with_rank_bm25_library_directly(corpus_tokens):
    # Independent check of the reference itself: BM25Okapi on the same tokens.
    rank_bm25 = pytest.importorskip("rank_bm25")
    library = rank_bm25.BM25Okapi(corpus_tokens)
    for query in QUERIES:
        assert list(library.get_scores(query.split())) == pytest.approx(okapi_reference(corpus_tokens, query.split()))


# --- retrieve contract ------------------------------------------------------------------------------
def test_only_positive_scores_and_at_most_k(whitespace_index):
    assert [hit.id for hit in whitespace_index.retrieve("cosine", k=10)] == ["d5", "d6"]
    assert len(whitespace_index.retrieve("rate minute every", k=1)) == 1
    assert whitespace_index.retrieve("rate", k=0) == []


def test_unknown_and_empty_queries_give_nothing(whitespace_index):
    assert whitespace_index.retrieve("zebra", k=5) == []
    assert whitespace_index.retrieve("   ", k=5) == []


def test_ties_keep_insertion_order(backend):
    index = BM25Index(backend=backend, tokenizer="whitespace")
    # "alpha" in 3 of 7 documents: a positive idf in both variants.
    texts = ["alpha beta", "alpha beta", "alpha beta", "gamma", "delta", "epsilon", "zeta"]
    index.index(["z", "a", "m", "o1", "o2", "o3", "o4"], texts)
    assert [hit.id for hit in index.retrieve("alpha", k=3)] == ["z", "a", "m"]
    assert [hit.id for hit in index.retrieve("alpha", k=2)] == ["z", "a"]


def test_results_are_scored_ids(whitespace_index):
    hit = whitespace_index.retrieve("cosine", k=1)[0]
    assert (hit.id, type(hit.score)) == ("d5", float)


# --- tokenizer setting ------------------------------------------------------------------------------
def test_tokenizer_setting_changes_results(backend):
    texts = ["The service was Running slowly", "runs are logged daily", "Error QM-4021 in the queue"]
    ids = ["running", "runs", "error"]
    results = {}
    for name in ("stem", "simple", "whitespace"):
        index = BM25Index(backend=backend, tokenizer=name)
        index.index(ids, texts)
        queries = ("run", "running", "qm-4021")
        results[name] = {query: {hit.id for hit in index.retrieve(query, k=3)} for query in queries}
    assert results["stem"]["run"] == {"running", "runs"}  # stemming joins inflections
    assert results["simple"]["run"] == set()
    assert results["simple"]["running"] == {"running"}
    assert results["whitespace"]["running"] == set()  # case kept: "Running" != "running"
    assert results["stem"]["qm-4021"] == results["simple"]["qm-4021"] == {"error"}
    assert results["whitespace"]["qm-4021"] == set()  # "QM-4021" != "qm-4021"


# --- save / load ------------------------------------------------------------------------------------
def test_save_load_round_trip(whitespace_index, backend, tmp_path):
    whitespace_index.save(tmp_path / "bm25")
    loaded = BM25Index.load(tmp_path / "bm25", backend=backend, tokenizer="whitespace", k1=1.5, b=0.75)
    assert loaded.settings == whitespace_index.settings
    assert loaded.ids == list(CORPUS)
    for query in QUERIES:
        assert loaded.retrieve(query, k=10) == whitespace_index.retrieve(query, k=10)


@pytest.mark.parametrize("setting", [{"backend": "other"}, {"tokenizer": "stem"}, {"k1": 1.2}, {"b": 0.5}])
def test_load_with_other_settings_fails(whitespace_index, tmp_path, setting):
    whitespace_index.save(tmp_path)
    key = next(iter(setting))
    with pytest.raises(BM25LoadError, match=f"other settings: {key}="):
        BM25Index.load(tmp_path, **setting)


@pytest.mark.parametrize("key", ["format_version", "tokenizer_version"])
def test_load_other_version_fails(whitespace_index, tmp_path, key):
    whitespace_index.save(tmp_path)
    meta = json.loads((tmp_path / "bm25_meta.json").read_text())
    (tmp_path / "bm25_meta.json").write_text(json.dumps({**meta, key: 999}))
    with pytest.raises(BM25LoadError, match=f"{key} 999.*rebuild"):
        BM25Index.load(tmp_path)


def test_load_missing_directory_fails(tmp_path):
    with pytest.raises(BM25LoadError, match="no BM25 index"):
        BM25Index.load(tmp_path / "nothing")


# --- errors -----------------------------------------------------------------------------------------
def test_unknown_backend_and_tokenizer_list_valid_names():
    with pytest.raises(ValueError, match="bm25s, rank_bm25"):
        BM25Index(backend="lucene")
    with pytest.raises(ValueError, match="stem, simple, whitespace"):
        BM25Index(tokenizer="porter")


@pytest.mark.parametrize(
    "ids, texts, message",
    [
        (["a"], ["x", "y"], "1 ids but 2 texts"),
        ([], [], "no documents"),
        (["a", "b", "a"], ["x", "y", "z"], "duplicate id 'a'"),
        (["a", "b"], ["the", "of and"], "no document has a token"),
    ],
)
def test_bad_input_to_index(ids, texts, message):
    with pytest.raises(ValueError, match=message):
        BM25Index().index(ids, texts)


def test_retrieve_before_index_fails():
    with pytest.raises(RuntimeError, match="call index"):
        BM25Index().retrieve("rate", k=3)


def test_documents_without_tokens_are_allowed(backend):
    index = BM25Index(backend=backend)
    # rank-bm25 gives idf 0 to a term in half the documents: keep "queue" in fewer than half.
    index.index(["empty", "full", "other"], ["the of", "queue drained", "batch"])
    assert [hit.id for hit in index.retrieve("queue", k=5)] == ["full"]


def test_from_config_takes_the_bm25_settings():
    from rag_core.config import RagConfig

    config = RagConfig(bm25_backend="rank_bm25", tokenizer="simple", bm25_k1=1.2, bm25_b=0.5)
    assert BM25Index.from_config(config).settings == BM25Settings("rank_bm25", "simple", 1.2, 0.5)
