"""The unit tier: no models, no servers, no notebooks, no subprocesses; the whole folder runs in well
under 2 minutes (`make test-fast`). A test that needs any of those belongs in `tests/` beside this
folder (`make test` runs every tier). The checks below keep the promise: loading a model or starting a
process from a unit test fails it."""

from __future__ import annotations

import subprocess

import pytest


@pytest.fixture(autouse=True)
def _no_processes_or_models(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a unit test started a process or loaded a model: move it out of tests/unit")

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)
    try:
        import sentence_transformers
    except ImportError:  # not installed: nothing to guard
        return
    monkeypatch.setattr(sentence_transformers.SentenceTransformer, "__init__", refuse)
    monkeypatch.setattr(sentence_transformers.CrossEncoder, "__init__", refuse)
