"""03-compare's plots (rag_core.workbench.reports.plots), read back from the drawn figure: metric-vs-setting draws
each run's bootstrap interval as its error bar and the winner as a star; quality-vs-latency numbers every
dot by its rank with labels that overlap no other label and no dot, lists each number's full setting,
and marks the Pareto front and the winner."""

from __future__ import annotations

import itertools

import matplotlib
import numpy as np
import pandas as pd
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from rag_core.workbench.reports.plots import (_overlap, _place_labels, plot_metric_vs, plot_metric_vs_settings,  # noqa: E402
                                      plot_quality_vs_latency)

METRIC, LATENCY = "page/ndcg@10", "latency/total_p50_ms"
GRID = {"chunk_size": [128, 256, 512], "overlap": [0, 64], "k": [5, 10]}


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def table(seed: int = 1) -> pd.DataFrame:
    """A comparison table as ``compare_sweep`` returns it, best first: the k=5 and k=10 points of a chunking
    score the same (as retrieval metrics do: k only cuts the context), so dots coincide, and latencies crowd."""
    rng = np.random.default_rng(seed)
    rows = []
    for chunk_size, overlap, k in itertools.product(*GRID.values()):
        rng_point = np.random.default_rng(chunk_size + overlap)  # the same for k = 5 and 10
        value, latency = rng_point.uniform(0.3, 0.8), rng_point.uniform(5.0, 8.0)
        rows.append({"chunk_size": chunk_size, "overlap": overlap, "k": k, METRIC: value,
                     f"{METRIC} ci_low": value - rng.uniform(0.05, 0.1), f"{METRIC} ci_high": value + rng.uniform(0.05, 0.1),
                     LATENCY: latency, "status": "FINISHED", "run_id": f"r{chunk_size}-{overlap}-{k}"})
    frame = pd.DataFrame(rows).sort_values(METRIC, ascending=False, kind="stable").reset_index(drop=True)
    frame.insert(0, "rank", range(1, len(frame) + 1))
    frame.insert(1, "role", ["winner" if rank == 3 else "" for rank in frame["rank"]])  # one_se chose rank 3
    return frame


def boxes(ax, gid: str) -> list:
    renderer = ax.figure.canvas.get_renderer()
    return [text.get_window_extent(renderer) for text in ax.texts if text.get_gid() == gid]


def test_metric_vs_setting_draws_each_runs_interval_and_the_winner():
    data = table()
    ax = plot_metric_vs(data, "chunk_size", METRIC)
    [bars] = [container for container in ax.containers if container.has_yerr]
    segments = bars.lines[2][0].get_segments()  # one vertical segment per run: (x, low) -> (x, high)
    assert sorted((round(s[0][1], 9), round(s[1][1], 9)) for s in segments) == sorted(
        (round(low, 9), round(high, 9)) for low, high in zip(data[f"{METRIC} ci_low"], data[f"{METRIC} ci_high"]))
    xs = [segment[0][0] for segment in segments]
    assert len(set(np.round(xs, 6))) == len(data)  # runs with the same chunk_size side by side, not on top
    [star] = [c for c in ax.collections if c.get_gid() == "winner"]
    winner = data[data["role"] == "winner"].iloc[0]
    assert star.get_offsets()[0][1] == pytest.approx(winner[METRIC])
    assert any(x == pytest.approx(star.get_offsets()[0][0]) for x in xs)  # on its own dot
    assert [tick.get_text() for tick in ax.get_xticklabels()] == ["128", "256", "512"]


def test_metric_vs_setting_without_intervals_and_with_text_values():
    data = table().drop(columns=[f"{METRIC} ci_low", f"{METRIC} ci_high", "role"])
    data["mode"] = ["bm25", "hybrid"] * (len(data) // 2)
    ax = plot_metric_vs(data, "mode", METRIC)
    assert not any(container.has_yerr for container in ax.containers)
    assert [tick.get_text() for tick in ax.get_xticklabels()] == ["bm25", "hybrid"]
    [star] = [c for c in ax.collections if c.get_gid() == "winner"]  # no role column: the best run
    assert star.get_offsets()[0][1] == pytest.approx(data[METRIC].max())


def test_one_panel_per_swept_setting():
    figure = plot_metric_vs_settings(table(), list(GRID), METRIC)
    titles = [ax.get_title() for ax in figure.axes if ax.get_title()]
    assert titles == [f"{METRIC} vs {name}" for name in GRID]


def test_quality_vs_latency_labels_never_overlap_and_name_the_full_setting():
    data = table()
    ax = plot_quality_vs_latency(data, METRIC, LATENCY, label_with=list(GRID))
    labels = [text for text in ax.texts if text.get_gid() == "run-label"]
    # coinciding dots (k = 5 and 10) share one label; every rank appears once
    numbers = sorted(int(n) for text in labels for n in text.get_text().split(","))
    assert numbers == list(range(1, len(data) + 1)) and len(labels) == len(data) // 2
    label_boxes = boxes(ax, "run-label")
    for first, second in itertools.combinations(label_boxes, 2):
        assert not first.overlaps(second)
    renderer = ax.figure.canvas.get_renderer()
    dots = ax.transData.transform(data[[LATENCY, METRIC]].to_numpy(dtype=float))
    for box in label_boxes:
        assert all(_overlap((box.x0, box.y0, box.x1, box.y1), (x - 3, y - 3, x + 3, y + 3)) == 0 for x, y in dots)
        assert ax.get_window_extent(renderer).contains(box.x0, box.y0) and ax.get_window_extent(renderer).contains(box.x1, box.y1)
    [listing] = [text.get_text() for text in ax.texts if text.get_gid() == "settings-list"]
    for _, row in data.iterrows():
        assert f"{row['rank']:>3}  chunk_size={row['chunk_size']} overlap={row['overlap']} k={row['k']}" in listing
    # the winner is marked where it is, the Pareto front runs through the runs no other beats on both axes
    [star] = [c for c in ax.collections if c.get_gid() == "winner"]
    assert tuple(star.get_offsets()[0]) == pytest.approx(tuple(data.loc[data["role"] == "winner", [LATENCY, METRIC]].iloc[0]))
    [front] = [line for line in ax.lines if line.get_gid() == "pareto-front"]
    expected = [(row[LATENCY], row[METRIC]) for _, row in data.iterrows()
                if not any((other[LATENCY] <= row[LATENCY] and other[METRIC] > row[METRIC]) or
                           (other[LATENCY] < row[LATENCY] and other[METRIC] >= row[METRIC]) for _, other in data.iterrows())]
    assert set(zip(map(float, front.get_xdata()), map(float, front.get_ydata()))) == set(expected) and len(expected) >= 2


def test_labels_of_crowded_dots_are_pushed_apart():
    _, ax = plt.subplots(figsize=(4, 3))
    dots = [(1.0, 1.0), (1.01, 1.0), (1.0, 1.01), (1.02, 1.02), (1.01, 0.99), (3.0, 3.0)]  # five in one spot
    ax.scatter(*zip(*dots))
    _place_labels(ax, [(x, y, f"run {n}") for n, (x, y) in enumerate(dots, start=1)], dots)
    for first, second in itertools.combinations(boxes(ax, "run-label"), 2):
        assert not first.overlaps(second)


def test_the_token_count_legend_covers_no_bar():
    from rag_core.workbench.reports.plots import plot_token_truncation

    counts = [value for n, value in enumerate(range(150, 800, 22)) for _ in range(5 + n % 3)]  # no empty corner
    ax = plot_token_truncation(counts, 256)
    renderer = ax.figure.canvas.get_renderer()
    legend = ax.get_legend().get_window_extent(renderer)
    bars = [patch.get_window_extent(renderer) for patch in ax.patches if patch.get_height() > 0]
    assert bars and not any(legend.overlaps(bar) for bar in bars)
    assert ax.get_title() == "Token counts: 151 of 180 chunks longer than the model's window (84%)"  # 5+6+7+5+6 at 150-238
