"""Fine-tuning's parts that need no training: training-query fingerprints and the train/test guard,
weights fingerprints (cache keys), rerank fusion, paired significance, negatives, rows, settings, and
the training set mined with the workbench's BM25 (checked against the evaluator's relevance)."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from finetune_fixtures import KEYWORDS, tiny_bert, topic_beir  # noqa: F401 - fixtures
from scipy.stats import ttest_rel

from rag_core.config import ConfigError, RagConfig
from rag_core.evaluate.golden import Evidence, GoldenQuery
from rag_core.finetune.data import TrainingQuery, TrainTestOverlap, build_training_set, ensure_disjoint, split_by_text
from rag_core.finetune.fingerprints import (
    TRAINING_FILE, check_trained_on, model_cache_name, normalise_query, query_fingerprint, trained_on_warnings,
    weights_fingerprint, write_training_queries,
)
from rag_core.retrieve.rerank.fusion import fuse_reranked
from rag_core.finetune.mining import NegativeGroup, groups, pick_negatives
from rag_core.finetune.rows import training_rows
from rag_core.finetune.settings import TrainSettings
from rag_core.finetune.significance import paired_comparison
from rag_core.evaluate.beir import load_beir
from rag_core.ingest.corpus import Corpus


def _query(query_id: str, text: str) -> GoldenQuery:
    return GoldenQuery(query_id, text, None, (Evidence("d1"),))


# --- training-query fingerprints and the train/test guard ---------------------------------------
def test_normalisation_ignores_case_spacing_and_outer_punctuation():
    assert normalise_query("  What IS the\tRate   limit? ") == "what is the rate limit"
    assert normalise_query("ﬁle size?") == "file size"  # NFKC folds the ligature
    assert query_fingerprint("What is the rate limit?") == query_fingerprint("what is the  rate limit")
    assert query_fingerprint("What is the rate limit?") != query_fingerprint("What is the rate-limit?")


def test_check_trained_on_names_the_queries_a_model_was_trained_on(tmp_path):
    write_training_queries(tmp_path, ["How do plants make glucose?", "Where is ATP produced?"], kind="reranker")
    record = json.loads((tmp_path / TRAINING_FILE).read_text())
    assert record["queries"] == 2 and "How do plants" not in json.dumps(record)  # fingerprints only, no text
    found = check_trained_on(tmp_path, {"q1": "how do plants make GLUCOSE", "q9": "Why is the sky blue?",
                                        "q2": "Where is ATP produced?"})
    assert found.recorded and found.checked == 3 and found.overlap == ("q1", "q2")
    assert "2 of the 3 queries" in found.warning() and "q1, q2" in found.warning()
    assert check_trained_on(tmp_path, ["Why is the sky blue?"]).warning() is None


def test_a_model_without_a_record_or_a_hub_name_gives_no_warning(tmp_path):
    assert not check_trained_on(tmp_path, ["anything"]).recorded
    write_training_queries(tmp_path / "model", ["q text"])
    assert trained_on_warnings(["BAAI/bge-small-en-v1.5", str(tmp_path), ""], {"q": "q text"}) == []
    assert len(trained_on_warnings([str(tmp_path / "model")] * 2, {"q": "Q text."})) == 1  # each model once


def test_ensure_disjoint_refuses_shared_ids_and_shared_texts():
    train = [_query("q1", "How do plants make glucose?"), _query("q2", "Where is ATP produced?")]
    ensure_disjoint(train, [_query("q3", "Why is the sky blue?")], "--test-golden t.jsonl")  # disjoint: fine
    with pytest.raises(TrainTestOverlap, match=r"refusing to train on 1 queries that --test-golden t.jsonl .*q1"):
        ensure_disjoint(train, [_query("q1", "another text")], "--test-golden t.jsonl")
    with pytest.raises(TrainTestOverlap, match="q2"):  # same question under another id
        ensure_disjoint(train, [_query("t7", "where is ATP produced")], "--holdout")


# --- weights fingerprints: cache keys that tell two trainings in one folder apart ---------------
def test_split_by_text_keeps_queries_with_the_same_text_on_one_side():
    queries = [_query(f"q{i}", f"claim number {i}") for i in range(20)]
    queries += [_query("dup-a", "The same claim."), _query("dup-b", "the same  CLAIM")]  # SciFact has such pairs
    for seed in range(10):
        kept, held = split_by_text(queries, 0.3, seed, lambda query: query.query)
        assert len(kept) + len(held) == 22 and len(held) in (6, 7)  # round(0.3 * 21 distinct texts) = 6, one may be a pair
        assert ({"dup-a", "dup-b"} <= {q.id for q in held}) or ({"dup-a", "dup-b"} <= {q.id for q in kept})
        ensure_disjoint(kept, held, "--holdout")  # never refused


def test_weights_fingerprint_follows_the_weights_not_the_folder(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "model.safetensors").write_bytes(b"weights-1")
    (tmp_path / "a" / "config.json").write_text("{}")
    (tmp_path / "a" / "README.md").write_text("card")
    first = weights_fingerprint(tmp_path / "a")
    (tmp_path / "a" / "README.md").write_text("another card")  # not part of what the model computes
    assert weights_fingerprint(tmp_path / "a") == first
    (tmp_path / "a" / "model.safetensors").write_bytes(b"weights-2")  # trained again into the same folder
    assert weights_fingerprint(tmp_path / "a") != first
    assert model_cache_name(str(tmp_path / "a"), str(tmp_path / "a")) == f"{tmp_path / 'a'} @{weights_fingerprint(tmp_path / 'a')}"
    assert model_cache_name("BAAI/bge-small-en-v1.5", "BAAI/bge-small-en-v1.5") == "BAAI/bge-small-en-v1.5"
    assert weights_fingerprint(tmp_path / "missing") is None


# --- rerank fusion --------------------------------------------------------------------------------
def test_fuse_reranked_by_hand():
    # re-ranked head c, a, b; first stage a, b, c, d. RRF k=60 over the head:
    # a: 1/62 + 1/61 = 0.032522, c: 1/61 + 1/63 = 0.032266, b: 1/63 + 1/62 = 0.032002; d (not re-ranked) follows.
    assert fuse_reranked(["c", "a", "b"], ["a", "b", "c", "d"], "rrf", 60) == ["a", "c", "b", "d"]
    assert fuse_reranked(["c", "a", "b"], ["a", "b", "c", "d"], "none") == ["c", "a", "b", "d"]
    # k = 0: c: 1/1 + 1/3 = 1.333, a: 1/2 + 1/1 = 1.5, b: 1/3 + 1/2 = 0.833
    assert fuse_reranked(["c", "a", "b"], ["a", "b", "c"], "rrf", 0) == ["a", "c", "b"]
    with pytest.raises(ValueError, match="valid: none, rrf"):
        fuse_reranked(["a"], ["a"], "max")


# --- paired significance --------------------------------------------------------------------------
def test_paired_comparison_against_scipy_and_by_hand():
    rng = np.random.default_rng(3)
    base = {f"q{i}": float(v) for i, v in enumerate(rng.uniform(0, 1, 40))}
    cand = {qid: min(1.0, value + 0.1 + float(rng.normal(0, 0.05))) for qid, value in base.items()}
    result = paired_comparison(base, cand, resamples=2000)
    ids = sorted(base)
    assert result.difference == pytest.approx(np.mean([cand[q] - base[q] for q in ids]))
    assert result.p_ttest == pytest.approx(ttest_rel([cand[q] for q in ids], [base[q] for q in ids]).pvalue)
    assert result.low < result.difference < result.high and result.low > 0 and result.p_bootstrap == 0.0
    same = paired_comparison(base, base)
    assert same.difference == 0 and same.p_ttest == 1.0 and same.p_bootstrap == 1.0
    with pytest.raises(ValueError, match="same queries"):
        paired_comparison(base, {"other": 1.0})


# --- negatives and rows ---------------------------------------------------------------------------
def test_pick_negatives_leaves_out_positives_and_the_skipped_ranks():
    query = TrainingQuery("q", "text", ("c2",), ("c1", "c2", "c3", "c4", "c5", "c6"))
    chosen = pick_negatives(query, 3, random.Random(0), skip=1)
    assert len(chosen) == 3 and set(chosen) <= {"c3", "c4", "c5", "c6"}
    assert chosen == sorted(chosen, key=query.candidates.index)  # kept in first-stage order
    assert pick_negatives(query, 10, random.Random(0)) == ["c1", "c3", "c4", "c5", "c6"]
    assert pick_negatives(query, 3, random.Random(5), 1) == pick_negatives(query, 3, random.Random(5), 1)


def test_groups_top_up_missing_hard_negatives_from_the_corpus():
    passages = {f"c{i}": f"text {i}" for i in range(8)}
    few = TrainingQuery("q", "query", ("c0",), ("c0", "c1"))  # the first stage found one non-relevant passage
    [group] = groups([few], passages, count=3, seed=0)
    assert group.positive == "text 0" and group.negatives[0] == "text 1" and len(set(group.negatives)) == 3
    assert "text 0" not in group.negatives


def test_training_rows_in_each_layout():
    found = [NegativeGroup("q1", "p1", ("n1", "n2")), NegativeGroup("q2", "p2", ("n3",))]
    listwise = training_rows(found, "listwise")
    assert listwise["docs"] == [["p1", "n1", "n2"], ["p2", "n3"]] and listwise["labels"] == [[1, 0, 0], [1, 0]]
    pointwise = training_rows(found, "pointwise")
    assert pointwise["passage"] == ["p1", "n1", "n2", "p2", "n3"] and pointwise["label"] == [1.0, 0.0, 0.0, 1.0, 0.0]
    tuples = training_rows(found, "tuples", "anchor")
    assert tuples.column_names == ["anchor", "positive", "negative_1"]  # the fewest negatives any row has
    assert tuples["negative_1"] == ["n1", "n3"]


def test_lce_loss_is_the_cross_entropy_of_each_positive_within_its_group(tiny_bert):  # noqa: F811
    import torch
    from sentence_transformers.cross_encoder import CrossEncoder

    from rag_core.finetune.losses import loss_spec

    model = CrossEncoder(str(tiny_bert), num_labels=1, max_length=48, activation_fn=torch.nn.Identity())
    model.eval()  # no dropout: the loss and predict see the same scores
    torch.manual_seed(0)
    queries = ["river bank?", "engine fuel?"]
    docs = [["river bank water", "engine piston", "violin bow"], ["engine fuel piston", "river flow"]]
    pairs = [(query, doc) for query, group in zip(queries, docs) for doc in group]
    with torch.no_grad():  # a random tiny BERT scores all pairs nearly alike: standardise [CLS] in the pooler
        cls = model.model.bert(**model.tokenizer(*map(list, zip(*pairs)), padding=True, return_tensors="pt"))
        cls = cls.last_hidden_state[:, 0]
        model.model.bert.pooler.dense.weight.copy_(torch.diag(1.0 / cls.std(0)))
        model.model.bert.pooler.dense.bias.copy_(-cls.mean(0) / cls.std(0))
        model.model.classifier.weight.normal_(0.0, 1.0)
    with torch.no_grad():
        value = float(loss_spec("reranker", "lce").build(model, 2)(
            [queries, docs], [torch.tensor([1, 0, 0]), torch.tensor([1, 0])]))
    by_hand = []
    for query, group in zip(queries, docs):  # -log softmax(scores)[positive], the positive first
        scores = np.asarray(model.predict([(query, doc) for doc in group]), dtype=np.float64)
        by_hand.append(np.log(np.exp(scores).sum()) - scores[0])
        assert np.ptp(scores) > 0.5
    assert np.isclose(value, np.mean(by_hand), atol=1e-4)
    with torch.no_grad():  # ListNet's soft target gives another value on the same scores
        listnet = float(loss_spec("reranker", "listnet").build(model, 2)(
            [queries, docs], [torch.tensor([1, 0, 0]), torch.tensor([1, 0])]))
    assert not np.isclose(listnet, value, atol=1e-4)


def test_settings_are_checked_and_name_the_setting():
    assert TrainSettings.for_kind("reranker").loss == "lce"
    assert TrainSettings.for_kind("embedder", learning_rate=1e-5, epochs=None).learning_rate == 1e-5
    for bad in ({"learning_rate": 0.0}, {"batch_size": 0}, {"warmup": 1.0}, {"epochs": float("nan")},
                {"device": "tpu"}, {"precision": "fp8"}):
        with pytest.raises(ConfigError, match=f"^{next(iter(bad))} "):
            TrainSettings.for_kind("reranker", **bad)


@pytest.mark.parametrize("missing, precision, expected", [
    (None, "auto", ("cpu", "bf16")),  # a CPU with AVX512-BF16 or AMX
    ("this CPU has none of avx512_bf16, amx_bf16", "auto", ("cpu", "fp32")),
    (None, "fp32", ("cpu", "fp32")),
])
def test_training_precision_is_bf16_only_where_the_cpu_runs_it(monkeypatch, missing, precision, expected):
    import torch

    from rag_core.finetune.training import device_and_precision
    from rag_core.retrieve import bf16

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(bf16, "missing_bf16", lambda device: missing)
    assert device_and_precision("auto", precision) == expected


def test_bf16_training_is_refused_where_it_would_be_emulated(monkeypatch):
    import torch

    from rag_core.finetune.training import device_and_precision
    from rag_core.retrieve import bf16

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(bf16, "missing_bf16", lambda device: "this CPU has none of avx512_bf16, amx_bf16")
    with pytest.raises(ConfigError, match="precision bf16: this CPU has none"):
        device_and_precision("cpu", "bf16")
    with pytest.raises(ConfigError, match="device cuda: no CUDA device"):
        device_and_precision("cuda")


# --- the training set ------------------------------------------------------------------------------
def test_training_set_positives_are_the_relevant_chunks_and_candidates_come_from_bm25(topic_beir, tmp_path):  # noqa: F811
    documents, queries = load_beir(topic_beir, "train")
    config = RagConfig(mode="bm25", rerank_depth=0)
    data = build_training_set(queries, Corpus.of(documents), tmp_path / "store", config, negatives_from="bm25",
                              depth=5, validation_share=0.25, seed=1)
    assert len(data.train) + len(data.validation) == len(queries) and len(data.validation) == 2
    assert not {q.id for q in data.train} & {q.id for q in data.validation}
    for query in data.all_queries():
        [positive] = query.positives  # one chunk per short document: the query's own
        assert data.passages[positive].startswith(f"{KEYWORDS[int(query.id[1:])]} notes")
        assert query.candidates[0] == positive  # BM25 ranks the keyword's document first
        assert 1 < len(query.candidates) <= 5
    with pytest.raises(ConfigError, match="negatives_from must be one of bm25, dense, hybrid"):
        build_training_set(queries, Corpus.of(documents), tmp_path / "store", config, negatives_from="splade")
