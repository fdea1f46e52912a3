"""Evaluation as a user runs it: ``rag-pipeline eval`` and ``notebooks/02-evaluate.ipynb``.

Both do the same three things: load a corpus and a golden set (``load_eval_inputs``), evaluate one
configuration and log it as one MLflow run where a ``TrackingTarget`` says (``evaluate_and_log``: the
run, the golden set as its dataset input, and with the ``tracing`` setting one trace per query), and
show the metrics (``rag_core.workbench.reports.text``: a table of levels x metrics, latency per stage,
index statistics; ``--json`` for machines).

The corpus comes from ``--input DIR`` (read now; the read time counts as ingestion time), a BEIR
folder (``--beir``), or the documents already in the store. Each corpus + golden set has its own
MLflow experiment, named ``"<corpus> | <golden set>"`` (``documents | golden`` for the sample data)
unless ``--experiment`` names one. Metric names keep ``@`` here; only MLflow sees ``_at_``
(see ``rag_core.workbench.execution.evaluation_log``). Computing metrics is ``rag_core.evaluate.evaluator``; sweeps are ``rag_core.workbench``.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from rag_core.components import load_plugins
from rag_core.config import RagConfig, load_config, setting_names
from rag_core.errors import BadInput
from rag_core.evaluate.beir import load_beir
from rag_core.evaluate.evaluator import evaluate_config
from rag_core.evaluate.golden import GoldenQuery, load_golden
from rag_core.evaluate.golden_records import is_dataset_ref
from rag_core.ingest.corpus import Corpus, store_corpus
from rag_core.ingest.files import read_documents
from rag_core.paths import PROJECT_ROOT, SAMPLE_DOCUMENTS_DIR, SAMPLE_GOLDEN_FILE, default_store_dir
from rag_core.service import store_access
from rag_core.workbench.execution.evaluation_log import log_evaluation
from rag_core.workbench.plans.results import EvalRun
from rag_core.workbench.statistics.oracle_loss import loss_metrics
from rag_core.workbench.tracking.datasets import log_golden_input
from rag_core.workbench.tracking.golden_datasets import GoldenVersion, link_to_experiment, load_golden_dataset
from rag_core.workbench.tracking.tracker import Tracker, TrackingTarget, tracking_errors

# What evaluating and logging a run imports on first use, not at this module's import (MLflow alone is
# ~3 s on 2 cores): ``preload`` imports it ahead, in a sweep's kernel while the kernel waits for work.
# The SQL tracking store (the default sqlite:/// one) and the runtime of the ONNX query exports were a
# first point's other 1.2 s.
PRELOAD = ("mlflow.tracking", "mlflow.entities", "mlflow.tracing.client", "mlflow.store.tracking.sqlalchemy_store",
           "pandas", "matplotlib.figure", "huggingface_hub.file_download", "onnxruntime", "rag_core.workbench.reports.plots",
           "rag_core.workbench.tracking.traces")


@dataclass(frozen=True)
class EvalInputs:
    corpus: Corpus
    queries: tuple[GoldenQuery, ...]
    read_seconds: float  # time to read the corpus (0 when it came from the store)
    corpus_name: str  # "documents", "scifact (BEIR)", "store .rag_store"
    golden_name: str  # "golden", "qrels test"
    golden_source: str | None = None  # the golden file or BEIR folder (the MLflow dataset's source)
    golden_dataset: GoldenVersion | None = None  # the MLflow golden dataset version (--golden mlflow:NAME@3)

    @property
    def experiment(self) -> str:
        return f"{self.corpus_name} | {self.golden_name}"


def load_eval_inputs(
    *,
    input_dir: str | Path | None = None,
    golden: str | Path | None = None,
    beir: str | Path | None = None,
    split: str = "test",
    store_dir: str | Path | None = None,
    max_queries: int | None = None,
    progress: bool = False,
) -> EvalInputs:
    """Corpus from `input_dir`, `beir` or the store; queries from `golden` (every evidence source
    must be a corpus document) or the BEIR qrels; the first `max_queries` of them."""
    if max_queries is not None and max_queries < 1:
        raise BadInput(f"`max_queries` must be at least 1, got {max_queries}")
    started, dataset = time.perf_counter(), None
    if beir is not None:
        if input_dir is not None or golden is not None:
            raise BadInput("`beir` brings its own corpus and queries: leave out `input_dir` and `golden`")
        documents, queries = load_beir(beir, split)
        corpus, corpus_name, golden_name = Corpus.of(documents), f"{Path(beir).resolve().name} (BEIR)", f"qrels {split}"
        golden_source = str(Path(beir).resolve())
    else:
        if golden is None:
            raise BadInput("no golden set: give `golden` FILE (or `beir` DIR)")
        if input_dir is not None:
            store = Path(store_dir) if store_dir is not None else default_store_dir()
            with store_access(store):  # a read-only store: one line naming it (exit 1)
                result = read_documents(input_dir, progress=progress, cache_dir=store / "extracted")
            if not result.documents:
                reasons = "; ".join(f"{item.path}: {item.reason}" for item in result.skipped) or "no files found"
                raise BadInput(f"no documents could be read from {input_dir} ({reasons})")
            corpus, corpus_name = Corpus.of(result.documents), Path(input_dir).resolve().name
        else:
            store = Path(store_dir) if store_dir is not None else default_store_dir()
            corpus, corpus_name = store_corpus(store), f"store {store.resolve().name}"
        if is_dataset_ref(str(golden)):  # mlflow:NAME[@VERSION]
            dataset, queries = load_golden_dataset(str(golden), corpus.by_id)
            golden_name, golden_source = dataset.name, dataset.ref
        else:
            queries = load_golden(golden, doc_ids=corpus.by_id)
            golden_name, golden_source = Path(golden).stem, str(Path(golden).resolve())
    read_seconds = time.perf_counter() - started if input_dir is not None or beir is not None else 0.0
    if not queries:
        raise BadInput("the golden set has no queries with relevant documents")
    return EvalInputs(corpus, tuple(queries[:max_queries] if max_queries else queries), read_seconds,
                      corpus_name, golden_name, golden_source, dataset)


def evaluate_and_log(
    config: RagConfig,
    inputs: EvalInputs,
    store_dir: str | Path,
    *,
    tracking: TrackingTarget | None = TrackingTarget(),
    judge: bool = False,
    oracle: bool = False,
    progress: bool = False,
    where: Mapping[str, Any] | None = None,
) -> EvalRun:
    """Evaluate `config` on `inputs` and log one MLflow run where `tracking` says (None: not logged).
    Its experiment defaults to ``inputs.experiment`` and its run name to ``run_name_for(config)``;
    with ``tracking.run_id`` (a run the caller created, e.g. a sweep point) the report goes into that run.
    Answers: the ``answers`` setting, `judge` (the LLM judge too) and `oracle` (answers from the golden
    evidence as well; the losses due to retrieval and to generation join the metrics: ``oracle_loss``)."""
    if tracking is not None and tracking.run_id is None:  # an unusable tracking store fails before the work
        Tracker.at(tracking.uri).check(tracking.experiment or inputs.experiment)  # a deleted one too
    started = time.perf_counter()
    with store_access(Path(store_dir)):  # a read-only store: one line naming it (exit 1)
        report = evaluate_config(config, inputs.corpus, inputs.queries, store_dir, judge=judge, oracle=oracle,
                                 progress=progress, read_seconds=inputs.read_seconds, where=where)
    report.metrics.update(loss_metrics(report.per_query))
    timing = {
        "timing/read_seconds": inputs.read_seconds,
        "timing/build_seconds": report.metrics["index/ingest_seconds"] - inputs.read_seconds,
        "timing/evaluate_seconds": time.perf_counter() - started,
    }
    report.metrics.update(timing)
    if tracking is None:
        return EvalRun(report, inputs.experiment, None, None, timing)

    tracker = Tracker.at(tracking.uri)
    target = replace(tracking, uri=tracker.uri, experiment=tracking.experiment or inputs.experiment,
                     run_name=tracking.run_name or run_name_for(config))
    with tracking_errors(tracker.uri):
        started = time.perf_counter()
        run_id = log_evaluation(report, target)
        _log_golden(tracker, run_id, inputs, target.experiment)
        timing["timing/log_seconds"] = time.perf_counter() - started
        if config.tracing:
            from rag_core.workbench.tracking.traces import log_query_traces  # imports MLflow's tracing: only when asked for

            started = time.perf_counter()
            log_query_traces(report, run_id=run_id, experiment_id=tracker.experiment_id(target.experiment),
                             tracking_uri=tracker.uri)
            timing["timing/tracing_seconds"] = time.perf_counter() - started
        tracker.log(run_id, metrics={name: timing[name] for name in ("timing/log_seconds", "timing/tracing_seconds")
                                     if name in timing})
    return EvalRun(report, target.experiment, run_id, tracker.uri, timing)


def _log_golden(tracker: Tracker, run_id: str, inputs: EvalInputs, experiment: str) -> None:
    """The golden set as the run's dataset input; a version of an MLflow golden dataset as ``NAME@v3``,
    also listed in the experiment's Datasets tab."""
    dataset = inputs.golden_dataset
    if dataset is None:
        log_golden_input(tracker, run_id, inputs.queries, inputs.golden_name, inputs.golden_source)
        return
    log_golden_input(tracker, run_id, inputs.queries, dataset.input_name, dataset.ref, dataset_id=dataset.dataset_id,
                     version=dataset.version)
    link_to_experiment(dataset, tracker.experiment_id(experiment), tracker.uri)


def preload() -> None:
    """Import ``PRELOAD`` now; the first run then finds it imported (``rag_core.workbench.execution.kernels`` runs
    this as a kernel starts). Nothing here changes a result; a module that fails to import is left to
    fail, with its own message, where it is used."""
    import importlib

    for module in PRELOAD:
        try:
            importlib.import_module(module)
        except Exception:  # noqa: BLE001 - reported where it is needed, not in a kernel's start-up
            pass
    try:
        from rag_core.retrieve.bm25 import import_bm25s

        import_bm25s()  # and numba with it: 0.26 s
        if "mlflow.store.tracking.sqlalchemy_store" in sys.modules:  # its ORM classes, set up at first query
            import sqlalchemy.orm

            sqlalchemy.orm.configure_mappers()
    except Exception:  # noqa: BLE001 - as above
        pass


def run_name_for(config: RagConfig) -> str:
    """A run name from the settings people sweep most."""
    return (f"{config.mode} chunk_size={config.chunk_size} overlap={config.overlap} k={config.k} "
            f"rerank_depth={config.rerank_depth}")


# --- notebook helpers ---------------------------------------------------------------------------
def config_from_parameters(namespace: Mapping[str, Any]) -> RagConfig:
    """The config from a notebook's parameters: its ``settings`` mapping of overrides (a value of None
    means the default, or the environment variable for models and provider), after importing its
    ``plugins``. A setting passed as a parameter of its own (``papermill -p chunk_size 256``) counts
    too; ``settings`` wins over it. Defaults come from the settings' declarations, not the notebook."""
    settings = dict(namespace.get("settings") or {})
    plugins = [*(namespace.get("plugins") or ()), *(settings.get("plugins") or ())]
    load_plugins(plugins)  # the notebook's one load of plugins, first: their settings may be parameters
    loose = {name: namespace[name] for name in setting_names() if name in namespace and name not in settings}
    return load_config(None, {**loose, **settings, **({"plugins": plugins} if plugins else {})})


def load_notebook_inputs(input_dir: str | None = None, golden: str | None = None, beir: str | None = None,
                         split: str = "test", store: str | None = None, max_queries: int | None = None,
                         query_ids: Sequence[str] | None = None) -> tuple[EvalInputs, Path]:
    """(inputs, store folder) from notebook parameters; None means the sample corpus and golden set
    (unless `beir` is given) and the project's store (``$RAG_STORE`` or ``<project>/.rag_store``).
    `query_ids` keeps only those queries (a search's query subset), in golden-set order."""
    sample = beir is None
    store_dir = Path(store) if store else PROJECT_ROOT / default_store_dir()
    sources = (input_dir or (SAMPLE_DOCUMENTS_DIR if sample else None), golden or (SAMPLE_GOLDEN_FILE if sample else None), beir)
    inputs = _load_inputs_once(*map(_path_or_none, sources), split, store_dir, max_queries,
                               _files_signature([Path(source) for source in sources if source is not None]))
    if query_ids is not None:
        wanted = set(map(str, query_ids))
        missing = wanted - {query.id for query in inputs.queries}
        if missing:
            raise BadInput(f"query_ids not in the golden set: {', '.join(sorted(missing)[:5])}")
        inputs = dataclasses.replace(inputs, queries=tuple(query for query in inputs.queries if query.id in wanted))
    return inputs, store_dir


@functools.lru_cache(maxsize=4)
def _load_inputs_once(input_dir: str | None, golden: str | None, beir: str | None, split: str, store_dir: Path,
                      max_queries: int | None, signature: tuple) -> EvalInputs:
    """The inputs, read once per kernel while their files are unchanged (`signature`): sweep points in a
    warm kernel do not read and parse the same PDFs again."""
    return load_eval_inputs(input_dir=input_dir, golden=golden, beir=beir, split=split, store_dir=store_dir,
                            max_queries=max_queries)


def _path_or_none(path: str | Path | None) -> str | None:
    if path is not None and is_dataset_ref(str(path)):  # mlflow:NAME@3 is no file
        return str(path)
    return str(Path(path).resolve()) if path is not None else None


def _files_signature(roots: Sequence[Path]) -> tuple:
    """(path, size, mtime) of every file below `roots`: changes when any input file does."""
    signature = []
    for path in (path for root in roots for path in ([root] if root.is_file() else sorted(root.rglob("*")))):
        try:
            stat = path.stat()
        except OSError:  # a dangling link: reading the inputs reports it
            continue
        signature.append((str(path), stat.st_size, stat.st_mtime_ns))
    return tuple(signature)
