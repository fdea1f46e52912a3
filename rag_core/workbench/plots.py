"""Every plot of the workbench, in one place.

Notebook plots (exploration: chunk lengths, token truncation; comparison: a metric against a setting,
quality against latency; searches: progress against cost, parameter importances) draw on the Matplotlib ``ax`` given, or on a new pyplot figure, and return
it. The plots saved with every evaluation run (retrieval quality by level, latency by stage) are
drawn on a pyplot-free ``Figure`` (no global state: safe in sweep worker threads) and written to a
PNG file.

Left out: interactive plots, styling beyond Matplotlib's defaults.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

from rag_core.evaluate.relevance import LEVELS
from rag_core.records import Chunk

if TYPE_CHECKING:
    import pandas as pd


# --- exploration (01-explore) --------------------------------------------------------------------
def plot_chunk_lengths(chunks: Sequence[Chunk], chunk_size: int | None = None, ax=None):
    """Histogram of chunk lengths in words, with the configured chunk_size marked."""
    ax = ax or _axes(7, 3.5)
    ax.hist([len(chunk.text.split()) for chunk in chunks], bins=30)
    if chunk_size:
        ax.axvline(chunk_size, color="tab:red", linestyle="--", label=f"chunk_size = {chunk_size} words")
        ax.legend()
    ax.set_xlabel("words per chunk")
    ax.set_ylabel("chunks")
    ax.set_title(f"Chunk lengths ({len(chunks)} chunks)")
    return ax


def plot_token_truncation(counts: Sequence[int], max_seq_length: int, ax=None):
    """Histogram of tokens per chunk; chunks right of the line are truncated by the embedding model."""
    ax = ax or _axes(7, 3.5)
    truncated = sum(count > max_seq_length for count in counts)
    ax.hist(counts, bins=30)
    ax.axvline(max_seq_length, color="tab:red", linestyle="--", label=f"max_seq_length = {max_seq_length} tokens")
    ax.set_xlabel("tokens per chunk (embedding model's tokenizer)")
    ax.set_ylabel("chunks")
    share = 100 * truncated / len(counts) if counts else 0.0
    ax.set_title(f"Token counts: {truncated} of {len(counts)} chunks truncated ({share:.0f}%)")
    ax.legend()
    return ax


# --- comparison (03-compare) ---------------------------------------------------------------------
def plot_metric_vs(runs: "pd.DataFrame", setting: str, metric: str, *, by: str | None = None, ax=None):
    """`metric` against `setting`: every run a dot, a line through the mean at each value (one line
    per value of `by`, when given)."""
    ax = ax or _axes()
    groups = runs.groupby(by) if by else [(None, runs)]
    for value, group in groups:
        ax.scatter(group[setting], group[metric], alpha=0.5)
        means = group.groupby(setting)[metric].mean()
        ax.plot(means.index, means.values, marker="o", label=f"{by}={value}" if by else "mean over the other settings")
    ax.set_xlabel(setting)
    ax.set_ylabel(metric)
    ax.set_title(f"{metric} vs {setting}")
    ax.legend()
    return ax


def plot_quality_vs_latency(runs: "pd.DataFrame", metric: str, latency: str = "latency/total_p50_ms", *,
                            label_with: Sequence[str] = (), ax=None):
    """Each run a dot (quality up, latency right), the Pareto front (no run both faster and better) as a line."""
    ax = ax or _axes()
    ax.scatter(runs[latency], runs[metric])
    # Each dot names only the settings where its run differs from the most common value: readable on wide grids.
    usual = {name: runs[name].astype(str).mode().iloc[0] for name in label_with}
    for _, row in runs.iterrows():
        if label_with:
            changed = [f"{name}={row[name]}" for name in label_with if str(row[name]) != usual[name]]
            ax.annotate(" ".join(changed) or "(most common values)", (row[latency], row[metric]),
                        fontsize=7, alpha=0.8, xytext=(3, 3), textcoords="offset points")
    positive = runs[latency][runs[latency] > 0]
    if len(positive) and positive.max() > 100 * positive.min():  # latencies spanning orders of magnitude
        ax.set_xscale("log")
    front, best = [], float("-inf")
    for _, row in runs.sort_values([latency, metric], ascending=[True, False]).iterrows():
        if row[metric] > best:
            front.append((row[latency], row[metric]))
            best = row[metric]
    if front:
        ax.plot(*zip(*front), color="tab:red", label="Pareto front")
        ax.legend()
    ax.set_xlabel(f"{latency} (ms per query)")
    ax.set_ylabel(metric)
    ax.set_title("Quality vs latency")
    return ax


# --- searches (03-compare) -----------------------------------------------------------------------
def plot_search_progress(trials: "pd.DataFrame", metric: str, ax=None):
    """A search's progress: each trial's value against the seconds spent up to it (a dot, its colour
    the queries it reached: halving scores most trials on a few), and the best value on every tuning
    query so far (a step line). `trials`: ``search_report.trials_frame``."""
    ax = ax or _axes(7, 4)
    scored = trials[trials["value"].notna()]
    points = ax.scatter(scored["spent_seconds"], scored["value"], c=scored["queries"], cmap="viridis", alpha=0.7)
    if scored["queries"].nunique() > 1:
        ax.figure.colorbar(points, ax=ax, label="queries scored")
    ax.step(trials["spent_seconds"], trials["best_so_far"], where="post", color="tab:red",
            label="best so far (every tuning query)")
    ax.set_xlabel("seconds spent (evaluations, index builds, optimizer)")
    ax.set_ylabel(metric)
    ax.set_title(f"Search progress ({len(trials)} trials)")
    ax.legend(loc="lower right")
    return ax


def plot_param_importances(importances: Mapping[str, float], ax=None):
    """Optuna's parameter importances (summing to 1), largest on top."""
    ax = ax or _axes(6, max(2.0, 0.4 * len(importances) + 1))
    if not importances:
        ax.text(0.5, 0.5, "too few completed trials for importances", ha="center", va="center")
        ax.set_axis_off()
        return ax
    names = sorted(importances, key=importances.get)
    ax.barh(names, [importances[name] for name in names])
    ax.set_xlabel("importance (Optuna PED-ANOVA, normalised to sum to 1)")
    ax.set_title("Which settings mattered")
    return ax


# --- evaluation run artifacts ---------------------------------------------------------------------
def plot_retrieval_by_level(metrics: Mapping[str, float], path: Path) -> None:
    """Grouped bars: each retrieval metric (recall@k, ndcg@k, hit_rate@k, mrr) at chunk, page, doc level."""
    names = list(dict.fromkeys(name.split("/", 1)[1] for name in metrics if name.split("/", 1)[0] in LEVELS))
    figure, axes = _figure(max(6.0, 0.9 * len(names) + 2), bottom=0.25)  # room for the slanted names
    width = 0.8 / len(LEVELS)
    for offset, level in enumerate(LEVELS):
        values = [metrics.get(f"{level}/{name}", 0.0) for name in names]
        axes.bar([i + (offset - 1) * width for i in range(len(names))], values, width, label=level)
    axes.set_xticks(range(len(names)), names, rotation=30, ha="right")
    axes.set_ylim(0, 1.2)
    axes.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    axes.set_ylabel("mean over queries")
    axes.set_title(f"Retrieval quality by level ({int(metrics.get('eval/queries', 0))} queries)")
    axes.legend(loc="upper center", ncols=len(LEVELS))
    figure.savefig(path, dpi=100)


def plot_latency_by_stage(metrics: Mapping[str, float], path: Path) -> None:
    """Bars of p50 and p95 latency (ms) for each pipeline stage that ran."""
    stages = [name[len("latency/"):-len("_p50_ms")] for name in metrics
              if name.startswith("latency/") and name.endswith("_p50_ms")]
    figure, axes = _figure(max(5.0, 1.1 * len(stages) + 2), bottom=0.12)
    for offset, percentile in enumerate(("p50", "p95")):
        values = [metrics[f"latency/{stage}_{percentile}_ms"] for stage in stages]
        axes.bar([i + (offset - 0.5) * 0.4 for i in range(len(stages))], values, 0.4, label=percentile)
    axes.set_xticks(range(len(stages)), stages)
    axes.set_ylabel("milliseconds per query")
    axes.set_title("Latency by stage")
    axes.legend()
    figure.savefig(path, dpi=100)


def _figure(width: float, bottom: float):
    """A 4-inch-high figure with fixed margins: a "tight" layout would draw every text once more to
    measure it, which doubled the cost of the two plots each evaluation run logs (about 0.5 s a run)."""
    from matplotlib.figure import Figure  # no pyplot: no global state, safe in threads

    figure = Figure(figsize=(width, 4))
    figure.subplots_adjust(left=0.1, right=0.98, bottom=bottom, top=0.9)
    return figure, figure.subplots()


def _axes(width: float = 6.0, height: float = 4.0):
    """A new pyplot figure's axes, for the notebook plots."""
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=(width, height))[1]
