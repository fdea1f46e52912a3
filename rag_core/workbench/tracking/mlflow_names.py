"""Metric names as MLflow stores them: MLflow allows only ``[A-Za-z0-9_ ./:-]``, so ``@`` is written
``_at_`` (``page/recall@5`` is logged as ``page/recall_at_5``). The mapping is one-to-one and only
MLflow sees it: the CLI's JSON, the CSV and every table keep ``@``.

Both the tracker (``rag_core.workbench.tracking.tracker``) and the runs view the UI opens on
(``rag_core.workbench.tracking.experiment_view``) name metrics this way.
Left out: param and tag names (settings and ``rag.*`` tags are valid as they are).
"""

from __future__ import annotations

import re


def mlflow_metric_name(name: str) -> str:
    """``page/recall@5`` -> ``page/recall_at_5`` (MLflow rejects ``@``)."""
    return name.replace("@", "_at_")


def metric_name_from_mlflow(name: str) -> str:
    """``page/recall_at_5`` -> ``page/recall@5``; other names unchanged."""
    return re.sub(r"_at_(\d+)$", r"@\1", name)
