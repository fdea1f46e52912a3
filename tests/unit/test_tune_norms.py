"""``tune-fusion --norm``: which score normalisations the learned fusion is tried after."""

import pytest

from rag_core.workbench.search.fusion_tuning import parse_norms


def test_all_is_every_normalisation_but_none_with_the_setting_first():
    assert parse_norms("all", "zmuv") == ("zmuv", "min-max", "max", "sum", "rank", "borda")
    assert parse_norms(" all ", "none") == ("none", "min-max", "max", "sum", "zmuv", "rank", "borda")


def test_a_list_is_taken_as_given():
    assert parse_norms("sum, rank", "min-max") == ("sum", "rank")


@pytest.mark.parametrize("text", ["", " , ", "min-max,softmax", "All"])
def test_anything_else_names_the_valid_ones(text):
    with pytest.raises(ValueError, match=r"^--norm must be 'all' or names among min-max, max, sum, zmuv, rank, borda, none"):
        parse_norms(text, "min-max")
