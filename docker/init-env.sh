#!/usr/bin/env bash
# Create docker/.env (read by docker compose) from docker/.env.example, once:
# every documented default is copied, every empty value (the credentials) is
# filled with a fresh random secret, so no password or key is ever committed or
# baked into the image. An existing .env keeps its values, passwords included; settings
# new in the example are appended to it.
#
#   docker/init-env.sh [TARGET]     (default TARGET: docker/.env)
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
example="$here/.env.example"
target="${1:-$here/.env}"

hex() { od -An -tx1 -N"$1" /dev/urandom | tr -d ' \n'; }
# a Fernet key: 32 random bytes, URL-safe base64
fernet() { head -c 32 /dev/urandom | base64 | tr -d '\n' | tr '+/' '-_'; }

# An existing .env keeps every value it has; a setting added to the example since it was written
# (a newer stack's) is appended with its default, or a fresh secret.
if [ -f "$target" ]; then
  have="$(sed -n 's/^\([A-Za-z_][A-Za-z0-9_]*\)=.*/\1/p' "$target")"
  new_lines="$(mktemp)"
  trap 'rm -f "$new_lines"' EXIT
  from="$(basename "$example")"
  while IFS= read -r line || [ -n "$line" ]; do
    case "$line" in
      [A-Z]*=*) ;;
      *) continue ;;
    esac
    # a here-string, not a pipe: `grep -q` stops at its match, and under pipefail the printf it
    # cut off (SIGPIPE) failed the test, so a setting the file has was appended again
    grep -qx "${line%%=*}" <<<"$have" && continue
    case "$line" in
      *_FERNET_KEY=) line="${line}$(fernet)" ;;
      *_PASSWORD= | *_SECRET= | *_SECRET_KEY= | *_SECRET_ACCESS_KEY=) line="${line}$(hex 24)" ;;
    esac
    printf '%s\n' "$line" >>"$new_lines"
    echo "init-env: adding ${line%%=*} to $target (new in $from)"
  done <"$example"
  [ -s "$new_lines" ] || echo "init-env: $target exists, kept as it is"
  cat "$new_lines" >>"$target"
  exit 0
fi

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
