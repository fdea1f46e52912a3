"""calibrate-judge: agreement statistics against hand computations, the labels file, and the command end
to end (real anthropic SDK, the project's local LLM server as the judge, MLflow run and artifacts)."""

from __future__ import annotations

import csv
import json
import math
from itertools import combinations

import pytest
from mlflow.tracking import MlflowClient

from conftest import run_cli
from llm_fixtures import PLANTED_KEY, anthropic_env, clean_llm_env, llm_server  # noqa: F401 - fixtures
from llm_responders import heuristic_judge, table_judge
from rag_core.evaluate.calibration import agreement
from rag_core.evaluate.judge import METRICS
from rag_core.evaluate.judge_labels import LabelsError, load_labels
from rag_core.paths import DATA_DIR

SHIPPED_LABELS = DATA_DIR / "golden" / "judge_labels.jsonl"


# --- statistics, by hand -------------------------------------------------------------------------
def test_agreement_without_ties_matches_the_textbook_formulas():
    result = agreement("faithfulness", [1, 2, 3, 4, 5], [2, 1, 3, 5, 4])
    # rho = 1 - 6 * sum d^2 / (n (n^2 - 1)), d = (-1, 1, 0, -1, 1): 1 - 6 * 4 / 120
    assert result.spearman == pytest.approx(0.8)
    # 10 pairs, discordant (1,2) and (4,5): (8 - 2) / 10
    assert result.kendall == pytest.approx(0.6)
    assert (result.n, result.exact, result.within_one, result.mean_difference) == (5, 0.2, 1.0, 0.0)
    assert result.confusion[0] == (0, 1, 0, 0, 0) and result.confusion[3] == (0, 0, 0, 0, 1)
    assert sum(map(sum, result.confusion)) == 5


def test_agreement_with_ties():
    result = agreement("coverage", [1, 1, 2, 3], [1, 2, 2, 3])
    # average ranks (1.5, 1.5, 3, 4) and (1, 2.5, 2.5, 4): covariance 3.75, variances 4.5 and 4.5
    assert result.spearman == pytest.approx(3.75 / 4.5)
    # tau-b: 4 concordant, 0 discordant, one tie on each side: 4 / sqrt((6 - 1) * (6 - 1))
    assert result.kendall == pytest.approx(0.8)
    assert (result.exact, result.within_one, result.mean_difference) == (0.75, 1.0, 0.25)


def test_correlation_is_undefined_when_one_side_is_constant():
    result = agreement("answer_relevance", [5, 5, 5], [3, 4, 5])
    assert result.spearman is None and result.kendall is None and result.exact == pytest.approx(1 / 3)
    assert "answer_relevance/spearman" not in result.metrics() and result.metrics()["answer_relevance/n"] == 3


# --- the labels file -----------------------------------------------------------------------------
def test_shipped_labels_load():
    labels = load_labels(SHIPPED_LABELS)
    assert len(labels) == 18 and all(set(label.human) == set(METRICS) for label in labels)
    assert len({score for label in labels for score in label.human.values()}) == 5  # the whole scale is used


@pytest.mark.parametrize("line, message", [
    ({"query": "Q", "answer": "A", "passages": [{"source": "a.pdf", "text": "t"}], "human": {"truth": 3}}, "unknown axis"),
    ({"query": "Q", "answer": "A", "passages": [{"source": "a.pdf", "text": "t"}], "human": {"coverage": 6}}, "1 to 5"),
    ({"query": "Q", "answer": "A", "passages": [], "human": {"coverage": 2}}, "passages"),
    ({"query": "Q", "answer": "A", "passages": [{"source": "a.pdf", "text": "t"}],
      "human": {"answer_correctness": 2}}, "reference"),
])
def test_bad_labels_are_named_by_line(tmp_path, line, message):
    path = tmp_path / "labels.jsonl"
    path.write_text(json.dumps(line) + "\n")
    with pytest.raises(LabelsError, match=message) as error:
        load_labels(path)
    assert f"{path}:1" in str(error.value)


# --- the command, against the local LLM server ------------------------------------------------------
HAND_LABELS = [  # answer -> human faithfulness, human answer_relevance (None: not scored)
    ("Answer one.", 1, 1), ("Answer two.", 2, 1), ("Answer three.", 3, 2), ("Answer four.", 4, 3), ("Answer five.", 5, None),
]
JUDGE = {"Answer one.": (2, 1), "Answer two.": (1, 2), "Answer three.": (3, 2), "Answer four.": (5, 3),
         "Answer five.": (4, 4)}  # the judge's faithfulness and answer_relevance


def _env(server, tracking: str | None = None) -> dict[str, str]:
    env = {"ANTHROPIC_API_KEY": PLANTED_KEY, "ANTHROPIC_BASE_URL": server.anthropic_base_url}
    return {**env, "MLFLOW_TRACKING_URI": tracking} if tracking else env


@pytest.mark.slow
def test_calibrate_judge_reports_the_hand_computed_figures_and_logs_them(tmp_path, anthropic_env):
    path = tmp_path / "labels.jsonl"
    with path.open("w") as out:
        for number, (answer, faithfulness, relevance) in enumerate(HAND_LABELS, start=1):
            human = {"faithfulness": faithfulness, **({"answer_relevance": relevance} if relevance else {})}
            out.write(json.dumps({"id": f"h{number}", "query": "What is asked?", "answer": answer, "human": human,
                                  "passages": [{"source": "doc.pdf", "page": 2, "text": "Some passage."}]}) + "\n")
    table = {(answer, axis): scores[i] for answer, scores in JUDGE.items()
             for i, axis in enumerate(("faithfulness", "answer_relevance"))}
    table.update({(answer, "coverage"): 3 for answer in JUDGE})  # judged (no reference: no correctness), not labelled
    anthropic_env.responder = table_judge(table)
    tracking = f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}"
    (tmp_path / "mlruns").mkdir()

    result = run_cli("calibrate-judge", "--labels", str(path), "--json", env=_env(anthropic_env, tracking))
    assert result.returncode == 0, result.stderr
    assert len(anthropic_env.requests) == 5 * 3
    axes = {axis["axis"]: axis for axis in json.loads(result.stdout)["axes"]}
    assert set(axes) == {"faithfulness", "answer_relevance"}
    faithfulness, relevance = axes["faithfulness"], axes["answer_relevance"]
    assert (faithfulness["spearman"], faithfulness["kendall"]) == (pytest.approx(0.8), pytest.approx(0.6))
    assert (faithfulness["exact"], faithfulness["within_one"]) == (0.2, 1.0)
    assert (relevance["n"], relevance["spearman"], relevance["kendall"]) == (4, pytest.approx(3.75 / 4.5), pytest.approx(0.8))

    run_id = json.loads(result.stdout)["mlflow"]["run_id"]
    client = MlflowClient(tracking)
    run = client.get_run(run_id)
    assert run.data.metrics["faithfulness/spearman"] == pytest.approx(0.8)
    assert run.data.metrics["answer_relevance/within_one_agreement"] == 1.0
    assert run.data.params["labels_file"] == "labels.jsonl"
    confusion = client.download_artifacts(run_id, "confusion.csv", str(tmp_path))
    rows = list(csv.DictReader(open(confusion)))
    human_one = next(r for r in rows if r["axis"] == "faithfulness" and r["human"] == "1")
    assert [int(human_one[f"judge_{s}"]) for s in range(1, 6)] == [0, 1, 0, 0, 0]
    assert PLANTED_KEY not in result.stdout + result.stderr
    for stored in (tmp_path / "mlruns").rglob("*"):
        if stored.is_file():
            assert PLANTED_KEY.encode() not in stored.read_bytes(), stored


def _spearman(x: list[int], y: list[int]) -> float:
    """Pearson correlation of average ranks, written out (independent of scipy)."""
    def ranks(values):
        ordered = sorted(values)
        return [ordered.index(v) + 1 + (ordered.count(v) - 1) / 2 for v in values]

    rx, ry = ranks(x), ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    return cov / math.sqrt(sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry))


def _kendall_b(x: list[int], y: list[int]) -> float:
    pairs = list(combinations(range(len(x)), 2))
    sign = lambda v: (v > 0) - (v < 0)  # noqa: E731
    s = sum(sign(x[i] - x[j]) * sign(y[i] - y[j]) for i, j in pairs)
    untied_x = sum(x[i] != x[j] for i, j in pairs)
    untied_y = sum(y[i] != y[j] for i, j in pairs)
    return s / math.sqrt(untied_x * untied_y)


@pytest.mark.slow
def test_calibrate_judge_on_the_shipped_labels_prints_its_table(tmp_path, anthropic_env):
    anthropic_env.responder = heuristic_judge
    as_json = run_cli("calibrate-judge", "--labels", str(SHIPPED_LABELS), "--no-mlflow", "--json",
                      env=_env(anthropic_env))
    assert as_json.returncode == 0, as_json.stderr
    payload = json.loads(as_json.stdout)
    assert len(anthropic_env.requests) == 18 * 4 and payload["mlflow"] is None
    for axis in payload["axes"]:
        rows = [row for row in payload["per_answer"] if row.get(f"judge/{axis['axis']}") is not None]
        human = [row[f"human/{axis['axis']}"] for row in rows]
        judge = [row[f"judge/{axis['axis']}"] for row in rows]
        assert axis["n"] == 18
        assert axis["spearman"] == pytest.approx(_spearman(human, judge))
        assert axis["kendall"] == pytest.approx(_kendall_b(human, judge))
        assert axis["within_one"] == pytest.approx(sum(abs(h - j) <= 1 for h, j in zip(human, judge)) / 18)

    anthropic_env.requests.clear()
    as_text = run_cli("calibrate-judge", "--labels", str(SHIPPED_LABELS), "--no-mlflow", env=_env(anthropic_env))
    assert as_text.returncode == 0, as_text.stderr
    for axis in METRICS:
        assert axis in as_text.stdout
    assert "spearman" in as_text.stdout and "human 5" in as_text.stdout


@pytest.mark.slow
def test_calibrate_judge_errors_exit_cleanly(tmp_path, clean_llm_env):
    missing = run_cli("calibrate-judge", "--labels", str(tmp_path / "none.jsonl"), "--no-mlflow")
    assert missing.returncode == 2 and "labels file not found" in missing.stderr
    no_key = run_cli("calibrate-judge", "--labels", str(SHIPPED_LABELS), "--no-mlflow")
    assert no_key.returncode == 1 and "ANTHROPIC_API_KEY" in no_key.stderr
    assert "Traceback" not in missing.stderr + no_key.stderr
