"""The worked plugin example, run as a researcher would: ``examples/plugins/sweep.yaml`` from a clean
checkout of the project (its files, no store, no MLflow runs, nothing installed from it), through the
CLI and papermill's kernel. The plugin retriever and chunker are grid values; every run records their
settings as MLflow params; and the plugins' components are checked against independent computations."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from mlflow.tracking import MlflowClient

from conftest import ROOT
from rag_core.components import load_plugins
from rag_core.config import RagConfig
from rag_core.ingest.chunkers import make_chunker
from rag_core.records import Document

EXAMPLES = ROOT / "examples" / "plugins"


def _clean_checkout(target: Path) -> Path:
    """The project's files as a checkout has them: tracked and untracked-but-not-ignored files only."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


@pytest.mark.slow
def test_the_plugin_sweep_runs_from_a_clean_checkout_with_plugin_settings_as_params(tmp_path):
    checkout = _clean_checkout(tmp_path / "checkout")
    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    env = {**os.environ, "PYTHONPATH": str(checkout), "MLFLOW_TRACKING_URI": uri}
    completed = subprocess.run([sys.executable, "-m", "rag_core.cli", "sweep", "examples/plugins/sweep.yaml",
                                "--store", str(tmp_path / "store"), "--no-tracing"],
                               cwd=checkout, env=env, capture_output=True, text=True, timeout=1500)
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    assert "Traceback" not in completed.stderr

    client = MlflowClient(uri)
    [experiment] = [e for e in client.search_experiments() if e.name == "documents | golden"]
    runs = [run for run in client.search_runs([experiment.experiment_id]) if "mlflow.parentRunId" in run.data.tags]
    assert len(runs) == 8 and {run.info.status for run in runs} == {"FINISHED"}
    points = {(run.data.params["mode"], run.data.params["chunker"]) for run in runs}
    assert points == {(mode, chunker) for mode in ("bm25", "tfidf", "bm25,tfidf", "hybrid")
                      for chunker in ("recursive", "sentence_runs")}
    for run in runs:  # the plugins' settings are params of every run, like the built-ins'
        params = run.data.params
        assert (params["tfidf_ngram_max"], params["tfidf_sublinear_tf"], params["sentence_overlap"]) == ("1", "True", "1")
        assert params["plugins"] == ",".join(str(checkout / "examples" / "plugins" / name)
                                             for name in ("tfidf_retriever.py", "sentence_chunker.py"))
        assert 0.0 <= run.data.metrics["page/ndcg_at_10"] <= 1.0
    tfidf_only = [run for run in runs if run.data.params["mode"] == "tfidf"]
    assert all(run.data.metrics["latency/tfidf_p50_ms"] > 0 for run in tfidf_only)
    assert "tfidf" in completed.stdout  # the comparison table names the plugin's points
    assert (checkout / "examples" / "plugins" / "runs" / "plugins").is_dir()


def test_the_example_retriever_ranks_by_tfidf_cosine_like_scikit_learn(tmp_path, isolated_components):
    from sklearn.feature_extraction.text import TfidfVectorizer

    from rag_core.ingest.corpus import Corpus
    from rag_core.retrieve.pipeline import Pipeline

    texts = {"a.txt": "the cat sat on the mat", "b.txt": "dogs chase cats in the park",
             "c.txt": "a mat of moss grew on the stone", "d.txt": "stock prices fell sharply"}
    corpus = Corpus.of([Document.from_pages(name, [text], name) for name, text in texts.items()])
    load_plugins([str(EXAMPLES / "tfidf_retriever.py")])
    config = RagConfig(mode="tfidf", rerank_depth=0, chunk_size=50, overlap=0, tfidf_sublinear_tf=False)
    result = Pipeline(config, corpus, tmp_path / "store").retrieve("cat on a mat", where=None)
    vectorizer = TfidfVectorizer()  # the reference: the same model fitted here, cosine by hand
    matrix = vectorizer.fit_transform(list(texts.values())).toarray()
    query = vectorizer.transform(["cat on a mat"]).toarray()[0]
    cosine = matrix @ query / (np.linalg.norm(matrix, axis=1) * np.linalg.norm(query))
    expected = [name for name, score in sorted(zip(texts, cosine), key=lambda item: -item[1]) if score > 0]
    assert [hit.chunk.doc_id for hit in result.stages["tfidf"]] == expected
    assert [hit.score for hit in result.stages["tfidf"]] == pytest.approx(sorted(cosine[cosine > 0], reverse=True))
    filtered = Pipeline(config, corpus, tmp_path / "store").retrieve("cat on a mat", where={"doc_id": "c.txt"})
    assert [hit.chunk.doc_id for hit in filtered.stages["tfidf"]] == ["c.txt"]


def test_the_example_chunker_keeps_whole_sentences_within_chunk_size(isolated_components):
    load_plugins([str(EXAMPLES / "sentence_chunker.py")])
    text = "One two three. Four five six seven. Eight nine.\n\nTen eleven twelve thirteen fourteen. Fifteen."
    document = Document.from_pages("s.txt", [text], "s.txt")
    chunker = make_chunker(RagConfig(chunker="sentence_runs", chunk_size=7, overlap=0, sentence_overlap=1))
    chunks = [chunk.text for chunk in chunker.chunk_corpus([document])]
    assert chunks == ["One two three. Four five six seven.", "Four five six seven. Eight nine.",
                      "Eight nine.\n\nTen eleven twelve thirteen fourteen.",
                      "Ten eleven twelve thirteen fourteen. Fifteen."]
    no_overlap = make_chunker(RagConfig(chunker="sentence_runs", chunk_size=7, overlap=0, sentence_overlap=0))
    assert [chunk.text for chunk in no_overlap.chunk_corpus([document])] == [
        "One two three. Four five six seven.", "Eight nine.\n\nTen eleven twelve thirteen fourteen.", "Fifteen."]
