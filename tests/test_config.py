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
