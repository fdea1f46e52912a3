"""Extractive answers that answer: the few sentences of the top passages that best match the question.

Without an LLM an answer can only quote. Quoting whole passages showed the head of the top chunk,
which is rarely where the answer is (issue 36: the QS-4021 question got the error catalogue's
introduction). Here the top passages are cut into sentences (``split_sentences``), a
``SentenceScorer`` scores each sentence against the question, and runs of consecutive sentences
(at most ``max_sentences`` of them and ``max_words`` words) score the mean of their sentences, less
``RANK_PENALTY`` for each rank their passage is below the first (the retriever judged the whole
passage); the best run is kept (of equal ones the longer), then the best runs that still fit
(``select_sentences``), each with the citation of its own page; with their citations they hold at
most ``MAX_ANSWER_WORDS`` (72) words. A title (a question, or a short
sentence that starts a line: an FAQ's question, a heading) is shown with what follows, never alone,
and the ``TITLE_CARRY`` sentences after it score at least as the title does: the answer to "what
does QS-4021 mean" is in the two sentences after the line that names QS-4021, which do not repeat
the code. Titles count for words, not sentences.

Scorers (plain callables over sentences, so that tests inject their own and load no model):
- ``term_weight_scorer``: the share of the question's term weight that a sentence holds,
  ``sum_{t in q and s} w(t) / sum_{t in q} w(t)`` over distinct terms, with BM25's idf as ``w``
  (``bm25_idf``: Robertson & Zaragoza 2009, the Lucene form ``log(1 + (N - n_t + 0.5) / (n_t + 0.5))``,
  from the index the query already searched) or, with no index, every term alike;
- ``embedding_scorer``: the cosine between the question's and the sentence's embeddings, by the
  model the query already loaded;
- ``combined_scorer``: the weighted mean of several scorers' scores, each first scaled to [0, 1] over
  the sentences (min-max), so that no scale dominates;
- ``rank_fused_scorer``: reciprocal rank fusion of several scorers' rankings (Cormack, Clarke & Büttcher
  2009, ``rag_core.retrieve.fusion.rrf``), scaled so that a sentence first in every ranking scores 1.
``pipeline_scorer`` builds the weighted mean from a ``Pipeline``'s loaded parts (``pipeline_scorers``: no
new model); to keep a query quick it embeds only the ``EMBEDDED_SENTENCES`` sentences BM25's weights
rank best (``shortlisted``), each up to ``EMBED_WORDS`` words.

A sentence ends at ``.``, ``!`` or ``?`` before white space (not after a few common abbreviations), or
at a blank line (pages are joined by one: ``rag_core.ingest.sentence_split``, which the chunkers share); a heading line without a full stop stays with the sentence
after it ("QS-4021 Billing account suspended HTTP 402."). With the documents at hand, passages are
widened to the sentences they cut at either end (chunks start and end mid-sentence) and overlapping
passages of one document are merged, so that no sentence is offered twice.
A sentence longer than ``LONG_WORDS`` (a flattened table) is cut at its line breaks.
Left out: sentence models (no new model), abbreviations beyond a short list, putting the chosen runs
back in document order (they are shown best first). Measured and not kept (issue 44,
``benchmarks/extractive_answers.py --rules``: none quotes the golden evidence for more than two questions
more than the weighted mean, on the sample set or on FinanceBench dev, and none by a significant margin):
rank fusion instead of the weighted mean, equal weights, either scorer alone, every sentence embedded, a
fourth sentence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Mapping, NamedTuple, Sequence

import numpy as np

from rag_core.doc_ids import escape_controls
from rag_core.ingest.sentence_split import split_sentences
from rag_core.ingest.sentence_split import SENTENCE_END as _END
from rag_core.records import Document, Hit
from rag_core.retrieve.fusion.rrf import reciprocal_rank_fusion

if TYPE_CHECKING:
    from rag_core.retrieve.bm25 import BM25Index
    from rag_core.retrieve.pipeline import Pipeline

# (question, sentences) -> one score per sentence, higher is better
SentenceScorer = Callable[[str, Sequence[str]], np.ndarray]

MAX_SENTENCES = 3
MAX_WORDS = 60
MAX_ANSWER_WORDS = 72  # the sentences and their citations together: no extractive answer is longer (issue 44)
TITLE_WORDS = 10  # a sentence on a line of its own shorter than this is a title (a heading, an FAQ's question)
TITLE_CARRY = 2  # sentences after a title that score at least as the title does (an FAQ answer: two, often)
RANK_PENALTY = 0.01  # a run's score less this for each rank its passage is below the first: the retriever saw the whole passage
MIN_SHARE_OF_BEST = 0.6  # a run scoring under this share of the best run's score is not shown
MAX_TITLES = 3  # titles a run may hold besides its sentences (they count for words, not sentences)
MIN_WORDS = 4  # a run shorter than this (a lone heading, a page number) is not shown
LONG_WORDS = 80  # a sentence longer than this (a flattened table) is cut at its line breaks
EMBEDDED_SENTENCES = 48  # pipeline_scorer embeds the sentences BM25's weights rank best, this many
EMBED_WORDS = 40  # and each only up to this many words (a query's time: benchmarks/extractive_answers.py)
# pipeline_scorer: BM25's term weights against the embedding. With RANK_PENALTY, no pair of a 4 x 4 grid does
# better on the sample set, and one chosen leaving a question out does worse (benchmarks/extractive_answers.py --grid)
LEXICAL_WEIGHT = 0.15
WIDEN_CHARS = 400  # how far a passage is widened to the sentence it cuts, at most


@dataclass(frozen=True)
class Excerpt:
    """One to a few consecutive sentences shown in an answer, where they are, and their score."""
    text: str  # the sentences, white space collapsed
    sentences: int  # titles (headings, questions) not counted
    doc_id: str
    page_start: int  # 1-based, the first sentence's page (without the document: its passage's first)
    page_end: int  # the last sentence's page (without the document: its passage's last)
    char_start: int  # in the document's text
    passage_rank: int  # 1-based rank of the (first) passage it came from
    score: float

    def citation(self) -> str:
        pages = f"page {self.page_start}" if self.page_start == self.page_end else \
            f"pages {self.page_start}-{self.page_end}"
        return f"[Source: {escape_controls(self.doc_id)}, {pages}]"


@dataclass(frozen=True)
class _Sentence:
    text: str
    start: int
    pages: tuple[int, int]  # its page, or without the document its passage's first and last
    title: bool  # a question, or a short line of its own (a heading, an FAQ's title): shown with what follows


def select_sentences(question: str, hits: Sequence[Hit], scorer: SentenceScorer,
                     documents: Mapping[str, Document] | None = None, max_sentences: int = MAX_SENTENCES,
                     max_words: int = MAX_WORDS, max_answer_words: int = MAX_ANSWER_WORDS,
                     rank_penalty: float = RANK_PENALTY) -> list[Excerpt]:
    """The runs of consecutive sentences of `hits` that best match `question`, best first, with no
    more than `max_sentences` sentences and `max_words` words in all (a first sentence longer than
    that is cut at `max_words`), and no more than `max_answer_words` counting each run's citation
    (``Excerpt.citation``: the answer shows one after each run; a run that would pass it is left out,
    a first one cut). `scorer` scores sentences; a run scores the mean of its sentences, and
    does not end with a title (a question or a short line of its own: an FAQ's question, a heading), and
    a sentence right after a title scores at least as the title does (``_run_score``).
    `documents` (doc id -> ``Document``) widen the passages to whole sentences and place each run on
    its pages; without them a run cites its passage's first page."""
    regions = _regions(hits, documents or {})
    texts = list(dict.fromkeys(sentence.text for region in regions for sentence in region[3]))
    if not texts:
        return []
    by_text = dict(zip(texts, np.asarray(scorer(question, texts), dtype=float)))
    runs = [(region, first, length,
             _run_score(region[3][first:first + length], by_text) - rank_penalty * (region[1] - 1))
            for region in regions for first in range(len(region[3]))
            for length in range(1, max_sentences + MAX_TITLES + 1)
            if first + length <= len(region[3]) and _fits(region[3][first:first + length], max_sentences, max_words)]
    chosen: list[Excerpt] = []
    used: set[tuple[str, int]] = set()  # (doc id, sentence start) already shown
    sentences_left, words_left, answer_words_left = max_sentences, max_words, max_answer_words
    for (doc_id, rank, _, sentences), first, length, score in sorted(
            runs, key=lambda run: (-run[3], run[0][1], run[0][2] + run[1], -run[2])):
        if chosen and score < MIN_SHARE_OF_BEST * chosen[0].score:
            break  # what is left matches far worse than the best: not shown
        part = sentences[first:first + length]
        words, counted = sum(len(s.text.split()) for s in part), sum(not s.title for s in part)
        if counted > sentences_left or (chosen and words > words_left) or any((doc_id, s.start) in used for s in part):
            continue
        excerpt = Excerpt(" ".join(s.text for s in part), counted, doc_id, part[0].pages[0], part[-1].pages[1],
                          part[0].start, rank, score)
        cited = len(excerpt.citation().split())
        if chosen and words + cited > answer_words_left:
            continue
        if words > max_words or words + cited > answer_words_left:  # the first run, too long: shown cut
            shown = max(1, min(max_words, answer_words_left - cited - 1))  # and "..."
            excerpt, words = replace(excerpt, text=" ".join(excerpt.text.split()[:shown]) + " ..."), shown + 1
        chosen.append(excerpt)
        used.update((doc_id, s.start) for s in part)
        sentences_left, words_left = sentences_left - counted, words_left - words
        answer_words_left -= words + cited
        if sentences_left <= 0 or min(words_left, answer_words_left) < MIN_WORDS:
            break
    return chosen


def _fits(run: Sequence[_Sentence], max_sentences: int, max_words: int) -> bool:
    words = sum(len(sentence.text.split()) for sentence in run)
    return (words >= MIN_WORDS and (len(run) == 1 or words <= max_words) and not run[-1].title
            and sum(not sentence.title for sentence in run) <= max_sentences)


def _run_score(run: Sequence[_Sentence], score: Mapping[str, float]) -> float:
    """The mean over the run's sentences other than titles; the ``TITLE_CARRY`` sentences after titles
    score at least as they do: the answer under a heading that names what was asked scores as the
    heading does. A title after a sentence starts afresh; titles in a row count their best."""
    scores, title, carried = [], None, 0
    for sentence in run:
        if sentence.title:
            title = score[sentence.text] if title is None or carried else max(title, score[sentence.text])
            carried = 0
        else:
            scores.append(score[sentence.text] if title is None else max(score[sentence.text], title))
            carried += 1
            if carried >= TITLE_CARRY:
                title, carried = None, 0
    return float(np.mean(scores))


def _regions(hits: Sequence[Hit], documents: Mapping[str, Document]) -> list[tuple[str, int, int, list[_Sentence]]]:
    """(doc id, best passage rank, start, sentences) of the text `hits` cover: with its document, each
    passage widened to whole sentences and merged with the passages of that document it overlaps."""
    spans: dict[str, list[list[int]]] = {}  # doc id -> [start, end, rank]
    loose = []
    for rank, hit in enumerate(hits, start=1):
        chunk = hit.chunk
        document = documents.get(chunk.doc_id)
        if document is None or document.text[chunk.char_start:chunk.char_end] != chunk.text:
            pages = (chunk.page_start, chunk.page_end)
            loose.append((chunk.doc_id, rank, chunk.char_start,
                          _sentences(chunk.text, chunk.char_start, lambda _: pages)))
            continue
        spans.setdefault(chunk.doc_id, []).append([*_widened(document.text, chunk.char_start, chunk.char_end), rank])
    regions = []
    for doc_id, found in spans.items():
        document = documents[doc_id]
        merged: list[list[int]] = []
        for start, end, rank in sorted(found):
            if merged and start <= merged[-1][1]:
                merged[-1][1], merged[-1][2] = max(merged[-1][1], end), min(merged[-1][2], rank)
            else:
                merged.append([start, end, rank])
        for start, end, rank in merged:
            page_at = document.page_at
            regions.append((doc_id, rank, start, _sentences(document.text[start:end], start,
                                                            lambda at: (page_at(at), page_at(at)))))
    return sorted(regions + loose, key=lambda region: region[1])


def _sentences(text: str, offset: int, page_at: Callable[[int], tuple[int, int]]) -> list[_Sentence]:
    """The sentences of `text` (at `offset` in its document). A title is a question, or a short sentence
    that starts a line (or follows a question on its line), followed by another sentence."""
    spans = [piece for span in split_sentences(text) for piece in _lines_of(text, *span)]
    found: list[_Sentence] = []
    for number, (start, end) in enumerate(spans, start=1):
        sentence = " ".join(text[start:end].split())
        line_start = text.rfind("\n", 0, start) + 1
        own_line = not text[line_start:start].strip() or (
            bool(found) and found[-1].text.endswith("?") and found[-1].start - offset >= line_start)
        title = number < len(spans) and (sentence.endswith("?") or (own_line and len(sentence.split()) < TITLE_WORDS))
        found.append(_Sentence(sentence, offset + start, page_at(offset + start), title))
    return found


def _lines_of(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """[start, end), or when longer than LONG_WORDS words (a table, a list without full stops) its lines
    in pieces of at most LONG_WORDS words: no one shows or embeds a unit that long whole."""
    if len(text[start:end].split()) <= LONG_WORDS:
        return [(start, end)]
    pieces, begin, words, at = [], start, 0, start
    while at < end:
        stop = text.find("\n", at, end)
        stop = end if stop < 0 else stop + 1
        line_words = len(text[at:stop].split())
        if words and words + line_words > LONG_WORDS:
            pieces.append((begin, at))
            begin, words = at, 0
        words += line_words
        at = stop
    pieces.append((begin, end))
    return [(begin, stop) for begin, stop in pieces if text[begin:stop].strip()]


def _widened(text: str, start: int, end: int) -> tuple[int, int]:
    """[start, end) widened to the sentence boundaries just outside it (at most WIDEN_CHARS each way;
    not at all where none is that near)."""
    lookahead = 2  # a boundary's pattern looks at most two characters past the full stop
    before = [match for match in _END.finditer(text, max(0, start - WIDEN_CHARS), min(len(text), start + lookahead))
              if match.start() < start]
    new_start = before[-1].end() if before and start > 0 else start
    after = _END.search(text, max(0, end - 1), min(len(text), end + WIDEN_CHARS)) if end < len(text) else None
    return new_start, (after.end() if after else end)


# --- scorers ------------------------------------------------------------------------------------
def term_weight_scorer(tokenize: Callable[[str], list[str]],
                       weight: Callable[[str], float] = lambda token: 1.0) -> SentenceScorer:
    """The share of the question's term weight each sentence holds (distinct terms; 0 for none). Sums are
    ``math.fsum``'s, exact whatever the order of a set (which changes with the process's hash seed), so
    that sentences holding the same terms tie exactly, in every run."""
    def score(question: str, sentences: Sequence[str]) -> np.ndarray:
        terms = {token: weight(token) for token in set(tokenize(question))}
        total = math.fsum(terms.values())
        if total <= 0:
            return np.zeros(len(sentences))
        return np.array([math.fsum(terms[token] for token in set(tokenize(text)) if token in terms) / total
                         for text in sentences])
    return score


def bm25_idf(index: "BM25Index") -> Callable[[str], float]:
    """BM25's idf of a token over the index's passages (Lucene form); a token in no passage gets the
    idf of a token in none (the largest)."""
    n_docs = len(index)

    def idf(token: str) -> float:
        scores = index._backend.term_scores(token)  # noqa: SLF001 - its per-passage scores give the document frequency
        df = int(np.count_nonzero(scores)) if scores is not None else 0
        return math.log(1 + (n_docs - df + 0.5) / (df + 0.5))
    return idf


def embedding_scorer(encode_question: Callable[[str], np.ndarray],
                     encode_sentences: Callable[[list[str]], np.ndarray]) -> SentenceScorer:
    """Cosine of the question's and each sentence's embedding (both encoders return unit vectors)."""
    def score(question: str, sentences: Sequence[str]) -> np.ndarray:
        if not sentences:
            return np.zeros(0)
        return np.asarray(encode_sentences(list(sentences)), dtype=float) @ np.asarray(encode_question(question))
    return score


def combined_scorer(*weighted: tuple[SentenceScorer, float]) -> SentenceScorer:
    """The weighted mean of (scorer, weight) pairs' scores, each scaled to [0, 1] over the sentences
    scored (min-max), so that no scale dominates."""
    def score(question: str, sentences: Sequence[str]) -> np.ndarray:
        total = np.zeros(len(sentences))
        for scorer, weight in weighted:
            total += weight * _scaled(np.asarray(scorer(question, sentences), dtype=float))
        return total / max(1e-12, sum(weight for _, weight in weighted))
    return score


def rank_fused_scorer(*scorers: SentenceScorer, k: int = 60) -> SentenceScorer:
    """Reciprocal rank fusion of the scorers' rankings of the sentences, ``sum_i 1 / (k + rank_i)`` (rank 1
    the best; of equal scores the earlier sentence ranks first), times ``(k + 1) / len(scorers)``: a
    sentence first in every ranking scores 1, so that ``RANK_PENALTY`` and ``MIN_SHARE_OF_BEST`` keep
    their meaning. Ranks only: no scorer's scale matters."""
    def score(question: str, sentences: Sequence[str]) -> np.ndarray:
        ranked = [[str(i) for i in np.argsort(-np.asarray(scorer(question, sentences), dtype=float), kind="stable")]
                  for scorer in scorers]
        fused = {hit.id: hit.score for hit in reciprocal_rank_fusion(ranked, k=k)}
        return np.array([fused[str(i)] for i in range(len(sentences))]) * (k + 1) / max(1, len(scorers))
    return score


def shortlisted(scorer: SentenceScorer, first: SentenceScorer, size: int) -> SentenceScorer:
    """`scorer` on the `size` sentences `first` scores best (ties: the earlier), the lowest of those
    scores on the rest: for an expensive `scorer` (an embedding per sentence)."""
    def score(question: str, sentences: Sequence[str]) -> np.ndarray:
        if len(sentences) <= size:
            return np.asarray(scorer(question, sentences), dtype=float)
        best = np.sort(np.argsort(-np.asarray(first(question, sentences), dtype=float), kind="stable")[:size])
        values = np.asarray(scorer(question, [sentences[i] for i in best]), dtype=float)
        result = np.full(len(sentences), values.min())
        result[best] = values
        return result
    return score


def _scaled(values: np.ndarray) -> np.ndarray:
    spread = float(values.max() - values.min()) if len(values) else 0.0
    return (values - values.min()) / spread if spread > 0 else np.zeros(len(values))


def pipeline_scorer(pipeline: "Pipeline", lexical_weight: float = LEXICAL_WEIGHT) -> SentenceScorer:
    """From what `pipeline` loaded for its query (``pipeline_scorers``): BM25's term weights alone, or
    with the embedding their weighted mean (`lexical_weight` for BM25's share, the rest for the embedding's)."""
    lexical, dense = pipeline_scorers(pipeline)
    return lexical if dense is None else combined_scorer((lexical, lexical_weight), (dense, 1 - lexical_weight))


class PipelineScorers(NamedTuple):
    """The scorers a query's loaded parts give (``pipeline_scorers``)."""
    lexical: SentenceScorer  # BM25's term weights (its idf), or the tokenizer's terms alike
    dense: SentenceScorer | None  # the embedding's cosine; None when the query did not embed


def pipeline_scorers(pipeline: "Pipeline", embedded: int | None = EMBEDDED_SENTENCES) -> PipelineScorers:
    """From what `pipeline` loaded for its query: BM25's idf when it searched with BM25 (else its
    tokenizer, every term alike); the embedding model when it searched with it (else None), on the
    `embedded` sentences the lexical scorer ranks best (None: every sentence)."""
    from rag_core.retrieve.retrievers import uses_embedder
    from rag_core.retrieve.tokenizer import get_tokenizer

    index = next((retriever.index for retriever in pipeline.first_stage.retrievers
                  if getattr(retriever, "index", None) is not None and hasattr(retriever.index, "tokenize")), None)
    lexical = (term_weight_scorer(index.tokenize, bm25_idf(index)) if index is not None
               else term_weight_scorer(get_tokenizer(pipeline.config.tokenizer)))
    if not uses_embedder(pipeline.config):
        return PipelineScorers(lexical, None)
    embedder: Any = pipeline.index.embedder
    encoder = embedder.query_encoder  # what embedded the question: loaded already, no new model
    heads = lambda texts: [" ".join(text.split()[:EMBED_WORDS]) for text in texts]  # noqa: E731
    dense = embedding_scorer(embedder.embed_query,
                             lambda texts: encoder.encode(heads(texts), "document", embedder.batch_size))
    return PipelineScorers(lexical, dense if embedded is None else shortlisted(dense, lexical, embedded))
