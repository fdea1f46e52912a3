"""Reading a model's reply: the JSON objects in it, wherever they start (prose around them is skipped).

Left out: repairing malformed JSON (a reply without a usable object is the caller's error to raise).
"""

from __future__ import annotations

import json
from typing import Any, Iterator


def json_objects_in(text: str) -> Iterator[dict[str, Any]]:
    """Every JSON object in a model's reply, in order, wherever it starts (prose around it is skipped)."""
    decoder = json.JSONDecoder()
    for start, char in enumerate(text):
        if char != "{":
            continue
        try:
            value, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            yield value
