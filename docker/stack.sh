#!/usr/bin/env bash
# The dev stack's commands, behind `make stack-base | stack-up | stack-demo | stack-down`.
#
#   docker/stack.sh base          the Debian base images (docker/base.sh)
#   docker/stack.sh build         docker/.env once, the bases, the onceflow, registry and postgres images
#   docker/stack.sh up            build, start, wait until every service is healthy
#   docker/stack.sh down [ARGS]   stop the stack (ARGS go to `docker compose down`, e.g. -v drops the volumes)
#   docker/stack.sh demo          up, produce events, stream through Airflow for several windows, audit, fetch the reports
#   docker/stack.sh info          the URLs
#
# Each step prints its wall time. Settings (environment): STACK_WAIT_SECONDS (900),
# ONCEFLOW_CA_BUNDLE (a CA bundle for pip, uv and Maven in the build; default: the machine's
# /etc/ssl/certs/ca-certificates.crt when there), DEMO_PIPELINE (payments), DEMO_EVENTS (20000),
# DEMO_RATE (events/s while streaming, 50), DEMO_WINDOWS (stream windows to watch, 3),
# DEMO_RUN_SECONDS (1800 per DAG run). Reference: docs/docker-stack.md.
set -euo pipefail
cd "$(dirname "$0")/.."

# docker compose, with docker/.env as the stack's one source of settings (project dir docker/). A
# variable of the same name exported in the calling shell (ONCEFLOW_KAFKA_BOOTSTRAP, AWS_ACCESS_KEY_ID,
# ... from local work) would win over docker/.env in compose's interpolation and point the containers
# elsewhere, or hand them the shell's own keys; so compose runs without them.
dc() {
  local unset=() name
  if [ -f docker/.env ]; then
    while IFS= read -r name; do unset+=(-u "$name"); done \
      < <(sed -n 's/^\([A-Za-z_][A-Za-z0-9_]*\)=.*/\1/p' docker/.env)
  fi
  env "${unset[@]}" docker compose -f docker/compose.yaml "$@"
}
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

# timed NAME COMMAND...: run it, print its wall time.
timed() {
  local name="$1" start rc=0
  shift
  start=$(date +%s)
  # its own status, not set -e's: a caller's `timed … || fail …` turns set -e off inside, so a
  # failure would otherwise read as done
  "$@" || rc=$?
  if [ "$rc" -ne 0 ]; then
    say "$name: FAILED (exit $rc) after $(( $(date +%s) - start ))s"
    return "$rc"
  fi
  say "$name: $(( $(date +%s) - start ))s"
}

base() {
  need_docker
  docker/init-env.sh
  ONCEFLOW_BASE_IMAGE="$(env_value ONCEFLOW_BASE_IMAGE)" timed "base image" docker/base.sh
  # the schema registry's: Apicurio 3 needs Java 21, which only Debian 13 packages
  DEBIAN_SUITE=trixie ONCEFLOW_BASE_IMAGE="$(env_value ONCEFLOW_REGISTRY_BASE_IMAGE)" \
    timed "registry base image" docker/base.sh
}

# The CA bundle the build trusts, in the build context (git-ignored); empty when there is none.
build_ca() {
  local ca="${ONCEFLOW_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
  mkdir -p docker/build
  if [ -f "$ca" ]; then
    cp "$ca" docker/build/ca-bundle.pem
    say "the build trusts the CA bundle $ca"
  else
    [ -z "${ONCEFLOW_CA_BUNDLE:-}" ] || fail "ONCEFLOW_CA_BUNDLE=$ca is no file. Fix: point it at a PEM bundle"
    : >docker/build/ca-bundle.pem
  fi
}

build() {
  base
  build_ca
  say "building the onceflow, registry and postgres images"
  # the classic builder unless told otherwise: Debian's docker.io has no buildx, and its layer
  # cache is the one `docker build` fills (DOCKER_BUILDKIT=1 uses BuildKit's, a cache of its own).
  # The onceflow image first (with postgres, which shares nothing), then the registry's: its stage
  # takes `onceflow setup` from the onceflow image's build stage, and built side by side on a cold
  # cache the two would each install the venv, fetch the jars and train the class-data archive.
  DOCKER_BUILDKIT="${DOCKER_BUILDKIT:-0}" timed "onceflow and postgres images built" dc build spark-master postgres \
    && DOCKER_BUILDKIT="${DOCKER_BUILDKIT:-0}" timed "images built" dc build registry
}

info() {
  say "Airflow UI:       http://localhost:$(env_value AIRFLOW_UI_PORT)  (user $(env_value AIRFLOW_ADMIN_USER); password: AIRFLOW_ADMIN_PASSWORD in docker/.env)"
  say "Spark master UI:  http://localhost:$(env_value SPARK_MASTER_UI_PORT)"
  say "Spark worker UI:  http://localhost:$(env_value SPARK_WORKER_UI_PORT)"
  say "Kafka (host):     localhost:$(env_value KAFKA_HOST_PORT) (SASL_SSL as onceflow; password KAFKA_ONCEFLOW_PASSWORD in docker/.env)"
  say "object store:     http://localhost:$(env_value S3_HOST_PORT) (key $(env_value AWS_ACCESS_KEY_ID); secret AWS_SECRET_ACCESS_KEY in docker/.env)"
  say "schema registry:  http://localhost:$(env_value REGISTRY_HOST_PORT)/apis/ccompat/v7"
}

up() {
  build
  say "starting the stack (waits up to ${wait_seconds}s for every healthcheck)"
  timed "stack healthy" dc up -d --no-build --wait --wait-timeout "$wait_seconds" \
    || fail "the stack did not become healthy within ${wait_seconds}s. Fix: see 'docker compose -f docker/compose.yaml ps' and 'docker compose -f docker/compose.yaml logs <service>'."
  info
}

down() {
  need_docker
  dc down "$@"
}

airflow() { dc exec -T airflow-scheduler airflow "$@"; }

# Ask the scheduler about DAG $1's runs: `state RUN_ID` prints that run's state (queued, running,
# success, failed; empty until listed), `count STATE` how many runs ended in STATE.
dag_runs() {
  dc exec -T airflow-scheduler python -c '
import json, subprocess, sys
dag, what, arg = sys.argv[1:4]
out = subprocess.run(["airflow", "dags", "list-runs", dag, "--output", "json"],
                     capture_output=True, text=True).stdout
# the CLI prints warnings (graphviz) on stdout before the JSON: the JSON is the line of the list
lines = [line for line in out.splitlines() if line.startswith("[")]
try:
    runs = json.loads(lines[-1]) if lines else []
except ValueError:
    runs = []
if what == "state":
    print(next((r.get("state") or "" for r in runs if r.get("run_id") == arg), ""))
else:
    print(sum(1 for r in runs if r.get("state") == arg))
' "$1" "$2" "$3"
}
run_state() { dag_runs "$1" state "$2"; }
runs_in_state() { dag_runs "$1" count "$2"; }

# Wait (bounded) until the dag-processor has parsed DAG $1.
wait_for_dag() {
  local deadline=$(( $(date +%s) + 300 ))
  until airflow dags details "$1" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] \
      || fail "DAG $1 not parsed within 300s. Fix: look for import errors in the Airflow UI, or: docker compose -f docker/compose.yaml logs airflow-dag-processor"
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
      || fail "$dag run $run_id still '${state:-queued}' after ${DEMO_RUN_SECONDS:-1800}s. Fix: check the scheduler: docker compose -f docker/compose.yaml logs airflow-scheduler"
    say "$dag: ${state:-queued} …"
    sleep 15
  done
}

# Unpause <pipeline>_stream (@continuous: one run after the other, each watching a window of
# ONCEFLOW_STREAM_WINDOW, the shipped pipelines' airflow.window) and wait until $1 runs ended well.
stream_windows() {
  local dag="${pipeline}_stream" want="$1" done=0 failed deadline before failed_before
  wait_for_dag "$dag"
  deadline=$(( $(date +%s) + want * $(env_value STREAM_WINDOW_SECONDS) + 900 ))
  # runs of an earlier demo on the same volumes do not count
  before="$(runs_in_state "$dag" success)"
  failed_before="$(runs_in_state "$dag" failed)"
  airflow dags unpause "$dag" >/dev/null
  say "unpaused $dag: its runs launch the streaming app, then adopt it, one window of $(env_value STREAM_WINDOW_SECONDS)s each"
  while [ "$done" -lt "$want" ]; do
    [ "$(date +%s)" -lt "$deadline" ] || fail "$dag: $done of $want windows after the deadline. Fix: docker compose -f docker/compose.yaml logs airflow-scheduler"
    failed=$(( $(runs_in_state "$dag" failed) - failed_before ))
    [ "$failed" = 0 ] || fail "$dag: a run failed. Fix: open its task logs in the Airflow UI"
    sleep 15
    done=$(( $(runs_in_state "$dag" success) - before ))
    say "$dag: $done of $want windows done"
  done
}

demo() {
  up
  say "producing ${DEMO_EVENTS:-20000} events to Kafka as User:producer (5% aborted transactions, 1% malformed)"
  dc run --rm onceflow onceflow produce --pipeline "pipelines/${pipeline}.yaml" \
    --kafka-connection kafka_producer --count "${DEMO_EVENTS:-20000}" --abort-ratio 0.05 --malformed-ratio 0.01
  say "and ${DEMO_RATE:-50} events/s while the stream runs"
  dc run -d --name onceflow-demo-producer --rm onceflow onceflow produce \
    --pipeline "pipelines/${pipeline}.yaml" --kafka-connection kafka_producer \
    --rate "${DEMO_RATE:-50}" --count 10000000 --abort-ratio 0.05 --malformed-ratio 0.01 >/dev/null
  trap 'docker rm -f onceflow-demo-producer >/dev/null 2>&1 || true' EXIT
  stream_windows "${DEMO_WINDOWS:-3}"
  docker rm -f onceflow-demo-producer >/dev/null
  run_dag "${pipeline}_audit"
  airflow dags pause "${pipeline}_stream" >/dev/null
  say "paused ${pipeline}_stream: the app stops at a batch boundary when its lease ends"
  mkdir -p reports
  rm -rf "reports/stack"
  dc cp airflow-scheduler:/data/onceflow/reports reports/stack
  say "audit reports copied to reports/stack/ (open the index.html files in a browser):"
  find reports/stack -name index.html | sed 's/^/  /'
  say "and in the Airflow UI, on the ${pipeline}_audit runs (http://localhost:$(env_value AIRFLOW_UI_PORT))"
}

case "${1:-}" in
  base) base ;;
  build) build ;;
  up) up ;;
  down) shift; down "$@" ;;
  demo) demo ;;
  info) info ;;
  *) fail "usage: docker/stack.sh base | build | up | down [compose down args] | demo | info" ;;
esac
