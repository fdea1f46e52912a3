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
    heights, _, _ = ax.hist([len(chunk.text.split()) for chunk in chunks], bins=30)
    if chunk_size:
        ax.axvline(chunk_size, color="tab:red", linestyle="--", label=f"chunk_size = {chunk_size} words")
        _legend_above_bars(ax, heights)
    ax.set_xlabel("words per chunk")
    ax.set_ylabel("chunks")
    ax.set_title(f"Chunk lengths ({len(chunks)} chunks)")
    return ax


def plot_token_truncation(counts: Sequence[int], max_seq_length: int, ax=None):
    """Histogram of tokens per chunk; chunks right of the line are longer than the embedding model's window
    (embedded as several windows, or truncated with ``dense_pooling: first``)."""
    ax = ax or _axes(7, 3.5)
    longer = sum(count > max_seq_length for count in counts)
    heights, _, _ = ax.hist(counts, bins=30)
    ax.axvline(max_seq_length, color="tab:red", linestyle="--",
               label=f"the model's window: max_seq_length = {max_seq_length} tokens")
    ax.set_xlabel("tokens per chunk (embedding model's tokenizer)")
    ax.set_ylabel("chunks")
    share = 100 * longer / len(counts) if counts else 0.0
    ax.set_title(f"Token counts: {longer} of {len(counts)} chunks longer than the model's window ({share:.0f}%)")
    _legend_above_bars(ax, heights)
    return ax


def _legend_above_bars(ax, heights) -> None:
    """The legend in a band above the tallest bar (it covered the tallest bars)."""
    top = max((float(height) for height in heights), default=0.0)
    ax.set_ylim(0, max(top * 1.3, top + 1.5))
    ax.legend(loc="upper right", fontsize=8)


# --- comparison (03-compare) ---------------------------------------------------------------------
# Both take a comparison table (``sweep_report.compare_sweep``; ``compare.load_runs`` works too, without
# intervals): one row per run, settings and metrics as columns, ``<metric> ci_low``/``ci_high`` the bootstrap
# 95% interval, ``rank`` (1 = best) and ``role`` (``winner``) when the table has them.
def plot_metric_vs(runs: "pd.DataFrame", setting: str, metric: str, *, by: str | None = None, legend: bool = True,
                   ax=None):
    """`metric` against `setting`: every run a dot with its bootstrap interval as an error bar (runs with
    the same value side by side), a line through the mean at each value (one per value of `by`), the
    winner a star."""
    import numpy as np
    import pandas as pd

    ax = ax or _axes()
    runs = _finished(runs, metric)
    values = sorted(runs[setting].dropna().unique(), key=lambda value: (str(type(value)), value))
    numeric = pd.api.types.is_numeric_dtype(runs[setting]) and not pd.api.types.is_bool_dtype(runs[setting])
    position = {value: float(value) if numeric else float(index) for index, value in enumerate(values)}
    gaps = np.diff(sorted(position.values()))
    step = float(gaps.min()) if len(gaps) else 1.0
    groups = list(runs.groupby(by, sort=True)) if by else [(None, runs)]
    drawn_at = {}  # row index -> x of its dot
    for number, (value, group) in enumerate(groups):
        color = f"C{number}"
        shared = group.groupby(setting)[setting]
        # runs with the same value of `setting` side by side, over at most 40% of the smallest step
        spread = 0.4 * step / max(int(shared.transform("size").max()), 1)
        x = group[setting].map(position) + (shared.cumcount() - (shared.transform("size") - 1) / 2) * spread
        drawn_at.update(x.items())
        ax.errorbar(x, group[metric], yerr=_interval_errors(group, metric), fmt="o", color=color, alpha=0.55,
                    markersize=5, capsize=3, elinewidth=1,
                    label=("runs, 95% bootstrap interval" if number == 0 and _has_interval(group, metric) else None))
        means = group.groupby(setting)[metric].mean()
        ax.plot([position[key] for key in means.index], means.values, color=color, marker="D", markersize=4,
                label=f"{by}={value}: mean" if by else "mean over the other settings")
    winner = _winner(runs, metric)
    if winner is not None:
        ax.scatter([drawn_at[winner]], [runs.loc[winner, metric]], marker="*", s=220, color="gold", edgecolor="black",
                   zorder=5, label="winner", gid="winner")
    if not numeric or len(values) <= 12:
        ax.set_xticks([position[value] for value in values], [str(value) for value in values])
    ax.set_xlabel(setting)
    ax.set_ylabel(metric)
    ax.set_title(f"{metric} vs {setting}")
    if legend:
        ax.legend(fontsize=8)
    return ax


def plot_metric_vs_settings(runs: "pd.DataFrame", settings: Sequence[str], metric: str, *, width: float = 5.0):
    """``plot_metric_vs`` once per setting, side by side (at most three a row); returns the figure."""
    import matplotlib.pyplot as plt

    settings = list(settings) or ["chunk_size"]
    columns = min(3, len(settings))
    rows = -(-len(settings) // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(width * columns, 4 * rows), squeeze=False)
    for ax, setting in zip(axes.flat, settings):
        plot_metric_vs(runs, setting, metric, legend=False, ax=ax)
    for ax in list(axes.flat)[len(settings):]:
        ax.set_axis_off()
    figure.tight_layout(rect=(0, 0.35 / (4 * rows), 1, 1))  # room below for one legend, off the data
    figure.legend(*axes.flat[0].get_legend_handles_labels(), loc="lower center", ncols=3, fontsize=8, frameon=False)
    return figure


def plot_quality_vs_latency(runs: "pd.DataFrame", metric: str, latency: str = "latency/total_p50_ms", *,
                            label_with: Sequence[str] = (), max_labels: int = 15, ax=None):
    """Each run a dot (quality up, latency right) with its bootstrap interval as an error bar, numbered by
    its rank (runs with the same scores share a dot: ``1,2``); the numbers sit where they overlap no other
    number and no dot, and a list beside the axes names each numbered run's full setting (`label_with`).
    The Pareto front (no run both faster and better) is a line, the winner a star. Beyond `max_labels`
    dots, only the front, the winner and the best ranks are numbered."""
    ax = ax or _axes(7.5, 4.5)
    runs = _finished(runs, metric)
    runs = runs[runs[latency].notna()]
    ranks = runs["rank"].astype(int) if "rank" in runs else runs[metric].rank(ascending=False, method="first").astype(int)
    runs = runs.assign(_rank=ranks).sort_values("_rank")
    ax.errorbar(runs[latency], runs[metric], yerr=_interval_errors(runs, metric), fmt="o", color="tab:blue",
                markersize=5, capsize=2, elinewidth=0.8, alpha=0.7,
                label="runs, 95% bootstrap interval" if _has_interval(runs, metric) else "runs")
    positive = runs[latency][runs[latency] > 0]
    if len(positive) and positive.max() > 100 * positive.min():  # latencies spanning orders of magnitude
        ax.set_xscale("log")
    front, best = [], float("-inf")
    for index, row in runs.sort_values([latency, metric], ascending=[True, False]).iterrows():
        if row[metric] > best:
            front.append(index)
            best = row[metric]
    if front:
        ax.plot(runs.loc[front, latency], runs.loc[front, metric], color="tab:red", lw=1.5, marker="o", markersize=10,
                markerfacecolor="none", markeredgewidth=1.5, label="Pareto front", gid="pareto-front")
    winner = _winner(runs, metric)
    if winner is not None:
        ax.scatter([runs.loc[winner, latency]], [runs.loc[winner, metric]], marker="*", s=260, color="gold",
                   edgecolor="black", zorder=5, label="winner", gid="winner")
    ax.set_xlabel(f"{latency} (ms per query)")
    ax.set_ylabel(metric)
    ax.set_title("Quality vs latency")
    ax.legend(fontsize=8, loc="lower left", bbox_to_anchor=(1.02, 0.0))  # beside the axes: off the dots
    # the dots to number: all of them, or the front, the winner and the best ranks
    shown = set(runs.index) if len(runs) <= max_labels else (
        set(front) | ({winner} if winner is not None else set()) | set(runs.index[:max_labels]))
    dots: dict[tuple[float, float], list] = {}  # (latency, metric) -> the runs drawn there, best first
    for index, row in runs.iterrows():
        if index in shown:
            dots.setdefault((round(float(row[latency]), 9), round(float(row[metric]), 9)), []).append(index)
    _place_labels(ax, [(x, y, ",".join(str(runs.loc[i, "_rank"]) for i in members)) for (x, y), members in dots.items()],
                  [(float(x), float(y)) for x, y in zip(runs[latency], runs[metric])])
    names = [name for name in label_with if name in runs]
    if names:
        listing = [f"{runs.loc[i, '_rank']:>3}  " + " ".join(f"{name}={_shown_setting(runs.loc[i, name])}" for name in names)
                   for i in runs.index if i in shown]
        if len(shown) < len(runs):
            listing.append(f"({len(runs) - len(shown)} more runs, not numbered: see the table)")
        ax.text(1.02, 1.0, "\n".join(["rank  settings", *listing]), transform=ax.transAxes, va="top", ha="left",
                family="monospace", fontsize=7, gid="settings-list")
    return ax


def _finished(runs: "pd.DataFrame", metric: str) -> "pd.DataFrame":
    """The rows with a value of `metric` (a failed run has none)."""
    runs = runs[runs[metric].notna()]
    return runs[runs["status"] == "FINISHED"] if "status" in runs else runs


def _has_interval(runs: "pd.DataFrame", metric: str) -> bool:
    return f"{metric} ci_low" in runs and runs[f"{metric} ci_low"].notna().any()


def _interval_errors(runs: "pd.DataFrame", metric: str):
    """matplotlib's ``yerr`` (2 x n distances below and above each value) from the interval columns; None without."""
    import numpy as np

    if not _has_interval(runs, metric):
        return None
    values = runs[metric].to_numpy(dtype=float)
    low = np.nan_to_num(values - runs[f"{metric} ci_low"].to_numpy(dtype=float))
    high = np.nan_to_num(runs[f"{metric} ci_high"].to_numpy(dtype=float) - values)
    return np.vstack([np.clip(low, 0, None), np.clip(high, 0, None)])


def _winner(runs: "pd.DataFrame", metric: str):
    """The index of the row whose ``role`` starts with ``winner``; without a role column, the best by `metric`."""
    if runs.empty:
        return None
    if "role" in runs:
        chosen = runs.index[runs["role"].fillna("").astype(str).str.startswith("winner")]
        return chosen[0] if len(chosen) else None
    return runs[metric].idxmax()


def _shown_setting(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


LABEL_OFFSETS = [(dx * radius, dy * radius) for radius in (5, 10, 16, 24, 34)
                 for dx, dy in ((1, 1), (1, -1), (-1, 1), (-1, -1), (1, 0), (-1, 0), (0, 1), (0, -1))]  # points


def _place_labels(ax, labels: Sequence[tuple[float, float, str]], dots: Sequence[tuple[float, float]]) -> None:
    """Each label beside its dot, at the first offset (nearest first) where its box overlaps no label placed
    before, no dot and stays inside the axes; a label pushed away gets a thin line to its dot. The boxes are
    measured with the figure's renderer, so the check holds at the figure's size (not if it is resized)."""
    figure = ax.figure
    renderer = figure.canvas.get_renderer() if hasattr(figure.canvas, "get_renderer") else figure._get_renderer()
    ax.set_xlim(ax.get_xlim())  # fixed now: the labels must not move the limits they were placed in
    ax.set_ylim(ax.get_ylim())
    to_display = ax.transData.transform
    dot_boxes = [_box(*to_display((x, y)), 4.0) for x, y in dots]  # a dot: about 8 pixels across
    area, placed = ax.get_window_extent(renderer), []
    for x, y, text in labels:
        best = None
        for dx, dy in LABEL_OFFSETS:
            label = ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", fontsize=8,
                                ha="left" if dx > 0 else "right" if dx < 0 else "center",
                                va="bottom" if dy > 0 else "top" if dy < 0 else "center", gid="run-label")
            box = label.get_window_extent(renderer)
            box = (box.x0 - 1, box.y0 - 1, box.x1 + 1, box.y1 + 1)
            clash = sum(_overlap(box, other) for other in [*placed, *dot_boxes]) + _outside(box, area)
            if best is None or clash < best[0]:
                if best is not None:
                    best[1].remove()
                best = (clash, label, box, (dx, dy))
            else:
                label.remove()
            if clash == 0:
                break
        _, label, box, (dx, dy) = best
        if max(abs(dx), abs(dy)) > 10:  # a line from the label's corner to its dot
            ax.annotate("", (x, y), xytext=(dx, dy), textcoords="offset points",
                        arrowprops={"arrowstyle": "-", "color": "grey", "lw": 0.6, "shrinkA": 0, "shrinkB": 3})
        placed.append(box)


def _box(x: float, y: float, half: float) -> tuple[float, float, float, float]:
    return (x - half, y - half, x + half, y + half)


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> float:
    width = min(a[2], b[2]) - max(a[0], b[0])
    height = min(a[3], b[3]) - max(a[1], b[1])
    return width * height if width > 0 and height > 0 else 0.0


def _outside(box: tuple[float, float, float, float], area) -> float:
    """The area of `box` outside the axes."""
    inside = _overlap(box, (area.x0, area.y0, area.x1, area.y1))
    return (box[2] - box[0]) * (box[3] - box[1]) - inside


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
