"""Issue 42's training infrastructure and issue 45's case 1, on tiny data with a tiny BERT (no GPU needed):

- the ``gpu`` recipe holds the issue's converged choices, and docs/fine-tuning.md's recipe table says the same;
- ``--time-budget`` stops a training and keeps its best checkpoint by validation (a fake clock: no timing);
- data loading: worker processes and pinned memory on a GPU only;
- micro-batches: a re-ranker step in passes of fewer groups (auto on a CPU) trains the same weights as one pass;
- the training path given a BEIR folder and ``--no-mlflow`` imports neither the vector store, MLflow nor PyMuPDF;
- ``--out`` over a folder of a user's files is refused (exit 2, nothing touched); ``--force`` trains beside it and
  keeps the user's folder whole under another name; ``--out .`` never replaces a project's README.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import ROOT, run_cli
from finetune_fixtures import tiny_bert, topic_beir  # noqa: F401 - fixtures

from rag_core.config import RagConfig
from rag_core.evaluate.beir import load_beir
from rag_core.finetune.output import OutputNotOurs, check_output
from rag_core.finetune.run import FinetuneJob, run_finetune
from rag_core.finetune.settings import RECIPES, TrainSettings
from rag_core.finetune.training import LossBar, TimeBudget, training_arguments
from rag_core.finetune.validation import RerankValidation
from rag_core.ingest.corpus import Corpus

BM25 = RagConfig(mode="bm25", rerank_depth=5)
USER_FILES = {"README.md": "# my project\n", "config.json": '{"mine": true}\n', "notes.txt": "keep me\n"}


def _job(kind: str, beir: Path, base: Path, out: Path, tests: bool = True, **settings) -> FinetuneJob:
    documents, queries = load_beir(beir, "train")
    chosen = {"max_steps": 1, "eval_steps": 1, "batch_size": 2, "max_length": 48, "negatives": 2, "warmup": 0.0,
              **settings}
    return FinetuneJob(kind, tuple(queries), Corpus.of(documents), "topic train", out,
                       TrainSettings.for_kind(kind, **chosen), negatives_depth=5, validation_share=0.25,
                       base_model=str(base), test_queries=tuple(load_beir(beir, "test")[1]) if tests else (),
                       test_name="--test-split test")


def _user_folder(folder: Path) -> Path:
    folder.mkdir(parents=True)
    for name, text in USER_FILES.items():
        (folder / name).write_text(text)
    return folder


# ---- recipes ---------------------------------------------------------------------------------------------------

def test_the_gpu_recipe_holds_the_issues_converged_choices():
    reranker = TrainSettings.for_kind("reranker", "gpu")
    assert (reranker.loss, reranker.batch_size, reranker.negatives) == ("lce", 16, 15)
    assert reranker.batch_size * (1 + reranker.negatives) == 256  # pairs a step: 16 questions x (1 + 15)
    assert (reranker.learning_rate, reranker.head_learning_rate, reranker.warmup) == (1e-4, 1e-3, 0.1)
    assert (reranker.max_length, reranker.epochs, reranker.patience) == (256, 10.0, 0)
    assert RECIPES["gpu"].negatives_depth == {"reranker": 100, "embedder": 30}
    embedder = TrainSettings.for_kind("embedder", "gpu")
    assert (embedder.loss, embedder.batch_size, embedder.negatives, embedder.learning_rate, embedder.epochs) == \
        ("mnrl", 64, 1, 3e-5, 10.0)
    assert TrainSettings.for_kind("reranker", "gpu", batch_size=4).batch_size == 4  # a flag given wins
    assert TrainSettings.for_kind("reranker") == TrainSettings.for_kind("reranker", "default")


def _docs_recipe_table() -> dict[str, dict[str, str]]:
    """docs/fine-tuning.md's recipe table: setting -> column header -> cell."""
    text = (ROOT / "docs" / "fine-tuning.md").read_text()
    start = text.index("<!-- recipes-table -->")
    lines = text[start:].splitlines()[1:]
    rows = lines[:next(number for number, line in enumerate(lines) if not line.startswith("|"))]  # the table alone
    header = [cell.strip() for cell in rows[0].strip("|").split("|")]
    table = {}
    for line in rows[2:]:
        cells = [cell.strip().strip("`") for cell in line.strip("|").split("|")]
        table[cells[0]] = dict(zip(header, cells))
    return table


def test_the_docs_recipe_table_is_the_code():
    table = _docs_recipe_table()
    columns = {(recipe, kind): f"{kind} {recipe}" for recipe in RECIPES for kind in ("reranker", "embedder")}
    for (recipe, kind), column in columns.items():
        settings = TrainSettings.for_kind(kind, recipe)
        for name, row in table.items():
            expected = RECIPES[recipe].negatives_depth[kind] if name == "negatives_depth" else getattr(settings, name)
            assert float(row[column]) == float(expected) if not isinstance(expected, str) else \
                row[column] == expected, (name, column)
    assert {"negatives_depth", "batch_size", "negatives", "learning_rate", "head_learning_rate", "epochs",
            "max_length", "warmup", "loss"} <= set(table)


def test_data_loading_uses_workers_and_pinned_memory_on_a_gpu_only(tmp_path):
    from transformers import TrainingArguments

    settings = TrainSettings.for_kind("reranker", "gpu")
    on_cpu = training_arguments(TrainingArguments, settings, tmp_path, "fp32", "cpu")
    assert (on_cpu.dataloader_num_workers, on_cpu.dataloader_pin_memory) == (0, False)
    mapped = {name: getattr(training_arguments(TrainingArguments, settings, tmp_path, "bf16", "cpu"), name)
              for name in ("bf16", "per_device_train_batch_size", "warmup_steps")}
    assert mapped == {"bf16": True, "per_device_train_batch_size": 16, "warmup_steps": 0.1}
    given = training_arguments(TrainingArguments, TrainSettings.for_kind("reranker", loader_workers=2), tmp_path,
                               "fp32", "cpu")
    assert given.dataloader_num_workers == 2 and given.dataloader_persistent_workers


# ---- micro-batches ---------------------------------------------------------------------------------------------

def test_a_step_is_split_into_passes_on_a_cpu_only_where_its_groups_are_independent(tmp_path):
    from transformers import TrainingArguments

    gpu = TrainSettings.for_kind("reranker", "gpu")  # 16 groups of 16 pairs
    assert (gpu.groups_per_pass("cpu", True), gpu.groups_per_pass("cuda", True)) == (2, 16)  # 32 pairs a pass
    assert TrainSettings.for_kind("reranker").groups_per_pass("cpu", True) == 4  # the CPU recipe: one pass, as before
    assert TrainSettings.for_kind("reranker", "gpu", micro_batch=4).groups_per_pass("cuda", True) == 4
    assert TrainSettings.for_kind("reranker", batch_size=6, negatives=15).groups_per_pass("cpu", True) == 2
    split = training_arguments(TrainingArguments, gpu, tmp_path, "fp32", "cpu", splittable=True)
    assert (split.per_device_train_batch_size, split.gradient_accumulation_steps) == (2, 8)
    whole = training_arguments(TrainingArguments, TrainSettings.for_kind("embedder", "gpu"), tmp_path, "fp32", "cpu")
    assert (whole.per_device_train_batch_size, whole.gradient_accumulation_steps) == (64, 1)  # in-batch negatives
    with pytest.raises(ValueError, match="micro_batch must divide batch_size"):
        TrainSettings.for_kind("reranker", "gpu", micro_batch=3)
    with pytest.raises(ValueError, match="compares the whole batch in one pass"):
        TrainSettings.for_kind("embedder", micro_batch=8).groups_per_pass("cpu", False)
    assert TrainSettings.for_kind("reranker", micro_batch=2).resume_key() == TrainSettings.for_kind("reranker").resume_key()


def test_a_micro_batch_the_loss_cannot_take_is_refused_before_anything_runs(topic_beir, tmp_path):  # noqa: F811
    out = tmp_path / "model"
    done = run_cli("finetune", "embedder", "--beir", str(topic_beir), "--micro-batch", "8", "--out", str(out),
                   "--no-mlflow", store=tmp_path / "store")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "micro_batch 8: this loss (mnrl) compares the whole batch in one pass" in done.stderr
    assert not out.exists() and not (tmp_path / "store").exists()  # nothing mined, loaded or written


def test_a_step_in_passes_trains_the_same_weights_as_one_pass(topic_beir, tmp_path, monkeypatch):  # noqa: F811
    """Same groups, same mean gradient: plain SGD (Adam would turn gradients that are zero up to rounding, such as
    the head's bias under a softmax, into +-lr steps) and no dropout (it draws other masks in other passes); then
    4 groups in one pass, in 4 passes of 1 and in 2 of 2 take the same step. A loss summed over the passes would
    take 4 times the step; other groups, another step. (Only a full step: an epoch's last step, when the groups
    left do not fill it, averages its passes, not its groups.)"""
    from transformers import AutoTokenizer, BertConfig, BertModel

    import rag_core.finetune.reranker as reranker
    from rag_core.retrieve.models import packaged_minilm_dir

    base = tmp_path / "no-dropout-bert"
    tokenizer = AutoTokenizer.from_pretrained(str(packaged_minilm_dir()))
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=128, hidden_dropout_prob=0.0,
                         attention_probs_dropout_prob=0.0)).save_pretrained(str(base))
    tokenizer.save_pretrained(str(base))
    with_sgd = reranker.training_arguments
    monkeypatch.setattr(reranker, "training_arguments", lambda *args, **kwargs: with_sgd(*args, optim="sgd", **kwargs))
    monkeypatch.setattr(RerankValidation, "ndcg", lambda self, model: float(self.calls.append(0) or len(self.calls)),
                        raising=False)
    monkeypatch.setattr(RerankValidation, "calls", [], raising=False)  # a rising validation: the last step is kept
    trained = {}
    for micro_batch in (-1, 1, 2):  # auto: the whole step (4 groups of 3 pairs) in one pass; 4 passes; 2 passes
        job = _job("reranker", topic_beir, base, tmp_path / f"m{micro_batch}", tests=False, batch_size=4,
                   micro_batch=micro_batch, precision="fp32", max_steps=1, learning_rate=0.9, head_learning_rate=0.9)
        result = run_finetune(job, BM25, tmp_path / "store", log_to_mlflow=False).result
        assert (result.steps, result.best_step) == (1, 1)
        trained[micro_batch] = reranker.load_base_cross_encoder(str(result.model_dir), job.settings, "cpu").state_dict()
    before = {f"0.model.bert.{name}": value for name, value in BertModel.from_pretrained(str(base)).state_dict().items()}
    moved = {key: trained[-1][key] - before[key] for key in before if key in trained[-1]}
    assert len(moved) > 30 and moved["0.model.bert.encoder.layer.0.attention.self.value.weight"].norm() > 1e-4
    for micro_batch in (1, 2):  # each parameter's change equal to the one-pass change, up to float rounding
        assert trained[micro_batch].keys() == trained[-1].keys()
        for key, change in moved.items():
            assert (trained[micro_batch][key] - before[key] - change).norm() <= 1e-2 * change.norm() + 1e-7, key
        head = "0.model.classifier.weight"
        assert torch.allclose(trained[micro_batch][head], trained[-1][head], rtol=1e-4, atol=1e-7)


# ---- time budget ----------------------------------------------------------------------------------------------

def test_a_training_stopped_by_its_time_budget_keeps_the_best_checkpoint(topic_beir, tiny_bert, tmp_path,  # noqa: F811
                                                                        monkeypatch):
    from rag_core.finetune.reranker import load_base_cross_encoder

    ticks = iter(range(0, 10_000, 60))  # a clock that advances one minute each time it is read
    monkeypatch.setattr(TimeBudget, "clock", staticmethod(lambda: float(next(ticks))))
    validations = iter([0.2, 0.6, 0.4, 0.1, 0.1])  # steps 0, 2, then 3 (where the budget runs out)
    monkeypatch.setattr(RerankValidation, "ndcg", lambda self, model: next(validations))
    saved = {}

    def snapshot(self, args, state, control, model=None, **kwargs):
        saved[state.global_step] = {k: v.detach().clone() for k, v in model.state_dict().items()}

    monkeypatch.setattr(LossBar, "on_save", snapshot, raising=False)
    job = _job("reranker", topic_beir, tiny_bert, tmp_path / "m", tests=False, max_steps=8, eval_steps=2,
               learning_rate=0.05, head_learning_rate=0.05, time_budget=2.5)
    result = run_finetune(job, BM25, tmp_path / "store", log_to_mlflow=False).result
    # read at the start (0 s), then after steps 1, 2, 3 (180 s >= 150 s): stopped at step 3, validated there
    assert (result.steps, result.stopped_by_budget, result.stopped_early) == (3, True, True)
    assert [(p.step, p.ndcg_at_10) for p in result.curve] == [(0, 0.2), (2, 0.6), (3, 0.4)]
    assert result.best_step == 2 and sorted(saved) == [2, 3]
    model = load_base_cross_encoder(str(result.model_dir), job.settings, "cpu").state_dict()
    assert all(torch.equal(model[name], saved[2][name]) for name in saved[2])  # step 2's weights, not step 3's
    assert any(not torch.equal(saved[2][name], saved[3][name]) for name in saved[2])
    assert json.loads((result.model_dir / "finetune.json").read_text())["stopped_by_budget"] is True


def test_the_time_budget_is_checked_and_left_out_of_the_resume_key():
    with pytest.raises(ValueError, match="time_budget must be >= 0"):
        TrainSettings.for_kind("reranker", time_budget=-1.0)
    with_budget = TrainSettings.for_kind("reranker", time_budget=5.0, loader_workers=3)
    assert with_budget.resume_key() == TrainSettings.for_kind("reranker").resume_key()  # resumable with another budget


# ---- what the training path imports ---------------------------------------------------------------------------

FORBIDDEN = ("chromadb", "mlflow", "fitz", "pymupdf")


def test_the_beir_training_path_imports_no_vector_store_mlflow_or_pdf_library(topic_beir, tiny_bert, tmp_path):  # noqa: F811
    script = f"""
import sys
from rag_core.cli import main
common = ["--beir", {str(topic_beir)!r}, "--base-model", {str(tiny_bert)!r}, "--mode", "bm25", "--max-steps", "1",
          "--eval-steps", "1", "--max-length", "48", "--batch-size", "2", "--negatives", "1", "--negatives-depth", "5",
          "--test-split", "test", "--no-mlflow", "--store", {str(tmp_path / 'store')!r}]
codes = [main(["finetune", kind, *common, "--out", {str(tmp_path)!r} + "/" + kind]) for kind in ("reranker", "embedder")]
print("CODES", codes)
print("IMPORTED", sorted({{name.split(".")[0] for name in sys.modules}} & set({FORBIDDEN!r})))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=600,
                          env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert "CODES [0, 0]" in done.stdout, done.stderr[-3000:]
    assert "IMPORTED []" in done.stdout
    assert (tmp_path / "reranker" / "config.json").is_file() and (tmp_path / "embedder" / "modules.json").is_file()


# ---- --out over a user's folder (issue 45, case 1) -------------------------------------------------------------

def test_out_over_a_folder_of_user_files_is_refused_before_anything_runs(topic_beir, tmp_path):  # noqa: F811
    folder = _user_folder(tmp_path / "mine")
    for extra in ([], ["--self-supervised"]):
        done = run_cli("finetune", "embedder", "--beir", str(topic_beir), "--out", str(folder), "--no-mlflow",
                       *extra, store=tmp_path / "store")
        assert done.returncode == 2, done.stderr
        line = done.stderr.strip()
        assert line.startswith(f"error: --out {folder} holds files that are not a model") and "\n" not in line
        assert "README.md, config.json, notes.txt" in line and "--force" in line and "new folder" in line
    assert {path.name: path.read_text() for path in folder.iterdir()} == USER_FILES
    assert sorted(path.name for path in tmp_path.iterdir()) == ["mine"]  # no store, no staging folder


def test_out_dot_in_a_project_never_replaces_its_readme(tmp_path):
    project = _user_folder(tmp_path / "project")
    for extra in ([], ["--force"]):
        done = run_cli("finetune", "reranker", "--beir", "x", "--out", ".", *extra, cwd=project)
        assert done.returncode == 2 and done.stderr.startswith("error: --out . ")
    assert "--force cannot set it aside" in done.stderr
    assert {path.name: path.read_text() for path in project.iterdir()} == USER_FILES


def test_force_writes_beside_then_keeps_the_user_folder_whole(topic_beir, tiny_bert, tmp_path):  # noqa: F811
    folder = _user_folder(tmp_path / "models" / "mine")
    with pytest.raises(OutputNotOurs):
        check_output(folder)
    outcome = run_finetune(_job("reranker", topic_beir, tiny_bert, folder, tests=False), BM25, tmp_path / "store",
                           log_to_mlflow=False, force=True)
    kept = outcome.set_aside_to
    assert outcome.result.model_dir == folder and re.fullmatch(r"mine\.replaced-\d{8}-\d{6}", kept.name)
    assert {path.name: path.read_text() for path in kept.iterdir()} == USER_FILES  # the user's files, untouched
    assert json.loads((folder / "config.json").read_text()).get("mine") is None  # the model's own config
    assert (folder / "training_queries.json").is_file() and not (folder / "notes.txt").exists()
    assert sorted(path.name for path in folder.parent.iterdir()) == ["mine", kept.name]  # no staging folder left
    assert not check_output(folder).set_aside  # now a model this command wrote: trained again in place


def test_a_failed_forced_training_leaves_the_user_folder_and_no_staging_folder(topic_beir, tmp_path):  # noqa: F811
    folder = _user_folder(tmp_path / "models" / "mine")
    with pytest.raises(Exception):
        run_finetune(_job("reranker", topic_beir, tmp_path / "no-such-model", folder, tests=False), BM25,
                     tmp_path / "store", log_to_mlflow=False, force=True)
    assert sorted(path.name for path in folder.parent.iterdir()) == ["mine"]
    assert {path.name: path.read_text() for path in folder.iterdir()} == USER_FILES
