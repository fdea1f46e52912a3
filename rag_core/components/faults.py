"""A component that breaks its contract is named in one line: ``ComponentFault`` (exit 1).

A plugin runs inside our process, and what it gets wrong would otherwise surface far from it: a
``KeyError`` in the pipeline for a chunk id it made up, ``NaN`` printed where ``query --json`` promises
JSON, a passage shown three times, a ``ValueError`` deep in the BM25 index for two identical chunks.
So the callers of a component check its output where the contract is (the retrievers' hits:
``rag_core.retrieve.retrievers.base.checked_ranked``; a chunker's chunks: ``Chunker.chunk_corpus``)
and raise a ``ComponentFault`` naming the component, where it comes from and what it returned.

- ``component_fault(component, what)``: that error for a ``Component`` of a registry.
- ``checked_scores(component, call, scores, expected)``: `expected` finite numbers (a re-ranker's
  scores), or that error.
- ``calling(component, call)``: a block in which what a plugin raises (other than ``BadInput`` and
  ``RunFailure``, which say what to do already) becomes a ``ComponentFault`` naming it, with the
  exception's type and first line. A built-in's exception passes through: a bug of ours keeps its
  traceback.
Left out: time limits on a plugin's calls, and plugins that crash the process (they run in it).
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Any, Iterator

from rag_core.errors import BadInput, RunFailure

BUILT_IN = "built-in"  # Component.origin of the components rag_core registers itself
SHOWN_CHARS = 300  # of a plugin's exception message


class ComponentFault(RunFailure):
    """A component (most often a plugin) returned what its contract forbids, or raised."""


def describe(component: Any) -> str:
    """``retriever 'mine' (module mine.py (/path/mine.py))``: its kind, name and origin."""
    origin = getattr(component, "origin", BUILT_IN)
    return f"{component.kind} {component.name!r}" + ("" if origin == BUILT_IN else f" ({origin})")


def component_fault(component: Any, what: str) -> ComponentFault:
    """The error for `component` having done `what` (``returned chunk id 'x', which ...``)."""
    return ComponentFault(f"{describe(component)} {what}")


def checked_scores(component: Any, call: str, scores: Any, expected: int) -> list[float]:
    """`scores` as floats when they are `expected` finite numbers (one per passage given), else a
    ``ComponentFault`` naming `component`."""
    try:
        values = [float(score) for score in scores]
    except (TypeError, ValueError):
        raise component_fault(component, f"{call}() returned scores that are not numbers") from None
    if len(values) != expected:
        raise component_fault(component, f"{call}() returned {len(values)} scores for {expected} passages")
    for position, value in enumerate(values):
        if not math.isfinite(value):
            raise component_fault(component, f"{call}() returned the score {value} for passage {position + 1}")
    return values


@contextmanager
def calling(component: Any, call: str) -> Iterator[None]:
    """Run the block (a call of `component`'s `call` method); a plugin's exception becomes one
    ``ComponentFault`` line naming it."""
    try:
        yield
    except (BadInput, RunFailure):
        raise
    except Exception as exc:  # noqa: BLE001 - whatever a plugin raises is named, not printed as a traceback
        if getattr(component, "origin", BUILT_IN) == BUILT_IN:
            raise
        first = (str(exc).strip().splitlines() or [""])[0][:SHOWN_CHARS]
        raise component_fault(component, f"failed in {call}(): {type(exc).__name__}"
                                         + (f": {first}" if first else "")) from exc
