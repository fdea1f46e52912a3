"""The ``cluster`` chunker: the cluster-semantic chunker of Chroma's technical report "Evaluating Chunking
Strategies for Retrieval" (Smith & Troynikov, 2024), in our words.

1. The text is cut into small pieces of at most ``cluster_piece_size`` words (tokens with ``chunk_unit:
   tokens``; default 50, the report's), as ``recursive`` cuts a text (``split_span``: paragraphs, lines,
   sentences, words), and each piece is embedded by the embedding model in use (``embed_model``, the
   index's ``Embedder``: cached by model as loaded and text, so a second chunking embeds nothing).
2. The pieces' cosine similarities form a matrix; its mean over distinct pairs is subtracted and its
   diagonal set to 0 (``centred_similarity``). A pair more alike than the document's average pair now
   counts for, a pair less alike against.
3. A chunk is a run of consecutive pieces, and its reward the sum of its block of the matrix (every
   ordered pair of its pieces). A dynamic programme over end positions (``optimal_segmentation``) finds
   the cut of the document into runs, each of at most ``chunk_size`` words (tokens, summed piece by
   piece; a single piece always fits), whose rewards add up to the most: best[i] = max over the start j
   of the last run of best[j] + reward(j..i), ties to the shortest last run. Pieces that resemble each
   other more than the average end up together; a piece unlike its neighbours stands alone.

Where this differs from Chroma's code, on purpose: the size limit is ``chunk_size`` in words or tokens
(theirs counts pieces: ``max_chunk_size // min_chunk_size``), and every position takes the best of its
allowed runs even when all are negative (theirs keeps a default that can make a run longer than the
limit). With ``per_page`` no run crosses a page. Reads ``chunk_size``, ``chunk_unit`` and ``per_page``
(not ``overlap``) and its own ``cluster_piece_size``; costs one embedding per piece (about
``chunk_size / cluster_piece_size`` times a chunking's chunks; cached) and a similarity matrix per
document (n pieces: n^2 floats; a 100-page filing of 60,000 words makes 1,200 pieces, 11 MB) with
O(n x pieces per run) steps.
Left out: overlap, the report's other chunkers (its LLM chunker: chunks here are always spans).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from rag_core.ingest.chunkers.base import Chunker, Span, page_regions, span_chunk
from rag_core.ingest.chunkers.recursive import split_span
from rag_core.ingest.chunkers.semantic import unit_rows
from rag_core.records import Chunk, Document

__all__ = ["ClusterChunker", "centred_similarity", "optimal_segmentation"]


def centred_similarity(vectors: np.ndarray) -> np.ndarray:
    """Cosine similarities of the rows of `vectors`, less their mean over distinct pairs, diagonal 0."""
    unit = unit_rows(vectors)
    matrix = unit @ unit.T
    if len(matrix) > 1:
        matrix -= matrix[np.triu_indices(len(matrix), k=1)].mean()
    np.fill_diagonal(matrix, 0.0)
    return matrix


def optimal_segmentation(matrix: np.ndarray, sizes: Sequence[int], max_size: int,
                         region_starts: Sequence[int] = ()) -> list[tuple[int, int]]:
    """(first, last) piece indices (inclusive) of the runs covering pieces ``0..n-1`` that maximise the
    sum over runs of ``matrix[first:last+1, first:last+1].sum()``, each run's `sizes` adding up to at
    most `max_size` (a single piece always allowed) and no run crossing a piece index in `region_starts`."""
    count = len(sizes)
    reach = np.concatenate([[0], np.cumsum(sizes)])  # reach[j]: size of pieces[:j]
    starts = sorted(set(region_starts) | {0})
    region_first = np.repeat(starts, np.diff([*starts, count])) if count else np.zeros(0, int)
    best = np.zeros(count + 1)  # best[j]: the best total of pieces[:j]
    choice = np.zeros(count, dtype=int)  # choice[i]: the first piece of the last run of the best cut of pieces[:i+1]
    rewards = np.zeros(0)  # rewards[j - low]: reward of the run j..i (for the current i), j >= low
    low = 0
    for i in range(count):
        earliest = int(np.searchsorted(reach, reach[i + 1] - max_size, side="left"))  # first j with size(j..i) <= max
        new_low = min(i, max(int(region_first[i]), earliest, low))
        # reward(j, i) = reward(j, i-1) + 2 * sum(matrix[j:i, i]) + matrix[i, i]  (the matrix is symmetric)
        column = matrix[new_low:i, i]
        rewards = np.append(rewards[new_low - low:] + 2 * np.cumsum(column[::-1])[::-1] + matrix[i, i], matrix[i, i])
        low = new_low
        totals = rewards + best[low:i + 1]
        pick = len(totals) - 1 - int(np.argmax(totals[::-1]))  # of equal totals, the shortest run
        best[i + 1], choice[i] = totals[pick], low + pick
    runs, last = [], count - 1
    while last >= 0:
        runs.append((int(choice[last]), last))
        last = int(choice[last]) - 1
    return runs[::-1]


class ClusterChunker(Chunker):
    def chunk(self, document: Document) -> list[Chunk]:
        config, text = self.config, document.text
        pieces: list[Span] = []
        region_starts = []
        for region in page_regions(document, config.per_page):
            region_starts.append(len(pieces))
            pieces += split_span(text, region, config.cluster_piece_size, 0, self.count)
        if len(pieces) < 2:
            return [span_chunk(document, start, end) for start, end in pieces]
        if self.embedder is None:
            raise ValueError("the cluster chunker needs the embedding model (make_chunker's embedder)")
        vectors, _ = self.embedder.embed_documents([text[start:end] for start, end in pieces])
        sizes = [self.count(text[start:end]) for start, end in pieces]
        runs = optimal_segmentation(centred_similarity(vectors), sizes, config.chunk_size, region_starts)
        return [span_chunk(document, pieces[first][0], pieces[last][1]) for first, last in runs]
