#!/usr/bin/env bash
# The team's services on this machine, for trying the "scaling out" setup without Docker:
#   PostgreSQL (MLflow's backend store)  127.0.0.1:$PG_PORT   data in $DIR/postgres
#   MLflow tracking server               http://127.0.0.1:$MLFLOW_PORT   artifacts in $DIR/artifacts
#   Chroma server                        http://127.0.0.1:$CHROMA_PORT   data in $DIR/chroma
# Usage: scripts/team_services.sh start|stop|status   (make team-services / make team-services-stop)
# Then: MLFLOW_TRACKING_URI=http://127.0.0.1:5000 rag-pipeline sweep experiments/smoke.yaml --executor ray
# Everything listens on 127.0.0.1 only. PostgreSQL refuses to run as root: as root it runs as 'nobody'.
# deploy/compose.yaml describes the same three services as containers.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${TEAM_DIR:-$PWD/.team}
BIN=${BIN:-.venv/bin}
PG_BIN=${PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}
PG_PORT=${PG_PORT:-5433} MLFLOW_PORT=${MLFLOW_PORT:-5000} CHROMA_PORT=${CHROMA_PORT:-8000}
AS_PG=(); [ "$(id -u)" -eq 0 ] && AS_PG=(runuser -u nobody --)

start() {
    [ -x "$PG_BIN/initdb" ] || { echo "error: no PostgreSQL server binaries (apt-get install postgresql)" >&2; exit 1; }
    mkdir -p "$DIR/artifacts" "$DIR/chroma" "$DIR/postgres-run"
    [ ${#AS_PG[@]} -eq 0 ] || chown nobody "$DIR/postgres-run"
    if [ ! -d "$DIR/postgres-run/data" ]; then
        "${AS_PG[@]}" "$PG_BIN/initdb" -D "$DIR/postgres-run/data" -U mlflow --auth=trust -E UTF8 --no-locale >/dev/null
    fi
    "${AS_PG[@]}" "$PG_BIN/pg_ctl" -D "$DIR/postgres-run/data" -l "$DIR/postgres-run/postgres.log" -w \
        -o "-p $PG_PORT -k $DIR/postgres-run -c listen_addresses=127.0.0.1" start >/dev/null
    "$BIN/python" - "$PG_PORT" <<'EOF'
import sys, psycopg2
connection = psycopg2.connect(host="127.0.0.1", port=int(sys.argv[1]), user="mlflow", dbname="postgres")
connection.autocommit = True
with connection.cursor() as cursor:
    cursor.execute("SELECT 1 FROM pg_database WHERE datname = 'mlflow'")
    if cursor.fetchone() is None:
        cursor.execute("CREATE DATABASE mlflow")
EOF
    setsid "$BIN/mlflow" server --backend-store-uri "postgresql+psycopg2://mlflow@127.0.0.1:$PG_PORT/mlflow" \
        --artifacts-destination "$DIR/artifacts" --host 127.0.0.1 --port "$MLFLOW_PORT" \
        >"$DIR/mlflow.log" 2>&1 & echo $! >"$DIR/mlflow.pid"
    setsid "$BIN/chroma" run --path "$DIR/chroma" --host 127.0.0.1 --port "$CHROMA_PORT" \
        >"$DIR/chroma.log" 2>&1 & echo $! >"$DIR/chroma.pid"
    for _ in $(seq 120); do
        curl -fsS "http://127.0.0.1:$MLFLOW_PORT/health" >/dev/null 2>&1 && break; sleep 1
    done
    status
}

stop() {
    for name in mlflow chroma; do  # each runs in its own process group (setsid): TERM it, KILL it after 20 s
        [ -f "$DIR/$name.pid" ] || continue
        group=$(cat "$DIR/$name.pid")
        kill -- "-$group" 2>/dev/null || true
        for _ in $(seq 20); do kill -0 -- "-$group" 2>/dev/null || break; sleep 1; done
        kill -KILL -- "-$group" 2>/dev/null || true
        rm -f "$DIR/$name.pid"
    done
    [ ! -d "$DIR/postgres-run/data" ] || "${AS_PG[@]}" "$PG_BIN/pg_ctl" -D "$DIR/postgres-run/data" -m fast -w stop \
        >/dev/null 2>&1 || true
    echo "stopped (data kept in $DIR)"
}

status() {
    curl -fsS "http://127.0.0.1:$MLFLOW_PORT/health" >/dev/null 2>&1 && m=up || m=down
    curl -fsS "http://127.0.0.1:$CHROMA_PORT/api/v2/heartbeat" >/dev/null 2>&1 && c=up || c=down
    "${AS_PG[@]}" "$PG_BIN/pg_ctl" -D "$DIR/postgres-run/data" status >/dev/null 2>&1 && p=up || p=down
    echo "PostgreSQL 127.0.0.1:$PG_PORT $p | MLflow http://127.0.0.1:$MLFLOW_PORT $m | Chroma http://127.0.0.1:$CHROMA_PORT $c"
    echo "export MLFLOW_TRACKING_URI=http://127.0.0.1:$MLFLOW_PORT   (logs: $DIR/*.log)"
}

case "${1:-status}" in start) start ;; stop) stop ;; status) status ;; *) echo "usage: $0 start|stop|status" >&2; exit 2 ;; esac
