"""Search strategies against the exhaustive grid (issue 18), on the sample corpus and the FinanceBench dev split.

The space is ``experiments/search-sample.yaml`` / ``search-filings.yaml``: 288 configurations (two
chunkings, mode, fusion, routing, BM25 k1 and b; re-ranking off), 30% of the queries held out.

Phases (``--phase``, default ``all``, in this order):

``exhaustive``  The space run as a grid (``strategy: grid``, the same code as ``rag-pipeline sweep``), once:
                a re-run reuses the finished points. From MLflow it reads each point's per-query primary
                metric and its measured cost, split into warm work (the point's wall time less the index
                building it did) and cold work: chunking a corpus, embedding a chunking (a dense index),
                building a BM25 index (per chunking, k1 and b), each measured where it happened. Its
                compute C is the sum of every point's warm time and every cold item once. For FinanceBench
                the dense indexes are embedded beforehand (``rag-pipeline ingest``, nice -n 10, into
                ``--store``); their cold time is read from the store's index manifests.
``validate``    Real end-to-end searches (tpe and halving, seed 0, each into a fresh store so that it
                embeds what it uses) with the budget of the replay below; prints each search's charged
                seconds next to its wall time, and its trials next to the replay of the same seed.
``replay``      Tabular replay, as in HPO benchmarking (e.g. HPOBench, YAHPO): for seeds 0-9, tpe and
                halving run for real through Optuna (``SearchDriver``, an SQLite study like a real
                search, the optimizer's own time measured and charged), but each evaluation is looked up
                in the exhaustive table: its value is the table's mean over the trial's queries, its cost
                the measured warm time scaled to that many queries: a fixed part (the point's time
                outside its evaluation: notebook, inputs, MLflow logging, measured per point) plus the
                rest in proportion to the queries; the rest is its candidate group's dearest point's,
                since a search may be first to compute those candidates (conservative). Each cold item
                is charged the first time the search touches it, and the kernel start-up and model
                loading the grid paid once (the excess of its first points) once per search. Budget: 25% of C less the
                dearest evaluation (a budget in seconds may be passed by the last one).

Success (the issue): in at least 8 of 10 seeds, the configuration a strategy chooses has a tuning score
inside the exhaustive best's bootstrap 95% interval (tuning queries, primary metric), reached with at
most 25% of C. The final holdout runs (the winner and the default on every query, for the report; a
grid has its scores already) are reported beside it, as a share with them. The held-out score of each
choice is reported next to the grid's.
Timings are provisional: measured on a shared 2-core machine. Every figure from ``replay`` is replayed.

``table``       Nothing runs: the summary and table again, from the replays saved in ``--out``.

``--embedded`` replays as if every dense index were in the store already (a store a team reuses): no
embedding is charged to C or to the searches; results under ``"<corpus> embedded"``. Only ``replay``
and ``table`` apply (nothing is evaluated: the grid's table is reused).

Usage: python benchmarks/search.py [--corpus sample|financebench|both] [--phase all|exhaustive|validate|replay|table]
       [--embedded] [--fb-store /work/stores/search-fb] [--seeds 10] [--out benchmarks/results/search.json]
Left out: the searches' figures on the real re-ranker (none offline).
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rag_core.config import load_config, setting_names
from rag_core.paths import EXPERIMENTS_DIR
from rag_core.workbench.execution.sweep import run_sweep
from rag_core.workbench.plans.space import Budget, SearchSettings
from rag_core.workbench.plans.sweep_file import SweepSpec, digest, load_sweep
from rag_core.workbench.reports.compare import load_runs
from rag_core.workbench.search.driver import SearchDriver, TrialScore, open_study
from rag_core.workbench.statistics.holdout import split_queries
from rag_core.workbench.statistics.intervals import bootstrap_interval, load_per_query
from rag_core.workbench.tracking.tracker import Tracker, run_metrics
from results_file import RESULTS, write_results

HERE = RESULTS / "search"
SPACES = {"sample": EXPERIMENTS_DIR / "search-sample.yaml", "financebench": EXPERIMENTS_DIR / "search-filings.yaml"}
SEARCH_KEYS = ("strategy", "budget", "max_new_chunkings", "search_seed", "halving")
STRATEGIES = ("tpe", "halving")
BUDGET_SHARE = 0.25


# --- sweep files derived from the space -----------------------------------------------------------------
def variant(path: Path, name: str, **keys: Any) -> SweepSpec:
    """The sweep file at `path` renamed, with absolute data paths and the search keys replaced by `keys`."""
    data = yaml.safe_load(path.read_text())
    for key in ("input", "golden"):
        data[key] = str((path.parent / data[key]).resolve())
    for key in SEARCH_KEYS:
        data.pop(key, None)
    data.update(name=name, **{key: value for key, value in keys.items() if value is not None})
    HERE.mkdir(parents=True, exist_ok=True)
    target = HERE / f"{name}.yaml"
    target.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_sweep(target)


# --- the exhaustive table ---------------------------------------------------------------------------------
def config_key(params: dict[str, str]) -> str:
    """The exhaustive table's key of a configuration: the digest of its settings as params. (``SearchDriver``
    keys trials by ``point_identity``: configurations that differ only in settings that do not apply to them,
    ``bm25_k1`` with ``mode: dense``, are one trial there, told the first one's value.)"""
    return digest({name: params[name] for name in setting_names()})


def exhaustive(corpus: str, store: Path, tracking_uri: str) -> dict[str, Any]:
    spec = variant(SPACES[corpus], f"search-{corpus}-grid", strategy="grid")
    started = time.perf_counter()
    result = run_sweep(spec, store, tracking_uri=tracking_uri, output_dir=HERE / "notebooks" / spec.name,
                       echo=lambda line: print(line, flush=True))
    tracker = Tracker.at(tracking_uri)
    runs = {run.info.run_id: run for run in tracker.child_runs(result.experiment, result.parent_run_id)
            if run.info.status == "FINISHED"}
    finished = load_runs(result.experiment, parent_run_id=result.parent_run_id, tracking_uri=tracking_uri)
    per_query = load_per_query(finished["run_id"], tracking_uri)
    space = {digest(point.config.as_params()) for point in spec.points()[0]}  # not the default's extra point 0
    points, cold, default = [], {}, None
    for run_id in finished["run_id"]:
        run = runs[run_id]
        params, metrics = run.data.params, run_metrics(run)
        if config_key(params) not in space:  # the default configuration, the holdout's extra point 0
            wall = metrics["timing/notebook_seconds"] + metrics.get("timing/sweep_tracking_seconds", 0.0)
            values = per_query[run_id].set_index("query_id")[spec.primary_metric]
            default = {"label": run.info.run_name, "warm": wall - metrics.get("timing/build_seconds", 0.0),
                       "values": {str(qid): float(v) for qid, v in values.items()}}
            continue
        config = load_config(None, {name: params[name] for name in setting_names()})
        chunking = f"{config.chunk_size}/{config.overlap}"
        parts = {f"chunk {chunking}": metrics.get("index/chunk_seconds", 0.0) * (metrics.get("index/chunkings_built", 0) > 0),
                 f"dense {chunking}": (metrics.get("index/embed_seconds", 0.0) + metrics.get("index/upsert_seconds", 0.0))
                 * (metrics.get("index/upserted", 0) > 0),
                 f"bm25 {chunking} {config.bm25_k1} {config.bm25_b}": metrics.get("index/bm25_seconds", 0.0)}
        for item, seconds in parts.items():
            cold[item] = max(cold.get(item, 0.0), seconds)
        wall = metrics["timing/notebook_seconds"] + metrics.get("timing/sweep_tracking_seconds", 0.0)
        table = per_query[run_id].set_index("query_id")
        points.append({"key": config_key(params), "mode": config.mode, "chunking": chunking,
                       "bm25": f"bm25 {chunking} {config.bm25_k1} {config.bm25_b}" if config.mode != "dense" else None,
                       "candidates": json.dumps([chunking, config.mode, config.route_docs,
                                                 config.fusion if config.mode == "hybrid" else None,
                                                 [config.bm25_k1, config.bm25_b] if config.mode != "dense" else None]),
                       "label": run.info.run_name, "warm": wall - sum(parts.values()), "wall": wall,
                       "fixed": max(wall - metrics.get("timing/evaluate_seconds", wall), 0.0),
                       "values": {str(qid): float(v) for qid, v in table[spec.primary_metric].items()}})
    _cold_done_before(spec, store, cold)
    startup = _kernel_startup(points)
    query_ids = [str(q) for q in next(iter(per_query.values()))["query_id"]]
    split = split_queries(query_ids, spec.holdout, spec.holdout_seed)
    compute = sum(p["warm"] for p in points) + sum(cold.values()) + startup
    best = max(points, key=lambda p: _mean(p, split.tuning))
    interval = bootstrap_interval([best["values"][q] for q in split.tuning])
    inside = [p for p in points if _mean(p, split.tuning) >= interval.low]
    print(f"{corpus}: {len(points)} points, compute {compute:.0f} s (warm {sum(p['warm'] for p in points):.0f} s, cold "
          f"{sum(cold.values()):.0f} s, start-up {startup:.0f} s), wall {time.perf_counter() - started:.0f} s this run; best {best['label']}: "
          f"tuning {interval}; {len(inside)} points inside its interval", flush=True)
    return {"corpus": corpus, "points": points, "cold": cold, "startup_seconds": startup, "compute_seconds": compute,
            "query_ids": query_ids, "tuning": list(split.tuning), "held_out": list(split.held_out),
            "metric": spec.primary_metric, "best": {"label": best["label"], "key": best["key"], "tune": vars(interval),
                                                    "holdout": _mean(best, split.held_out)},
            "inside": len(inside), "experiment": result.experiment, "parent_run_id": result.parent_run_id,
            **({"default": {**default, "tune": _mean(default, split.tuning), "holdout": _mean(default, split.held_out)}}
               if default else {})}


def _cold_done_before(spec: SweepSpec, store: Path, cold: dict[str, float]) -> None:
    """Cold items the grid did not do itself, because the store had them (FinanceBench's dense indexes,
    embedded beforehand by ``rag-pipeline ingest``): a dense index's embedding and upsert seconds as its
    manifest recorded them; chunking, timed now (it is cheap)."""
    from rag_core.ingest.chunkers.recursive import chunk_corpus
    from rag_core.retrieve.index import Index
    from rag_core.workbench.execution.evaluation import load_eval_inputs

    missing = [item for item, seconds in cold.items() if seconds == 0 and not item.startswith("bm25")]
    if not missing:
        return
    corpus = load_eval_inputs(input_dir=spec.input_dir, golden=spec.golden, store_dir=store).corpus
    for item in missing:
        kind, chunking = item.split()[:2]
        size, overlap = map(int, chunking.split("/"))
        config = load_config(None, {**spec.base, "chunk_size": size, "overlap": overlap})
        if kind == "chunk":
            started = time.perf_counter()
            chunk_corpus(corpus.documents, size, overlap, config.per_page)
            cold[item] = time.perf_counter() - started
        else:
            manifests = sorted(Index(store, corpus, config).dir.glob("dense-*.json"))
            data = json.loads(manifests[0].read_text()) if manifests else {}
            cold[item] = float(data.get("embed_seconds", 0.0)) + float(data.get("upsert_seconds", 0.0))


def _kernel_startup(points: list[dict]) -> float:
    """The grid's kernel start-up and model loading show as a few points far slower than their mode's
    median: replace their warm time with the median and return the excess (charged to no one)."""
    excess = 0.0
    for mode in {p["mode"] for p in points}:
        group = [p for p in points if p["mode"] == mode]
        median = statistics.median(p["warm"] for p in group)
        for point in group:
            if point["warm"] > 3 * median:
                excess += point["warm"] - median
                point["warm"] = median
    return excess


def _mean(point: dict, query_ids) -> float:
    return statistics.mean(point["values"][q] for q in query_ids)


# --- the replay ---------------------------------------------------------------------------------------------
@dataclass
class Replay:
    """A ``TrialEvaluator`` over the exhaustive table."""
    table: dict[str, Any]

    def __post_init__(self) -> None:
        self.by_key = {p["key"]: p for p in self.table["points"]}
        groups: dict[str, float] = {}
        for point in self.table["points"]:
            groups[point["candidates"]] = max(groups.get(point["candidates"], 0.0), point["warm"])
        self.group_warm = groups
        self.touched: set[str] = set()
        self.started = False
        self.n_all = len(self.table["query_ids"])

    def cost(self, point: dict, queries: int) -> float:
        warm = self.group_warm[point["candidates"]]
        fixed = min(point["fixed"], warm)
        return fixed + (warm - fixed) * queries / self.n_all

    def cold_items(self, point: dict) -> list[str]:
        items = [f"chunk {point['chunking']}"]
        items += [f"dense {point['chunking']}"] if point["mode"] != "bm25" else []
        items += [point["bm25"]] if point["bm25"] else []
        return items

    def evaluate(self, sweep_point) -> TrialScore:
        point = self.by_key[digest(sweep_point.config.as_params())]
        new = [item for item in self.cold_items(point) if item not in self.touched]
        self.touched.update(new)
        cold = sum(self.table["cold"].get(item, 0.0) for item in new)
        if not self.started:  # the kernel's start-up and model loading, once per search
            self.started, cold = True, cold + self.table["startup_seconds"]
        value = statistics.mean(point["values"][q] for q in sweep_point.query_ids)
        return TrialScore(value, self.cost(point, len(sweep_point.query_ids)) + cold, cold)

    def embedding_needed(self, config):
        point = self.by_key[digest(config.as_params())]
        return None if point["mode"] == "bm25" or f"dense {point['chunking']}" in self.touched else f"dense {point['chunking']}"

    def cold_estimate(self, config):
        point = self.by_key[digest(config.as_params())]
        return self.table["cold"].get(f"dense {point['chunking']}")

    def unavailable(self, config):
        return None

    def build(self, config):
        return 0.0


def search_budget(table: dict) -> float:
    """The searches' budget in seconds: 25% of C less the dearest evaluation (the last one may pass a
    budget in seconds), so that the search stays within 25% of C."""
    return BUDGET_SHARE * table["compute_seconds"] - max(p["warm"] for p in table["points"])


def final_cost(table: dict, winner: dict | None, evaluator: "Replay") -> float:
    """The final holdout runs after a search: its winner and the default configuration on every query
    (measured warm times; the default's from the grid's extra point 0)."""
    default = table.get("default", {}).get("warm", statistics.median(p["warm"] for p in table["points"]))
    return default + (evaluator.cost(winner, len(table["query_ids"])) if winner else 0.0)


def search_settings(strategy: str, seed: int, seconds: float) -> SearchSettings:
    return SearchSettings(strategy, Budget(seconds=seconds), None, seed)


def replay(corpus: str, table: dict, seeds: int) -> list[dict]:
    spec = variant(SPACES[corpus], f"search-{corpus}-replay", strategy="tpe", budget=1)
    budget = search_budget(table)
    low = table["best"]["tune"]["low"]
    rows = []
    with tempfile.TemporaryDirectory(prefix="search-replay-") as folder:
        for strategy in STRATEGIES:
            for seed in range(seeds):
                settings = search_settings(strategy, seed, budget)
                storage = f"sqlite:///{folder}/{strategy}-{seed}.db"
                evaluator = Replay(table)
                rungs = settings.halving.rungs(len(table["tuning"])) if strategy == "halving" else (1,)
                study = open_study(storage, "replay", settings, settings.halving.eta ** (len(rungs) - 1))
                driver = SearchDriver(study, spec.space, spec.base, settings, evaluator, table["tuning"],
                                      metric=table["metric"], echo=lambda line: None, storage=storage, study_name="replay")
                history = driver.run()
                rows.append(_replay_row(corpus, strategy, seed, history, evaluator, table, low))
                row = rows[-1]
                print(f"{corpus} {strategy} seed {seed}: {row['trials']} trials, {row['evaluations']} evaluations, "
                      f"charged {row['charged_seconds']:.0f} s = {row['share']:.1%} of C ({row['share_with_final']:.1%} "
                      f"with the final runs); "
                      f"choice tuning {row['choice_tune']:.3f} (interval low {low:.3f}: "
                      f"{'inside' if row['inside'] else 'OUTSIDE'}), held-out {row['choice_holdout']:.3f}; "
                      f"optimizer {row['optimizer_ms']:.0f} ms/trial", flush=True)
    return rows


def _replay_row(corpus, strategy, seed, history, evaluator: Replay, table, low) -> dict:
    best = history.best
    point = evaluator.by_key[best.config_key] if best else None
    first_inside = next((spent for spent, value in history.best_so_far()
                         if not math.isnan(value) and value >= low), None)
    trials = len(history.trials)
    return {"corpus": corpus, "strategy": strategy, "seed": seed, "trials": trials,
            "evaluations": sum(1 for t in history.trials for e in t.evaluations if not e[3]),
            "charged_seconds": history.spent_seconds, "final_seconds": final_cost(table, point, evaluator),
            "share": history.spent_seconds / table["compute_seconds"],
            "share_with_final": (history.spent_seconds + final_cost(table, point, evaluator)) / table["compute_seconds"],
            "choice": point["label"] if point else None,
            "choice_tune": _mean(point, table["tuning"]) if point else math.nan,
            "choice_holdout": _mean(point, table["held_out"]) if point else math.nan,
            "inside": bool(point) and _mean(point, table["tuning"]) >= low - 1e-12,
            "first_inside_seconds": first_inside,
            "optimizer_ms": 1000 * sum(t.optimizer_seconds for t in history.trials) / max(trials, 1),
            "stopped": history.stopped, "choice_key": best.config_key if best else None,
            "trial_keys": [t.config_key for t in history.trials]}


# --- validation: real searches --------------------------------------------------------------------------------
def validate(corpus: str, table: dict, tracking_uri: str) -> list[dict]:
    budget = search_budget(table)
    rows = []
    for strategy in STRATEGIES:
        store = HERE / f"store-{corpus}-validate-{strategy}"
        shutil.rmtree(store, ignore_errors=True)
        spec = variant(SPACES[corpus], f"search-{corpus}-validate-{strategy}", strategy=strategy,
                       budget={"seconds": round(budget, 1)}, search_seed=0)
        started = time.perf_counter()
        result = run_sweep(spec, store, tracking_uri=tracking_uri, rerun=True, output_dir=HERE / "notebooks" / spec.name,
                           echo=lambda line: print(line, flush=True))
        history = result.search
        trials = [{"number": t.number, "key": t.config_key, "status": t.status,
                   "evaluations": [[q, v] for q, v, *_ in t.evaluations]} for t in history.trials]
        rows.append({"corpus": corpus, "strategy": strategy, "budget_seconds": budget,
                     "charged_seconds": history.spent_seconds, "search_wall_seconds": history.wall_seconds,
                     "total_wall_seconds": time.perf_counter() - started, "trials": trials,
                     "choice": history.best.config_key if history.best else None,
                     "holdout": result.holdout.as_dict() if result.holdout else None, "store": str(store)})
        print(f"validate {corpus} {strategy}: charged {history.spent_seconds:.0f} s, search wall "
              f"{history.wall_seconds:.0f} s ({history.spent_seconds / history.wall_seconds:.2f}), total with the final "
              f"runs {rows[-1]['total_wall_seconds']:.0f} s", flush=True)
    return rows


def compare_with_replay(validation: list[dict], replays: list[dict], table: dict) -> list[dict]:
    """Seed 0, real against replayed: do the trials evaluate the same configurations, and does each real
    value equal the table's mean over the same queries (the table is what the replay is told)?"""
    from rag_core.workbench.search.driver import query_order

    by_key = {p["key"]: p for p in table["points"]}
    order = query_order(table["tuning"], 0)
    out = []
    for row in validation:
        replayed = next(r for r in replays if r["strategy"] == row["strategy"] and r["seed"] == 0)
        differences = [abs(statistics.mean(by_key[t["key"]]["values"][q] for q in order[:n]) - value)
                       for t in row["trials"] if t["key"] in by_key for n, value in t["evaluations"] if value is not None]
        real_keys, replay_keys = [t["key"] for t in row["trials"]], replayed["trial_keys"]
        same = next((i for i, (a, b) in enumerate(zip(real_keys, replay_keys)) if a != b), min(len(real_keys), len(replay_keys)))
        out.append({"strategy": row["strategy"], "real_trials": len(real_keys), "replayed_trials": len(replay_keys),
                    "same_leading_trials": same, "max_value_difference": max(differences, default=0.0),
                    "real_charged_seconds": row["charged_seconds"], "real_wall_seconds": row["search_wall_seconds"],
                    "replay_charged_seconds": replayed["charged_seconds"], "same_choice": row["choice"] == replayed["choice_key"]})
        print(f"seed 0 {row['strategy']}: {same} leading trials identical ({len(real_keys)} real, {len(replay_keys)} replayed); "
              f"max |real - table| {out[-1]['max_value_difference']:.2e}; charged real {row['charged_seconds']:.0f} s "
              f"(wall {row['search_wall_seconds']:.0f} s) vs replay {replayed['charged_seconds']:.0f} s", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", choices=("sample", "financebench", "both"), default="both")
    parser.add_argument("--phase", choices=("all", "exhaustive", "validate", "replay", "table"), default="all")
    parser.add_argument("--fb-store", default="/work/stores/search-fb")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--embedded", action="store_true",
                        help="replay as if every dense index were in the store already (a store a team reuses): no "
                             "embedding is charged, to the grid's C or to the searches; results under '<corpus> embedded'")
    parser.add_argument("--validate", default="sample", help="corpora whose validation searches run for real, each "
                        "into a fresh store (FinanceBench's would embed both chunkings again: about 25 min each) [sample]")
    parser.add_argument("--out", default=str(RESULTS / "search.json"))
    args = parser.parse_args()
    HERE.mkdir(parents=True, exist_ok=True)
    tracking_uri = f"sqlite:///{HERE / 'mlflow.db'}"
    corpora = ("sample", "financebench") if args.corpus == "both" else (args.corpus,)
    out = Path(args.out)
    results = json.loads(out.read_text()) if out.exists() else {}
    for corpus in corpora:
        store = Path(args.fb_store) if corpus == "financebench" else HERE / "store-sample"
        tables = HERE / f"{corpus}-table.json"
        name = f"{corpus} embedded" if args.embedded else corpus
        entry = results.setdefault(name, {})
        if args.phase in ("all", "exhaustive") and not args.embedded:
            table = exhaustive(corpus, store, tracking_uri)
            tables.write_text(json.dumps(table))
        table = json.loads(tables.read_text())
        if args.embedded:
            table = embedded(table)
        entry["exhaustive"] = {key: value for key, value in table.items() if key not in ("points",)}
        if args.phase in ("all", "validate") and corpus in args.validate.split(",") and not args.embedded:
            entry["validation"] = validate(corpus, table, tracking_uri)
        if args.phase in ("all", "replay"):
            rows = replay(corpus, table, args.seeds)
            entry["replay"] = rows
            entry["summary"] = summary(rows, table)
            if entry.get("validation"):
                entry["real_vs_replay"] = compare_with_replay(entry["validation"], rows, table)
        if args.phase == "table" and entry.get("replay"):
            entry["summary"] = summary(entry["replay"], table)
        if entry.get("summary"):
            print_summary(name, entry["summary"], table)
        write_results(results, out)


def embedded(table: dict) -> dict:
    """The table as if the dense indexes were in the store already: their embedding is charged to no one."""
    cold = {item: 0.0 if item.startswith("dense ") else seconds for item, seconds in table["cold"].items()}
    saved = sum(table["cold"].values()) - sum(cold.values())
    return {**table, "cold": cold, "compute_seconds": table["compute_seconds"] - saved}


def summary(rows: list[dict], table: dict) -> dict:
    values = {}
    for strategy in STRATEGIES:
        mine = [r for r in rows if r["strategy"] == strategy]
        values[strategy] = {"seeds": len(mine), "inside": sum(r["inside"] for r in mine),
                            "inside_within_budget": sum(r["inside"] and r["share"] <= BUDGET_SHARE + 1e-9 for r in mine),
                            "mean_share": statistics.mean(r["share"] for r in mine),
                            "max_share": max(r["share"] for r in mine),
                            "mean_share_with_final": statistics.mean(r["share_with_final"] for r in mine),
                            "inside_with_final_within_budget": sum(r["inside"] and r["share_with_final"] <= BUDGET_SHARE + 1e-9
                                                                   for r in mine),
                            "mean_first_inside_share": statistics.mean(_first_inside(r, table) for r in mine),
                            "max_first_inside_share": max(_first_inside(r, table) for r in mine),
                            "mean_choice_tune": statistics.mean(r["choice_tune"] for r in mine),
                            "mean_choice_holdout": statistics.mean(r["choice_holdout"] for r in mine),
                            "mean_optimizer_ms": statistics.mean(r["optimizer_ms"] for r in mine)}
    values["grid"] = {"choice_tune": table["best"]["tune"]["estimate"], "choice_holdout": table["best"]["holdout"],
                      "interval": table["best"]["tune"]}
    return values


def _first_inside(row: dict, table: dict) -> float:
    """The share of C charged when the search first held a configuration inside the interval (inf: never)."""
    seconds = row["first_inside_seconds"]
    return math.inf if seconds is None else seconds / table["compute_seconds"]


def print_summary(corpus: str, values: dict, table: dict) -> None:
    grid = values["grid"]
    print(f"\n{corpus}: exhaustive C = {table['compute_seconds']:.0f} s over {len(table['query_ids'])} queries "
          f"({len(table['tuning'])} tuning); grid's choice: tuning {grid['choice_tune']:.3f} "
          f"[{grid['interval']['low']:.3f}, {grid['interval']['high']:.3f}], held-out {grid['choice_holdout']:.3f}; "
          f"{table['inside']} of {len(table['points'])} points inside that interval")
    print(f"{'strategy':>9} {'inside, <=25% C':>16} {'share of C':>10} {'max':>6} {'1st inside':>10} {'+ final runs':>12} "
          f"{'inside, <=25% + final':>22} {'tuning':>7} {'held-out':>8} {'optimizer ms':>12}  (replayed; means over seeds)")
    for strategy in STRATEGIES:
        v = values[strategy]
        first = v.get("mean_first_inside_share", math.nan)
        print(f"{strategy:>9} {v['inside_within_budget']:>10}/{v['seeds']:<5} {v['mean_share']:>10.1%} {v['max_share']:>6.1%} "
              f"{first:>10.1%} {v['mean_share_with_final']:>12.1%} "
              f"{v['inside_with_final_within_budget']:>16}/{v['seeds']:<5} {v['mean_choice_tune']:>7.3f} "
              f"{v['mean_choice_holdout']:>8.3f} {v['mean_optimizer_ms']:>12.0f}")
    blank = f"{'':>16} {'':>10} {'':>6} {'':>10} {'':>12} {'':>22}"
    print(f"{'grid':>9} {blank} {grid['choice_tune']:>7.3f} {grid['choice_holdout']:>8.3f}   (all of C)")
    if "default" in table:
        print(f"{'default':>9} {blank} {table['default']['tune']:>7.3f} {table['default']['holdout']:>8.3f}")


if __name__ == "__main__":
    main()
