"""``calibrate-judge`` as a user runs it: judge the labelled answers, compare, log one MLflow run.

``calibrate_judge`` sends every labelled answer through the same judge as ``eval --judge``
(``rag_core.evaluate.judge.judge_many``, through the configured LLM client, with its retries) and
compares its scores with the person's on every axis the person scored
(``rag_core.evaluate.calibration``). An answer whose judge score is missing (the judge failed) is
left out of that axis and counted. ``log_calibration`` writes one run to the experiment
``judge calibration``: params (judge provider and model, the labels file's name and sha256), metrics
``<axis>/spearman``, ``/kendall``, ``/exact_agreement``, ``/within_one_agreement``,
``/mean_difference``, ``/n``, and artifacts ``confusion.csv`` (axis, human score, counts per judge
score), ``per_answer.csv`` and ``calibration.json``. API keys never reach it (the tracker's guard).
Left out: comparing several judge models in one run (run the command once per model).
"""

from __future__ import annotations

import csv
import hashlib
import json
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

from rag_core.evaluate.calibration import SCALE, AxisAgreement, agreement
from rag_core.evaluate.judge import METRICS, judge_many
from rag_core.evaluate.judge_labels import LabelledAnswer
from rag_core.llm import LLMClient
from rag_core.progress import progress as progress_bar

EXPERIMENT = "judge calibration"


@dataclass(frozen=True)
class Calibration:
    axes: tuple[AxisAgreement, ...]  # in the judge's axis order, only axes a person scored
    per_answer: tuple[dict[str, Any], ...]  # id, then human/<axis>, judge/<axis>, judge/<axis>_reason
    missing: dict[str, int]  # axis -> answers the judge did not score (left out of that axis)
    provider: str
    model: str


def calibrate_judge(labels: Sequence[LabelledAnswer], client: LLMClient, *, retries: int = 3,
                    backoff_s: float = 2.0, max_delay_s: float = 60.0, progress: bool = False) -> Calibration:
    items = progress_bar([label.judge_item() for label in labels], progress, "judging labelled answers", unit="answer")
    scores, _ = judge_many(items, client=client, retries=retries, backoff_s=backoff_s, max_delay_s=max_delay_s)
    rows, pairs, missing = [], {axis: ([], []) for axis in METRICS}, {}
    for label, judged in zip(labels, scores):
        row: dict[str, Any] = {"id": label.id}
        for axis, human in label.human.items():
            judge = judged.scores()[axis]
            row.update({f"human/{axis}": human, f"judge/{axis}": judge,
                        f"judge/{axis}_reason": judged.reasons.get(axis) or judged.errors.get(axis, "")})
            if judge is None:
                missing[axis] = missing.get(axis, 0) + 1
            else:
                pairs[axis][0].append(human)
                pairs[axis][1].append(judge)
        rows.append(row)
    axes = tuple(agreement(axis, *pairs[axis]) for axis in METRICS if pairs[axis][0])
    return Calibration(axes, tuple(rows), missing, client.provider, client.model)


def log_calibration(calibration: Calibration, labels_path: str | Path, *, experiment: str = EXPERIMENT,
                    tracking_uri: str | None = None) -> tuple[str, str]:
    """(run id, tracking URI) of the run written."""
    from rag_core.workbench.tracking.tracker import Tracker

    labels_path = Path(labels_path)
    tracker = Tracker.at(tracking_uri)
    run_id = tracker.start_run(experiment, f"judge {calibration.model} vs {labels_path.name}")
    metrics = {name: value for axis in calibration.axes for name, value in axis.metrics().items()}
    metrics.update({f"{axis}/missing": float(count) for axis, count in calibration.missing.items()})
    params = {"judge_provider": calibration.provider, "judge_model": calibration.model,
              "labels_file": labels_path.name, "labels_sha256": hashlib.sha256(labels_path.read_bytes()).hexdigest(),
              "labelled_answers": len(calibration.per_answer)}
    tracker.log(run_id, params=params, metrics=metrics)
    with tempfile.TemporaryDirectory() as folder:
        tracker.log_artifacts(run_id, write_artifacts(calibration, Path(folder)))
    tracker.finish(run_id)
    return run_id, tracker.uri


def write_artifacts(calibration: Calibration, folder: Path) -> list[Path]:
    confusion, per_answer, summary = folder / "confusion.csv", folder / "per_answer.csv", folder / "calibration.json"
    with confusion.open("w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(["axis", "human", *(f"judge_{score}" for score in SCALE)])
        for axis in calibration.axes:
            writer.writerows([axis.axis, human, *counts] for human, counts in zip(SCALE, axis.confusion))
    columns = list(dict.fromkeys(key for row in calibration.per_answer for key in row))
    with per_answer.open("w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, columns)
        writer.writeheader()
        writer.writerows(calibration.per_answer)
    summary.write_text(json.dumps({"axes": [asdict(axis) for axis in calibration.axes],
                                   "missing": calibration.missing, "model": calibration.model}, indent=2))
    return [confusion, per_answer, summary]
