"""Sentence selection for extractive answers (rag_core/generate/sentences.py), with injected scorers:
the answering sentence in the middle of a long passage is shown, on its own page; titles (an FAQ's
question, a heading) come with what follows; the budget of sentences and words holds; the scorers'
arithmetic is checked by hand (BM25's idf against the Lucene formula)."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from rag_core.generate.answer import extractive_answer
from rag_core.generate.sentences import (MAX_ANSWER_WORDS, MAX_WORDS, RANK_PENALTY, bm25_idf, combined_scorer,
                                         embedding_scorer, rank_fused_scorer, select_sentences, split_sentences,
                                         term_weight_scorer)
from rag_core.records import Chunk, Document, Hit, StageScore


def tokenize(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


WORDS = term_weight_scorer(tokenize)  # every term alike
QUESTION = "How long are dead letter messages kept before they are deleted?"
ANSWER = "Messages in a dead letter queue are kept for 14 days before they are deleted."
FILLER = [
    "The broker stores every queue in three availability zones of its region.",
    "Publishers receive an acknowledgement once all three copies are written.",
    "Consumers fetch batches of up to ten entries with a single call.",
    "Visibility timeouts start when a batch is handed to a consumer.",
    "Long polling waits up to twenty seconds for new entries to arrive.",
    "Each project has its own encryption key for data at rest.",
    "Metrics are published every minute to the monitoring console.",
    "Alarms can be defined on queue depth and on the age of the oldest entry.",
]


def hit(doc_id: str, text: str, start: int = 0, pages: tuple[int, int] = (1, 1), rank: int = 1) -> Hit:
    chunk = Chunk(Chunk.make_id(doc_id, start, start + len(text), text), doc_id, text, start, start + len(text), *pages)
    return Hit(chunk, 1.0 / rank, {"fused": StageScore(rank, 1.0 / rank)})


def test_the_answering_sentence_in_the_middle_of_a_long_passage_is_shown_on_its_page():
    page_one = " ".join(FILLER[:5]) + " " + FILLER[5]
    page_two = " ".join(FILLER[6:]) + " " + ANSWER + " " + " ".join(FILLER[:4])
    document = Document.from_pages("guide.pdf", [page_one, page_two], "0" * 64)
    passage = hit("guide.pdf", document.text, pages=(1, 2))
    assert ANSWER not in " ".join(document.text.split()[:MAX_WORDS])  # the premise: the head does not hold it

    [first, *rest] = select_sentences(QUESTION, [passage], WORDS, {"guide.pdf": document})
    assert first.text == ANSWER and first.citation() == "[Source: guide.pdf, page 2]"
    assert first.char_start == document.text.index(ANSWER) and first.passage_rank == 1
    shown = [first, *rest]
    assert sum(excerpt.sentences for excerpt in shown) <= 3
    assert sum(len(excerpt.text.split()) for excerpt in shown) <= MAX_WORDS
    # Without the document the sentence is still found, citing its passage's pages.
    assert select_sentences(QUESTION, [passage], WORDS)[0].citation() == "[Source: guide.pdf, pages 1-2]"


def test_sentences_end_at_full_stops_and_blank_lines_not_at_decimals_or_abbreviations():
    text = "Heading line\nThe fee is 2.5 percent, e.g. on transfers. Is it due?  Yes!\n\nNext part"
    assert [text[start:end] for start, end in split_sentences(text)] == [
        "Heading line\nThe fee is 2.5 percent, e.g. on transfers.", "Is it due?", "Yes!", "Next part"]


def test_an_faq_question_is_shown_with_its_answer_never_alone():
    text = ("What does QS-4021 mean? Our producers fail.\nThis is the billing suspension code, returned while an "
            "invoice is overdue. Receiving keeps working for 30 days.\nUnrelated closing remark about the console.")
    favourite = {"What does QS-4021 mean?": 1.0}  # the question matches best, its answer not at all

    def scorer(question, sentences):
        return np.array([favourite.get(sentence, 0.0) for sentence in sentences])

    shown = select_sentences("What does QS-4021 mean?", [hit("faq.pdf", text)], scorer, max_sentences=2)
    assert shown[0].text == ("What does QS-4021 mean? Our producers fail. This is the billing suspension code, "
                             "returned while an invoice is overdue. Receiving keeps working for 30 days.")
    # the line after a question is its title too; its score carries to the two sentences of the answer
    assert shown[0].sentences == 2 and shown[0].score == 1.0  # titles: words, not sentences of the budget
    assert len(shown) == 1  # the rest scores 0 against the best's 1.0: under MIN_SHARE_OF_BEST, not shown


def test_the_budget_of_sentences_and_words_holds_and_the_best_comes_first():
    sentences = [f"Sentence number {word} has exactly six words." for word in ("one", "two", "three", "four")]
    long = "A very long sentence " + " ".join(["word"] * 70) + "."
    scores = {sentences[0]: 0.2, sentences[1]: 0.9, sentences[2]: 0.1, sentences[3]: 0.8, long: 0.0}
    scorer = lambda question, texts: np.array([scores[text] for text in texts])  # noqa: E731
    opening = "An opening sentence long enough not to be taken for a heading."
    scores[opening] = 0.0
    passage = hit("a.txt", " ".join([opening, *sentences, long]))
    shown = select_sentences("q", [passage], scorer, max_sentences=2, max_words=40)
    assert [excerpt.text for excerpt in shown] == [sentences[1], sentences[3]]  # 0.9, then 0.8 (runs average lower)
    assert [round(excerpt.score, 3) for excerpt in shown] == [0.9, 0.8]
    only_long = select_sentences("q", [hit("b.txt", long)], scorer, max_words=10)
    assert only_long[0].text == " ".join(long.split()[:10]) + " ..."  # the best, cut at the budget


def test_overlapping_passages_offer_each_sentence_once():
    document = Document.from_pages("doc.txt", [" ".join(FILLER[:4]) + " " + ANSWER], "0" * 64)
    cut = document.text.index(FILLER[2])
    first, second = hit("doc.txt", document.text[:cut + 20]), hit("doc.txt", document.text[cut:], cut, rank=2)
    shown = select_sentences(QUESTION, [first, second], WORDS, {"doc.txt": document})
    assert len({excerpt.char_start for excerpt in shown}) == len(shown)
    assert shown[0].text == ANSWER and shown[0].passage_rank == 1  # merged with the first passage it overlaps


def test_term_weights_are_shares_of_the_questions_weight():
    weights = {"dead": 3.0, "letter": 1.0, "kept": 2.0}
    scorer = term_weight_scorer(tokenize, lambda token: weights.get(token, 0.0))
    scores = scorer("dead letter kept", ["a dead end", "letters kept here: dead letter", "nothing"])
    assert scores.tolist() == pytest.approx([3 / 6, 6 / 6, 0.0])
    # exact sums: a sentence holding every term holds exactly all the weight, whatever order its set has
    tenths = term_weight_scorer(tokenize, {"a": 0.1, "b": 0.2, "c": 0.3}.__getitem__)
    assert tenths("a b c", ["c b a", "b a c", "a c b"]).tolist() == [1.0, 1.0, 1.0]  # 0.1 + 0.2 + 0.3 != 0.6 in floats


def test_combined_scores_are_weighted_means_of_min_max_scaled_scores():
    first = lambda question, texts: np.array([1.0, 3.0, 5.0])  # noqa: E731 - scaled: 0, 0.5, 1
    second = lambda question, texts: np.array([0.2, 0.1, 0.0])  # noqa: E731 - scaled: 1, 0.5, 0
    combined = combined_scorer((first, 0.25), (second, 0.75))("q", ["a", "b", "c"])
    assert combined.tolist() == pytest.approx([0.75, 0.5, 0.25])


def test_rank_fused_scores_are_reciprocal_ranks_scaled_so_that_first_everywhere_is_one():
    first = lambda question, texts: np.array([1.0, 3.0, 5.0])  # noqa: E731 - ranks 3, 2, 1
    second = lambda question, texts: np.array([0.2, 0.3, 0.0])  # noqa: E731 - ranks 2, 1, 3
    fused = rank_fused_scorer(first, second, k=60)("q", ["a", "b", "c"])
    assert fused.tolist() == pytest.approx([(1 / 63 + 1 / 62) * 61 / 2, (1 / 62 + 1 / 61) * 61 / 2,
                                            (1 / 61 + 1 / 63) * 61 / 2])
    same_twice = rank_fused_scorer(first, first, k=10)("q", ["a", "b", "c"])
    assert same_twice.tolist() == pytest.approx([11 / 13, 11 / 12, 1.0])
    ties = lambda question, texts: np.array([0.5, 0.5])  # noqa: E731 - of equal scores the earlier ranks first
    assert rank_fused_scorer(ties, k=0)("q", ["a", "b"]).tolist() == pytest.approx([1.0, 0.5])


def test_embedding_scores_are_cosines():
    vectors = {"q": np.array([1.0, 0.0]), "a": np.array([0.6, 0.8]), "b": np.array([0.0, 1.0])}
    scorer = embedding_scorer(lambda text: vectors[text], lambda texts: np.array([vectors[t] for t in texts]))
    assert scorer("q", ["a", "b"]).tolist() == pytest.approx([0.6, 0.0])


def test_bm25_idf_is_lucenes():
    from rag_core.retrieve.bm25 import BM25Index

    index = BM25Index(tokenizer="simple")
    index.index(["a", "b", "c", "d"], ["dead letter queue", "letter box", "letter opener", "queue depth"])
    idf = bm25_idf(index)
    n = 4
    for token, df in (("dead", 1), ("letter", 3), ("queue", 2), ("absent", 0)):
        assert idf(token) == pytest.approx(math.log(1 + (n - df + 0.5) / (df + 0.5)))


def test_a_title_carries_its_score_to_the_two_sentences_of_its_answer():
    """An FAQ's question that matches is shown with the two sentences of its answer, although only the
    question scores: both answer sentences score what the question does, and of two runs that score
    the same the longer is shown."""
    question_line = "Why do messages come back after my worker has finished them?"
    first = "The acknowledgement of the message did not reach the service before its visibility timeout."
    second = "The receipt handle expired before it arrived."
    text = f"{FILLER[0]}\n{question_line}\n{first} {second} {FILLER[1]}"
    scores = {question_line: 1.0, first: 0.2, second: 0.1}
    scorer = lambda _question, sentences: np.array([scores.get(s, 0.0) for s in sentences])  # noqa: E731

    [shown] = select_sentences("worker finished", [hit("faq.txt", text)], scorer, max_sentences=2)
    assert shown.text == f"{question_line} {first} {second}" and shown.sentences == 2


def test_a_sentence_of_a_better_ranked_passage_wins_a_near_tie():
    """A run's score loses RANK_PENALTY per rank of its passage below the first: of two sentences that
    score within it of each other, the better-ranked passage's comes first."""
    better, worse = "Retention is fourteen days on every plan.", "Retention is fourteen days for every queue."
    scores = {better: 0.9, worse: 0.9 + RANK_PENALTY / 2}
    scorer = lambda _question, sentences: np.array([scores[s] for s in sentences])  # noqa: E731

    shown = select_sentences("retention", [hit("b.txt", better, rank=1), hit("a.txt", worse, rank=2)], scorer,
                             max_sentences=1)
    assert [excerpt.doc_id for excerpt in shown] == ["b.txt"] and shown[0].score == pytest.approx(0.9)
    shown = select_sentences("retention", [hit("a.txt", worse, rank=1), hit("b.txt", better, rank=2)], scorer,
                             max_sentences=1)
    assert [excerpt.doc_id for excerpt in shown] == ["a.txt"]


def test_the_embedding_outweighs_shared_words_at_the_pipelines_weights():
    """A paraphrase: the sentence that answers shares no word with the question; one that does not
    answer shares half its weight. Min-max scaled over the three sentences (lexical 1, 0, 0.5; cosine
    0, 1, 0.5) and weighted 0.15 / 0.85 (``LEXICAL_WEIGHT``), they score 0.15, 0.85 and 0.5: the
    answer wins, and the third (0.5 < 0.6 x 0.85) is not shown. Weighted the other way, the shared words win."""
    shares_words = "Workers that finish a job acknowledge it before they take the next one."
    answers = "Processing that outlasts the visibility timeout makes the message visible to a second consumer."
    between = "A consumer holds a limited number of unacknowledged batches at any one time."
    lexical = {shares_words: 0.5, answers: 0.0, between: 0.25}
    vectors = {"q": np.array([1.0, 0.0]), shares_words: np.array([0.0, 1.0]), answers: np.array([0.8, 0.6]),
               between: np.array([0.4, math.sqrt(1 - 0.16)])}  # cosines 0, 0.8, 0.4
    words = lambda _question, texts: np.array([lexical[text] for text in texts])  # noqa: E731
    dense = embedding_scorer(lambda _question: vectors["q"], lambda texts: np.array([vectors[t] for t in texts]))
    passage = hit("faq.txt", f"{shares_words} {between} {answers}")

    shown = select_sentences("q", [passage], combined_scorer((words, 0.15), (dense, 0.85)))
    assert [excerpt.text for excerpt in shown] == [answers] and shown[0].score == pytest.approx(0.85)
    shown = select_sentences("q", [passage], combined_scorer((words, 0.85), (dense, 0.15)))
    assert [excerpt.text for excerpt in shown] == [shares_words] and shown[0].score == pytest.approx(0.85)


def test_no_extractive_answer_is_longer_than_72_words_citations_included():
    """Three passages of one 20-word sentence each, from a document whose name has three words: each
    sentence costs 20 + 6 words with its citation ("[Source: release notes 2024.pdf, page 1]"). Two
    fit in 72 (52); the third would make 78, although the sentences alone (60) fit MAX_WORDS."""
    sentences = [" ".join([f"{name}"] * 19) + " end." for name in ("alpha", "beta", "gamma")]
    scores = dict(zip(sentences, (0.9, 0.8, 0.7)))
    scorer = lambda _question, texts: np.array([scores[text] for text in texts])  # noqa: E731
    hits = [hit("release notes 2024.pdf", text, start=100 * n, rank=n + 1) for n, text in enumerate(sentences)]
    answer = extractive_answer(hits, "note", query="q", scorer=scorer)
    body = answer.text.split("\n\n", 1)[1]
    assert body == "\n\n".join(f"{text} [Source: release notes 2024.pdf, page 1]" for text in sentences[:2])
    assert len(body.split()) == 52 <= MAX_ANSWER_WORDS
    assert len(select_sentences("q", hits, scorer, max_answer_words=200)) == 3  # the cap is what left it out
    # One sentence of 25 words under a cap of 30: cut to 30 - 6 (citation) - 1 ("...") = 23 words.
    long = " ".join(["delta"] * 24) + " end."
    [cut] = select_sentences("q", [hit("release notes 2024.pdf", long)], lambda _q, texts: np.ones(len(texts)),
                             max_answer_words=30)
    assert cut.text == " ".join(["delta"] * 23) + " ..." and len(f"{cut.text} {cut.citation()}".split()) == 30
