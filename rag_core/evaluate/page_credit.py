"""Page credit: how a ranking of passages becomes a ranking of pages, and tie-aware metrics over it.

A passage that crosses pages is one retrieved item, yet page metrics need one rank per page. Where
its pages land must not depend on where a chunk boundary happens to fall, so the rule is a setting,
``page_credit``:

- ``tied`` (the default): the pages of one passage share its rank. Metrics take their expected value
  over every order of tied items (McSherry and Najork, "Computing Information Retrieval Performance
  Measures Efficiently in the Presence of Tied Scores", ECIR 2008), never the optimistic order: a
  passage over pages 1-2 at rank 1 with the evidence on page 2 scores page MRR (1 + 1/2) / 2 = 0.75.
- ``majority``: the pages of a passage in order of how much of its text each holds (most first; equal
  shares in page order), one rank each.
- ``page_order``: the rule before ``page_credit`` existed, kept for comparison: a passage's pages in
  page order, one rank each, so evidence on its second page drops a rank.

A page keeps the rank of its first occurrence in every rule. A page ranking is a list of tie groups
(page ids, best group first); ``tied`` makes a group of the new pages of each passage, the other rules
make every group one page. With ``page_score`` pooling (``rag_core.evaluate.metrics.rank_pages``), pages
with equal pooled scores that first occur in the same passage form a group, ordered the same way.

``tied_metric`` computes recall@K, nDCG@K, hit rate@K and MRR in expectation over the orders within
groups, in closed form: a group of n pages holding r relevant ones puts, at each of its positions, a
relevant page with probability r / n. With groups of one page it is the usual (ranx) definition. Each is
registered in the metric registry (``rag_core.evaluate.metric_registry``) at every ranking level, with its
function ``(spans, cutoff, number relevant) -> value``: adding a ranking metric is one function and its
``METRICS.define`` line, here or in a plugin (``docs/adding.md``).

Left out: graded relevance (evidence is binary); ties between different passages (a fused ranking
orders them already).
"""

from __future__ import annotations

import math
from typing import Callable, Mapping, Sequence

from rag_core.evaluate.metric_registry import CUTOFF, METRICS, RANKING_LEVELS
from rag_core.records import Chunk, Document

PageGroups = list[list[str]]  # tie groups of page ids ("doc#pN"), best first; a page appears once


def page_item_id(doc_id: str, page: int) -> str:
    """A page's id in qrels and rankings: ``"report.pdf#p3"``."""
    return f"{doc_id}#p{page}"


def pages_in_page_order(chunk: Chunk, documents: Mapping[str, Document] | None) -> list[str]:
    return [page_item_id(chunk.doc_id, page) for page in range(chunk.page_start, chunk.page_end + 1)]


def pages_by_share(chunk: Chunk, documents: Mapping[str, Document] | None) -> list[str]:
    """The chunk's pages, the page holding most of its characters first (equal shares: page order)."""
    if chunk.page_start == chunk.page_end:
        return [page_item_id(chunk.doc_id, chunk.page_start)]
    document = (documents or {}).get(chunk.doc_id)
    if document is None:
        raise ValueError(f"page_credit majority needs the document of chunk {chunk.id} ({chunk.doc_id!r})")
    starts = document.page_starts
    shares = {}
    for page in range(chunk.page_start, chunk.page_end + 1):
        page_end = starts[page] if page < document.n_pages else len(document.text)
        shares[page] = min(chunk.char_end, page_end) - max(chunk.char_start, starts[page - 1])
    return [page_item_id(chunk.doc_id, page) for page in sorted(shares, key=lambda page: (-shares[page], page))]


# credit rule -> (a chunk's pages in order, whether the pages of one chunk are tied)
PAGE_CREDITS: dict[str, tuple[Callable[[Chunk, Mapping[str, Document] | None], list[str]], bool]] = {
    "tied": (pages_in_page_order, True),
    "majority": (pages_by_share, False),
    "page_order": (pages_in_page_order, False),
}
DEFAULT_PAGE_CREDIT = "tied"


def credit_rule(name: str) -> tuple[Callable[[Chunk, Mapping[str, Document] | None], list[str]], bool]:
    if name not in PAGE_CREDITS:
        raise ValueError(f"unknown page_credit {name!r}; valid: {', '.join(PAGE_CREDITS)}")
    return PAGE_CREDITS[name]


def page_groups(chunks: Sequence[Chunk], credit: str = DEFAULT_PAGE_CREDIT,
                documents: Mapping[str, Document] | None = None) -> PageGroups:
    """Ranked chunks (best first) -> tie groups of pages under `credit`; a page keeps its first occurrence."""
    pages_of, tied = credit_rule(credit)
    seen: set[str] = set()
    groups: PageGroups = []
    for chunk in chunks:
        new = [page for page in pages_of(chunk, documents) if page not in seen]
        seen.update(new)
        if new:
            groups += [new] if tied else [[page] for page in new]
    return groups


def flatten(groups: PageGroups) -> list[str]:
    return [page for group in groups for page in group]


def as_scores(groups: PageGroups) -> dict[str, float]:
    """Tie groups -> item -> 1 / rank of the group's first position (tied items share a score), the
    shape of a ranx run; ``from_scores`` reads it back."""
    scores, rank = {}, 1
    for group in groups:
        scores.update(dict.fromkeys(group, 1.0 / rank))
        rank += len(group)
    return scores


def from_scores(scored: Mapping[str, float]) -> PageGroups:
    """item -> score (higher first) -> tie groups: items of equal score share a rank."""
    groups: PageGroups = []
    for item in sorted(scored, key=lambda item: -scored[item]):
        if groups and scored[groups[-1][0]] == scored[item]:
            groups[-1].append(item)
        else:
            groups.append([item])
    return groups


Span = tuple[int, int, int]  # (positions before a tie group, its size, the relevant pages in it)


def tied_metric(name: str, groups: PageGroups, relevant: set[str]) -> float:
    """One ranking metric (``recall@5``, ``ndcg@10``, ``hit_rate@5``, ``mrr``: those of the metric registry at
    a ranking level) of tie groups, in expectation over the orders within each group; 0 when nothing is
    relevant or retrieved."""
    metric, _, cutoff_text = name.partition("@")
    registered = METRICS.find("page", metric)
    if registered is None or registered.function is None:
        valid = ", ".join(item.written for item in METRICS.at("page") if item.function is not None)
        raise ValueError(f"unknown metric {name!r}; valid: {valid}")
    if registered.parameter == CUTOFF and not cutoff_text:
        raise ValueError(f"metric {name!r} needs a cutoff (@K)")
    if not relevant or not groups:
        return 0.0
    cutoff = int(cutoff_text) if cutoff_text else None
    spans: list[Span] = []
    before = 0
    for group in groups:
        spans.append((before, len(group), sum(page in relevant for page in group)))
        before += len(group)
    return registered.function(spans, cutoff, len(relevant))


def _inside(spans: Sequence[Span], cutoff: int) -> list[tuple[int, int, int, int]]:
    """(start, size, found, positions shown within the cutoff) of each group that starts before it."""
    return [(start, size, found, min(size, cutoff - start)) for start, size, found in spans if start < cutoff]


@METRICS.define("recall", RANKING_LEVELS, "share of the relevant items in the first K", parameter=CUTOFF, best=1.0)
def _recall(spans: Sequence[Span], cutoff: int, relevant: int) -> float:
    return sum(found * shown / size for _, size, found, shown in _inside(spans, cutoff)) / relevant


@METRICS.define("ndcg", RANKING_LEVELS, "normalised discounted cumulative gain of the first K (binary relevance)",
                parameter=CUTOFF, best=1.0)
def _ndcg(spans: Sequence[Span], cutoff: int, relevant: int) -> float:
    gain = sum(found / size / math.log2(start + position + 1)
               for start, size, found, shown in _inside(spans, cutoff) for position in range(1, shown + 1))
    ideal = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(relevant, cutoff) + 1))
    return gain / ideal


@METRICS.define("hit_rate", RANKING_LEVELS, "1 when a relevant item is in the first K", parameter=CUTOFF, best=1.0)
def _hit_rate(spans: Sequence[Span], cutoff: int, relevant: int) -> float:
    """1 - P(no relevant page among the shown positions of every group)."""
    return 1.0 - math.prod(math.comb(size - found, shown) / math.comb(size, shown)
                           for _, size, found, shown in _inside(spans, cutoff))


@METRICS.define("mrr", RANKING_LEVELS, "1 / the rank of the first relevant item (whole ranking)", best=1.0)
def _expected_reciprocal_rank(spans: Sequence[Span], cutoff: int | None = None, relevant: int = 0) -> float:
    """E[1 / rank of the first relevant page] (MRR takes no cutoff: one given is not applied): decided by
    the first group holding one (every position of a group comes before the next group). In a random
    order of n pages with r relevant, the first relevant one is at position j with probability
    C(n - j, r - 1) / C(n, r)."""
    for start, size, found in spans:
        if found:
            total = math.comb(size, found)
            return sum(math.comb(size - j, found - 1) / total / (start + j) for j in range(1, size - found + 2))
    return 0.0
