"""Token windows (rag_core.retrieve.windows) against hand-computed token offsets, and the pooling of
window scores into unit scores (rag_core.retrieve.parent_child.pool_to_parents)."""

from __future__ import annotations

import numpy as np
import pytest

from rag_core.records import ScoredId
from rag_core.retrieve.parent_child import collapse_to_parents, pool_rows, pool_to_parents
from rag_core.retrieve.windows import (WindowStats, count_unread, default_stride, unit_windows, unread_warning,
                                       window_spans, windows_of, word_starts)

# "aa bb cc dd ee ff gg hh": one token per word
EIGHT = "aa bb cc dd ee ff gg hh"
EIGHT_OFFSETS = [(0, 2), (3, 5), (6, 8), (9, 11), (12, 14), (15, 17), (18, 20), (21, 23)]
# "aa bbb c", with "bbb" in three word pieces: b ##b ##b
PIECES = "aa bbb c"
PIECES_OFFSETS = [(0, 2), (3, 4), (4, 5), (5, 6), (7, 8)]


def test_word_starts_follow_the_gaps_in_the_text():
    assert word_starts(PIECES_OFFSETS, PIECES) == [True, True, False, False, True]
    assert word_starts([(0, 4), (4, 5)], "word, x") == [True, False]  # punctuation joins its word


def test_windows_every_stride_tokens_and_the_last_a_whole_window_ending_at_the_end():
    # size 3, stride 2 over 8 tokens: [0,3) [2,5) [4,7), then the last whole window [5,8)
    assert window_spans([True] * 8, 3, 2) == [(0, 3), (2, 5), (4, 7), (5, 8)]
    windows = unit_windows("u", EIGHT, EIGHT_OFFSETS, 3, 2)
    assert [(w.id, w.char_start, w.char_end) for w in windows] == [
        ("u#w0", 0, 8), ("u#w1", 6, 14), ("u#w2", 12, 20), ("u#w3", 15, 23)]
    assert [EIGHT[w.char_start:w.char_end] for w in windows] == ["aa bb cc", "cc dd ee", "ee ff gg", "ff gg hh"]
    assert {w.of for w in windows} == {4} and all(w.unit_id == "u" for w in windows)


def test_windows_do_not_cut_a_word_in_its_pieces():
    # size 4, stride 2: the first window [0,4) is "aa bbb" (token 4 starts "c"); the next start, token 2, lies
    # inside "bbb": moved back to its first piece, token 1, and [1,5) reaches the last token
    assert window_spans(word_starts(PIECES_OFFSETS, PIECES), 4, 2) == [(0, 4), (1, 5)]
    windows = unit_windows("u", PIECES, PIECES_OFFSETS, 4, 2)
    assert [PIECES[w.char_start:w.char_end] for w in windows] == ["aa bbb", "bbb c"]
    # size 3, stride 3: [0,3) must end inside "bbb" (no word starts in its second half, token 2); the next start,
    # token 3, moves back to 1: [1,4) ends before "c"; the last window, [2,5), is a whole one (starting inside
    # "bbb": no word starts in the first half of the last window's place)
    assert window_spans(word_starts(PIECES_OFFSETS, PIECES), 3, 3) == [(0, 3), (1, 4), (2, 5)]


def test_a_unit_that_fits_is_one_window_with_the_units_own_id():
    windows = unit_windows("u", EIGHT, EIGHT_OFFSETS, 8, 4)
    assert [(w.id, w.of, w.char_start, w.char_end, w.token_end) for w in windows] == [("u", 1, 0, len(EIGHT), 8)]
    assert window_spans([True] * 3, 3, 1) == [(0, 3)]


def test_stats_count_long_units_and_the_characters_truncation_never_reads():
    assert count_unread(EIGHT, EIGHT_OFFSETS, 3) == len(EIGHT) - 8  # the first 3 tokens end at character 8
    assert count_unread(EIGHT, EIGHT_OFFSETS, 8) == 0
    windows, stats = windows_of(["a", "b"], [EIGHT, "aa bb"], [EIGHT_OFFSETS, EIGHT_OFFSETS[:2]], 3, 2)
    assert stats == WindowStats(units=2, longer=1, windows=5, characters=len(EIGHT) + 5, unread_first=15)
    assert [w.id for w in windows] == ["a#w0", "a#w1", "a#w2", "a#w3", "b"]
    assert stats.unread_share_first == pytest.approx(15 / 28) and stats.longer_share == 0.5


def test_default_stride_is_three_quarters_of_the_window():
    assert default_stride(254, 0) == 190 and default_stride(254, 100) == 100


def test_the_warning_names_the_setting_and_only_above_a_tenth_unread_with_first():
    stats = WindowStats(units=46, longer=45, windows=46, characters=1000, unread_first=550)
    warning = unread_warning(stats, "first", 256)
    assert warning.startswith("warning: dense search never reads 55% of the indexed text")
    assert "45 of 46 units" in warning and "dense_pooling: mean_top2" in warning and "\n" not in warning
    assert unread_warning(stats, "max", 256) is None
    assert unread_warning(WindowStats(10, 1, 10, 1000, 100), "first", 256) is None  # 10%: not above
    assert unread_warning(WindowStats(10, 1, 10, 1000, 101), "first", 256) is not None


def test_pooling_max_and_mean_of_the_two_best_windows():
    windows = [ScoredId("a#w1", 0.9), ScoredId("b", 0.8), ScoredId("a#w0", 0.5), ScoredId("c#w0", 0.7),
               ScoredId("c#w1", 0.7), ScoredId("a#w2", 0.6)]
    unit_of = {"a#w0": "a", "a#w1": "a", "a#w2": "a", "c#w0": "c", "c#w1": "c"}
    assert pool_to_parents(windows, unit_of, "max") == [ScoredId("a", 0.9), ScoredId("b", 0.8), ScoredId("c", 0.7)]
    # mean_top2: a (0.9 + 0.6) / 2 = 0.75, b 0.8 (one window), c (0.7 + 0.7) / 2 = 0.7
    pooled = pool_to_parents(windows, unit_of, "mean_top2")
    assert [hit.id for hit in pooled] == ["b", "a", "c"]
    assert [hit.score for hit in pooled] == pytest.approx([0.8, 0.75, 0.7])
    assert pool_to_parents(windows, unit_of, "max", depth=2) == [ScoredId("a", 0.9), ScoredId("b", 0.8)]
    # max pooling is what parent-child retrieval does with a ranked list of children
    assert pool_to_parents(windows[:2], unit_of, "max") == collapse_to_parents(windows[:2], {**unit_of, "b": "b"})
    with pytest.raises(ValueError, match="max, mean_top2"):
        pool_to_parents(windows, unit_of, "sum")


def test_pooling_ties_are_ordered_by_unit_id():
    assert pool_to_parents([ScoredId("z", 0.5), ScoredId("m#w0", 0.5)], {"m#w0": "m"}, "max") == [
        ScoredId("m", 0.5), ScoredId("z", 0.5)]


@pytest.mark.parametrize("pooling", ["max", "mean_top2"])
def test_pooling_on_arrays_agrees_with_pooling_a_ranked_list(pooling):
    """``pool_rows`` (numpy, what exact search uses) against ``pool_to_parents`` (a loop over hits)."""
    rng = np.random.default_rng(3)
    parents = rng.integers(0, 40, size=200)  # some parents with one child, some with many
    scores = np.round(rng.random(200), 2).astype(np.float32)  # rounded: ties within and across parents
    ids = [f"c{i}" for i in range(200)]
    parent_of = {f"c{i}": f"p{parent:02d}" for i, parent in enumerate(parents)}
    ranked = sorted((ScoredId(i, float(s)) for i, s in zip(ids, scores)), key=lambda hit: (-hit.score, hit.id))
    expected = pool_to_parents(ranked, parent_of, pooling)
    units, pooled, best = pool_rows(scores, parents, pooling)
    order = np.lexsort((units, -pooled))
    assert [f"p{units[i]:02d}" for i in order] == [hit.id for hit in expected]
    assert [float(pooled[i]) for i in order] == pytest.approx([hit.score for hit in expected])
    for unit, row in zip(units, best):  # each parent's best child is one of its children with its highest score
        assert parents[row] == unit and scores[row] == scores[parents == unit].max()


def test_token_units_a_little_over_the_window_get_a_note_naming_the_size_that_fits():
    from types import SimpleNamespace

    from rag_core.retrieve.retrievers.dense import overshoot_note

    def config(**values):
        return SimpleNamespace(**{"chunk_unit": "tokens", "chunk_size": 256, "child_size": 0, **values})

    note = overshoot_note(config(), 254, [256, 100, 255, 254])
    assert note == ("2 units are at most 2 tokens longer than the embedding model's window (254 text tokens) and are "
                    "embedded as 2 windows each; chunk_size 254 would embed each once")
    assert overshoot_note(config(), 254, [285, 10]) is not None  # 254 * 9 // 8 = 285: the longest noted
    assert overshoot_note(config(), 254, [286, 255]) is None  # one far over (a page): windows are the point
    assert overshoot_note(config(), 254, [254, 12]) is None  # every unit fits
    assert overshoot_note(config(chunk_unit="words"), 254, [256]) is None  # words: the size is no token count
    child = overshoot_note(config(chunk_size=1024, child_size=260), 254, [260])
    assert child is not None and child.endswith("child_size 254 would embed each once")
