"""A retriever that is not built in: TF-IDF cosine similarity with scikit-learn, as a plugin.

Nothing in rag_core names this file. It registers itself when imported, which happens when a config
or sweep file lists it (``plugins: [tfidf_retriever.py]``, relative to that file), or with
``rag-pipeline ... --plugins examples/plugins/tfidf_retriever.py``. Then ``mode: tfidf`` (alone, or
fused with others: ``mode: bm25,tfidf``, ``mode: dense:0.5,bm25:0.3,tfidf:0.2``) runs it in ``query``,
``eval``, sweeps and notebooks, and its two settings are flags (``--tfidf-ngram-max 2``), sweep axes
and MLflow params like any built-in setting.

The index (the fitted vectorizer and the chunk-term matrix) is saved once per chunking and settings
under the retriever's cache key, in the chunking's folder of the store.
Left out: anything scikit-learn's TfidfVectorizer does not do (it lowercases and keeps word tokens).
"""

from __future__ import annotations

import pickle
from typing import Any, Sequence

import numpy as np

from rag_core.components import Setting
from rag_core.records import ScoredId
from rag_core.retrieve.retrievers import RETRIEVERS, ChunkSet, Query, Ranked, Retriever


@RETRIEVERS.register(
    "tfidf",
    help="TF-IDF cosine similarity (scikit-learn), an example plugin",
    settings=[
        # stage: what a change invalidates (its index and what follows; undeclared: the chunks onwards)
        Setting("tfidf_ngram_max", int, 1, "TF-IDF: longest word n-gram indexed", minimum=1, maximum=3, stage="index"),
        Setting("tfidf_sublinear_tf", bool, True, "TF-IDF: 1 + log(tf) instead of raw term frequency", stage="index"),
    ],
)
class TfidfRetriever(Retriever):
    def build(self, chunks: ChunkSet) -> None:
        from sklearn.feature_extraction.text import TfidfVectorizer

        path = chunks.folder / f"{self.cache_key(chunks)}.pkl"  # the key covers its settings and chunk_context
        if path.exists():  # a pickle this plugin wrote itself
            self.vectorizer, self.matrix = pickle.loads(path.read_bytes())
        else:
            self.vectorizer = TfidfVectorizer(ngram_range=(1, self.config.tfidf_ngram_max),
                                              sublinear_tf=self.config.tfidf_sublinear_tf)
            self.matrix = self.vectorizer.fit_transform(chunks.texts)  # rows are L2-normalised
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary = path.with_suffix(".tmp")
            temporary.write_bytes(pickle.dumps((self.vectorizer, self.matrix)))
            temporary.replace(path)
        self.ids = chunks.ids
        self.doc_ids = np.array([chunks.doc_of[chunk_id] for chunk_id in self.ids], dtype=object)

    def search(self, query: Query, depth: int, allowed_doc_ids: Sequence[str] | None = None) -> Ranked:
        scores = (self.matrix @ self.vectorizer.transform([query.text]).T).toarray().ravel()  # cosine similarity
        if allowed_doc_ids is not None:  # the filter applies before ranking
            scores = np.where(np.isin(self.doc_ids, list(allowed_doc_ids)), scores, 0.0)
        positive = np.flatnonzero(scores > 0)
        best = positive[np.lexsort((positive, -scores[positive]))][:depth]  # ties: index order
        return Ranked([ScoredId(self.ids[i], float(scores[i])) for i in best])

    def models_used(self) -> dict[str, Any]:
        return {}
