# Sourced by docker/base.sh and docker/engine.sh (not run): the Debian mirror this machine's apt
# uses, so that both reach Debian 13's packages where its apt reaches Debian 12's.
# shellcheck shell=bash

# The machine's Debian mirror: the first URI of a bookworm "main" source in apt's config
# (deb822 .sources files or one-line .list files), never a host written into this repository;
# a mirror of bookworm serves trixie too.
apt_mirror() {
  local files=(/etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources)
  local f
  for f in "${files[@]}"; do
    [ -f "$f" ] || continue
    case "$f" in
      *.sources)
        awk 'BEGIN{RS=""} /Suites:[^\n]*bookworm([ \n]|$)/ && /Components:[^\n]*main/ {
               if (match($0, /URIs: *[^ \n]+/)) { u=substr($0, RSTART, RLENGTH); sub(/URIs: */, "", u); print u; exit } }' "$f"
        ;;
      *)
        awk '$1=="deb" && $0 ~ / bookworm main/ { for (i=2;i<=NF;i++) if ($i ~ /^(https?|file):/) { print $i; exit } }' "$f"
        ;;
    esac
  done | grep -v -- '-security' | head -n 1
}
