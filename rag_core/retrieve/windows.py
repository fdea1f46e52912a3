"""Token windows: a unit (chunk, parent, child) longer than the embedding model's window is embedded
as overlapping windows of the model's own length, so that dense search reads every word it ranks.

A unit's indexed text is tokenized once with the model's tokenizer (character offsets per token,
special tokens left out). ``window_spans`` cuts the tokens into windows of at most ``size`` tokens
(the model's ``max_seq_length`` less its special tokens) starting every ``stride`` tokens; the last
window ends at the unit's last token and is a whole window long. Windows start and end between
words (a token preceded by a gap in the text), so a window's text tokenizes to exactly its tokens; a
single word longer than a window is cut inside. ``unit_windows`` turns the spans into ``Window``
records: a unit that fits keeps its own id (the same stored vector as without windows), the others
get ``<unit id>#w<i>``.

A window is a child of its unit, as a child chunk is of its parent (``rag_core.retrieve.parent_child``):
the dense score of a unit is its windows' scores pooled by ``pool_to_parents`` (``dense_pooling``:
``max``, ``mean_top2``), the same function that scores a parent by its children. ``first`` is the
truncation sentence-transformers does silently: no windows, the unit embedded as one text whose tail
past the window is never read; ``WindowStats`` says how much that is.

Left out: windows that follow sentence boundaries, pooling the token embeddings across windows
(late chunking), a learned pooling.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

WINDOW_MARK = "#w"  # a window's id: <unit id>#w<index>, for units longer than one window
UNREAD_WARN_SHARE = 0.10  # above this share of indexed text unread by dense search, one warning line


@dataclass(frozen=True)
class Window:
    id: str  # the unit's id when it fits in one window, else <unit id>#w<index>
    unit_id: str
    index: int  # 0-based, in text order
    of: int  # how many windows the unit has
    char_start: int  # offsets into the unit's indexed text
    char_end: int
    token_start: int  # token offsets (special tokens not counted)
    token_end: int


@dataclass(frozen=True)
class WindowStats:
    units: int = 0
    longer: int = 0  # units with more tokens than one window holds
    windows: int = 0  # windows embedded (one per unit that fits)
    characters: int = 0  # indexed text, all units
    unread_first: int = 0  # characters past each unit's first window: what `first` never reads

    @property
    def longer_share(self) -> float:
        return self.longer / self.units if self.units else 0.0

    @property
    def unread_share_first(self) -> float:
        return self.unread_first / self.characters if self.characters else 0.0

    def as_dict(self) -> dict[str, float]:
        return {"units": self.units, "longer": self.longer, "windows": self.windows, "characters": self.characters,
                "unread_first": self.unread_first}


def word_starts(offsets: Sequence[tuple[int, int]], text: str) -> list[bool]:
    """Whether each token starts a word: the first token, or one preceded by whitespace in `text`."""
    return [i == 0 or (start > 0 and text[start - 1].isspace()) or start > offsets[i - 1][1]
            for i, (start, _) in enumerate(offsets)]


def window_spans(starts_word: Sequence[bool], size: int, stride: int) -> list[tuple[int, int]]:
    """[token_start, token_end) of each window over ``len(starts_word)`` tokens: at most `size`
    tokens, one every `stride` tokens, the last ending at the last token; boundaries between words
    where a word boundary lies inside the window's second half (else inside a word)."""
    count = len(starts_word)
    if size <= 0 or stride <= 0:
        raise ValueError("window size and stride must be positive")
    if count <= size:
        return [(0, count)]
    spans: list[tuple[int, int]] = []
    start = 0
    while True:
        if start + size >= count:  # the last window: a whole one, ending at the last token
            last = max(0, count - size)
            snapped = min(start, next((i for i in range(last, min(count, last + size // 2)) if starts_word[i]), last))
            if not spans or snapped > spans[-1][0]:
                spans.append((snapped, count))
            return spans
        end = start + size
        snapped_end = next((i for i in range(end, start + size // 2, -1) if starts_word[i]), end)
        spans.append((start, snapped_end))
        following = min(start + stride, snapped_end)  # no gap between windows
        snapped_start = next((i for i in range(following, start, -1) if starts_word[i]), following)
        start = snapped_start if snapped_start > start else following


def unit_windows(unit_id: str, text: str, offsets: Sequence[tuple[int, int]], size: int,
                 stride: int) -> list[Window]:
    """The windows of one unit whose indexed text `text` tokenizes to `offsets` (per token, without
    special tokens)."""
    if not offsets:
        return [Window(unit_id, unit_id, 0, 1, 0, len(text), 0, 0)]
    spans = window_spans(word_starts(offsets, text), size, stride)
    if len(spans) == 1:
        return [Window(unit_id, unit_id, 0, 1, 0, len(text), 0, len(offsets))]
    return [Window(f"{unit_id}{WINDOW_MARK}{i}", unit_id, i, len(spans), offsets[start][0], offsets[end - 1][1],
                   start, end) for i, (start, end) in enumerate(spans)]


def count_unread(text: str, offsets: Sequence[tuple[int, int]], size: int) -> int:
    """Characters of `text` past its first `size` tokens: what truncation never reads."""
    return len(text) - offsets[size - 1][1] if len(offsets) > size else 0


def windows_of(ids: Sequence[str], texts: Sequence[str], offsets: Sequence[Sequence[tuple[int, int]]], size: int,
               stride: int) -> tuple[list[Window], WindowStats]:
    """Every unit's windows (in unit order), and the statistics of the units' lengths."""
    windows: list[Window] = []
    longer = unread = 0
    for unit_id, text, token_offsets in zip(ids, texts, offsets):
        windows += unit_windows(unit_id, text, token_offsets, size, stride)
        longer += len(token_offsets) > size
        unread += count_unread(text, token_offsets, size)
    stats = WindowStats(len(ids), longer, len(windows), sum(len(text) for text in texts), unread)
    return windows, stats


def default_stride(size: int, stride: int) -> int:
    """``dense_stride`` 0 means three quarters of the window (a quarter of it overlaps the next)."""
    return stride if stride > 0 else max(1, (3 * size) // 4)


def unread_warning(stats: WindowStats, pooling: str, max_seq_length: int) -> str | None:
    """One warning line when `pooling` leaves more than ``UNREAD_WARN_SHARE`` of the indexed text
    unread by dense search (only ``first`` reads a unit's first window alone), naming the fix."""
    if pooling != "first" or stats.unread_share_first <= UNREAD_WARN_SHARE:
        return None
    return (f"warning: dense search never reads {100 * stats.unread_share_first:.0f}% of the indexed text: "
            f"{stats.longer} of {stats.units} units ({100 * stats.longer_share:.0f}%) are longer than the embedding "
            f"model's {max_seq_length} tokens and dense_pooling is first (truncation); set dense_pooling: mean_top2 to "
            f"embed them as windows")
