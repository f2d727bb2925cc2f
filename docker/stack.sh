#!/usr/bin/env bash
# The dev stack's commands, behind `make stack-up | stack-down | stack-demo`.
#
#   docker/stack.sh up            create docker/.env once, build the image, start and wait until healthy
#   docker/stack.sh down [ARGS]   stop the stack (ARGS go to `docker compose down`, e.g. -v drops the volumes)
#   docker/stack.sh demo          up, produce events, run the <pipeline>_batch and _audit DAGs, fetch the reports
#   docker/stack.sh info          the URLs
#
# Settings (environment): STACK_WAIT_SECONDS (900), DEMO_PIPELINE (payments),
# DEMO_EVENTS (20000), DEMO_RUN_SECONDS (1800 per DAG run). Reference: docs/docker-stack.md.
set -euo pipefail
cd "$(dirname "$0")/.."

compose=(docker compose -f docker/compose.yaml)   # project dir docker/: reads docker/.env
wait_seconds="${STACK_WAIT_SECONDS:-900}"
pipeline="${DEMO_PIPELINE:-payments}"

say() { echo "stack: $*"; }
fail() { echo "stack: $*" >&2; exit 1; }

# An engine that answers and compose v2, or exactly what to install (docker/engine.sh check says it).
need_docker() {
  docker/engine.sh check \
    || fail "no usable Docker engine (above: what is missing and the fix; docs/docker-stack.md#getting-an-engine)."
}

env_value() { sed -n "s/^$1=//p" docker/.env | tail -n 1; }

info() {
  say "Airflow UI:       http://localhost:$(env_value AIRFLOW_UI_PORT)  (user $(env_value AIRFLOW_ADMIN_USER); password: AIRFLOW_ADMIN_PASSWORD in docker/.env)"
  say "Spark master UI:  http://localhost:$(env_value SPARK_MASTER_UI_PORT)"
  say "Spark worker UI:  http://localhost:$(env_value SPARK_WORKER_UI_PORT)"
  say "Kafka (host):     localhost:$(env_value KAFKA_HOST_PORT)"
}

up() {
  need_docker
  docker/init-env.sh
  say "building the onceflow image and starting the stack (waits up to ${wait_seconds}s for every healthcheck)"
  "${compose[@]}" up -d --build --wait --wait-timeout "$wait_seconds" \
    || fail "the stack did not become healthy within ${wait_seconds}s. Fix: see '${compose[*]} ps' and '${compose[*]} logs <service>'."
  info
}

down() {
  need_docker
  "${compose[@]}" down "$@"
}

airflow() { "${compose[@]}" exec -T airflow-scheduler airflow "$@"; }

# The state of run $2 of DAG $1 (queued, running, success, failed), empty until listed.
run_state() {
  "${compose[@]}" exec -T airflow-scheduler python -c '
import json, subprocess, sys
out = subprocess.run(["airflow", "dags", "list-runs", sys.argv[1], "--output", "json"],
                     capture_output=True, text=True).stdout
try:
    runs = json.loads(out or "[]")
except ValueError:
    runs = []
print(next((r.get("state") or "" for r in runs if r.get("run_id") == sys.argv[2]), ""))
' "$1" "$2"
}

# Wait (bounded) until the dag-processor has parsed DAG $1.
wait_for_dag() {
  local deadline=$(( $(date +%s) + 300 ))
  until airflow dags details "$1" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] \
      || fail "DAG $1 not parsed within 300s. Fix: look for import errors in the Airflow UI, or: ${compose[*]} logs airflow-dag-processor"
    say "waiting for the dag-processor to parse $1 …"
    sleep 10
  done
}

# Trigger one DAG and wait (bounded) until its run ends; fail unless it succeeded.
run_dag() {
  local dag="$1" run_id deadline state
  run_id="stack-demo-$(date +%s)"
  wait_for_dag "$dag"
  deadline=$(( $(date +%s) + ${DEMO_RUN_SECONDS:-1800} ))
  airflow dags unpause "$dag" >/dev/null
  airflow dags trigger "$dag" --run-id "$run_id" >/dev/null
  say "triggered $dag (run $run_id)"
  while :; do
    state="$(run_state "$dag" "$run_id")"
    case "$state" in
      success) say "$dag: success"; return 0 ;;
      failed) fail "$dag run $run_id failed. Fix: open its task logs in the Airflow UI ($(env_value AIRFLOW_UI_PORT))." ;;
    esac
    [ "$(date +%s)" -lt "$deadline" ] \
      || fail "$dag run $run_id still '${state:-queued}' after ${DEMO_RUN_SECONDS:-1800}s. Fix: check the scheduler: ${compose[*]} logs airflow-scheduler"
    say "$dag: ${state:-queued} …"
    sleep 15
  done
}

demo() {
  up
  say "producing ${DEMO_EVENTS:-20000} events to Kafka (5% aborted transactions, 1% malformed)"
  "${compose[@]}" run --rm onceflow onceflow produce --pipeline "pipelines/${pipeline}.yaml" \
    --count "${DEMO_EVENTS:-20000}" --abort-ratio 0.05 --malformed-ratio 0.01
  run_dag "${pipeline}_batch"
  run_dag "${pipeline}_audit"
  mkdir -p reports
  rm -rf "reports/stack"
  "${compose[@]}" cp airflow-scheduler:/data/onceflow/reports reports/stack
  say "audit reports copied to reports/stack/ (open the index.html files in a browser):"
  find reports/stack -name index.html | sed 's/^/  /'
  say "and in the Airflow UI, on the ${pipeline}_audit runs (http://localhost:$(env_value AIRFLOW_UI_PORT))"
}

case "${1:-}" in
  up) up ;;
  down) shift; down "$@" ;;
  demo) demo ;;
  info) info ;;
  *) fail "usage: docker/stack.sh up | down [compose down args] | demo | info" ;;
esac
