"""A team's tracking database: ``mlflow server`` on a real PostgreSQL 15 backend (a cluster the test
creates in a temporary directory on a loopback port) with artifacts served from
``--artifacts-destination``. The smoke sweep runs with two parallel workers through
``MLFLOW_TRACKING_URI=http://...`` only, and every run comes back through the REST API: the parent, one
child per point with its settings, metrics, artifacts and executed notebook. PostgreSQL holds them
(its tables are read directly too). Both servers are always stopped."""

from __future__ import annotations

import pytest
from servers import check_sweep_through_rest, mlflow_server, postgres_cluster, rest_runs

from rag_core.paths import EXPERIMENTS_DIR

pytestmark = pytest.mark.slow


@pytest.fixture
def postgres_tracking(tmp_path):
    with postgres_cluster("mlflow") as database:
        artifacts = tmp_path / "artifacts"
        artifacts.mkdir()
        with mlflow_server(database, tmp_path, artifacts_destination=artifacts) as base:
            yield database, base, artifacts


def test_a_sweep_tracked_in_postgres_through_the_server(postgres_tracking, tmp_path, monkeypatch):
    import psycopg2

    from rag_core.workbench import load_sweep, run_sweep

    database, base, artifacts = postgres_tracking
    monkeypatch.setenv("MLFLOW_TRACKING_URI", base)  # the sweep and its notebooks know only the URL
    spec = load_sweep(EXPERIMENTS_DIR / "smoke.yaml")
    result = run_sweep(spec, tmp_path / "store", workers=2, output_dir=tmp_path / "notebooks", echo=lambda line: None)

    assert result.tracking_uri == base and not result.failed and len(result.executed) == 4
    check_sweep_through_rest(base, result, indexes_built=2)

    # the runs are rows of PostgreSQL, the artifacts files under --artifacts-destination
    connection = psycopg2.connect(database.replace("+psycopg2", ""))
    with connection, connection.cursor() as cursor:
        cursor.execute("SELECT run_uuid, status FROM runs")
        stored = dict(cursor.fetchall())
        cursor.execute("SELECT COUNT(*) FROM metrics WHERE run_uuid = %s AND key = 'page/ndcg_at_10'",
                       (result.outcomes[0].run_id,))
        assert cursor.fetchone()[0] == 1
    connection.close()
    assert stored == {run["info"]["run_id"]: "FINISHED" for run in rest_runs(base, result.experiment)}
    assert len(stored) == 5
    notebooks = sorted(path.name for path in artifacts.rglob("*.ipynb"))
    assert notebooks == sorted(f"{outcome.point.file_stem}.ipynb" for outcome in result.outcomes)
