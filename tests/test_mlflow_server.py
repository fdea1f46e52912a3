"""An MLflow tracking server in front of the smoke sweep's store: its REST API shows the parent run
and the child runs with their params, metrics and artifacts (the executed notebook included).
The server is started on 127.0.0.1 on a free port and always terminated."""

from __future__ import annotations

import pytest
from servers import check_sweep_through_rest, mlflow_server
from sweep_fixtures import smoke_sweep  # noqa: F401 - fixture

pytestmark = pytest.mark.slow


@pytest.fixture
def server(smoke_sweep, tmp_path):  # noqa: F811
    with mlflow_server(smoke_sweep.tracking_uri, tmp_path) as base:
        yield base


def test_the_server_shows_the_sweep_runs(server, smoke_sweep):  # noqa: F811
    check_sweep_through_rest(server, smoke_sweep.result, indexes_built=2)
