"""``rag-pipeline finetune embedder|reranker --self-supervised``: it never opens a BEIR folder's queries or
qrels (watched with an audit hook, and again with those files removed), it refuses every option that
would read queries, and it writes a model folder that records that no golden query was used, with an
MLflow run like the golden-set fine-tuning's. Tiny data; a tiny BERT except for the one run with the
packaged MiniLM (slow)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from finetune_fixtures import tiny_bert, topic_beir, write_topic_beir  # noqa: F401 - fixtures
from mlflow.tracking import MlflowClient
from sweep_fixtures import tracking_uri  # noqa: F401 - fixture

from rag_core.cli import main
from rag_core.evaluate.beir import load_beir
from rag_core.finetune.fingerprints import TRAINING_FILE

_OPENED: list[str] | None = None  # paths opened while a test watches; None: not watching


def _audit(event: str, arguments: tuple) -> None:
    if event == "open" and _OPENED is not None and isinstance(arguments[0], (str, bytes, Path)):
        _OPENED.append(str(arguments[0]))


sys.addaudithook(_audit)  # audit hooks cannot be removed: this one records only while _OPENED is a list


def _watching(call):
    """(call's result, the paths it opened)."""
    global _OPENED
    _OPENED = []
    try:
        return call(), list(_OPENED)
    finally:
        _OPENED = None


def _tiny(*extra: str) -> list[str]:
    return ["--mode", "bm25", "--max-steps", "1", "--eval-steps", "1", "--max-length", "48", "--batch-size", "2",
            "--warmup", "0", "--negatives-depth", "5", "--validation-share", "0.25", *extra]


def _read_only_question_files(folder: Path) -> list[str]:
    return [str(folder / "queries.jsonl"), str(folder / "qrels")]


def test_self_supervised_never_opens_queries_or_qrels(topic_beir, tiny_bert, tmp_path, capsys):  # noqa: F811
    questions = _read_only_question_files(topic_beir)
    _, opened = _watching(lambda: load_beir(topic_beir, "train"))  # the hook sees a golden-set reader's opens
    assert any(path.startswith(questions[0]) for path in opened) and any(questions[1] in path for path in opened)

    def argv(folder: Path, out: str) -> list[str]:
        return ["finetune", "embedder", "--self-supervised", "--beir", str(folder), "--base-model", str(tiny_bert),
                "--out", str(tmp_path / out), "--store", str(tmp_path / "store"), "--no-mlflow", "--json",
                *_tiny("--negatives", "1")]

    code, opened = _watching(lambda: main(argv(topic_beir, "model")))
    assert code == 0, capsys.readouterr().err
    assert any(path.endswith("corpus.jsonl") for path in opened)
    assert not [path for path in opened if any(question in path for question in questions)]
    summary = json.loads(capsys.readouterr().out)
    assert summary["golden_queries_used"] is False and summary["heldout"] is None

    bare = tmp_path / "corpus-only"  # the same folder without its questions trains the same way
    bare.mkdir()
    shutil.copy(topic_beir / "corpus.jsonl", bare / "corpus.jsonl")
    assert main(argv(bare, "model-2")) == 0
    capsys.readouterr()
    first, second = (json.loads((tmp_path / name / TRAINING_FILE).read_text()) for name in ("model", "model-2"))
    assert first["fingerprints"] == second["fingerprints"] and first["golden_queries_used"] is False


@pytest.mark.parametrize("extra, message", [
    (["--golden", "g.jsonl"], "leave out --golden"),
    (["--beir", "B", "--test-split", "test"], "leave out --test-split"),
    (["--beir", "B", "--holdout", "0.3"], "leave out --holdout"),
    (["--beir", "B", "--split", "test"], "leave out --split"),
    ([], "give --input DIR or --beir DIR"),
    (["--beir", "B", "--input", "B"], "give --input DIR or --beir DIR (one of them)"),
    (["--beir", "B", "--max-pseudo-queries", "-1"], "--max-pseudo-queries must be >= 0"),
])
def test_options_that_would_read_questions_are_refused(topic_beir, tmp_path, capsys, extra, message):  # noqa: F811
    extra = [str(topic_beir) if item == "B" else item for item in extra]
    code = main(["finetune", "embedder", "--self-supervised", "--out", str(tmp_path / "m"),
                 "--store", str(tmp_path / "store"), "--no-mlflow", *extra])
    error = capsys.readouterr().err.strip()
    assert code == 2 and error.startswith("error: ") and message in error and len(error.splitlines()) == 1
    assert not (tmp_path / "m").exists()


def test_without_self_supervised_the_training_queries_are_still_required(tmp_path, capsys):
    code = main(["finetune", "embedder", "--out", str(tmp_path / "m"), "--store", str(tmp_path / "store")])
    error = capsys.readouterr().err.strip()
    assert code == 2 and "--golden FILE or --beir DIR (or --self-supervised" in error
    assert main(["finetune", "embedder", "--beir", "x", "--max-validation", "5", "--out", str(tmp_path / "m")]) == 2
    assert "need --self-supervised" in capsys.readouterr().err


def test_a_reranker_on_the_stand_in_body_and_its_mlflow_run(topic_beir, tiny_bert, tmp_path, capsys,  # noqa: F811
                                                             tracking_uri):  # noqa: F811
    argv = ["finetune", "reranker", "--self-supervised", "--beir", str(topic_beir), "--base-model", str(tiny_bert),
            "--out", str(tmp_path / "reranker"), "--store", str(tmp_path / "store"), "--json",
            *_tiny("--negatives", "2")]
    assert main(argv) == 0, capsys.readouterr().err
    summary = json.loads(capsys.readouterr().out)
    record = json.loads((tmp_path / "reranker" / "finetune.json").read_text())
    assert record["golden_queries_used"] is False and record["pseudo_query_recipe"]["kinds"] == [
        "heading", "ict", "table_row"]
    # 12 documents: 12 titles ("alpha notes", ...) and 12 sentences taken out of their abstracts
    assert record["pseudo_queries_by_kind"] == {"heading": 12, "ict": 12}
    assert summary["train_queries"] + summary["validation_queries"] == 24
    run = MlflowClient(tracking_uri).get_run(summary["mlflow"]["run_id"])
    assert run.data.params["golden_queries_used"] == "false" and run.data.params["self_supervised"] == "true"
    assert run.data.params["kind"] == "reranker" and "validation/best_ndcg_at_10" in run.data.metrics


@pytest.mark.slow
def test_the_packaged_minilm_adapts_to_a_folder_of_documents(tmp_path, capsys):
    folder = write_topic_beir(tmp_path / "beir")
    docs = tmp_path / "docs"
    docs.mkdir()
    for number, line in enumerate((folder / "corpus.jsonl").read_text().splitlines()):
        record = json.loads(line)
        (docs / f"note-{number}.txt").write_text(f"{record['title']}\n\n{record['text']}\n")
    argv = ["finetune", "embedder", "--self-supervised", "--input", str(docs), "--embed-model", "packaged:minilm",
            "--out", str(tmp_path / "model"), "--store", str(tmp_path / "store"), "--no-mlflow", "--json",
            "--mode", "bm25", "--max-steps", "2", "--eval-steps", "1", "--batch-size", "4", "--max-length", "64"]
    assert main(argv) == 0, capsys.readouterr().err
    summary = json.loads(capsys.readouterr().out)
    assert summary["base_model"] == "packaged:minilm" and summary["steps"] == 2
    record = json.loads((tmp_path / "model" / "finetune.json").read_text())
    assert record["golden_queries_used"] is False and record["documents"] == 12
    assert (tmp_path / "model" / "model.safetensors").is_file()
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(tmp_path / "model"), device="cpu")
    assert model.max_seq_length == 256  # trained on 64 tokens, it searches at the packaged MiniLM's length
    assert model.encode(["river bank", "violin bow"]).shape == (2, 384)
