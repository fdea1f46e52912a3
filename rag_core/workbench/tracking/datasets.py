"""The golden set as an MLflow dataset input of a run: the run page's "Datasets used" and the runs
table's Dataset column name it, with its digest (the golden fingerprint: equal digests, same
queries), its source (the golden file or BEIR folder; an MLflow golden dataset's id) and its schema.

What is logged is a table of the queries: query_id, query, answer, evidence_sources, evidence_pages,
evidence (JSON: source, page, text of each item). Left out: the corpus as a dataset (its fingerprint
is a param and a tag), dataset tables as artifacts (``per_query.csv`` already holds the queries).
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Sequence

from rag_core.evaluate.evaluator import golden_fingerprint
from rag_core.evaluate.golden import GoldenQuery

if TYPE_CHECKING:
    import pandas as pd

    from rag_core.workbench.tracking.tracker import Tracker

DATASET_CONTEXT = "evaluation"  # the input's mlflow.data.context tag
VERSION_INPUT_TAG = "rag.golden.version"  # the input's tag naming an MLflow golden dataset's version
RACE_ATTEMPTS = 3  # log_inputs tries when another run inserted the same dataset at the same moment


def golden_table(queries: Sequence[GoldenQuery]) -> "pd.DataFrame":
    """One row per query (plain strings: MLflow infers the dataset's schema from the columns)."""
    import pandas as pd

    return pd.DataFrame({
        "query_id": [query.id for query in queries],
        "query": [query.query for query in queries],
        "answer": [query.answer or "" for query in queries],
        "evidence_sources": [" | ".join(query.sources) for query in queries],
        "evidence_pages": [" | ".join(str(item.page or "") for item in query.evidence) for query in queries],
        "evidence": [json.dumps([{"source": item.source, "page": item.page, "text": item.text}
                                 for item in query.evidence]) for query in queries],
    })


def log_golden_input(tracker: "Tracker", run_id: str, queries: Sequence[GoldenQuery], name: str,
                     source: str | None, *, dataset_id: str | None = None, version: int | None = None) -> None:
    """Log `queries` as the run's dataset input `name` (digest: the golden fingerprint). A version of an
    MLflow golden dataset (``rag_core.workbench.tracking.golden_datasets``) gives its `dataset_id` (the
    input's source) and `version` (an input tag beside the context)."""
    import warnings

    import mlflow.data
    from mlflow.data.evaluation_dataset_source import EvaluationDatasetSource
    from mlflow.entities import Dataset, DatasetInput, InputTag

    with warnings.catch_warnings():  # "source can be interpreted in multiple ways": both are the local file
        warnings.simplefilter("ignore", UserWarning)
        dataset = mlflow.data.from_pandas(golden_table(queries), name=name, digest=golden_fingerprint(queries),
                                          source=EvaluationDatasetSource(dataset_id) if dataset_id else source or name)
    entity = Dataset(**dataset.to_dict())
    tags = [InputTag("mlflow.data.context", DATASET_CONTEXT)]
    if version is not None:
        tags.append(InputTag(VERSION_INPUT_TAG, str(version)))
    inputs = [DatasetInput(entity, tags)]
    for attempt in range(RACE_ATTEMPTS):
        try:
            tracker.client.log_inputs(run_id, inputs)
            return
        except Exception as exc:  # MlflowException over REST, SQLAlchemy's IntegrityError on a database URI
            if attempt + 1 == RACE_ATTEMPTS or not lost_dataset_race(exc):
                raise
            time.sleep(0.2 * (attempt + 1))


def lost_dataset_race(exc: BaseException) -> bool:
    """MLflow's SQL store looks the dataset up and inserts it when absent, in one transaction: two runs of
    one experiment that log the same new dataset at once (sweep workers) can both miss it, and the second
    insert fails on the dataset's primary key. Its transaction was rolled back; a retry finds the row."""
    text = str(exc).lower()
    return "dataset" in text and ("duplicate key" in text or "unique constraint" in text)
