"""Self-supervised fine-tuning: adapt the embedder or a re-ranker to a corpus with no labelled questions,
on pseudo-queries made from its documents (``rag-pipeline finetune embedder|reranker --self-supervised``).

1. Documents: a folder read as ingest reads it (``read_corpus``), or a BEIR folder's ``corpus.jsonl``
   alone (``load_beir_corpus``: its queries and qrels are never opened).
2. Chunks with the configured chunking and the first stage hard negatives are mined with
   (``data.mining_pipeline``: BM25 by default), then pseudo-queries (``pseudo_queries``).
3. Candidates of each pseudo-query: its positive, up to ``same_document`` other chunks of its document,
   then the first stage's top ``depth`` for it; the chunks the positive was cut from are never candidates.
4. Validation: the pseudo-queries of ``validation_share`` of the documents (a seeded hash of their ids,
   ``split_queries``), so no document gives pairs to both sides; at most ``max_validation`` of them
   (a seeded sample), since each validation embeds or scores every candidate.
5. Training, checkpoints, early stopping on the validation nDCG@10, ``finetune.json`` and the MLflow
   run are the golden-set fine-tuning's (``run.train_model``, ``run.record_and_log``); the model
   folder records ``golden_queries_used: false``, the recipe and the pairs by kind. A saved embedder
   searches at its base model's ``max_seq_length`` whatever ``--max-length`` training used.

Shapes: positives are passages of their own (``<pseudo-query id>/positive`` -> text) beside the
chunks (chunk id -> text) in ``TrainingSet.passages``.
Left out: held-out figures (no labelled queries here: score the model with ``rag-pipeline eval
--embed-model DIR`` on questions, or ``benchmarks/self_supervised.py``), a re-ranker quality claim.
"""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rag_core.config import ConfigError, RagConfig
from rag_core.errors import BadInput
from rag_core.finetune.base_models import base_embedder, base_reranker
from rag_core.finetune.data import TrainingQuery, TrainingSet, chunk_passages, mining_pipeline
from rag_core.finetune.fingerprints import write_training_queries
from rag_core.finetune.output import Placed, check_output, staged_output
from rag_core.finetune.pseudo_queries import PseudoQuery, PseudoQueryRecipe, build_pseudo_queries, counts_by_kind
from rag_core.finetune.run import FinetuneOutcome, record_and_log, train_model
from rag_core.finetune.settings import TrainSettings
from rag_core.ingest.corpus import Corpus
from rag_core.progress import progress
from rag_core.workbench.statistics.holdout import split_queries

POSITIVE_SUFFIX = "/positive"


@dataclass(frozen=True)
class SelfSupervisedJob:
    kind: str  # reranker | embedder
    corpus: Corpus
    source: str  # what the documents are, for the record: "scifact-train corpus.jsonl (BEIR)"
    out_dir: Path
    settings: TrainSettings
    recipe: PseudoQueryRecipe = PseudoQueryRecipe()
    negatives_from: str = "bm25"
    negatives_depth: int = 30
    same_document: int = 3  # other chunks of the pseudo-query's document among its candidates
    validation_share: float = 0.1  # of the documents
    max_validation: int = 100  # validation pseudo-queries at most
    base_model: str | None = None


def read_corpus(input_dir: str | Path | None, beir: str | Path | None, store_dir: Path,
                show_progress: bool = False) -> tuple[Corpus, str]:
    """(documents, their name for the record) from a folder of files or a BEIR folder's corpus.jsonl only."""
    if (input_dir is None) == (beir is None):
        raise BadInput("`self_supervised` needs the documents: give `input_dir` DIR or `beir` DIR (one of them)")
    if beir is not None:
        from rag_core.evaluate.beir import load_beir_corpus

        return Corpus.of(load_beir_corpus(beir)), f"{Path(beir).resolve().name} corpus.jsonl (BEIR)"
    from rag_core.ingest.files import read_documents
    from rag_core.service import store_access

    with store_access(store_dir):
        result = read_documents(input_dir, progress=show_progress, cache_dir=store_dir / "extracted")
    if not result.documents:
        reasons = "; ".join(f"{item.path}: {item.reason}" for item in result.skipped) or "no files found"
        raise BadInput(f"no documents could be read from {input_dir} ({reasons})")
    return Corpus.of(result.documents), Path(input_dir).resolve().name


def build_self_supervised_set(job: SelfSupervisedJob, config: RagConfig, store_dir: str | Path,
                              show_progress: bool = False) -> tuple[TrainingSet, list[PseudoQuery]]:
    """The training set of `job`: pseudo-queries with their candidates, split by document."""
    passage_kind = "text" if job.kind == "reranker" else "indexed"
    pipeline = mining_pipeline(job.corpus, store_dir, config, job.negatives_from, job.negatives_depth, passage_kind,
                               show_progress)
    chunks = pipeline.index.chunks
    pseudo = build_pseudo_queries(pipeline.corpus.documents, chunks, job.recipe)
    if len(pseudo) < 2:
        raise ConfigError(f"the documents give {len(pseudo)} pseudo-queries; self-supervised fine-tuning needs at "
                          "least 2 (documents with headings or passages of several sentences)")
    by_doc: dict[str, list[str]] = {}
    for chunk in chunks:
        by_doc.setdefault(chunk.doc_id, []).append(chunk.id)
    passages = chunk_passages(pipeline, passage_kind)
    queries = []
    for query in progress(pseudo, show_progress and len(pseudo) > 20, "Mining candidates", unit="pseudo-query"):
        positive = query.id + POSITIVE_SUFFIX
        passages[positive] = query.positive
        source = set(query.chunks)
        neighbours = [chunk_id for chunk_id in by_doc.get(query.doc_id, []) if chunk_id not in source]
        neighbours = random.Random(f"{job.recipe.seed}:{query.id}").sample(neighbours,
                                                                            min(job.same_document, len(neighbours)))
        ranked = [hit.id for hit in pipeline.candidates(query.text)[0].ranked["fused"] if hit.id not in source]
        candidates = (positive, *dict.fromkeys([*neighbours, *ranked]))
        queries.append(TrainingQuery(query.id, query.text, (positive,), candidates[:job.negatives_depth + 1]))
    train, validation = split_by_document(queries, pseudo, job.validation_share, job.recipe.seed, job.max_validation)
    return TrainingSet(tuple(train), tuple(validation), passages, job.negatives_from, job.negatives_depth), pseudo


def split_by_document(queries: list[TrainingQuery], pseudo: list[PseudoQuery], share: float, seed: int,
                      max_validation: int) -> tuple[list[TrainingQuery], list[TrainingQuery]]:
    """(train, validation): the queries of `share` of the documents validate (at most `max_validation`
    of them, a seeded sample); the others train. Each document's pseudo-queries stay on one side."""
    doc_of = {query.id: query.doc_id for query in pseudo}
    held_out = set(split_queries(list(doc_of.values()), share, seed).held_out)
    train = [query for query in queries if doc_of[query.id] not in held_out]
    validation = [query for query in queries if doc_of[query.id] in held_out]
    if len(validation) > max_validation:
        chosen = set(random.Random(seed).sample(range(len(validation)), max_validation))
        validation = [query for number, query in enumerate(validation) if number in chosen]
    return train, validation


def keep_search_length(base_model: str, model_dir: Path) -> None:
    """Give the saved embedder its base model's ``max_seq_length``: ``--max-length`` cuts passages while
    training (shorter is cheaper), the adapted model then searches whole passages as its base did."""
    from sentence_transformers import SentenceTransformer

    length = SentenceTransformer(base_model, device="cpu").max_seq_length
    model = SentenceTransformer(str(model_dir), device="cpu")
    if length and model.max_seq_length != length:
        model.max_seq_length = length
        model.save(str(model_dir))


def run_self_supervised(job: SelfSupervisedJob, config: RagConfig, store_dir: str | Path, *, resume: bool = False,
                        log_to_mlflow: bool = True, experiment: str | None = None, tracking_uri: str | None = None,
                        show_progress: bool = False, force: bool = False) -> FinetuneOutcome:
    """Train `job` into ``job.out_dir`` under ``rag_core.finetune.output``'s rules (as ``run_finetune``)."""
    if not 0 < job.validation_share < 1:
        raise ConfigError(f"the validation share must be between 0 and 1, got {job.validation_share}")
    plan = check_output(job.out_dir, force)
    placed: list[Placed] = []
    with staged_output(plan, placed) as work:
        outcome = _train_self_supervised(job, work, config, store_dir, resume, log_to_mlflow, experiment,
                                         tracking_uri, show_progress)
    return replace(outcome, result=replace(outcome.result, model_dir=placed[0].model_dir),
                   set_aside_to=placed[0].set_aside_to)


def _train_self_supervised(job: SelfSupervisedJob, work: Path, config: RagConfig, store_dir: str | Path,
                           resume: bool, log_to_mlflow: bool, experiment: str | None, tracking_uri: str | None,
                           show_progress: bool) -> FinetuneOutcome:
    """Train into `work` (the folder the model is written to before it is put at ``job.out_dir``)."""
    base = (base_reranker if job.kind == "reranker" else base_embedder)(config, job.base_model)
    if show_progress:
        print(f"Base model: {base.name} ({base.note})", file=sys.stderr)
    data, pseudo = build_self_supervised_set(job, config, store_dir, show_progress)
    kinds = counts_by_kind(pseudo)
    if show_progress:
        print(f"Made {len(pseudo)} pseudo-queries ({', '.join(f'{n} {k}' for k, n in kinds.items())}) from "
              f"{len(job.corpus)} documents: training on {len(data.train)}, validating on {len(data.validation)} "
              f"(negatives from {job.negatives_from}, top {job.negatives_depth})", file=sys.stderr)
    result = train_model(job.kind, data, base, work, job.settings, resume, show_progress)
    if job.kind == "embedder":
        keep_search_length(base.path, work)
    record: dict[str, Any] = {"golden_queries_used": False, "pseudo_query_recipe": job.recipe.as_dict(),
                              "pseudo_queries_by_kind": kinds, "documents": len(job.corpus)}
    params = {"kind": job.kind, "base_model": base.name, "base_model_note": base.note, "source": job.source,
              "self_supervised": "true", "golden_queries_used": "false",
              "pseudo_query_kinds": ",".join(job.recipe.kinds), "documents": str(len(job.corpus)),
              "train_queries": str(len(data.train)), "validation_queries": str(len(data.validation)),
              "negatives_from": job.negatives_from, "negatives_depth": str(job.negatives_depth),
              "same_document_negatives": str(job.same_document), "validation_share": str(job.validation_share),
              "output": str(job.out_dir), **job.settings.as_params(),
              **{f"pseudo_{key}": str(value) for key, value in job.recipe.as_dict().items() if key != "kinds"}}
    write_training_queries(work, [query.text for query in data.all_queries()], kind=job.kind,
                           source=job.source, base_model=base.name, **record)
    experiment = experiment or f"finetune {job.kind} self-supervised | {job.source}"
    run_id, uri = record_and_log(result, job.kind, params, {**record, "heldout": None}, {}, experiment,
                                 log_to_mlflow, tracking_uri, run_name=job.out_dir.name)
    return FinetuneOutcome(base, data, result, None, run_id, uri, experiment)
