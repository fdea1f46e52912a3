"""API keys: where they come from, and the one place that hides them from text.

Keys live in the environment (``KEY_ENV``: one variable per LLM provider) or are passed to an LLM
client, which registers them (``register``). ``secret_values`` lists them all; ``redact`` masks them,
and anything shaped like a key (``sk-...``, ``Bearer ...``), in any text: error messages, logs, and
traces kept in MLflow. ``rag_core.workbench.tracking.tracker`` refuses outright to log a param, metric or
artifact holding one of ``secret_values``.

Left out: keys from files or secret managers (set the variable from them), other providers' formats.
"""

from __future__ import annotations

import os
import re

# provider -> environment variable holding its key
KEY_ENV = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}
MIN_SECRET_CHARS = 6  # shorter values are not treated as secrets (they would mask ordinary words)
_KEY_SHAPED = re.compile(r"sk-[A-Za-z0-9_\-]{6,}")  # Anthropic (sk-ant-...) and OpenAI (sk-..., sk-proj-...) keys
_BEARER = re.compile(r"(?i)(bearer\s+)[A-Za-z0-9_\-\.]{8,}")
_registered: set[str] = set()


def register(secret: str) -> None:
    """Treat `secret` (a key given to a client rather than through the environment) as a secret too."""
    _registered.add(secret)


def secret_values() -> list[str]:
    """Every key value known to this process (environment and registered), longest first."""
    values = {os.environ.get(name, "").strip() for name in KEY_ENV.values()} | _registered
    return sorted((value for value in values if len(value) >= MIN_SECRET_CHARS), key=len, reverse=True)


def redact(text: str) -> str:
    """`text` with every known key value, and anything shaped like a key, replaced by ``***``."""
    for secret in secret_values():
        text = text.replace(secret, "***")
    text = _KEY_SHAPED.sub("sk-***", text)
    return _BEARER.sub(r"\1***", text)
