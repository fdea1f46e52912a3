"""What work costs on this machine, and what a sweep file would cost before it runs.

**Throughputs.** After every sweep and search, the finished child runs' own measurements are added to
``<store>/throughputs.json`` (``record_runs``; a sweep's builds made before its points, ``record_builds``), one observation per run, the latest
``MAX_OBSERVATIONS`` of each kind kept: embedding throughput per model (``index/embedded`` chunks in
``index/embed_seconds``), BM25 indexing throughput, the warm time of an evaluation per retrieval mode
(the notebook's seconds less its index building, against the number of queries), and the tokens per
query of LLM query expansion. A point's warm time is fitted as ``fixed + per_query * queries`` by
least squares (proportional when every observation has the same number of queries).

**Estimates** (``estimate``, printed by ``rag-pipeline sweep FILE --dry-run``): the space's size, the
points merged (``SweepSpec.merged``), the distinct chunkings the run makes or finds in the store, each by
the store's own name of it (``Index.chunking_key``: the settings its chunker reads, its own, its code
version, and the embedding model as it will load: offline the packaged MiniLM, not the configured
name), the embedding models as they will load, and the dense indexes that are not in the store yet
(chunks estimated from the corpus's words, or counted when the chunking exists; with windows,
``dense_pooling`` other than ``first``, a unit longer than the model's window counts as its windows:
``window_count``) and their embedding time, the warm time of the evaluations the strategy would run (a
grid: every point; a search: its budget), and, when LLM query expansion is in the space, its calls,
tokens and list-price cost (``rag_core.generate.cost``). A grid's chunkings and indexes are those of its
points exactly; a search's, those of every combination of its axes up to the indexes. No model is
loaded: the model as loaded is ``models.embedder_source``'s answer (the configured name where only
loading could tell). Where nothing was measured yet, the figure is missing and the estimate says so; no
default speed is assumed.
Left out: the judge (sweeps do not judge), kernel start-up (a few seconds per worker), GPU timings.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from rag_core.components import SETTINGS
from rag_core.components.registry import VERSION_PREFIX
from rag_core.components.settings import STAGES
from rag_core.components.stages import component_key, key_through
from rag_core.config import ConfigError, RagConfig, load_config
from rag_core.ingest.chunkers import CHUNKERS
from rag_core.ingest.corpus import write_json_atomic
from rag_core.retrieve.models import FALLBACK_EMBED_NAME, embedder_source
from rag_core.retrieve.retrievers import uses_embedder
from rag_core.retrieve.windows import default_stride
from rag_core.workbench.plans.sweep_file import SweepSpec
from rag_core.workbench.tracking.tracker import run_metrics

if TYPE_CHECKING:
    from mlflow.entities import Run

    from rag_core.ingest.corpus import Corpus

THROUGHPUTS_FILE = "throughputs.json"
MAX_OBSERVATIONS = 400
LLM_EXPANSIONS = ("multi_query", "hyde")
MAX_ENUMERATED = 20_000  # combinations of those settings enumerated for an estimate
# Tokens per word of MiniLM's WordPiece tokenizer, for a unit counted in words (chunk_unit: words): 1.10 on the
# sample corpus (512-word chunks, median 563 tokens), 1.22 on the FinanceBench filings (256 words, median 312).
TOKENS_PER_WORD = 1.2
# The window (tokens of text one input holds) when no dense index of the model is in the store yet to say it:
# MiniLM's 256 less its 2 special tokens (the packaged model, the offline fallback).
ASSUMED_WINDOW_TOKENS = 254


@dataclass
class Throughputs:
    """Observations, each ``[run id, amount, seconds]`` (``llm``: ``[run id, input tokens, output tokens]`` per query)."""
    host: str = ""
    embed: dict[str, list] = field(default_factory=dict)  # embedding model used -> observations (chunks)
    bm25: list = field(default_factory=list)  # (chunks indexed)
    points: dict[str, list] = field(default_factory=dict)  # mode -> observations (queries, warm seconds)
    llm: dict[str, list] = field(default_factory=dict)  # query_expansion -> observations

    def embed_rate(self, model: str) -> float | None:
        """Chunks per second for `model` (or the offline fallback it would become); None: never measured."""
        for name in (model, FALLBACK_EMBED_NAME):
            observations = self.embed.get(name)
            if observations:
                return _rate(observations)
        return None

    def bm25_rate(self) -> float | None:
        return _rate(self.bm25) if self.bm25 else None

    def point_seconds(self, mode: str, queries: int) -> float | None:
        """The warm seconds of one evaluation of `queries` queries in `mode`; None: never measured."""
        observations = self.points.get(mode)
        if not observations:
            return None
        xs, ys = [float(o[1]) for o in observations], [float(o[2]) for o in observations]
        mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
        spread = sum((x - mean_x) ** 2 for x in xs)
        if spread == 0:
            return mean_y * queries / mean_x
        slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / spread
        fixed = mean_y - slope * mean_x
        if slope < 0 or fixed < 0:  # noise: fall back to proportional
            return mean_y * queries / mean_x
        return fixed + slope * queries

    def llm_tokens(self, expansion: str) -> tuple[float, float] | None:
        observations = self.llm.get(expansion)
        if not observations:
            return None
        return (sum(o[1] for o in observations) / len(observations), sum(o[2] for o in observations) / len(observations))


def _rate(observations: Sequence[Sequence]) -> float | None:
    seconds = sum(float(o[2]) for o in observations)
    return sum(float(o[1]) for o in observations) / seconds if seconds > 0 else None


def load_throughputs(store_dir: str | Path) -> Throughputs:
    path = Path(store_dir) / THROUGHPUTS_FILE
    if not path.exists():
        return Throughputs(host=platform.node())
    try:
        return Throughputs(**json.loads(path.read_text()))
    except (ValueError, TypeError):  # an unreadable file: measured again from now on
        return Throughputs(host=platform.node())


def record_runs(store_dir: str | Path, runs: Iterable["Run"]) -> Throughputs:
    """Add the measurements of finished runs (each once, by run id) and save; returns the result."""
    throughputs = load_throughputs(store_dir)
    for run in runs:
        if run.info.status == "FINISHED":
            _add(throughputs, run.info.run_id, run.data.params, run_metrics(run))
    throughputs.host = platform.node()
    store = Path(store_dir)
    if store.is_dir():
        write_json_atomic(store / THROUGHPUTS_FILE, {key: value for key, value in vars(throughputs).items()})
    return throughputs


def record_builds(store_dir: str | Path, builds: Sequence[tuple[str, float, float]]) -> None:
    """Add the embedding throughput of index builds made outside a point's run (a sweep's builds first):
    (model used, chunks embedded, embedding seconds) each, one observation per build."""
    if not builds or not Path(store_dir).is_dir():
        return
    throughputs = load_throughputs(store_dir)
    for number, (model, embedded, seconds) in enumerate(builds):
        observations = throughputs.embed.setdefault(model, [])
        if embedded > 0 and seconds > 0:
            observations.append([f"build-{time.time_ns()}-{number}", embedded, seconds])
            del observations[:-MAX_OBSERVATIONS]
    write_json_atomic(Path(store_dir) / THROUGHPUTS_FILE, dict(vars(throughputs)))


def _add(throughputs: Throughputs, run_id: str, params: dict[str, str], metrics: dict[str, float]) -> None:
    def observe(observations: list, amount: float, seconds: float) -> None:
        if run_id not in {o[0] for o in observations} and amount > 0 and seconds > 0:
            observations.append([run_id, amount, seconds])
            del observations[:-MAX_OBSERVATIONS]

    embedded = metrics.get("index/embedded", 0.0)
    if embedded and params.get("embed_model_used"):
        observe(throughputs.embed.setdefault(params["embed_model_used"], []), embedded, metrics.get("index/embed_seconds", 0.0))
    if metrics.get("index/bm25_seconds", 0.0) > 0:
        observe(throughputs.bm25, metrics.get("index/chunks", 0.0), metrics["index/bm25_seconds"])
    notebook, build = metrics.get("timing/notebook_seconds"), metrics.get("timing/build_seconds", 0.0)
    if notebook and params.get("mode"):
        observe(throughputs.points.setdefault(params["mode"], []), metrics.get("eval/queries", 0.0), notebook - build)
    expansion = params.get("query_expansion", "none")
    if expansion in LLM_EXPANSIONS and "expansion/input_tokens" in metrics:
        observe(throughputs.llm.setdefault(expansion, []), metrics["expansion/input_tokens"],
                metrics.get("expansion/output_tokens", 0.0))


# --- the estimate before a run ----------------------------------------------------------------------
@dataclass(frozen=True)
class EmbeddingNeed:
    label: str  # the chunking and model
    chunks: int  # counted when the chunking exists, else estimated from the corpus's words
    seconds: float | None  # at the measured throughput (texts per second); None: never measured here
    texts: int = 0  # texts embedded: the chunks, or with windows each long unit's windows (0: = chunks)


@dataclass(frozen=True)
class PlannedChunking:
    label: str  # what decides its chunks (the settings its chunker reads, its own, the model as loaded)
    key: str  # the store's name of it (chunks/<key>/)
    in_store: bool  # made before: the run reads it
    chunks: int | None = None  # counted when in the store


@dataclass(frozen=True)
class CostEstimate:
    strategy: str
    budget: str  # "" for a grid
    space_size: int | None  # configurations (None: a continuous axis)
    evaluations: float | None  # full evaluations the strategy would run (None: as many as the seconds allow)
    queries: int  # per full evaluation
    chunkings: int | None  # distinct chunkings in the space (None: too many to enumerate)
    models: list[str]  # embedding models in the space
    to_embed: list[EmbeddingNeed]  # dense indexes not in the store yet
    embed_limit: int | None  # max_new_chunkings
    warm_seconds: dict[str, float | None]  # mode -> seconds per full evaluation
    cold_seconds: float | None  # embedding the new indexes the strategy would reach
    total_seconds: float | None
    llm: str  # LLM query expansion's calls, tokens and cost; "" when none is in the space
    notes: list[str]
    chunking_plan: list[PlannedChunking] = field(default_factory=list)  # every distinct chunking, as the store names it
    dense_indexes: int | None = None  # distinct dense indexes in the space (None: too many to enumerate)
    models_loaded: dict[str, str] = field(default_factory=dict)  # configured embedding model -> as it will load
    merged: list[str] = field(default_factory=list)  # grid points run as one (SweepSpec.merged)

    def as_dict(self) -> dict[str, Any]:
        values = dict(vars(self))
        values["to_embed"] = [vars(need) for need in self.to_embed]
        values["chunking_plan"] = [vars(chunking) for chunking in self.chunking_plan]
        return values


def estimate(spec: SweepSpec, corpus: "Corpus", queries: int, store_dir: str | Path) -> CostEstimate:
    """What running `spec` would cost: see the module docstring. `queries`: per full evaluation."""
    throughputs = load_throughputs(store_dir)
    notes: list[str] = []
    search = spec.search
    configs = _build_configs(spec)
    if configs is None:
        notes.append(f"more than {MAX_ENUMERATED} chunking/model combinations: not enumerated")
    plan = planned_chunkings(configs or [], corpus, store_dir)
    embedding = [c for c in configs or () if uses_embedder(c)]
    loaded = {c.embed_model: model_as_loaded(c) for c in embedding}
    models = sorted(loaded)
    to_embed = _to_embed(configs or [], corpus, store_dir, throughputs)
    dense = None if configs is None else len({_dense_identity(c, corpus, store_dir) for c in embedding})
    if search.is_search:
        points = None
        modes = sorted({c.mode for c in configs or []} or {"hybrid"})
        evaluations = search.budget.points if search.budget.points is not None else None
        reachable = to_embed[: search.max_new_chunkings] if search.max_new_chunkings is not None else to_embed
        if evaluations is not None:
            reachable = reachable[: max(int(evaluations), 0)]
        mode_counts = {mode: 1.0 for mode in modes}
    else:
        points, _ = spec.points()
        evaluations = float(len(points))
        reachable = to_embed
        mode_counts = {}
        for point in points:
            mode_counts[point.config.mode] = mode_counts.get(point.config.mode, 0.0) + 1
    warm = {mode: throughputs.point_seconds(mode, queries) for mode in mode_counts}
    if any(value is None for value in warm.values()):
        notes.append("no evaluation measured on this machine yet for mode(s) "
                     f"{', '.join(m for m, v in warm.items() if v is None)}: run a sweep or search once to measure")
    cold = None if any(need.seconds is None for need in reachable) else sum(need.seconds for need in reachable)
    if reachable and cold is None:
        notes.append("no embedding measured on this machine yet for this model: its time is unknown")
    total = None
    if search.is_search and search.budget.seconds is not None and evaluations is None:
        total = search.budget.seconds
    elif evaluations is not None and None not in warm.values() and cold is not None:
        share = sum(mode_counts.values())
        per_evaluation = sum(warm[mode] * count for mode, count in mode_counts.items()) / share
        total = evaluations * per_evaluation + cold
        if search.is_search and search.budget.seconds is not None:
            total = min(total, search.budget.seconds)
    return CostEstimate(search.strategy, search.budget.describe() if search.budget else "", spec.space.size
                        if search.is_search else len(points), evaluations, queries,
                        None if configs is None else len(plan), models, to_embed,
                        search.max_new_chunkings, warm, cold, total,
                        _llm_line(spec, _llm_evaluations(spec, points, evaluations), queries, throughputs), notes,
                        plan, dense, loaded, [] if search.is_search else [m.describe() for m in spec.merged()])


def _build_configs(spec: SweepSpec, names: Sequence[str] | None = None) -> list[RagConfig] | None:
    """One valid configuration per distinct build (the settings and code versions up to the indexes,
    ``key_through(config, "index")``): a grid's points' own, a search's every combination of its axes
    whose settings are of the stages up to the indexes (and ``mode``); None when there are too many
    combinations to enumerate. With `names`: every combination of those settings (the estimate of before,
    kept for ``benchmarks/settings_keys_compare.py``)."""
    if names is None and not spec.search.is_search:
        builds: dict[tuple, RagConfig] = {}
        for point in spec.points()[0]:
            builds.setdefault(point.build_key, point.config)
        return list(builds.values())
    if names is None:
        names = tuple(name for name in spec.axes if name == "mode" or
                      (name in SETTINGS and STAGES.index(SETTINGS[name].stage) <= STAGES.index("index")))
    names = tuple(names)
    axes = {name: values for name, values in spec.grid.items() if name in names}
    for name, axis in spec.ranges.items():
        if name in names:
            if not axis.finite:
                return None
            axes[name] = axis.values()
    listed = spec.listed or ({},)
    total = len(listed)
    for values in axes.values():
        total *= len(values)
    if total > MAX_ENUMERATED:
        return None
    configs = {}
    for point, values in itertools.product(listed, itertools.product(*axes.values())):
        settings = {**spec.base, **{k: v for k, v in point.items() if k in names}, **dict(zip(axes, values))}
        try:
            config = load_config(None, settings)
        except ConfigError:
            continue
        configs.setdefault(key_through(config, "index"), config)
    return list(configs.values())


def dense_index_key(config: RagConfig) -> tuple:
    """What the dense index of `config` depends on (the stage table's, for the dense retriever)."""
    return component_key(config, "retriever", "dense", "index")


class ModelAsLoaded:
    """The embedding model as it will load, told without loading it (``models.embedder_source``; the
    configured name where only loading could tell): what an estimate's ``Index`` names its keys with."""

    def __init__(self, config: RagConfig) -> None:
        source = embedder_source(config.embed_model, config.model_fallback)
        self.name_used = source.used if source is not None else config.embed_model


def model_as_loaded(config: RagConfig) -> str:
    return ModelAsLoaded(config).name_used


def planned_chunkings(configs: Sequence[RagConfig], corpus: "Corpus", store_dir: str | Path) -> list[PlannedChunking]:
    """Every distinct chunking of `configs` as the store names it, made before (in the store) or not."""
    found: dict[str, PlannedChunking] = {}
    for config in configs:
        index = _index(config, corpus, store_dir)
        if index.chunking_key not in found:
            lengths = existing_lengths(config, corpus, store_dir)
            found[index.chunking_key] = PlannedChunking(describe_chunking(config, index.chunking_settings),
                                                        index.chunking_key, lengths is not None,
                                                        None if lengths is None else len(lengths))
    return list(found.values())


def unbuilt(configs: Sequence[RagConfig], corpus: "Corpus", store_dir: str | Path) -> list[RagConfig]:
    """The configurations whose chunking, or dense index when they embed, is not in the store yet (what a
    run would build); nothing is loaded to tell."""
    return [config for config in configs
            if existing_lengths(config, corpus, store_dir) is None
            or (uses_embedder(config) and not dense_built(config, corpus, store_dir))]


def _dense_identity(config: RagConfig, corpus: "Corpus", store_dir: str | Path) -> tuple:
    """One dense index: its chunking (the store's name), the model as loaded, its other settings."""
    _, ingest, index = dense_index_key(config)
    return (_index(config, corpus, store_dir).chunking_key, model_as_loaded(config), ingest,
            tuple(item for item in index if item[0] != "embed_model"))


def _to_embed(configs: Sequence[RagConfig], corpus: "Corpus", store_dir: str | Path,
              throughputs: Throughputs) -> list[EmbeddingNeed]:
    needs: dict[tuple, EmbeddingNeed] = {}
    words = sum(len(doc.text.split()) for doc in corpus.documents)
    for config in configs:
        if not uses_embedder(config):
            continue
        key = _dense_identity(config, corpus, store_dir)
        if key in needs or dense_built(config, corpus, store_dir):
            continue
        lengths = existing_lengths(config, corpus, store_dir)
        if lengths is None:
            reads = CHUNKERS.reads(config.chunker) if config.chunker in CHUNKERS else ()
            step = max(config.chunk_size - (config.overlap if "overlap" in reads else 0), 1)
            chunks = max(int(words / step), len(corpus))
            size = config.chunk_size if config.chunk_unit == "tokens" else config.chunk_size * TOKENS_PER_WORD
            lengths = [size] * chunks
        texts = len(lengths)
        if config.dense_pooling != "first":
            window = window_tokens(config, store_dir)
            texts = sum(window_count(tokens, window, default_stride(window, config.dense_stride)) for tokens in lengths)
        rate = throughputs.embed_rate(model_as_loaded(config))
        needs[key] = EmbeddingNeed(describe_build(config), len(lengths), texts / rate if rate else None, texts)
    return list(needs.values())


def window_count(tokens: float, window: int, stride: int) -> int:
    """Windows of a unit of `tokens` tokens: one when it fits, else one more per `stride` tokens past the
    first window (the last one ends at the unit's end: ``rag_core.retrieve.windows.window_spans``, whose
    windows start between words, so a unit may get one window more or less)."""
    if tokens <= window:
        return 1
    return 1 + math.ceil((tokens - window) / stride)


def window_tokens(config: RagConfig, store_dir: str | Path) -> int:
    """The model's window (text tokens per input) from a dense index of it in the store; else MiniLM's."""
    names = {config.embed_model, FALLBACK_EMBED_NAME} if config.model_fallback else {config.embed_model}
    for manifest in sorted(Path(store_dir).glob("chunks/*/dense-*.json")):
        try:
            recorded = json.loads(manifest.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(recorded, dict) and recorded.get("model") in names and recorded.get("window_tokens"):
            return int(recorded["window_tokens"])
    return ASSUMED_WINDOW_TOKENS


def describe_build(config: RagConfig) -> str:
    """A dense index in a line: its chunking, what else it indexes, its runtime and the model as loaded."""
    settings = _index(config, None, None).chunking_settings
    extras = [f"{name}={getattr(config, name)}" for name in ("child_size", "chunk_context", "extract_tables", "embed_backend")
              if getattr(config, name) != SETTINGS[name].default and name not in settings]
    return " ".join([describe_chunking(config, settings, model=False), *extras, f"model {model_as_loaded(config)}"])


def describe_chunking(config: RagConfig, settings: dict[str, Any], model: bool = True) -> str:
    """A chunking in a line, from what its key holds (``Index.chunking_settings``): the chunker, the
    settings it reads and its own (per_page when on), the model it uses as loaded (unless not `model`),
    its code version."""
    shown = [f"chunker={config.chunker}"]
    for name, value in settings.items():
        if name == "chunker" or (name == "per_page" and not value) or (name == "embed_model" and not model):
            continue
        if name.startswith(VERSION_PREFIX):
            shown.append(f"(code {value})")
        elif name == "embed_model":
            shown.append(f"model {value}")
        else:
            shown.append(f"{name}={value}")
    return " ".join(shown)


def _index(config: RagConfig, corpus: "Corpus | None", store_dir: str | Path | None):
    """The index of `config` as an estimate sees it: its names, with the model as it will load (nothing loaded)."""
    from rag_core.retrieve.index import Index

    return Index(Path(store_dir or "."), corpus, config, embedder=ModelAsLoaded(config))


def dense_built(config: RagConfig, corpus: "Corpus", store_dir: str | Path) -> bool:
    """Whether the dense index `config` needs is complete in the store (its model as configured, or as
    the offline fallback it becomes); loads no model."""
    names = [config.embed_model, FALLBACK_EMBED_NAME] if config.model_fallback else [config.embed_model]
    names = [name if config.embed_backend == "torch" else f"{name} [{config.embed_backend}]" for name in names]
    return _index(config, corpus, store_dir).dense_built(names)


def existing_chunks(config: RagConfig, corpus: "Corpus", store_dir: str | Path) -> int | None:
    """How many chunks the configuration's chunking has, when the store holds it."""
    lengths = existing_lengths(config, corpus, store_dir)
    return None if lengths is None else len(lengths)


def existing_lengths(config: RagConfig, corpus: "Corpus", store_dir: str | Path) -> list[float] | None:
    """The estimated tokens of each chunk of the configuration's chunking, when the store holds it (its
    words times ``TOKENS_PER_WORD``: no tokenizer is loaded)."""
    path = _index(config, corpus, store_dir).dir / "chunks.jsonl"
    if not path.exists():
        return None
    with path.open() as lines:
        return [len(json.loads(line).get("text", "").split()) * TOKENS_PER_WORD for line in lines if line.strip()]


def _llm_evaluations(spec: SweepSpec, points: list | None, evaluations: float | None) -> dict[str, float | None]:
    """LLM expansion -> evaluations that would use it: a grid's points that do, a search's whole budget
    (an upper bound: every trial might)."""
    if points is not None:
        counts: dict[str, float | None] = {}
        for point in points:
            if point.config.query_expansion in LLM_EXPANSIONS:
                counts[point.config.query_expansion] = (counts.get(point.config.query_expansion) or 0.0) + 1
        return counts
    values = set(spec.grid.get("query_expansion", ())) | {point.get("query_expansion") for point in spec.listed}
    values |= {spec.base.get("query_expansion")}
    return {value: evaluations for value in sorted(v for v in values if v in LLM_EXPANSIONS)}


def _llm_line(spec: SweepSpec, llm_evaluations: dict[str, float | None], queries: int, throughputs: Throughputs) -> str:
    from rag_core.generate.cost import TokenUsage, describe_cost

    if not llm_evaluations:
        return ""
    model = load_config(None, {key: spec.base[key] for key in ("llm_model", "llm_provider") if key in spec.base}).llm_model
    lines = []
    for expansion, evaluations in llm_evaluations.items():
        tokens = throughputs.llm_tokens(expansion)
        calls = int((evaluations or 0) * queries)
        if evaluations is None:
            lines.append(f"{expansion}: LLM calls unknown (a budget in seconds)")
            continue
        if tokens is None:
            lines.append(f"{expansion}: up to {calls} LLM calls; tokens per query never measured here (run one point)")
            continue
        usage = TokenUsage(calls, int(tokens[0] * calls), int(tokens[1] * calls))
        lines.append(f"{expansion}: up to {describe_cost(model, usage)}")
    return "; ".join(lines)


def machine() -> str:
    return f"{platform.node()} ({os.cpu_count()} CPUs)"
