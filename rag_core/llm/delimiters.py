"""Delimiters that untrusted text cannot close: every prompt puts document text, questions and
answers inside ``<tag-NONCE ...>`` ... ``</tag-NONCE>``, where NONCE occurs in none of those texts.

Left out: escaping the text itself (it is passed unchanged: the model may quote it).
"""

from __future__ import annotations

import secrets
from typing import Sequence


def delimited(tag: str, text: str) -> str:
    """`text` on its own lines between ``<tag>`` and ``</tag>`` (`tag` carries a nonce from ``new_nonce``)."""
    return f"<{tag}>\n{text}\n</{tag}>"


def new_nonce(texts: Sequence[str], nonce: str | None = None) -> str:
    """A code that occurs in none of ``texts`` (random unless given; a given one that occurs raises)."""
    if nonce is not None:
        if any(nonce in text for text in texts):
            raise ValueError(f"nonce {nonce!r} occurs in the text it should delimit")
        return nonce
    while True:
        candidate = secrets.token_hex(8)
        if not any(candidate in text for text in texts):
            return candidate
