#!/usr/bin/env bash
# Create docker/.env (read by docker compose) from docker/.env.example, once:
# every documented default is copied, every empty value (the credentials) is
# filled with a fresh random secret, so no password or key is ever committed or
# baked into the image. An existing .env is kept as it is, passwords included.
#
#   docker/init-env.sh [TARGET]     (default TARGET: docker/.env)
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
example="$here/.env.example"
target="${1:-$here/.env}"

if [ -f "$target" ]; then
  echo "init-env: $target exists, kept as it is"
  exit 0
fi

hex() { od -An -tx1 -N"$1" /dev/urandom | tr -d ' \n'; }
# a Fernet key: 32 random bytes, URL-safe base64
fernet() { head -c 32 /dev/urandom | base64 | tr -d '\n' | tr '+/' '-_'; }

tmp="$target.tmp.$$"
trap 'rm -f "$tmp"' EXIT
while IFS= read -r line || [ -n "$line" ]; do
  case "$line" in
    *_FERNET_KEY=) line="${line}$(fernet)" ;;
    *_PASSWORD= | *_SECRET= | *_SECRET_KEY= | *_SECRET_ACCESS_KEY=) line="${line}$(hex 24)" ;;
    [A-Z]*=) echo "init-env: ${line%=} has no value in $example and is not a secret to generate." \
                  "Fix: give it a default there" >&2
             exit 1 ;;
  esac
  printf '%s\n' "$line"
done <"$example" >"$tmp"
chmod 600 "$tmp"
mv "$tmp" "$target"
trap - EXIT
echo "init-env: wrote $target (defaults from $(basename "$example"), fresh secrets)"
