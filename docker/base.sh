#!/usr/bin/env bash
# A Debian base the stack's images are built on (`make stack-base`), tagged ONCEFLOW_BASE_IMAGE
# (onceflow-base:bookworm): Debian 12 for every image but the schema registry's, whose Java 21
# only Debian 13 packages (DEBIAN_SUITE=trixie, tagged onceflow-base:trixie by docker/stack.sh).
# One of two ways, chosen here, once:
#   - a registry answers: `docker pull debian:<suite>-slim`, tagged as the base;
#   - none does (these machines): debootstrap --variant=minbase <suite> from the Debian
#     mirror this machine's apt uses (read from /etc/apt/sources.list*, or DEBIAN_MIRROR),
#     then `docker import` of the tree.
# Either way the Dockerfiles see the same name and the same Debian; nothing else differs.
#
#   docker/base.sh          build the base unless the tag exists
#   docker/base.sh --force  build it again
#
# Settings (environment): DEBIAN_SUITE (bookworm), ONCEFLOW_BASE_IMAGE (onceflow-base:<suite>),
# DEBIAN_IMAGE (debian:<suite>-slim), DEBIAN_MIRROR (default: the machine's apt mirror),
# BASE_PULL_SECONDS (60).
set -euo pipefail

suite="${DEBIAN_SUITE:-bookworm}"
base="${ONCEFLOW_BASE_IMAGE:-onceflow-base:$suite}"
upstream="${DEBIAN_IMAGE:-debian:$suite-slim}"

say() { echo "base: $*"; }
fail() { echo "base: $*" >&2; exit 1; }

# apt_mirror: the machine's Debian mirror (docker/debian-mirror.sh, shared with docker/engine.sh)
# shellcheck source=docker/debian-mirror.sh
. "$(dirname "$0")/debian-mirror.sh"

if [ "${1:-}" != "--force" ] && docker image inspect "$base" >/dev/null 2>&1; then
  say "$base exists ($(docker image inspect -f '{{.Created}}' "$base")); --force builds it again"
  exit 0
fi

start=$(date +%s)
say "trying $upstream from a registry (at most ${BASE_PULL_SECONDS:-60}s) …"
if timeout "${BASE_PULL_SECONDS:-60}" docker pull -q "$upstream" >/dev/null 2>&1; then
  docker tag "$upstream" "$base"
  say "$base = $upstream (pulled) in $(( $(date +%s) - start ))s"
  exit 0
fi

mirror="${DEBIAN_MIRROR:-$(apt_mirror)}"
[ -n "$mirror" ] || fail "no registry answers and no Debian mirror found in /etc/apt/sources.list*. Fix: set DEBIAN_MIRROR=<a Debian mirror URL>, or make a registry with $upstream reachable."
if ! command -v debootstrap >/dev/null 2>&1; then
  say "no registry answers; installing debootstrap with apt"
  if [ "$(id -u)" -eq 0 ]; then apt-get install -y -q debootstrap >/dev/null
  else sudo apt-get install -y -q debootstrap >/dev/null; fi
fi
say "no registry answers; debootstrap --variant=minbase $suite from $mirror …"
tree="$(mktemp -d /var/tmp/onceflow-base.XXXXXX)"
trap 'rm -rf "$tree"' EXIT
run_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
run_root debootstrap --variant=minbase "$suite" "$tree" "$mirror" >"$tree.log" 2>&1 \
  || { tail -n 20 "$tree.log" >&2; fail "debootstrap failed (log above, full: $tree.log)"; }
rm -f "$tree.log"
# as the slim image: no apt lists, no caches; the apt sources are the mirror it was made from
run_root rm -rf "$tree/var/lib/apt/lists/"* "$tree/var/cache/apt/"*.bin "$tree/var/cache/apt/archives/"*.deb
run_root tar -C "$tree" -c . | docker import -c 'CMD ["bash"]' - "$base" >/dev/null
say "$base = debootstrap $suite (minbase, $mirror), imported in $(( $(date +%s) - start ))s"
