"""Two sweep workers that log the same new golden set at once: the one that loses MLflow's insert race
tries again (the row now exists), any other failure is raised as it was. (Not in tests/unit: MLflow's
dataset code runs `uname`.)"""

from types import SimpleNamespace

import pytest

from rag_core.evaluate.golden import GoldenQuery
from rag_core.workbench.tracking import datasets
from rag_core.workbench.tracking.datasets import log_golden_input

POSTGRES = ('BAD_REQUEST: (psycopg2.errors.UniqueViolation) duplicate key value violates unique constraint '
            '"dataset_pk"\nDETAIL:  Key (experiment_id, name, digest)=(1, golden, 4f2a) already exists.')
SQLITE = "(sqlite3.IntegrityError) UNIQUE constraint failed: datasets.experiment_id, datasets.name, datasets.digest"


class Client:
    def __init__(self, failures):
        self.failures, self.calls = list(failures), []

    def log_inputs(self, run_id, inputs):
        self.calls.append((run_id, [item.dataset.digest for item in inputs]))
        if self.failures:
            raise RuntimeError(self.failures.pop(0))


QUERIES = [GoldenQuery(id="q1", query="How long are backups kept?", answer=None, evidence=())]


@pytest.fixture(autouse=True)
def _no_wait(monkeypatch):
    monkeypatch.setattr(datasets.time, "sleep", lambda seconds: None)


@pytest.mark.parametrize("message", [POSTGRES, SQLITE])
def test_the_loser_of_the_insert_race_tries_again(message):
    client = Client([message])
    log_golden_input(SimpleNamespace(client=client), "run-1", QUERIES, "golden", None)
    assert len(client.calls) == 2 and client.calls[0] == client.calls[1]


def test_other_failures_and_a_race_that_does_not_end_are_raised():
    client = Client(["RESOURCE_DOES_NOT_EXIST: run 'run-1' not found"])
    with pytest.raises(RuntimeError, match="not found"):
        log_golden_input(SimpleNamespace(client=client), "run-1", QUERIES, "golden", None)
    assert len(client.calls) == 1
    client = Client([POSTGRES] * datasets.RACE_ATTEMPTS)
    with pytest.raises(RuntimeError, match="dataset_pk"):
        log_golden_input(SimpleNamespace(client=client), "run-1", QUERIES, "golden", None)
    assert len(client.calls) == datasets.RACE_ATTEMPTS
