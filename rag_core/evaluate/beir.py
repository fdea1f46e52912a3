"""Read a BEIR dataset as documents and golden queries, so it is evaluated like any corpus.

A BEIR directory holds (Thakur et al., 2021, "BEIR: A Heterogeneous Benchmark for Zero-shot
Evaluation of Information Retrieval Models")::

    corpus.jsonl        {"_id": "d1", "title": "...", "text": "..."}
    queries.jsonl       {"_id": "q1", "text": "..."}
    qrels/<split>.tsv   query-id <TAB> corpus-id <TAB> score   (header line first)

Each corpus entry becomes a one-page ``Document`` (title, blank line, text). Qrels with a score > 0
become document-level evidence (no page, no text); graded scores are not kept, relevance is binary.
Only queries with at least one relevant document are returned.

Malformed lines and duplicate ids are a ``GoldenSetError`` naming the file and line; a missing file
is a ``FileNotFoundError`` naming the path. Qrels that point at a query or document the dataset
does not hold (published datasets have a few) are skipped with one warning, since the data
cannot be fixed by the user. Downloading datasets is left out.
"""

from __future__ import annotations

import hashlib
import json
import random
import warnings
from pathlib import Path

from rag_core.evaluate.golden import Evidence, GoldenQuery, GoldenSetError
from rag_core.jsonl import read_jsonl
from rag_core.records import Document


def load_beir(directory: str | Path, split: str = "test") -> tuple[list[Document], list[GoldenQuery]]:
    """(documents in corpus order, queries in queries.jsonl order that have relevant documents)."""
    directory = Path(directory)
    corpus_path = _require(directory / "corpus.jsonl", "corpus")
    queries_path = _require(directory / "queries.jsonl", "queries")
    qrels_path = directory / "qrels" / f"{split}.tsv"
    if not qrels_path.is_file():
        splits = sorted(path.stem for path in (directory / "qrels").glob("*.tsv"))
        raise FileNotFoundError(
            f"BEIR qrels for split {split!r} not found: {qrels_path}"
            f" (available splits: {', '.join(splits) if splits else 'none'})"
        )

    documents = _read_corpus(corpus_path)
    query_texts: dict[str, str] = {}  # query_id -> text
    for _, where, record in read_jsonl(queries_path, GoldenSetError):
        query_id = _required_id(record, where)
        if query_id in query_texts:
            raise GoldenSetError(f"{where}: duplicate query id {query_id!r}")
        query_texts[query_id] = str(record.get("text") or "")

    relevant = _read_qrels(qrels_path)  # query_id -> relevant corpus ids, in file order
    doc_ids = {document.doc_id for document in documents}
    missing_queries = [qid for qid in relevant if qid not in query_texts]
    missing_docs = sorted({doc for docs in relevant.values() for doc in docs if doc not in doc_ids})
    if missing_queries or missing_docs:
        warnings.warn(
            f"{qrels_path}: skipped qrels for {len(missing_queries)} queries not in queries.jsonl and "
            f"{len(missing_docs)} documents not in corpus.jsonl (e.g. {(missing_queries + missing_docs)[:3]})",
            UserWarning,
            stacklevel=2,
        )

    queries = []
    for query_id, text in query_texts.items():
        evidence = tuple(Evidence(doc_id) for doc_id in relevant.get(query_id, ()) if doc_id in doc_ids)
        if evidence:
            queries.append(GoldenQuery(query_id, text, None, evidence))
    return documents, queries


def load_beir_corpus(directory: str | Path) -> list[Document]:
    """The documents of a BEIR folder's ``corpus.jsonl`` alone: queries and qrels are never opened
    (self-supervised fine-tuning may read a corpus, never its questions or judgements)."""
    return _read_corpus(_require(Path(directory) / "corpus.jsonl", "corpus"))


def _read_corpus(path: Path) -> list[Document]:
    documents: list[Document] = []
    seen: set[str] = set()
    for _, where, record in read_jsonl(path, GoldenSetError):
        doc_id = _required_id(record, where)
        if doc_id in seen:
            raise GoldenSetError(f"{where}: duplicate corpus id {doc_id!r}")
        seen.add(doc_id)
        title, body = str(record.get("title") or "").strip(), str(record.get("text") or "")
        text = f"{title}\n\n{body}" if title else body
        documents.append(Document.from_pages(doc_id, [text], hashlib.sha256(text.encode("utf-8")).hexdigest()))
    return documents


def _read_qrels(path: Path) -> dict[str, list[str]]:
    """query_id -> corpus ids with score > 0, in file order, each once."""
    relevant: dict[str, dict[str, None]] = {}
    with path.open(encoding="utf-8") as lines:
        for line_number, line in enumerate(lines, start=1):
            fields = line.rstrip("\r\n").split("\t")
            if not line.strip() or (line_number == 1 and fields[0].strip() == "query-id"):
                continue
            if len(fields) != 3:
                raise GoldenSetError(f"{path}:{line_number}: expected query-id<TAB>corpus-id<TAB>score")
            query_id, doc_id, score = (field.strip() for field in fields)
            try:
                is_relevant = float(score) > 0
            except ValueError:
                raise GoldenSetError(f"{path}:{line_number}: score {score!r} is not a number") from None
            if is_relevant:
                relevant.setdefault(query_id, {})[doc_id] = None
    return {query_id: list(doc_ids) for query_id, doc_ids in relevant.items()}


def _required_id(record: dict, where: str) -> str:
    value = record.get("_id")
    if value is None or str(value) == "":
        raise GoldenSetError(f"{where}: missing '_id'")
    return str(value)


def _require(path: Path, what: str) -> Path:
    if not path.is_file():
        raise FileNotFoundError(f"BEIR {what} file not found: {path}")
    return path


def write_synthetic_beir(folder: Path, documents: int = 5000, queries: int = 50, seed: int = 0) -> None:
    """A synthetic BEIR folder for tests and cost benchmarks: short abstracts (common words plus a few
    words rare to each), and queries made of one document's rare words, judged relevant to it."""
    rng = random.Random(seed)
    syllables = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "shi", "pe", "gra", "dul", "xen", "bor", "fi", "qua"]
    vocabulary = list(dict.fromkeys("".join(rng.choices(syllables, k=rng.randint(2, 4))) for _ in range(20000)))
    common, rare = vocabulary[:2000], vocabulary[2000:]
    (folder / "qrels").mkdir(parents=True)
    rare_words = {}
    with open(folder / "corpus.jsonl", "w") as corpus:
        for number in range(documents):
            own = rng.sample(rare, 5)
            rare_words[f"d{number}"] = own
            words = rng.choices(common, k=rng.randint(60, 120)) + own
            rng.shuffle(words)
            corpus.write(json.dumps({"_id": f"d{number}", "title": " ".join(rng.choices(common, k=4)),
                                     "text": " ".join(words)}) + "\n")
    judged = rng.sample(sorted(rare_words), queries)
    with open(folder / "queries.jsonl", "w") as out:
        for number, doc_id in enumerate(judged):
            out.write(json.dumps({"_id": f"q{number}", "text": " ".join(rare_words[doc_id][:3])}) + "\n")
    with open(folder / "qrels" / "test.tsv", "w") as out:
        out.write("query-id\tcorpus-id\tscore\n")
        out.writelines(f"q{number}\t{doc_id}\t1\n" for number, doc_id in enumerate(judged))
