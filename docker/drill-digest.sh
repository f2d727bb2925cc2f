#!/usr/bin/env bash
# What a failed stack drill leaves to read, printed after the stack is torn down so that it ends
# CI's output (Makefile's stack-test):
#   docker/drill-digest.sh before   the containers and the last log lines of each one not running
#                                   healthy (run before `down -v` removes them)
#   docker/drill-digest.sh after    the drill's own last words (test-artifacts/stack-drill.log)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
case "${1:-}" in
  before)
    echo "== the stack's containers when the drill failed"
    docker ps -a --filter "label=com.docker.compose.project=onceflow" --format '{{.Names}}\t{{.Status}}'
    docker ps -a --filter "label=com.docker.compose.project=onceflow" --format '{{.Names}} {{.Status}}' \
      | grep -vE ' Up .*\(healthy\)$|Exited \(0\)' | while read -r name _; do
        echo "== the last log lines of $name"
        docker logs --tail 25 "$name" 2>&1 | sed 's/^/  /'
      done
    ;;
  after)
    echo "== the stack drill failed; its last words (all of it: test-artifacts/stack-drill.log)"
    grep -E '^(drill|stack|E |FAILED|ERROR)|Error|Timeout' test-artifacts/stack-drill.log | tail -n 40
    ;;
  *) echo "usage: $0 before|after" >&2; exit 2 ;;
esac
