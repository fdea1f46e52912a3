"""API keys: one redactor for text, and the keys it knows (environment and registered by a client)."""

from __future__ import annotations

import pytest

from llm_fixtures import PLANTED_KEY, clean_llm_env  # noqa: F401
from rag_core import api_keys
from rag_core.api_keys import redact
from rag_core.workbench.tracking.tracker import SecretInRun, guard_secrets, secret_scrubber


def test_redact_masks_environment_keys_and_key_shaped_text(clean_llm_env):  # noqa: F811
    clean_llm_env.setenv("ANTHROPIC_API_KEY", PLANTED_KEY)
    text = f"key {PLANTED_KEY} or sk-proj-abcdefghijkl, header Bearer abcdefghijklmnop, fine: sk-1"
    assert redact(text) == "key *** or sk-***, header Bearer ***, fine: sk-1"


def test_redact_masks_a_configured_key_of_any_shape(clean_llm_env):  # noqa: F811
    clean_llm_env.setenv("OPENAI_API_KEY", "plainsecretvalue")
    assert redact("got plainsecretvalue back") == "got *** back"
    assert redact("short: abc") == "short: abc"  # values under MIN_SECRET_CHARS are not secrets


def test_a_key_given_to_a_client_is_masked_in_traces_and_refused_as_a_param(clean_llm_env, monkeypatch):  # noqa: F811
    monkeypatch.setattr(api_keys, "_registered", set())
    api_keys.register("given-not-from-env-42")
    assert "given-not-from-env-42" in api_keys.secret_values()
    scrub = secret_scrubber()
    assert scrub({"prompt": ["uses given-not-from-env-42"]}) == {"prompt": ["uses ***"]}
    with pytest.raises(SecretInRun, match="'note'"):
        guard_secrets({"note": "given-not-from-env-42"})
