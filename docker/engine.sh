#!/usr/bin/env bash
# A Docker engine for the dev stack on a Debian 12 machine without one (CI, these
# dev machines): Debian's docker.io, compose v2 from Debian 13's package (else built from its
# Go module), dockerd started in the background. Idempotent: each step is skipped when its result is
# already there; each prints what it does and how long it took.
#
#   docker/engine.sh [up]    install what is missing, start dockerd, wait until `docker info` answers
#   docker/engine.sh stop    stop the dockerd this script started (docker.io stays installed)
#   docker/engine.sh check   exit 0 if `docker info` and `docker compose version` answer, else say what is missing
#
# Settings (environment): COMPOSE_FROM (debian; go builds it), COMPOSE_VERSION (v2.40.3, the Go
# build's), DEBIAN_MIRROR (the machine's apt mirror), DOCKERD_LOG (/var/log/onceflow-dockerd.log),
# DOCKERD_WAIT_SECONDS (120). Needs root (or sudo) for apt-get and dockerd, and Go (>= 1.24)
# only to build compose. Reference: docs/docker-stack.md ("Getting an engine").
set -euo pipefail

compose_version="${COMPOSE_VERSION:-v2.40.3}"
plugin_dir=/usr/local/lib/docker/cli-plugins
dockerd_log="${DOCKERD_LOG:-/var/log/onceflow-dockerd.log}"
dockerd_pid=/var/run/onceflow-dockerd.pid
wait_seconds="${DOCKERD_WAIT_SECONDS:-120}"

say() { echo "engine: $*"; }
fail() { echo "engine: $*" >&2; exit 1; }

# Run as root: directly, or through sudo when it is there.
as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"
  elif command -v sudo >/dev/null 2>&1; then sudo "$@"
  else fail "'$*' needs root and there is no sudo. Fix: run docker/engine.sh as root."
  fi
}

# step NAME COMMAND...: run it, print its wall time.
step() {
  local name="$1" start
  shift
  start=$(date +%s)
  say "$name …"
  "$@"
  say "$name: done in $(( $(date +%s) - start ))s"
}

install_docker_io() {
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
  # --no-install-recommends: no docker-cli recommends; the client comes with docker.io itself
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends docker.io
}

# shellcheck source=docker/debian-mirror.sh
. "$(dirname "$0")/debian-mirror.sh"

# compose v2 from Debian 13's docker-compose package (a Go binary that needs glibc >= 2.34, which
# Debian 12 has): downloaded by apt with a sources list of its own (the machine's apt config is not
# touched) and unpacked into the plugin dir. Seconds, where building it takes minutes of both cores.
debian_compose() {
  local dir mirror status=0
  mirror="${DEBIAN_MIRROR:-$(apt_mirror)}"
  [ -n "$mirror" ] || return 1
  dir="$(mktemp -d)"
  mkdir -p "$dir/lists/partial" "$dir/archives/partial" "$dir/root"
  echo "deb $mirror trixie main" >"$dir/sources.list"
  local opts=(-o "Dir::Etc::SourceList=$dir/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
              -o "Dir::State::Lists=$dir/lists" -o "Dir::Cache::Archives=$dir/archives"
              -o "Dir::Cache::pkgcache=" -o "Dir::Cache::srcpkgcache=" -o "APT::Sandbox::User=root")
  if as_root apt-get "${opts[@]}" update -q >/dev/null \
     && (cd "$dir" && as_root apt-get "${opts[@]}" download -q docker-compose >/dev/null) \
     && dpkg-deb -x "$dir"/docker-compose_*_amd64.deb "$dir/root" \
     && "$dir/root/usr/libexec/docker/cli-plugins/docker-compose" version >/dev/null; then
    as_root mkdir -p "$plugin_dir"
    as_root install -m 755 "$dir/root/usr/libexec/docker/cli-plugins/docker-compose" "$plugin_dir/docker-compose"
  else
    status=1
  fi
  as_root rm -rf "$dir"
  return "$status"
}

# Debian 13's compose, else compose built from its Go module (COMPOSE_FROM=go: always the build)
install_compose() {
  if [ "${COMPOSE_FROM:-debian}" != "go" ] && debian_compose; then
    return 0
  fi
  [ "${COMPOSE_FROM:-debian}" = "go" ] || say "compose: Debian 13's package could not be had; building compose ${compose_version} instead"
  build_compose
}

build_compose() {
  command -v go >/dev/null 2>&1 \
    || fail "Go is not installed; compose v2 is built from its Go module. Fix: apt-get install golang-go (>= 1.24) or install Go from go.dev, then rerun."
  local dir work
  # `go install …@version` refuses compose's go.mod (it has exclude directives): download
  # the module, build it in a copy (the module cache is read-only)
  dir="$(go mod download -json "github.com/docker/compose/v2@${compose_version}" \
         | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
  [ -d "${dir:-/nonexistent}" ] \
    || fail "go mod download gave no module folder for compose ${compose_version}. Fix: check GOPROXY reaches proxy.golang.org."
  work="$(mktemp -d)"
  cp -r "$dir/." "$work/"
  chmod -R u+w "$work"
  (cd "$work" && nice -n 5 go build -trimpath \
      -ldflags "-s -w -X github.com/docker/compose/v2/internal.Version=${compose_version}" \
      -o docker-compose ./cmd)
  as_root mkdir -p "$plugin_dir"
  as_root install -m 755 "$work/docker-compose" "$plugin_dir/docker-compose"
  rm -rf "$work"
}

start_dockerd() {
  # --iptables=false --ip-forward=false: this machine kind's kernel/iptables do not
  # allow docker's NAT rules; bridge networks (with DNS) and published ports (the
  # userland proxy) still work, and containers reach nothing outside the machine.
  as_root sh -c "nohup dockerd --iptables=false --ip-forward=false >>'$dockerd_log' 2>&1 & echo \$! >'$dockerd_pid'"
  local deadline=$(( $(date +%s) + wait_seconds ))
  until as_root docker info >/dev/null 2>&1; do
    if ! as_root kill -0 "$(cat "$dockerd_pid")" 2>/dev/null; then
      tail -n 20 "$dockerd_log" >&2 || true
      fail "dockerd exited (log: $dockerd_log, last lines above)."
    fi
    [ "$(date +%s)" -lt "$deadline" ] || fail "dockerd did not answer within ${wait_seconds}s (log: $dockerd_log)."
    sleep 1
  done
}

up() {
  local start
  start=$(date +%s)
  if command -v dockerd >/dev/null 2>&1; then
    say "dockerd: installed ($(dockerd --version))"
  else
    step "installing Debian's docker.io with apt" install_docker_io
  fi
  if docker compose version >/dev/null 2>&1; then
    say "compose: installed ($(docker compose version))"
  else
    step "installing compose v2 (Debian 13's package, else built from its Go module) into ${plugin_dir}" install_compose
  fi
  if as_root docker info >/dev/null 2>&1; then
    say "dockerd: running (server $(as_root docker info --format '{{.ServerVersion}}' 2>/dev/null))"
  else
    step "starting dockerd in the background (log: $dockerd_log)" start_dockerd
  fi
  say "ready in $(( $(date +%s) - start ))s: $(docker compose version), server $(as_root docker info --format '{{.ServerVersion}} ({{.Driver}})')"
}

stop() {
  if [ -f "$dockerd_pid" ] && as_root kill -0 "$(cat "$dockerd_pid")" 2>/dev/null; then
    local pid
    pid="$(cat "$dockerd_pid")"
    say "stopping dockerd (pid $pid)"
    as_root kill -TERM "$pid"
    local deadline=$(( $(date +%s) + 60 ))
    while as_root kill -0 "$pid" 2>/dev/null; do
      [ "$(date +%s)" -lt "$deadline" ] || fail "dockerd (pid $pid) still running after 60s"
      sleep 1
    done
    as_root rm -f "$dockerd_pid"
    say "dockerd stopped"
  else
    say "no dockerd started by this script is running"
  fi
}

# What is missing, as the exact fix; exit 1 when something is.
check() {
  local missing=0
  if docker info >/dev/null 2>&1; then
    :
  elif ! command -v docker >/dev/null 2>&1 || { ! command -v dockerd >/dev/null 2>&1 && [ ! -S /var/run/docker.sock ]; }; then
    echo "engine: no Docker engine on this machine. Fix: install Docker Engine (Debian/Ubuntu: apt-get install docker.io;" \
         "elsewhere https://docs.docker.com/engine/install/), or on Debian 12 run docker/engine.sh (installs and starts one)" >&2
    missing=1
  else
    echo "engine: the Docker daemon does not answer ('docker info' fails). Fix: start it (systemctl start docker)," \
         "or run docker/engine.sh, which starts dockerd in the background" >&2
    missing=1
  fi
  if ! docker compose version >/dev/null 2>&1; then
    echo "engine: 'docker compose' (v2) is missing. Fix: install the Docker Compose v2 plugin" \
         "(docker-compose-plugin from Docker's apt repository), or run docker/engine.sh, which builds it from its Go module" >&2
    missing=1
  fi
  return "$missing"
}

case "${1:-up}" in
  up) up ;;
  stop) stop ;;
  check) check ;;
  *) fail "usage: docker/engine.sh [up] | stop | check" ;;
esac
