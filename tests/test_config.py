"""Settings: defaults from the spec, YAML loading, unknown keys named, precedence, CLI flags."""

from __future__ import annotations

import pytest

from conftest import run_cli
from rag_core.config import ConfigError, RagConfig, load_config


def test_spec_defaults():
    config = RagConfig()
    assert (config.chunk_size, config.overlap, config.k, config.retrieve_depth, config.rerank_depth,
            config.rrf_k, config.mode) == (512, 64, 5, 20, 20, 60, "hybrid")
    assert config.embed_model == "BAAI/bge-small-en-v1.5"
    assert config.rerank_model == "cross-encoder/ms-marco-MiniLM-L6-v2"


def test_yaml_then_environment_then_overrides(tmp_path, monkeypatch):
    path = tmp_path / "settings.yaml"
    path.write_text("chunk_size: 256\noverlap: 32\nembed_model: from-yaml\nmode: bm25\n")
    monkeypatch.setenv("RAG_EMBED_MODEL", "from-env")
    config = load_config(path, {"overlap": "16", "k": None})
    assert (config.chunk_size, config.overlap, config.mode, config.k) == (256, 16, "bm25", 5)
    assert config.embed_model == "from-env"


def test_unknown_key_is_named(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("chunk_size: 256\nchunk_overlap: 10\n")
    with pytest.raises(ConfigError, match="'chunk_overlap'.*bad.yaml"):
        load_config(path)


@pytest.mark.parametrize("changes, message", [
    ({"overlap": 600}, "overlap"), ({"mode": "sparse"}, "mode"), ({"tokenizer": "porter"}, "tokenizer"),
    ({"chunk_size": "big"}, "chunk_size"), ({"per_page": "maybe"}, "per_page"),
])
def test_bad_values_are_named(changes, message):
    with pytest.raises(ConfigError, match=message):
        RagConfig.from_dict(changes)


def test_cli_rejects_an_unknown_key_in_a_config_file(tmp_path):
    path = tmp_path / "typo.yaml"
    path.write_text("rerank_dept: 10\n")
    result = run_cli("query", "anything", "--config", str(path), store=tmp_path / "store")
    assert result.returncode == 2
    assert "rerank_dept" in result.stderr


def test_every_setting_is_a_documented_cli_flag():
    from rag_core.cli import build_parser
    from rag_core.config import SETTING_HELP, setting_names

    assert set(SETTING_HELP) == set(setting_names())
    help_text = build_parser()._subparsers._group_actions[0].choices["query"].format_help()
    for name in setting_names():
        assert "--" + name.replace("_", "-") in help_text


@pytest.mark.parametrize("changes, setting", [
    ({"bm25_k1": -5}, "bm25_k1"), ({"bm25_k1": "nan"}, "bm25_k1"), ({"bm25_k1": "inf"}, "bm25_k1"),
    ({"bm25_b": 7}, "bm25_b"), ({"bm25_b": -0.1}, "bm25_b"), ({"embed_batch_size": 0}, "embed_batch_size"),
    ({"max_answer_tokens": -5}, "max_answer_tokens"), ({"min_rerank_score": "nan"}, "min_rerank_score"),
    ({"llm_timeout_s": 0}, "llm_timeout_s"), ({"llm_timeout_s": "inf"}, "llm_timeout_s"),
    ({"llm_max_retries": -1}, "llm_max_retries"), ({"k": float("inf")}, "'k'"), ({"rrf_k": -1}, "rrf_k"),
])
def test_numeric_settings_are_checked_against_their_range(changes, setting):
    with pytest.raises(ConfigError, match=setting):
        RagConfig.from_dict(changes)


def test_edges_of_the_ranges_are_allowed():
    config = RagConfig.from_dict({"bm25_k1": 0, "bm25_b": 1, "llm_max_retries": 0, "min_rerank_score": -3.5})
    assert (config.bm25_k1, config.bm25_b, config.llm_max_retries) == (0.0, 1.0, 0)


def test_llm_timeout_and_retries_come_from_the_environment(monkeypatch):
    assert RagConfig().llm_timeout_s * (RagConfig().llm_max_retries + 1) <= 60  # what a person waits at a prompt
    monkeypatch.setenv("RAG_LLM_TIMEOUT_S", "2.5")
    monkeypatch.setenv("RAG_LLM_MAX_RETRIES", "0")
    config = load_config()
    assert (config.llm_timeout_s, config.llm_max_retries) == (2.5, 0)
    monkeypatch.setenv("RAG_LLM_TIMEOUT_S", "-1")
    with pytest.raises(ConfigError, match="llm_timeout_s"):
        load_config()
