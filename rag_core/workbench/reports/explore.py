"""Looking at a corpus and at one query, for ``notebooks/01-explore.ipynb``: what the documents and
pages hold, how long the chunks are in words and in the embedding model's tokens (and how many it
truncates), and how one query is ranked at every stage, with every score side by side; with
``route_docs``, which documents routing chose (``routing_table``); with ``chunk_context``, the text a
chunk is indexed with (``indexed_text``).

``expansion_table`` and ``child_table`` show what query expansion and parent-child retrieval did.
Its plots are in ``rag_core.workbench.reports.plots``.
Everything here reads; the pipeline builds its indexes in the store as usual. Evaluating many
queries is ``rag_core.evaluate.evaluator``; comparing runs is ``rag_core.workbench.reports.compare``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from rag_core.ingest.corpus import Corpus
from rag_core.paths import PROJECT_ROOT, SAMPLE_DOCUMENTS_DIR, default_store_dir
from rag_core.records import Chunk
from rag_core.retrieve.pipeline import Pipeline, Retrieval

if TYPE_CHECKING:
    import pandas as pd

    from rag_core.config import RagConfig


def load_corpus(input_dir: str | Path | None = None, config: "RagConfig | None" = None,
                store: str | Path | None = None) -> Corpus:
    """Read `input_dir` (None: the sample corpus); files that cannot be read are listed and left out.
    With `config`, as its settings extract (tables, cached in the store) and describe it (metadata)."""
    from rag_core.ingest.extraction import prepare_corpus
    from rag_core.ingest.files import read_documents

    cache = store_folder(store) / "extracted"
    result = read_documents(input_dir or SAMPLE_DOCUMENTS_DIR, cache_dir=cache)
    for skipped in result.skipped:
        print(f"skipped {skipped.path}: {skipped.reason}")
    corpus = Corpus.of(result.documents)
    return prepare_corpus(corpus, config.extract_tables, config.metadata_pattern, cache) if config else corpus


def store_folder(store: str | Path | None = None) -> Path:
    """`store`, or the project's store (``$RAG_STORE`` or ``<project>/.rag_store``)."""
    return Path(store) if store else PROJECT_ROOT / default_store_dir()


def corpus_overview(corpus: Corpus) -> "pd.DataFrame":
    """One row per document: title, pages, words, characters, headings found, and its metadata."""
    import pandas as pd

    return pd.DataFrame([{"document": doc.doc_id, "title": doc.title, "pages": doc.n_pages, "words": len(doc.text.split()),
                          "characters": len(doc.text), "headings": len(doc.headings), **doc.meta}
                         for doc in corpus.documents])


def routing_table(retrieval: Retrieval) -> "pd.DataFrame":
    """The documents routing chose (``route_docs``), best first, with their fused score."""
    import pandas as pd

    return pd.DataFrame([{"rank": rank, "document": item.id, "score": item.score}
                         for rank, item in enumerate(retrieval.routed, start=1)], columns=["rank", "document", "score"])


def indexed_text(pipeline: Pipeline, chunk: Chunk, chars: int = 300) -> str:
    """The start of the text `chunk` is embedded and BM25-indexed with (``chunk_context`` prefix first)."""
    from rag_core.retrieve.context import context_prefix

    document = pipeline.corpus.by_id[chunk.doc_id]
    return (context_prefix(document, chunk, pipeline.config.chunk_context) + chunk.text)[:chars]


def page_text(corpus: Corpus, document: str | None = None, page: int = 1) -> str:
    """The extracted text of one page (1-based) of `document` (None: the first document)."""
    doc = corpus.by_id[document] if document else corpus.documents[0]
    if not 1 <= page <= doc.n_pages:
        raise ValueError(f"{doc.doc_id} has pages 1 to {doc.n_pages}, not {page}")
    return doc.page_text(page)


def chunk_table(chunks: Sequence[Chunk]) -> "pd.DataFrame":
    import pandas as pd

    return pd.DataFrame([{"chunk": chunk.id, "document": chunk.doc_id, "page_start": chunk.page_start,
                          "page_end": chunk.page_end, "words": len(chunk.text.split()), "characters": len(chunk.text)}
                         for chunk in chunks])


def token_counts(pipeline: Pipeline) -> list[int]:
    """Tokens per chunk (special tokens included) with the embedding model's tokenizer, untruncated
    (``Embedder.token_counts``: the store's export, without torch, when it has one)."""
    return pipeline.index.embedder.token_counts([chunk.text for chunk in pipeline.index.chunks])


def stage_table(retrieval: Retrieval, text_chars: int = 80) -> "pd.DataFrame":
    """Every chunk any stage returned, with its rank and score at each stage (NaN: not in that list)
    and its final rank; final results first, then by fused rank."""
    import pandas as pd

    final = {hit.chunk.id: rank for rank, hit in enumerate(retrieval.hits, start=1)}
    hits = {hit.chunk.id: hit for stage in retrieval.stages for hit in retrieval.stages[stage]}
    rows = []
    for chunk_id, hit in hits.items():
        chunk = hit.chunk
        pages = f"{chunk.page_start}" if chunk.page_start == chunk.page_end else f"{chunk.page_start}-{chunk.page_end}"
        row: dict[str, Any] = {"chunk": chunk_id[:8], "source": chunk.doc_id, "pages": pages}
        for stage in retrieval.stages:
            score = hit.stages.get(stage)
            row[f"{stage} rank"] = score.rank if score else None
            row[f"{stage} score"] = score.score if score else None
        row["final rank"] = final.get(chunk_id)
        row["text"] = " ".join(chunk.text.split())[:text_chars]
        rows.append(row)
    table = pd.DataFrame(rows)
    for column in [name for name in table if name.endswith(" rank")]:
        table[column] = table[column].astype("Int64")  # ranks stay integers next to missing values
    order = [column for column in ("final rank", "fused rank") if column in table]
    return table.sort_values(order, na_position="last").reset_index(drop=True)


def expansion_table(retrieval: Retrieval) -> "pd.DataFrame":
    """What query expansion added to the query: RM3's weighted terms, multi_query's rephrasings or
    HyDE's passage, one row each (empty without expansion)."""
    import pandas as pd

    expansion = retrieval.expansion
    if expansion.get("method") == "rm3":
        rows = [{"rm3 term": term, "weight": weight} for term, weight in expansion.get("terms", {}).items()]
    elif expansion.get("method") == "multi_query":
        rows = [{"rephrasing": text} for text in [retrieval.query, *expansion["queries"]]]
    elif expansion.get("method") == "hyde":
        rows = [{"hypothetical passage": expansion.get("passage")}]
    else:
        rows = []
    return pd.DataFrame(rows)


def child_table(retrieval: Retrieval, text_chars: int = 60) -> "pd.DataFrame":
    """Parent-child retrieval: the ranked child chunks and the parent each one belongs to (empty
    when ``child_size`` is 0). Parents are the passages in ``stage_table``."""
    import pandas as pd

    parent_rank = {}
    for rank, hit in enumerate(retrieval.ranking, start=1):
        parent_rank.setdefault((hit.chunk.doc_id, hit.chunk.char_start, hit.chunk.char_end), rank)
    rows = []
    for rank, child in enumerate(retrieval.child_ranking, start=1):
        parent = next((r for (doc, start, end), r in parent_rank.items()
                       if doc == child.doc_id and start <= child.char_start and child.char_end <= end), None)
        rows.append({"child rank": rank, "source": child.doc_id, "page": child.page_start, "parent rank": parent,
                     "text": " ".join(child.text.split())[:text_chars]})
    return pd.DataFrame(rows)


def summary(corpus: Corpus, pipeline: Pipeline, counts: Sequence[int], retrieval: Retrieval) -> dict[str, Any]:
    """What the exploration found, as plain values (recorded by the notebook's last cell)."""
    max_len = pipeline.index.embedder.max_seq_length
    return {
        "documents": len(corpus), "pages": sum(doc.n_pages for doc in corpus.documents),
        "chunks": len(pipeline.index.chunks), "max_seq_length": max_len,
        "truncated": sum(count > max_len for count in counts), "query": retrieval.query,
        "stages": list(retrieval.stages),
        "final": [{"chunk": hit.chunk.id, "source": hit.chunk.doc_id, "page": hit.chunk.page_start,
                   "scores": {stage: score.score for stage, score in hit.stages.items()}} for hit in retrieval.hits],
        "latency_ms": retrieval.latency_ms,
        "routed": [item.id for item in retrieval.routed], "filter": retrieval.filter,
        "expansion": retrieval.expansion,
        "children_ranked": len(retrieval.child_ranking),
    }


def record(result: dict[str, Any]) -> None:
    """Display `result` as a JSON output that papermill keeps in the executed notebook."""
    import json

    from IPython.display import display

    display({"application/json": json.loads(json.dumps(result, default=str)),
             "text/plain": json.dumps(result, indent=1, default=str)[:2000]}, raw=True)
