"""The ``semantic`` chunker: chunk boundaries where the meaning moves, after Greg Kamradt's "5 levels of
text splitting" (level 4, semantic splitting; the method LangChain's and LlamaIndex's semantic splitters
implement).

1. The text is cut into sentences (``rag_core.ingest.sentence_split``).
2. Each sentence is embedded together with ``semantic_buffer`` sentences on either side (a group: the
   exact span of the text from the first to the last of them), so that one short sentence does not
   decide alone; groups are embedded by the embedding model in use (``embed_model``, the index's
   ``Embedder``), whose embeddings are cached by model as loaded and text like chunk embeddings: a
   second chunking of the same text embeds nothing.
3. The distance between adjacent groups is ``1 - cosine``; a boundary falls after each sentence whose
   distance to the next exceeds the ``semantic_percentile``-th percentile (default 95, numpy's linear
   interpolation) of the document's distances, so a document is cut at its largest moves, wherever its
   own distances lie.
4. A segment longer than ``chunk_size`` words (tokens) is cut by sentences (``pack_sentences``, no
   overlap; a single sentence longer than that as ``recursive`` cuts it): ``chunk_size`` is a maximum.

With ``per_page`` each page is cut on its own (a boundary at every page) and the percentile is over the
distances inside pages. A group longer than the model's window is embedded as the model reads it (its
first window: MiniLM reads 256 tokens). Reads ``chunk_size``, ``chunk_unit`` and ``per_page``, not
``overlap``; costs one embedding per sentence of the corpus (cached), about as many as chunks of a few
sentences would.
Left out: other thresholds of those libraries (standard deviations, interquartile range, gradient),
a minimum size, overlap.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from rag_core.ingest.chunkers.base import Chunker, Span, page_regions, span_chunk
from rag_core.ingest.chunkers.sentences import pack_sentences, sentence_spans
from rag_core.records import Chunk, Document

__all__ = ["SemanticChunker", "adjacent_distances", "boundaries", "group_spans", "unit_rows"]


def group_spans(sentences: Sequence[Span], buffer: int) -> list[Span]:
    """For each sentence, the span from `buffer` sentences before it to `buffer` after it (fewer at the ends)."""
    last = len(sentences) - 1
    return [(sentences[max(0, i - buffer)][0], sentences[min(last, i + buffer)][1]) for i in range(len(sentences))]


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """`vectors` scaled to unit length, in float64 (an embedder's are already: then only the type changes)."""
    vectors = np.asarray(vectors, dtype=np.float64)
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


def adjacent_distances(vectors: np.ndarray) -> np.ndarray:
    """``1 - cosine`` between each row of `vectors` (unit vectors) and the next."""
    return 1.0 - np.einsum("ij,ij->i", vectors[:-1], vectors[1:])


def boundaries(distances: np.ndarray, percentile: float) -> np.ndarray:
    """Whether a boundary follows each position: its distance above the `percentile`-th percentile of `distances`."""
    if not len(distances):
        return np.zeros(0, dtype=bool)
    return distances > np.percentile(distances, percentile)


class SemanticChunker(Chunker):
    def chunk(self, document: Document) -> list[Chunk]:
        config, text = self.config, document.text
        regions = [sentence_spans(text, region) for region in page_regions(document, config.per_page)]
        distances = [self._distances(text, sentences) for sentences in regions]
        cut = boundaries(np.concatenate(distances) if distances else np.zeros(0), config.semantic_percentile)
        chunks, position = [], 0
        for sentences, found in zip(regions, distances):
            breaks = cut[position:position + len(found)]
            position += len(found)
            for first, last in _segments(len(sentences), breaks):
                segment = sentences[first:last + 1]
                start, end = segment[0][0], segment[-1][1]
                spans = [(start, end)] if self.count(text[start:end]) <= config.chunk_size else \
                    pack_sentences(text, segment, config.chunk_size, 0, self.count)
                chunks += [span_chunk(document, a, b) for a, b in spans]
        return chunks

    def _distances(self, text: str, sentences: Sequence[Span]) -> np.ndarray:
        if len(sentences) < 2:
            return np.zeros(0)
        if self.embedder is None:
            raise ValueError("the semantic chunker needs the embedding model (make_chunker's embedder)")
        vectors, _ = self.embedder.embed_documents([text[a:b] for a, b in group_spans(sentences, self.config.semantic_buffer)])
        return adjacent_distances(unit_rows(vectors))


def _segments(count: int, breaks: np.ndarray) -> list[tuple[int, int]]:
    """(first, last) sentence indices of each segment of `count` sentences, cut after each True of `breaks`."""
    segments, first = [], 0
    for index in np.flatnonzero(breaks):
        segments.append((first, int(index)))
        first = int(index) + 1
    if first < count:
        segments.append((first, count - 1))
    return segments
