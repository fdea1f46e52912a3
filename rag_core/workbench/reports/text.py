"""Plain-text reports of results, for the terminal (``rag-pipeline``) and the notebooks alike.

- ``format_answer`` / ``format_explain``: a query's answer with its sources, and each passage's rank
  and score at every stage (``query`` and ``query --explain``);
- ``format_eval_report``: one evaluation's metrics table, context, latency per stage and index
  statistics (``eval``, and ``show`` in ``notebooks/02-evaluate.ipynb``);
- ``format_sweep`` / ``format_holdout``: a sweep's comparison table with intervals, its work and the
  honest winner (``sweep``, ``make demo``, ``notebooks/03-compare.ipynb``);
- ``format_calibration``: the judge against human scores (``calibrate-judge``).
Each takes the result record and returns a string; none prints, reads arguments or exits (that is
``rag_core.cli``). The notes of the eval and sweep reports are wrapped to the terminal's width
(``rag_core.terminal_text.fit``); their tables are not (they fit, but for ``sweep --wide``). Heavy
imports (pandas) happen inside the function that needs them.
Left out: JSON output (each command's ``--json`` prints its records as they are).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from rag_core.evaluate.metrics import metric_names
from rag_core.evaluate.relevance import LEVELS
from rag_core.retrieve.pipeline import shown_stages
from rag_core.retrieve.retrievers import retriever_choices
from rag_core.retrieve.windows import UNREAD_WARN_SHARE
from rag_core.workbench.reports.answer_text import answer_sections
from rag_core.terminal_text import TERMINAL_WIDTH, fit

if TYPE_CHECKING:
    from rag_core.config import RagConfig
    from rag_core.evaluate.evaluator import EvalReport
    from rag_core.retrieve.pipeline import Retrieval
    from rag_core.service import QueryResult
    from rag_core.workbench.plans.cost import CostEstimate
    from rag_core.workbench.plans.results import EvalRun, SweepResult
    from rag_core.workbench.plans.sweep_file import SweepSpec
    from rag_core.workbench.search.driver import SearchHistory
    from rag_core.workbench.statistics.honest import WinnerReport
    from rag_core.workbench.statistics.judge_calibration import Calibration


# --- a query -------------------------------------------------------------------------------------
def format_answer(result: "QueryResult") -> str:
    answer = result.answer
    lines = [answer.text.rstrip()]
    if answer.warning:
        lines += ["", f"note: {answer.warning}"]
    if answer.sources:
        lines += ["", "Sources:"] + [f"  {source}" for source in answer.sources]
    meta = f"mode: {answer.mode}"
    if answer.model:
        meta += f", model: {answer.model}"
    if answer.usage:
        meta += f", tokens: {answer.usage.get('input_tokens')} in / {answer.usage.get('output_tokens')} out"
    lines += ["", meta]
    return "\n".join(lines)


def format_explain(result: "QueryResult", config: "RagConfig | None" = None) -> str:
    """A table: each final passage's rank and score at every stage it went through."""
    stages = shown_stages(result.retrieval)
    cell = max(12, min(16, (TERMINAL_WIDTH - 44) // max(len(stages), 1)))  # the table fits 120 columns up to 6 stages
    header = f"{'#':>2}  {'passage':<40}" + "".join(f"{stage:>{cell}}" for stage in stages)
    rows = [header, "-" * len(header)]
    for position, hit in enumerate(result.retrieval.hits, start=1):
        label = f"{hit.chunk.doc_id} p{hit.chunk.page_start}" + (
            f"-{hit.chunk.page_end}" if hit.chunk.page_end != hit.chunk.page_start else "")
        cells = []
        for stage in stages:
            score = hit.stages.get(stage)
            ran = stage in result.retrieval.stages
            cells.append(f"{f'#{score.rank} {score.score:.4g}' if score else ('-' if ran else 'off'):>{cell}}")
        rows.append(f"{position:>2}  {label[:40]:<40}" + "".join(cells))
    latency = ", ".join(f"{name} {ms:.1f} ms" for name, ms in result.retrieval.latency_ms.items())
    rows += ["", "(rank and score per stage; '-' = not in that stage's list, 'off' = stage not run)",
             f"latency: {latency}"]
    startup = result.embedder_startup
    if startup:
        parts = [f"{label} {startup[key]:.0f} ms" for key, label in
                 (("import_ms", "import"), ("load_ms", "model load"), ("first_call_ms", "first call")) if key in startup]
        note = ("; torch's import is unavoidable on this backend (onnx / onnx-int8 skip it once their export is in "
                "the store)" if startup.get("runtime", "").startswith("torch") else "")
        rows.append(f"embedding model start-up in this process ({startup.get('runtime', '?')}): "
                    f"{', '.join(parts)}{note}")
    if result.retrieval.filter:
        rows.append(f"filter: {result.retrieval.filter} (applied before ranking)")
    if result.retrieval.routed and config is not None and config.doc_evidence != "none":
        rows.append(f"document evidence ({config.doc_evidence}, weight {config.doc_evidence_weight:g}; best documents, "
                    "score): " + ", ".join(f"#{rank} {item.id} ({item.score:.3g})"
                                           for rank, item in enumerate(result.retrieval.routed, start=1)))
    elif result.retrieval.routed:
        rows.append("routed to: " + ", ".join(f"#{rank} {item.id} ({item.score:.3g})"
                                             for rank, item in enumerate(result.retrieval.routed, start=1)))
    elif config is not None and config.route_docs:
        rows.append("routing: not applied, the question names no document (route_when named): every document searched")
    rows += explain_retrieval_settings(result.retrieval, config)
    return "\n".join(rows)


def explain_retrieval_settings(retrieval: "Retrieval", config: "RagConfig | None") -> list[str]:
    """Lines on fusion, query expansion and parent-child chunks, when they differ from plain retrieval."""
    lines: list[str] = []
    fused = len(retrieval.retrievers) > 1
    weights = [choice.weight for choice in retriever_choices(config)] if config is not None and fused else []
    if config is not None and fused and (config.fusion != "rrf" or any(weight is not None for weight in weights)):
        shown = ",".join(f"{w:g}" for w in weights if w is not None) or "equal"
        norm = "" if config.fusion == "rrf" else f", {config.fusion_norm} normalisation"
        lines.append(f"fusion: {config.fusion}{norm}, weights ({', '.join(retrieval.retrievers)}) {shown}")
    expansion = retrieval.expansion
    if expansion.get("method") == "rm3":
        terms = ", ".join(f"{term} {weight:.3f}" for term, weight in expansion.get("terms", {}).items())
        lines.append(f"query expansion rm3 (BM25 query as weighted terms): {terms or 'no feedback documents'}")
    elif expansion.get("method") == "multi_query":
        lines.append(f"query expansion multi_query ({expansion['model']}, {expansion['input_tokens']} tokens in / "
                     f"{expansion['output_tokens']} out); rephrasings, each retrieved and fused with RRF:")
        lines += [f"  {n}. {text}" for n, text in enumerate(expansion["queries"], start=1)]
    elif expansion.get("method") == "hyde":
        lines.append(f"query expansion hyde ({expansion['model']}, {expansion['input_tokens']} tokens in / "
                     f"{expansion['output_tokens']} out); hypothetical passage embedded with the query:")
        lines.append("  " + " ".join((expansion.get("passage") or "(empty)").split())[:300])
    if retrieval.child_ranking:
        lines.append(f"parent-child: {len(retrieval.child_ranking)} child chunks ranked, collapsed to their parents "
                     "(each at its best child's rank); the passages above are the parents")
    matched = expansion.get("dense_windows", {})  # unit id -> its best window, for units of several windows
    shown = [(position, matched[hit.chunk.id]) for position, hit in enumerate(retrieval.hits, start=1)
             if hit.chunk.id in matched]
    if shown:
        pooling = f" (dense_pooling {config.dense_pooling})" if config is not None else ""
        lines.append(f"dense windows{pooling}: the passage's best window, as the model read it")
        lines += [f"  #{position}: {window}" for position, window in shown]
    for key, found in expansion.items():  # page retrievers (page_units/<name>): chunk id -> the page it was found on
        on_pages = [(position, found[hit.chunk.id]) for position, hit in enumerate(retrieval.hits, start=1)
                    if key.startswith("page_units/") and hit.chunk.id in found]
        if on_pages:
            lines.append(f"page retriever {key.partition('/')[2]}: the page each passage was found on")
            lines += [f"  #{position}: {page}" for position, page in on_pages]
    return [""] + lines if lines else []


# --- an evaluation -------------------------------------------------------------------------------
def format_eval_report(report: "EvalReport") -> str:
    metrics, params = report.metrics, report.params
    ks = sorted({int(k) for k in params.get("metrics_k", "5,10").split(",")})
    names = metric_names(ks)
    lines = [f"Retrieval: {int(metrics.get('eval/queries', 0))} queries, mode {params.get('mode')}, "
             f"rerank_depth {params.get('rerank_depth')}; the final ranking is scored to depth {max(ks)}"]
    lines += text_table(["level", *names], [[level, *(f"{metrics.get(f'{level}/{name}', 0.0):.3f}" for name in names)]
                                            for level in (*LEVELS, *(("child",) if "child/mrr" in metrics else ()))])
    lines.append(f"Page metrics credit a passage's pages by page_credit {params.get('page_credit', 'tied')}.")
    lines += evidence_lines(metrics, params)
    alone = [name[:-len("/page/recall@5")] for name in metrics if name.endswith("/page/recall@5") and name.count("/") == 2]
    if alone:  # several retrievers fused: each one's own list, scored the same way
        lines += ["", "Each retriever alone (its own list before fusion)"]
        shown = [name for name in ("page/recall@5", "page/ndcg@10", "doc/recall@5", "chunk/ndcg@10")
                 if f"{alone[0]}/{name}" in metrics]
        lines += text_table(["retriever", *shown], [[name, *(f"{metrics[f'{name}/{metric}']:.3f}" for metric in shown)]
                                                    for name in alone] +
                            [["final ranking", *(f"{metrics.get(metric, 0.0):.3f}" for metric in shown)]])
    lines += ["", f"Context (the k={params.get('k')} passages given to the LLM): "
                  f"recall {metrics.get('context/recall', 0.0):.3f}, precision {metrics.get('context/precision', 0.0):.3f}, "
                  f"{metrics.get('context/words', 0.0):.0f} words per query"]
    for title, header, rows in answer_sections(report):  # eval --answers, --oracle, --judge
        lines += ["", title] + (text_table(header, rows) if header and rows else [])
    stages = [name[len("latency/"):-len("_p50_ms")] for name in metrics if name.endswith("_p50_ms")]
    if stages:
        lines += ["", "Latency per query (ms)"]
        lines += text_table(["stage", "p50", "p95"], [[stage, f"{metrics[f'latency/{stage}_p50_ms']:.2f}",
                                                       f"{metrics[f'latency/{stage}_p95_ms']:.2f}"] for stage in stages])
    if "expansion/input_tokens" in metrics:
        lines.append(f"Query expansion {params.get('query_expansion')}: {metrics['expansion/input_tokens']:.0f} tokens in, "
                     f"{metrics['expansion/output_tokens']:.0f} out per query (LLM)")
    index = {name[len("index/"):]: value for name, value in metrics.items() if name.startswith("index/")}
    lines += ["", f"Index: {int(index.get('documents', 0))} documents, {int(index.get('chunks', 0))} chunks "
                  f"(chunked now: {'yes' if index.get('chunkings_built') else 'no, reused'}), "
                  f"ingest {index.get('ingest_seconds', 0.0):.1f} s"]
    if "embed_model_used" in params:
        rate = index.get("embed_chunks_per_s")
        lines.append(f"Embeddings: {int(index.get('embedded', 0))} computed"
                     + (f" ({rate:.1f} chunks/s)" if rate else "")
                     + f", {int(index.get('embed_cache_hits', 0))} from cache; {int(index.get('truncated', 0))} chunks "
                     f"({100 * index.get('truncated_share', 0.0):.1f}%) longer than the model's "
                     f"{int(index.get('max_seq_length', 0))} tokens"
                     + (f" (read as {int(index['windows'])} windows, dense_pooling {params.get('dense_pooling')})"
                        if index.get("windows", 0) > index.get("chunks", 0) else ""))
        lines += dense_reading_lines(0.0, index.get("unread_share", 0.0), "", warn=False)  # the build warned
        lines.append(f"Embedding model: {params['embed_model_used']}")
    if index.get("pages"):  # page retrievers (page_bm25, page_dense)
        lines.append(f"Page units: {int(index['pages'])} pages" + (f", {int(index['page_windows'])} dense windows "
                     f"({int(index.get('page_embedded', 0))} embedded now)" if index.get("page_windows") else "")
                     + f"; built or loaded in {index.get('page_seconds', 0.0):.1f} s")
    if "rerank_model_used" in params:
        lines.append(f"Re-rank: {int(metrics.get('rerank/pairs_scored', 0))} pairs scored, "
                     f"{int(metrics.get('rerank/cache_hits', 0))} from cache; model: {params['rerank_model_used']}")
    return "\n".join(fit(line) for line in lines)  # the tables fit; a long note wraps


def evidence_lines(metrics: Mapping[str, float], params: Mapping[str, str]) -> list[str]:
    """The evidence metrics (``rag_core.evaluate.evidence_budget``) as a table by budget, or why there are none."""
    budgets = [int(budget) for budget in params.get("context_budgets", "").split(",") if budget.strip()]
    scored = int(metrics.get("evidence/queries", 0))
    queries = int(metrics.get("eval/queries", 0))
    if not budgets or not scored:
        return ["", "Evidence at a context budget: not available (no query's evidence quotes its text)"]
    lines = ["", f"Evidence in the ranking's first B words ({scored} of {queries} queries quote their evidence)"]
    return lines + text_table(["budget (words)", "recall", "precision", "iou"], [
        [str(budget), *(f"{metrics[f'evidence/{name}@{budget}']:.3f}" for name in ("recall", "precision", "iou"))]
        for budget in budgets])


def dense_reading_lines(longer_share: float, unread_share: float, where: str, warn: bool = True) -> list[str]:
    """How much of the indexed text dense search reads: units longer than the embedding model's window
    (`longer_share`, when known) and the share never read (``dense_pooling: first``); with `warn`, one
    warning line above ``UNREAD_WARN_SHARE`` naming the setting that fixes it."""
    lines = []
    if longer_share or unread_share:
        lines.append(f"Dense search, {where}" + (f"{100 * longer_share:.0f}% of units longer than the embedding "
                                                f"model's window, " if longer_share else "")
                     + (f"{100 * unread_share:.1f}% of the indexed text never read (dense_pooling first)"
                        if unread_share else "every word read (windows)"))
    if warn and unread_share > UNREAD_WARN_SHARE:
        lines.append(f"warning: dense search never reads {100 * unread_share:.0f}% of the indexed text ({where}"
                     "dense_pooling first truncates); set dense_pooling: mean_top2 to embed long units as windows")
    return lines


def show(evaluation: "EvalRun") -> None:
    """In a notebook: display the metrics table and record the result (a JSON output papermill keeps,
    which the sweep reads back: ``rag_core.workbench.execution.points.read_recorded_result``)."""
    from IPython.display import display

    from rag_core.workbench.plans.results import RESULT_MIME

    print(format_eval_report(evaluation.report))
    if evaluation.run_id:
        print(f"\nMLflow run {evaluation.run_id} in experiment {evaluation.experiment!r} ({evaluation.tracking_uri})")
    display({RESULT_MIME: json.loads(json.dumps(evaluation.record(), default=str)),
             "text/plain": "(evaluation result recorded as JSON)"}, raw=True)


# --- a sweep -------------------------------------------------------------------------------------
def format_sweep(result: "SweepResult", wide: bool = False) -> str:
    """The comparison table (best first), what was not run and why, and where things are. The table fits
    120 columns (``compact_table``: rank, verdict, settings, the ranking metric, held-out, latency);
    `wide`: every metric with its interval, and the run ids."""
    import textwrap

    import pandas as pd

    from rag_core.workbench.reports.compact_table import WIDTH, compact_table
    from rag_core.workbench.reports.sweep_report import VS_BEST_LEGEND
    from rag_core.workbench.statistics.intervals import shown_with_intervals

    ranked_by = f"tune/{result.primary_metric}" if result.holdout else result.primary_metric
    if wide or ranked_by not in result.table:
        with pd.option_context("display.width", 250, "display.max_columns", 50, "display.max_colwidth", 40):
            table = shown_with_intervals(result.table).to_string(index=False, float_format=lambda v: f"{v:.3f}", na_rep="")
        legend = [VS_BEST_LEGEND] if "vs best" in result.table else []
    else:
        held_out = f"holdout/{result.primary_metric}" if result.holdout else None
        table = compact_table(result.table, ranked_by, held_out if held_out in result.table else None,
                              result.table_metrics)
        legend = textwrap.wrap(("verdict: the point's role, then its paired t-test over queries against the best "
                                "(Holm-corrected p): same = indistinguishable (p > 0.05), within 1 SE = what select: "
                                "one_se chooses from; " if "vs best" in result.table else "")
                               + "p50 ms = latency/total_p50_ms; an empty setting is one the point's components do "
                               "not read; the sweep file's table_metrics chooses these "
                               "columns. Every metric with its interval: rag-pipeline sweep FILE --wide (finished "
                               "points are not run again), or comparison.csv on the parent run in MLflow", WIDTH)
    work = result.work
    credits = sorted({outcome.point.config.page_credit for outcome in result.outcomes})
    lines = [
        f"Sweep {result.name!r}: best first by {ranked_by}{' (the tuning queries)' if result.holdout else ''}; "
        f"page_credit {', '.join(credits) or 'tied'}",
        "[95% bootstrap interval over queries]",
        table,
        *legend,
        "",
        *([format_search(result.search), ""] if result.search else []),
        *([format_holdout(result.holdout), ""] if result.holdout else []),
        f"Work: {int(work['sweep/points'])} points, {int(work['sweep/distinct_chunkings'])} distinct chunkings, "
        f"{int(work['sweep/dense_indexes_built'])} dense indexes built, {int(work['sweep/chunks_embedded'])} chunks "
        f"embedded ({int(work['sweep/embed_cache_hits'])} from cache), {int(work['sweep/candidates_reused'])} "
        f"query candidate lists reused ({int(work['sweep/candidates_computed'])} computed), "
        f"{int(work['sweep/rerank_pairs_scored'])} re-rank pairs scored "
        f"({int(work['sweep/rerank_cache_hits'])} from cache); {work['sweep/wall_seconds']:.0f} s",
        *dense_reading_lines(work.get("sweep/truncated_share_max", 0.0), work.get("sweep/unread_share_max", 0.0),
                             "the worst point: "),
        f"MLflow: experiment {result.experiment!r}, parent run {result.parent_run_id} ({result.tracking_uri})",
        f"Executed notebooks: {result.output_dir}",
    ]
    if result.unavailable:
        lines.append(result.unavailable[0].upper() + result.unavailable[1:])
    if result.failed:
        lines.append(f"{len(result.failed)} point(s) FAILED: " + "; ".join(
            f"{outcome.point.label}: {(outcome.error or '').splitlines()[0][:150]}" for outcome in result.failed)
            + ". Run the sweep again to retry them.")
    return "\n".join(line if line is table else fit(line) for line in lines)  # a --wide table stays whole


def format_holdout(report: "WinnerReport") -> str:
    """The honest winner: chosen on the tuning queries, scored on the held-out ones, next to the default."""
    split, metric = report.split, report.metric
    lines = [f"Held out {len(split.held_out)} of {len(split.tuning) + len(split.held_out)} queries "
             f"(holdout {split.fraction:g}, seed {split.seed}); {metric}; winner by select: {report.selection.rule}; "
             f"{len(report.selection.indistinguishable())} point(s) indistinguishable from the best on the tuning queries:",
             f"  winner  {report.winner.label}: tuning {report.winner.tune}, held-out {report.winner.holdout}; "
             f"optimism (tuning - held-out) {report.optimism:+.3f}"]
    if report.default is None:
        lines.append(f"  default configuration: {report.default_status}")
    else:
        lines.append(f"  default {report.default.label} ({report.default_status}): tuning {report.default.tune}, "
                     f"held-out {report.default.holdout}")
        drop = report.default.tune.estimate - report.default.holdout.estimate
        lines.append(f"  the default's own tuning - held-out difference: {drop:+.3f} (the parts differ in difficulty); "
                     f"the winner's optimism beyond that: {report.optimism - drop:+.3f}")
        if report.gain is not None:
            lines.append(f"  winner - default on the held-out queries: {report.gain.estimate:+.3f} "
                         f"[{report.gain.low:+.3f}, {report.gain.high:+.3f}]")
    return "\n".join(lines)


# --- the judge against human scores --------------------------------------------------------------
def format_calibration(calibration: "Calibration", what: str) -> str:
    lines = [f"Judge {calibration.provider} {calibration.model} against {what}", ""]
    header = ["axis", "n", "spearman", "kendall", "exact", "within-one", "judge-human"]
    rows = [[a.axis, str(a.n), _number(a.spearman), _number(a.kendall), f"{a.exact:.2f}", f"{a.within_one:.2f}",
             f"{a.mean_difference:+.2f}"] for a in calibration.axes]
    lines += text_table(header, rows)
    if calibration.missing:
        lines.append("Not scored by the judge (left out): "
                     + ", ".join(f"{axis} {count}" for axis, count in calibration.missing.items()))
    lines += ["", "Confusion (rows: human score, columns: judge score)"]
    for axis in calibration.axes:
        lines += [f"{axis.axis}", "         judge 1  2  3  4  5"]
        lines += [f"  human {human}  " + " ".join(f"{count:>2}" for count in counts)
                  for human, counts in enumerate(axis.confusion, start=1)]
    lines.append("Correlations are n/a when either side gives every answer the same score.")
    return "\n".join(lines)


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


# --- shared --------------------------------------------------------------------------------------
def text_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Aligned lines: the first column left-aligned, the others right-aligned, two spaces apart."""
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    return ["  ".join(str(cell).ljust(width) if i == 0 else str(cell).rjust(width)
                      for i, (cell, width) in enumerate(zip(row, widths)))
            for row in [header, *rows]]


# --- a search and its estimated cost -------------------------------------------------------------
def search_summary(history: "SearchHistory") -> dict:
    """What a search did, for ``sweep --json``."""
    best = history.best
    return {"strategy": history.strategy, "study": history.study_name, "storage": history.storage,
            "budget": history.budget, "rungs": list(history.rungs), "stopped": history.stopped,
            "spent_points": history.spent_points, "spent_seconds": history.spent_seconds, "counts": history.counts(),
            "optimizer_seconds_per_trial": history.metrics()["search/optimizer_seconds_per_trial"],
            "best": {"trial": best.number, "settings": best.changes, "value": best.value, "queries": best.queries}
            if best else None}


def format_search(history: "SearchHistory") -> str:
    """What the search did: trials by outcome, what it spent, where the study is, the winner."""
    counts = ", ".join(f"{count} {status}" for status, count in sorted(history.counts().items()))
    best = history.best
    rungs = f" in rungs of {'/'.join(map(str, history.rungs))} queries" if len(history.rungs) > 1 else ""
    lines = [f"Search ({history.strategy}{rungs}): {len(history.trials)} trials ({counts}); spent "
             f"{history.spent_points:.1f} points and {history.spent_seconds:.0f} s of the budget "
             f"({', '.join(f'{key} {value:g}' for key, value in history.budget.items())}); stopped: {history.stopped}",
             f"  optimizer: {history.metrics()['search/optimizer_seconds_per_trial'] * 1000:.0f} ms per trial; "
             f"study {history.study_name!r} in {history.storage} (run the command again to resume or continue)"]
    if best:
        settings = " ".join(f"{key}={value}" for key, value in best.changes.items())
        lines.append(f"  best: trial {best.number} ({settings}): {best.value:.3f} on {best.queries} tuning queries")
    return "\n".join(lines)


def format_estimate(spec: "SweepSpec", cost: "CostEstimate", host: str, all_queries: int) -> str:
    """``sweep --dry-run``: the space, what must be embedded, the estimated time and LLM cost."""
    def duration(seconds: float | None) -> str:
        if seconds is None:
            return "unknown"
        return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"

    budget = f", budget {cost.budget}" if cost.budget else ""
    size = f"{cost.space_size:,} configurations" if cost.space_size is not None else "a continuous space"
    lines = [f"Dry run of sweep {spec.name!r} (strategy {cost.strategy}{budget}): nothing is run.",
             f"  space: {size}" + ("" if cost.strategy == "grid" else ": " + "; ".join(spec.space.describe()))]
    lines += [f"  {line}" for line in cost.merged]
    lines.append(f"  queries per full evaluation: {cost.queries} (of {all_queries})")
    made = sum(not chunking.in_store for chunking in cost.chunking_plan)
    lines.append(f"  chunkings: {cost.chunkings if cost.chunkings is not None else 'many'} distinct"
                 + (f", {made} to make, {len(cost.chunking_plan) - made} in the store:" if cost.chunking_plan else ""))
    lines += [f"    {chunking.label}: " + (f"in the store ({chunking.chunks:,} chunks)" if chunking.in_store else "to make")
              + f" [{chunking.key}]" for chunking in cost.chunking_plan]
    models = [name if loaded == name else f"{name} (loads {loaded})" for name, loaded in cost.models_loaded.items()]
    lines.append(f"  embedding models: {', '.join(models or cost.models) or 'none (BM25 only)'}"
                 + (f"; dense indexes: {cost.dense_indexes} distinct" if cost.dense_indexes else ""))
    if cost.to_embed:
        limit = f"; max_new_chunkings {cost.embed_limit}" if cost.embed_limit is not None else ""
        lines.append(f"  to embed: {len(cost.to_embed)} dense index(es) not in the store{limit}:")
        lines += [f"    {need.label}: ~{need.chunks:,} chunks"
                  + (f" as ~{need.texts:,} windowed texts" if need.texts > need.chunks else "")
                  + f", {duration(need.seconds)}" for need in cost.to_embed]
    else:
        lines.append("  to embed: nothing (every dense index is in the store)")
    warm = ", ".join(f"{mode} {duration(seconds) if seconds is None or seconds >= 1 else f'{seconds:.2f} s'}"
                     for mode, seconds in cost.warm_seconds.items())
    evaluations = f"{cost.evaluations:g}" if cost.evaluations is not None else "as many as the seconds allow"
    lines.append(f"  evaluations: {evaluations}; warm time per evaluation: {warm}; embedding: {duration(cost.cold_seconds)}")
    lines.append(f"  estimated time: {duration(cost.total_seconds)} on one worker (throughputs measured on {host}; "
                 f"provisional: a shared or busy machine is slower)")
    lines.append(f"  LLM: {cost.llm or 'none (no LLM query expansion in the space; sweeps do not run the judge)'}")
    lines += [f"  note: {note}" for note in cost.notes]
    return "\n".join(lines)


# --- fine-tuning ---------------------------------------------------------------------------------
def format_finetune(outcome: Any, kind: str) -> str:
    """``rag-pipeline finetune``: where the model is, how it was trained, its learning curve and its
    held-out comparison. `outcome`: a ``rag_core.finetune.run.FinetuneOutcome`` (fine-tuning sits above
    this module)."""
    result, best = outcome.result, outcome.result.best
    flag = "--rerank-model" if kind == "reranker" else "--embed-model"
    lines = [f"Fine-tuned {kind}: {result.model_dir} (use it with {flag} {result.model_dir})",
             f"Base model: {outcome.base.name} ({outcome.base.note})",
             f"Trained on {len(outcome.data.train)} queries for {result.steps} steps in {result.train_seconds:.0f} s "
             f"on {result.device} ({result.precision}), peak memory {result.peak_memory_mb:.0f} MB"
             + (", stopped early" if result.stopped_early else "")
             + (f", resumed from {result.resumed_from}" if result.resumed_from else ""),
             f"Validation nDCG@10 ({len(outcome.data.validation)} queries): {result.curve[0].ndcg_at_10:.4f} before "
             f"training, {best.ndcg_at_10:.4f} at step {best.step} (the model kept)"
             + ("" if result.beat_base else ": no better than the base model; try other settings"),
             "Learning curve (step: validation nDCG@10): "
             + ", ".join(f"{point.step}: {point.ndcg_at_10:.4f}" for point in result.curve)]
    if outcome.heldout:
        report = outcome.heldout
        lines += ["", f"Held-out queries ({report.queries}), {report.metric}:"]
        lines.append(f"  {report.baseline}: {report.systems[report.baseline][report.metric]:.4f}")
        lines += [f"  {name}: {comparison}" for name, comparison in report.comparisons.items()]
    if outcome.run_id:
        lines.append(f"\nMLflow: run {outcome.run_id} in experiment {outcome.experiment!r} ({outcome.tracking_uri})")
    return "\n".join(lines)
