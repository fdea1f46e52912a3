"""Training rows (a ``datasets.Dataset``) in the layout a loss reads (``losses.LAYOUTS``), from
``mining.NegativeGroup``s (query, positive, hard negatives):

- listwise: ``query``, ``docs`` (the positive first), ``labels`` (1, then 0 for each negative);
- pointwise: one row per pair, ``query``, ``passage``, ``label``;
- tuples: ``<query column>``, ``positive``, ``negative_1`` .. ``negative_n``, with n the fewest
  negatives any group has (the losses need the same number on every row).
Left out: graded labels.
"""

from __future__ import annotations

from typing import Any, Sequence

from rag_core.finetune.mining import NegativeGroup


def training_rows(found: Sequence[NegativeGroup], layout: str, query_column: str = "query") -> Any:
    from datasets import Dataset

    if layout == "listwise":
        return Dataset.from_dict({query_column: [g.query for g in found],
                                  "docs": [[g.positive, *g.negatives] for g in found],
                                  "labels": [[1] + [0] * len(g.negatives) for g in found]})
    if layout == "pointwise":
        pairs = [(g.query, text, float(label)) for g in found
                 for text, label in [(g.positive, 1), *((negative, 0) for negative in g.negatives)]]
        return Dataset.from_dict({query_column: [p[0] for p in pairs], "passage": [p[1] for p in pairs],
                                  "label": [p[2] for p in pairs]})
    if layout != "tuples":
        raise ValueError(f"unknown layout {layout!r}")
    fewest = min((len(g.negatives) for g in found), default=0)
    columns: dict[str, list[str]] = {query_column: [g.query for g in found], "positive": [g.positive for g in found]}
    for number in range(fewest):
        columns[f"negative_{number + 1}"] = [g.negatives[number] for g in found]
    return Dataset.from_dict(columns)
