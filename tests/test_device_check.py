"""scripts/device_check.py (issue 42's GPU device check) without a GPU: its ``--tiny`` mode end to end on the CPU
(tiny BEIR folder, tiny BERT), the held-out split, what it chooses to carry, the size accounting, and the fp16
model that travels coming back as fp32 weights."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT
from finetune_fixtures import tiny_bert, topic_beir  # noqa: F401 - fixtures

sys.path.insert(0, str(ROOT / "scripts"))
import device_check  # noqa: E402

from rag_core.evaluate.beir import load_beir  # noqa: E402
from rag_core.finetune.fingerprints import query_fingerprint  # noqa: E402


def test_tiny_mode_trains_both_kinds_and_scores_only_held_out_claims(topic_beir, tiny_bert, tmp_path):  # noqa: F811
    out = tmp_path / "check.json"
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "device_check.py"), "--tiny", "--beir",
                           str(topic_beir), "--base-model", str(tiny_bert), "--work", str(tmp_path / "work"),
                           "--json", str(out)], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "| kind | system | train s | steps | pairs/s | device | nDCG@10 | 95% interval |" in done.stdout
    results = json.loads(out.read_text())
    assert [(row["kind"], row["system"]) for row in results["rows"]] == [
        ("reranker", "first stage"), ("reranker", "re-ranked"), ("reranker", "re-ranked + rrf"),
        ("embedder", "base embedder"), ("embedder", "fine-tuned embedder")]
    trained = [row for row in results["rows"] if "steps" in row]
    assert len(trained) == 3 and all(0 < row["steps"] <= 2 and row["device"] == "cpu" for row in trained)
    assert all(row["low"] <= row["ndcg@10"] <= row["high"] and row["claims"] == results["held_out_claims"]
               for row in results["rows"])
    assert results["overlap"] == [] and results["forbidden_imported"] == []
    assert results["training_claims"] + results["held_out_claims"] == 9  # the tiny folder's train split


def test_the_held_out_claims_are_disjoint_by_text_and_stable(topic_beir):  # noqa: F811
    queries = list(load_beir(topic_beir, "train")[1])
    train, held_out = device_check.split_claims(queries, 0.3, 13)
    assert {query_fingerprint(q.query) for q in train}.isdisjoint(query_fingerprint(q.query) for q in held_out)
    assert len(train) + len(held_out) == len(queries) and held_out
    assert device_check.split_claims(list(reversed(queries)), 0.3, 13)[1] and \
        {q.id for q in device_check.split_claims(list(reversed(queries)), 0.3, 13)[1]} == {q.id for q in held_out}


def test_only_what_the_gpu_machine_lacks_is_carried():
    imported = {"datasets", "torch", "numpy", "rapidfuzz", "rag-workbench", "nvidia-cublas", "transformers",
                "multiprocess", "sentence-transformers", "kernels"}
    assert device_check.to_carry(imported) == ["datasets", "multiprocess", "rapidfuzz"]
    assert device_check.canonical("Rank_BM25") == "rank-bm25"
    assert device_check.wheel_distribution(Path("rank_bm25-0.2.2-py3-none-any.whl")) == "rank-bm25"


def test_the_size_report_adds_the_parts_against_64_mib():
    lines, fits = device_check.size_report({"tree": 4 * 2**20, "model": 45 * 2**20, "data": 15 * 2**20})
    assert fits and lines[-1].split()[-2] == "64.00"  # exactly the limit still travels
    assert not device_check.size_report({"tree": 64 * 2**20 + 1})[1]


def test_tree_bytes_counts_tracked_and_untracked_files_but_not_ignored_ones(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text("big/\n")
    (tmp_path / "a.txt").write_text("x" * 100)
    (tmp_path / "big").mkdir()
    (tmp_path / "big" / "b.bin").write_bytes(b"y" * 5000)
    assert device_check.tree_bytes(tmp_path) == 100 + len("big/\n")


@pytest.mark.slow
def test_the_fp16_model_that_travels_comes_back_as_fp32_weights(tmp_path):
    import torch
    from safetensors.torch import load_file

    from rag_core.retrieve.models import packaged_minilm_dir

    carried = tmp_path / "carried"
    device_check.write_fp16_model(carried / "model")
    (tmp_path / "beir").mkdir()
    (tmp_path / "beir" / "corpus.jsonl").write_text("{}\n")
    import tarfile

    with tarfile.open(carried / "data.tar.gz", "w:gz") as archive:
        archive.add(tmp_path / "beir", arcname="beir")
    beir, model = device_check.unpack_carried(carried, tmp_path / "scratch")
    original = load_file(str(packaged_minilm_dir() / "model.safetensors"))
    back = load_file(str(model / "model.safetensors"))
    assert (beir / "corpus.jsonl").read_text() == "{}\n"
    assert all(back[name].dtype == torch.float32 and torch.equal(back[name], original[name].half().float())
               for name in original if original[name].is_floating_point())
    size = (carried / "model" / "model.safetensors").stat().st_size
    assert size < 0.55 * (packaged_minilm_dir() / "model.safetensors").stat().st_size
